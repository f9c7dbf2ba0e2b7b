/**
 * A fresh container per job (PROTOCOL.md §21.1): made from the entry's image when the job starts, holding only the
 * job's directory (or its worktree) at the same path, the extra mounts and the variables the entry lists; the job
 * runs there under claude-dispatch's remote mode, over the engine's `exec -i`, as on a container host. The
 * container is removed once the job's end is read here, or killed: removing it is the whole tree's kill. Its
 * records and requests stay in the container, out of reach of this machine's state directory, and its permission
 * requests are not forwarded: the agent could answer its own there.
 */
import { execFile } from "node:child_process";
import path from "node:path";

import type {
  AgentHost,
  AttachRequest,
  ChildExit,
  ChildHandle,
  Host,
  HostCheck,
  KillReport,
  LocatedAgent,
  RecordedAgent,
  SpawnRequest,
} from "../../agent/host.js";
import type { DirectoryCheck } from "../../agent/policy.js";
import type { Worktrees } from "../../agent/worktree.js";
import type { Clock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import { ContainerTransport, ENGINE_ENVIRONMENT } from "../container/transport.js";
import { RemoteHost } from "../remote/remote-host.js";
import { lastLine } from "../remote/session.js";
import { environmentOf, type Transport } from "../remote/transport.js";
import type { SandboxHostConfig } from "./config.js";

type Env = Readonly<Record<string, string | undefined>>;

export interface SandboxHostOptions {
  config: SandboxHostConfig;
  /** This machine's environment: the engine gets what it needs of it, the container the variables listed. */
  env: Env;
  /** How long the engine and the far end may keep silent (CLAUDE_DISPATCH_SSH_TIMEOUT_MS, §21.2). */
  timeoutMs: number;
  clock: Clock;
  logger: Logger;
  /** The job's directory is this machine's: checked here against the entry's roots, links resolved. */
  checkDirectory(dir: string): Promise<DirectoryCheck>;
  /** This machine's worktrees: a job's worktree is made here and mounted. */
  worktrees: Worktrees;
  /** This server's state directory: never in a sandbox, nor any folder holding it. */
  stateDir: string;
}

/** What the engine said when asked to make, find or remove a container. */
interface EngineRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Where the job's container holds the state of claude-dispatch there: its own, gone with the container. */
const CONTAINER_PREFIX = "claude-dispatch-";

export class SandboxHost implements Host {
  readonly name: string;
  /** The job's directory and worktree are this machine's. */
  readonly sharesFiles = true;
  /** The container gets the variables the entry lists, at its making; nothing else of ours. */
  readonly agentEnvironment: Env = {};
  readonly worktrees: Worktrees;
  private readonly jobs = new Map<string, RemoteHost>();

  constructor(private readonly options: SandboxHostOptions) {
    this.name = options.config.name;
    this.worktrees = options.worktrees;
  }

  programOf(agent: string): string | undefined {
    return this.options.config.programs[agent];
  }

  forAgent(agent: string): AgentHost {
    return {
      start: (request) => new SandboxAgent(this, this.started(agent, request), idOf(request)),
      attach: (request) => new SandboxAgent(this, this.attached(agent, request), idOf(request)),
    };
  }

  /** Its container alive: the far end there has the job; gone: nothing of it is left to follow or kill. */
  async locate(recorded: RecordedAgent): Promise<LocatedAgent> {
    const name = containerOf(recorded.jobId);
    const found = await this.engine(["container", "inspect", "--format", "{{.State.Running}}", name]);
    if (found.code === 0 && found.stdout.trim() === "true")
      return { state: "alive", pid: undefined, startTime: undefined };
    // Stopped (the machine restarted): nothing of the job runs there, and nothing of it is kept.
    if (found.code === 0) await this.remove(recorded.jobId);
    return { state: "gone", pid: undefined, startTime: undefined };
  }

  canFollow(): boolean {
    return true;
  }

  /** Removing the container is the kill; one already gone was not running (§17). */
  async killRecorded(recorded: RecordedAgent): Promise<KillReport | undefined> {
    const removed = await this.remove(recorded.jobId);
    if (removed === "gone") return undefined;
    if (removed === "removed") return { signalled: 1, survivors: [] };
    return { signalled: 0, survivors: [], undetermined: true, why: `host ${this.name}: ${removed}` };
  }

  /** This machine's check against the entry's roots; a folder that is or holds the state directory never goes in. */
  async checkDirectory(dir: string): Promise<DirectoryCheck> {
    const check = await this.options.checkDirectory(dir);
    if (!check.ok) return check;
    if (isInside(this.options.stateDir, check.path))
      return { ok: false, code: "POLICY_DENIED", problem: "holds the state directory, which no sandbox may reach" };
    return check;
  }

  joinPath(repo: string, subdir: string): string {
    return path.join(repo, subdir);
  }

  /** None: in the container the agent could answer its own requests (§21.1); what would prompt is refused. */
  approver(): undefined {
    return undefined;
  }

  /** The engine is there and has the image, and claude-dispatch runs in a container of it. */
  async check(): Promise<HostCheck> {
    const { image } = this.options.config;
    const found = await this.engine(["image", "inspect", "--format", "{{.Id}}", image]);
    if (found.code !== 0)
      return { ok: false, problem: `${this.options.config.engine} has no image ${image}: ${lastLine(found.stderr)}` };
    // A container made for the check alone, without the network or any mount, gone with its session.
    const once = new RemoteHost(
      this.remoteOptions(this.transport(["run", "--rm", "-i", "--network", "none", image], `a new one of ${image}`)),
    );
    try {
      return await once.check();
    } finally {
      await once.close();
    }
  }

  /** Followers stop and the containers stay: their agents run on, and the next server follows them (§21.3). */
  async close(): Promise<void> {
    await Promise.all([...this.jobs.values()].map((host) => host.close()));
    this.jobs.clear();
  }

  /** The job's container made, then the start sent to claude-dispatch there. */
  private async started(agent: string, request: SpawnRequest): Promise<ChildHandle> {
    const id = idOf(request);
    const mount = request.worktree?.path ?? request.cwd;
    this.refuseStateDirectory(mount);
    const made = await this.engine(this.runArgs(id, mount), this.containerEnvironment());
    if (made.code !== 0) throw new Error(`cannot make its container: ${lastLine(made.stderr) || `exit ${made.code}`}`);
    // Its worktree is this machine's, made and kept here: claude-dispatch there only sees its folder.
    const { worktree: _mounted, ...there } = request;
    return this.jobHost(id, [mount]).forAgent(agent).start(there);
  }

  private async attached(agent: string, request: AttachRequest): Promise<ChildHandle> {
    return this.jobHost(idOf(request), []).forAgent(agent).attach(request);
  }

  /** A folder inside the state directory is mounted only if it is a job's worktree, which is made there. */
  private refuseStateDirectory(mount: string): void {
    const { stateDir } = this.options;
    if (isInside(stateDir, mount)) throw new Error(`${mount} holds the state directory, which no sandbox may reach`);
    if (isInside(mount, stateDir) && !isInside(mount, path.join(stateDir, "worktrees")))
      throw new Error(`${mount} is in the state directory, which no sandbox may reach`);
  }

  /** `run -d`: a container that only waits, for the job's sessions to exec into. */
  private runArgs(jobId: string, mount: string): string[] {
    const { image, network, env, mounts, user } = this.options.config;
    const bind = (source: string, target: string, writable: boolean): string[] => [
      "--mount",
      `type=bind,source=${source},target=${target}${writable ? "" : ",readonly=true"}`,
    ];
    if (/[,"'\n]/.test(mount)) throw new Error(`${mount} holds a character a mount cannot`);
    return [
      "run",
      "--detach",
      "--init",
      "--name",
      containerOf(jobId),
      "--label",
      `io.claude-dispatch.job=${jobId}`,
      "--network",
      network,
      "--security-opt",
      "no-new-privileges",
      // Every exec into it runs as this user too.
      ...(user ? ["--user", user] : []),
      ...bind(mount, mount, true),
      ...mounts.flatMap((extra) => bind(extra.source, extra.target, extra.writable)),
      // By name: the engine reads each value from its own environment, which holds them.
      ...env.flatMap((name) => ["--env", name]),
      image,
      "sleep",
      "infinity",
    ];
  }

  /** One job's far end, over `exec -i` into its container; kept until its agent is settled. */
  jobHost(jobId: string, roots: string[]): RemoteHost {
    let host = this.jobs.get(jobId);
    if (!host) {
      const name = containerOf(jobId);
      host = new RemoteHost(this.remoteOptions(this.transport(["exec", "-i", name], name), roots));
      this.jobs.set(jobId, host);
    }
    return host;
  }

  forget(jobId: string): void {
    this.jobs.delete(jobId);
  }

  /** Removes the job's container and everything in it: "gone" when there was none. */
  async remove(jobId: string): Promise<"removed" | "gone" | string> {
    const removed = await this.engine(["rm", "--force", "--time", "0", containerOf(jobId)]);
    if (removed.code === 0) return "removed";
    if (/no such container|no container with name/i.test(removed.stderr)) return "gone";
    const why = lastLine(removed.stderr) || `exit ${removed.code}`;
    return `${this.options.config.engine} could not remove its container: ${why}`;
  }

  /** The far end over this transport; its roots, for a start, the job's mounted folder (§21.3). */
  private remoteOptions(transport: Transport, roots?: string[]): ConstructorParameters<typeof RemoteHost>[0] {
    const { config, timeoutMs, clock, logger } = this.options;
    return {
      config: { ...config, roots: roots ?? config.roots, permissionModes: undefined },
      transport,
      timeoutMs,
      clock,
      logger,
    };
  }

  /**
   * The engine, its first arguments given: an exec into a job's container, or a container for one session;
   * `container` names it in messages.
   */
  private transport(first: string[], container: string): Transport {
    const { engine, engineBin } = this.options.config;
    const exec = new ContainerTransport(
      { ...this.options.config, kind: "container", container, engine, engineBin, user: undefined },
      this.options.env,
    );
    return {
      label: exec.label,
      program: exec.program,
      env: exec.env,
      sessionArgs: (remote) => [...first, ...remote],
      failure: (code) => exec.failure(code),
    };
  }

  /** What the engine needs to make the container, and the variables the entry passes into it. */
  private containerEnvironment(): Env {
    return environmentOf(this.options.env, [...ENGINE_ENVIRONMENT, ...this.options.config.env]);
  }

  /** The engine run to its end, bounded by the host's silence bound: argv, no shell. */
  private engine(args: string[], env: Env = environmentOf(this.options.env, ENGINE_ENVIRONMENT)): Promise<EngineRun> {
    const { engine, engineBin } = this.options.config;
    return new Promise((resolve) => {
      execFile(
        engineBin ?? engine,
        args,
        { env, timeout: this.options.timeoutMs, killSignal: "SIGKILL", maxBuffer: 1024 * 1024, windowsHide: true },
        (error, stdout, stderr) => {
          const code = error ? (typeof error.code === "number" ? error.code : null) : 0;
          resolve({ code, stdout, stderr: stderr || (error && code === null ? error.message : "") });
        },
      );
    });
  }
}

/**
 * The agent of one sandboxed job: its container made (a start) or found (an attach), then the far end's job
 * followed; once its end is read here, or it is killed, the container goes.
 */
class SandboxAgent implements ChildHandle {
  readonly pid = undefined;
  readonly marker = undefined;
  readonly ready: Promise<void>;
  readonly exited: Promise<ChildExit>;
  readonly settled: Promise<void>;

  constructor(
    private readonly host: SandboxHost,
    private readonly inner: Promise<ChildHandle>,
    private readonly jobId: string,
  ) {
    this.ready = inner.then(
      (agent) => agent.ready,
      () => undefined,
    );
    this.exited = inner
      .then(
        (agent) => agent.exited,
        (error: unknown): ChildExit => ({
          exitCode: null,
          signal: null,
          stderrTail: "",
          unobserved: true,
          failure: { code: "HOST_FAILED", detail: `on host ${host.name}: ${(error as Error).message}` },
        }),
      )
      .then(async (exit) => {
        await this.removeContainer();
        return exit;
      });
    this.settled = this.exited.then(() => undefined);
  }

  async identity(): Promise<{ pid: undefined; startTime: undefined; marker: undefined }> {
    return { pid: undefined, startTime: undefined, marker: undefined };
  }

  /** The far end kills the tree and reports its end; the container's removal takes whatever is left. */
  async killTree(): Promise<KillReport> {
    const agent = await this.inner.catch(() => undefined);
    const report = agent ? await agent.killTree() : { signalled: 0, survivors: [] };
    // The end read meanwhile may have removed it already, cutting the kill's own session short: either way the
    // container, and every process of the job, is gone.
    const removed = await this.removeContainer();
    if (removed === "removed" || removed === "gone") return { signalled: Math.max(report.signalled, 1), survivors: [] };
    return { signalled: report.signalled, survivors: [], pending: true, undetermined: true, why: removed };
  }

  private async removeContainer(): Promise<string> {
    const removed = await this.host.remove(this.jobId);
    this.host.forget(this.jobId);
    return removed;
  }
}

/** Whether candidate is root or lies under it, by path components. */
function isInside(candidate: string, root: string): boolean {
  const relative = path.relative(root, candidate);
  return relative === "" || (relative !== ".." && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
}

function idOf(request: { jobId?: string | undefined }): string {
  if (request.jobId === undefined) throw new Error("a sandboxed job needs its id");
  return request.jobId;
}

function containerOf(jobId: string): string {
  return `${CONTAINER_PREFIX}${jobId}`;
}
