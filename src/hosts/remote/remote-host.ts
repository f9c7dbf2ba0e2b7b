/**
 * A host reached through `claude-dispatch remote` (PROTOCOL.md §21): agents run on another machine, in a container or
 * in a pod, under the claude-dispatch installed there, in its remote mode, which does what this machine's host does
 * locally (tree kill, start times and markers, output files) and keeps the job in its own state directory. This side
 * starts, follows and kills over a transport's channel: ssh, a container engine's `exec -i`, `kubectl exec -i`.
 */
import path from "node:path";

import type {
  AgentHost,
  Host,
  HostCheck,
  KillReport,
  LocatedAgent,
  RecordedAgent,
  SpawnRequest,
} from "../../agent/host.js";
import { checkRemoteDirectory, type DirectoryCheck } from "../../agent/policy.js";
import type { ApproverLaunch } from "../../agent/types.js";
import type { ApprovalAnswer } from "../../store/approvals.js";
import type { Clock } from "../../core/clock.js";
import { DispatchError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { farEndCommand, type RemoteEntry } from "./entry.js";
import type { RemoteFrame, RemoteRequest, WorktreeRequest } from "./protocol.js";
import { promptOf, RemoteAgent, type LocalApprovals, type RemoteHostLink } from "./remote-agent.js";
import { RemoteWorktrees } from "./remote-worktrees.js";
import { describeEnd, openSession, type Session, type SessionEnd, type SessionOptions } from "./session.js";
import type { Transport } from "./transport.js";

export interface RemoteHostOptions {
  config: RemoteEntry;
  /** What carries the channel there. */
  transport: Transport;
  /** How long the host may keep silent (CLAUDE_DISPATCH_SSH_TIMEOUT_MS, §21.2). */
  timeoutMs: number;
  clock: Clock;
  logger: Logger;
  backoffMs?: { first: number; max: number };
  /** A job's approval files here, where the requests of its agent there are mirrored (§18); none: not forwarded. */
  approvalsOf?(jobId: string): LocalApprovals | undefined;
}

export type { HostCheck };

export class RemoteHost implements Host, RemoteHostLink {
  readonly name: string;
  /** Its agents' sessions and worktrees are on that machine: it answers for them (§21.3). */
  readonly sharesFiles = false;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly backoffMs: { first: number; max: number };
  readonly timeoutMs: number;
  private readonly sessions = new Set<Session>();
  private readonly agents = new Set<RemoteAgent>();
  /** Its worktrees, made and worked on there (§19). */
  readonly worktrees: RemoteWorktrees;

  constructor(private readonly options: RemoteHostOptions) {
    this.worktrees = new RemoteWorktrees({ roots: options.config.roots, call: (request) => this.call(request) });
    this.name = options.config.name;
    this.clock = options.clock;
    this.logger = options.logger;
    this.backoffMs = options.backoffMs ?? { first: 500, max: 30_000 };
    this.timeoutMs = options.timeoutMs;
  }

  get config(): RemoteEntry {
    return this.options.config;
  }

  /** The host as the launcher of one agent CLI sees it: the runtime's invocation, run there. */
  forAgent(agent: string): AgentHost {
    return {
      start: (request) => {
        if (request.jobId === undefined) throw new Error("a job on another host needs its id");
        const env: Record<string, string> = {};
        for (const [key, value] of Object.entries(request.env)) if (value !== undefined) env[key] = value;
        // A program the host's configuration names goes along; none, and that
        // machine's own setting or PATH decides (§21.3).
        const named = this.options.config.programs[agent] !== undefined;
        return this.track(
          new RemoteAgent(
            this,
            {
              kind: "start",
              request: {
                op: "start",
                job_id: request.jobId,
                agent,
                cwd: request.cwd,
                roots: this.options.config.roots,
                ...(named ? { command: request.command } : {}),
                args: [...request.args],
                ...(request.addDirs?.length ? { add_dirs: [...request.addDirs] } : {}),
                env,
                prompt: promptOf(request.stdin),
                offset: 0,
                ...(request.worktree ? { worktree: request.worktree } : {}),
              },
            },
            outputOf(request),
            request.onStdout,
            this.options.approvalsOf?.(request.jobId),
          ),
        );
      },
      attach: (request) => {
        if (request.jobId === undefined) throw new Error("a job on another host needs its id");
        return this.track(
          new RemoteAgent(
            this,
            { kind: "follow", jobId: request.jobId },
            request.output,
            request.onStdout,
            this.options.approvalsOf?.(request.jobId),
          ),
        );
      },
    };
  }

  programOf(agent: string): string | undefined {
    return this.options.config.programs[agent];
  }

  /** The agent gets that machine's own environment, and only what the runtime adds (§21.3). */
  readonly agentEnvironment: Readonly<Record<string, string | undefined>> = {};

  /** An agent there is found by its job, by the claude-dispatch there: no pid of this machine names it (§21.3). */
  async locate(): Promise<LocatedAgent> {
    return { state: "alive", pid: undefined, startTime: undefined };
  }

  canFollow(): boolean {
    return true;
  }

  /** Killed there, by its job; out of reach is undetermined, never taken for killed (§21.3). */
  killRecorded(recorded: RecordedAgent): Promise<KillReport> {
    return this.kill(recorded.jobId);
  }

  /** Checked against the host's roots as paths; that machine resolves links when it starts the agent (§21.3). */
  async checkDirectory(dir: string): Promise<DirectoryCheck> {
    return checkRemoteDirectory(dir, this.options.config.roots);
  }

  joinPath(repo: string, subdir: string): string {
    return path.posix.join(repo, subdir);
  }

  approver(jobId: string, waitMs: number): ApproverLaunch {
    return this.approverLaunch(jobId, waitMs);
  }

  /**
   * A session: its first frame within the host's silence bound, and the whole of it within wholeMs when given (§21.2).
   */
  open(request: RemoteRequest, onFrame: (frame: RemoteFrame) => boolean | void, wholeMs?: number): Session {
    const argv = this.options.transport.sessionArgs(farEndCommand(this.options.config));
    const session = openSession(
      { ...this.sessionOptions(argv), ...(wholeMs !== undefined ? { wholeMs } : {}) },
      request,
      onFrame,
    );
    this.sessions.add(session);
    void session.ended.then(() => this.sessions.delete(session));
    return session;
  }

  /** Kills the job's tree there; unreachable is undetermined, never a kill that did not happen (§21.3). */
  async kill(jobId: string): Promise<KillReport> {
    let answer: { killed: boolean; survivors: number[] } | undefined;
    let refused: string | undefined;
    // The far end says `accepted` at once, then kills with its own grace: the answer is given twice the bound (§5.4).
    const session = this.open(
      { op: "kill", job_id: jobId },
      (frame) => {
        if (frame.type === "killed") answer = frame;
        else if (frame.type === "error") refused = frame.message;
        return answer === undefined && refused === undefined;
      },
      2 * this.timeoutMs,
    );
    const closed = await session.ended;
    if (answer) return { signalled: answer.killed ? 1 : 0, survivors: answer.survivors };
    const why =
      refused !== undefined
        ? `host ${this.name} refused the kill: ${refused}`
        : `host ${this.name} could not be reached (${this.describe(closed)})`;
    return { signalled: 0, survivors: [], undetermined: true, why };
  }

  /**
   * The approver a job's agent there runs: claude-dispatch there, in its
   * approver mode, on its state directory (§18, §21.3).
   */
  approverLaunch(jobId: string, waitMs: number): ApproverLaunch {
    const [command = "claude-dispatch", ...first] = this.options.config.command;
    const stateDir = this.options.config.stateDir;
    return {
      command,
      args: [...first, "approver", ...(stateDir ? [`--state-dir=${stateDir}`] : []), `--wait-ms=${waitMs}`, jobId],
      waitMs,
    };
  }

  /** Sends an answer given here; false when the host could not be reached, so that it is sent again. */
  async answer(jobId: string, requestId: string, answer: ApprovalAnswer): Promise<boolean> {
    let settled = false;
    const session = this.open({ op: "answer", job_id: jobId, request_id: requestId, answer }, (frame) => {
      if (frame.type !== "answered" && frame.type !== "error") return;
      settled = true;
      if (frame.type === "error")
        this.logger.warn(
          `job ${jobId} on host ${this.name}: request ${requestId} was not answered there: ${frame.message}`,
        );
      else if (!frame.won)
        this.logger.warn(
          `job ${jobId} on host ${this.name}: request ${requestId} had been answered there already ` +
            `(${frame.answer.decision} by ${frame.answer.by})`,
        );
      return false;
    });
    const closed = await session.ended;
    if (!settled)
      this.logger.warn(
        `job ${jobId} on host ${this.name}: the answer to request ${requestId} could not be sent ` +
          `(${this.describe(closed)}); it is sent again`,
      );
    return settled;
  }

  /**
   * A worktree operation there: its result, or its refusal as the DispatchError it is; HOST_FAILED when out of reach.
   */
  async call(request: WorktreeRequest): Promise<unknown> {
    let result: { value: unknown } | undefined;
    let refused: { code: NonNullable<Extract<RemoteFrame, { type: "error" }>["code"]>; message: string } | undefined;
    const session = this.open(request, (frame) => {
      if (frame.type === "worktree") result = { value: frame.result };
      else if (frame.type === "error") refused = { code: frame.code, message: frame.message };
      else return;
      return false;
    });
    const closed = await session.ended;
    if (result) return result.value;
    if (refused) throw new DispatchError(refused.code, `on host ${this.name}: ${refused.message}`);
    throw new DispatchError("HOST_FAILED", `host ${this.name} could not be reached (${this.describe(closed)})`);
  }

  /** Reachable in BatchMode, claude-dispatch there, its state directory usable, the agents' programs found. */
  async check(): Promise<HostCheck> {
    const started = this.clock.now();
    let answer: Extract<RemoteFrame, { type: "check" }> | undefined;
    let refused: string | undefined;
    const { agents, programs } = this.options.config;
    const session = this.open({ op: "check", agents, programs: { ...programs } }, (frame) => {
      if (frame.type === "check") answer = frame;
      else if (frame.type === "error") refused = frame.message;
      return answer === undefined && refused === undefined;
    });
    const closed: SessionEnd = await session.ended;
    if (answer)
      return {
        ok: true,
        version: answer.version,
        stateDir: answer.state_dir,
        programs: answer.programs,
        ms: this.clock.now() - started,
      };
    return { ok: false, problem: refused ?? this.describe(closed) };
  }

  /** Why a session ended, in a phrase: the transport's own failure, or the far end's exit. */
  describe(closed: SessionEnd): string {
    return describeEnd(closed, this.options.transport);
  }

  /** This server is leaving: followers stop (the agents run on), and what the transport keeps is closed. */
  async close(): Promise<void> {
    for (const agent of this.agents) agent.stop();
    for (const session of this.sessions) session.stop();
    await Promise.all([...this.sessions].map((session) => session.ended));
    const argv = this.options.transport.closingArgs?.();
    if (argv === undefined) return;
    const exit = openSession(this.sessionOptions(argv), { op: "check", agents: [], programs: {} }, () => false);
    await exit.ended;
  }

  private sessionOptions(argv: string[]): SessionOptions {
    const { transport } = this.options;
    return {
      label: `${transport.label} (host ${this.name})`,
      program: transport.program,
      argv,
      env: transport.env,
      logger: this.logger,
      clock: this.clock,
      firstFrameMs: this.timeoutMs,
    };
  }

  private track(agent: RemoteAgent): RemoteAgent {
    this.agents.add(agent);
    void agent.settled.then(() => this.agents.delete(agent));
    return agent;
  }
}

function outputOf(request: SpawnRequest): NonNullable<SpawnRequest["output"]> {
  if (!request.output) throw new Error("a job on another host needs output files here");
  return request.output;
}
