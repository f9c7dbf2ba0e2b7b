/**
 * The nine tools (PROTOCOL.md §5, §18–§20): each call validated, admitted by the
 * operator's policy, and carried out on the job registry; the answer is a
 * rendered tool result. Failures are thrown as DispatchError and rendered by
 * the handler.
 */
import type { Host } from "../agent/host.js";
import type { AgentOptions } from "../agent/options.js";
import { admitAgent } from "../agent/policy.js";
import { DispatchError, quoted } from "../core/errors.js";
import { isUnfinished, sessionIdOf, type Job } from "../jobs/registry.js";
import type { WorktreeHold, WorktreeRecord, Worktrees } from "../agent/worktree.js";
import {
  renderDiscarded,
  renderJob,
  renderKill,
  renderMerge,
  renderOutputPage,
  renderResponded,
  renderSessions,
  type ListedSession,
  renderStarted,
  renderWorktreeDiff,
  type CallToolResult,
  type RenderOptions,
} from "../tools/results.js";
import type { ToolName } from "../tools/definitions.js";
import { checkUndecided, mergeMessage } from "../tools/worktree-results.js";
import { findSessions, type SessionJob } from "../tools/session-results.js";
import { renderList } from "../tools/listing.js";
import {
  parseKillInput,
  parseListInput,
  parseOutputInput,
  parseRespondInput,
  parseSessionsInput,
  parseWorktreeInput,
  parseWaitInput,
  type ToolSettings,
} from "../tools/validation.js";
import { parseRunInput, parseStartInput } from "../tools/run-arguments.js";
import type { HandlerDeps } from "./deps.js";
import { hold, withProgress, type ProgressToken } from "./progress.js";
import type { TaskTool } from "./tasks.js";

function describeDuration(ms: number): string {
  if (ms < 120_000) return `${Math.round(ms / 1000)} seconds`;
  if (ms < 2 * 3_600_000) return `${Math.round(ms / 60_000)} minutes`;
  if (ms < 2 * 86_400_000) return `${Math.round(ms / 3_600_000)} hours`;
  return `${Math.round(ms / 86_400_000)} days`;
}

/** A job id's start that may name one job: at least 8 hex digits (§5.3). */
const ID_PREFIX = /^[0-9a-f]{8}[0-9a-f-]{0,27}$/i;
export class ToolCalls {
  constructor(
    private readonly deps: HandlerDeps,
    private readonly settings: ToolSettings,
  ) {}

  /** Carries out one validated tool call. */
  async run(
    name: ToolName,
    args: Record<string, unknown>,
    signal: AbortSignal,
    progressToken: ProgressToken | undefined,
  ): Promise<CallToolResult<unknown>> {
    const { deps } = this;
    const now = (): number => deps.clock.now();
    switch (name) {
      case "claude_run":
        return this.awaitRun(await this.startJob(name, args, signal), signal, progressToken);
      case "claude_start":
        return renderStarted(await this.startJob(name, args, signal), now());
      case "claude_wait": {
        const input = parseWaitInput(args);
        const job = await this.requireJob(input.jobId);
        if (isUnfinished(job) && input.holdMs > 0)
          await withProgress(deps, progressToken, job, () => hold(deps.clock, job, input.holdMs, signal));
        return renderJob(job, now(), await this.renderOptions(job, { maxResultChars: deps.maxResultChars }));
      }
      case "claude_kill": {
        const input = parseKillInput(args);
        const job = await this.requireJob(input.jobId);
        const { killed, survivors } = await deps.jobs.kill(job.id, "claude_kill");
        return renderKill(job, now(), killed, survivors, deps.maxResultChars);
      }
      case "claude_list": {
        const input = parseListInput(args);
        // Every job of the state directory, whichever server started it (§15.6).
        await deps.jobs.discover();
        return renderList(deps.jobs.list(), now(), input, deps.maxResultChars, {
          agent: deps.policy.homeAgent,
          host: deps.hosts?.home.name,
        });
      }
      case "claude_output": {
        const input = parseOutputInput(args, this.settings);
        return renderOutputPage(await this.requireJob(input.jobId), input.view, input.offset, input.limit);
      }
      case "claude_respond": {
        const input = parseRespondInput(args);
        const job = await this.requireJob(input.jobId);
        const answered = await deps.jobs.approvals.respond(
          job.id,
          input.requestId,
          input.decision,
          "tool",
          input.message,
        );
        return renderResponded(job, answered, now());
      }
      case "claude_worktree":
        return this.worktreeAction(args);
      case "claude_sessions":
        return this.sessions(args);
    }
  }

  /**
   * Validates a claude_run or claude_start call and starts its job (or queues
   * it), in a worktree of its own when asked (§19).
   */
  async startJob(name: TaskTool, args: Record<string, unknown>, signal: AbortSignal): Promise<Job> {
    const run = name === "claude_run" ? parseRunInput(args, this.settings) : undefined;
    const input = run ?? parseStartInput(args, this.settings);
    const inWorktree = this.worktreeWanted(input.worktree);
    const { cwd, options } = await this.prepareAgent(input.cwd, input.options, signal, input.agent, input.host);
    const spec = {
      agent: input.agent,
      ...(input.host === undefined ? {} : { host: input.host }),
      prompt: input.prompt,
      cwd,
      resumeSessionId: input.sessionId,
      options,
    };
    const start = (agentSpec: typeof spec & { worktree?: WorktreeRecord }, id?: string): Job =>
      run
        ? this.deps.jobs.start(agentSpec, "run", run.timeoutMs, id)
        : this.deps.jobs.start(agentSpec, "start", undefined, id);
    // A session continues in the worktree it ran in while that is still there: a session is tied to its folder (§19).
    const earlier =
      input.sessionId === undefined || input.worktree === false
        ? undefined
        : this.worktreeOfSession(input.sessionId, input.host);
    if (earlier) return start({ ...spec, cwd: this.git(input.host).cwdIn(earlier), worktree: earlier });
    if (!inWorktree) return start(spec);
    const git = this.git(input.host);
    const id = this.deps.jobs.newJobId();
    const made = await git.create(cwd, id);
    try {
      if (signal.aborted)
        throw new DispatchError("INVALID_ARGUMENT", "the request was cancelled before the job started");
      return start({ ...spec, cwd: made.cwd, worktree: made.worktree }, id);
    } catch (error) {
      await git.discard(made.worktree).catch(() => undefined);
      throw error;
    }
  }

  /** The call's "worktree", else the operator's default; "required" refuses false (§19). */
  private worktreeWanted(asked: boolean | undefined): boolean {
    const policy = this.deps.worktrees?.policy ?? "off";
    if (policy === "required" && asked === false)
      throw new DispatchError(
        "POLICY_DENIED",
        `"worktree" false is not allowed here: the operator requires every job to run in a worktree ` +
          `(CLAUDE_DISPATCH_WORKTREE=required)`,
      );
    return asked ?? policy !== "off";
  }

  /** The host a call names, else this machine's (§21). */
  private hostOf(name: string | undefined): Host | undefined {
    const hosts = this.deps.hosts;
    return name === undefined ? hosts?.home : hosts?.get(name);
  }

  /** The worktrees of the host a job runs on, made and worked on there (§19, §21.3). */
  private worktreesOf(host: string | undefined): Worktrees | undefined {
    return this.deps.worktrees ? this.hostOf(host)?.worktrees : undefined;
  }

  private git(host?: string): Worktrees {
    const git = this.worktreesOf(host);
    if (!git)
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `"worktree" is not available on this server (it keeps no state directory)`,
      );
    return git;
  }

  private worktreeOfSession(sessionId: string, host: string | undefined): WorktreeRecord | undefined {
    const git = this.worktreesOf(host);
    // Every job is listed (finished ones read from their records) only when some worktree may be there to be found.
    if (!git?.any()) return undefined;
    const where = this.hostOf(host)?.name;
    const job = this.deps.jobs
      .list()
      .findLast(
        (candidate) =>
          candidate.worktree &&
          !candidate.worktree.state &&
          candidate.hostName === where &&
          sessionIdOf(candidate) === sessionId,
      );
    return job?.worktree && git.exists(job.worktree) ? job.worktree : undefined;
  }

  /** A finished job's report names what it changed in its worktree, read now (§19). */
  private async renderOptions(job: Job, options: RenderOptions): Promise<RenderOptions> {
    const worktree = job.worktree;
    const git = this.worktreesOf(job.hostName);
    if (!worktree || worktree.state || !git || isUnfinished(job) || !git.exists(worktree)) return options;
    try {
      return { ...options, worktreeChanges: await git.changes(worktree) };
    } catch (error) {
      this.deps.logger.warn(`job ${job.id}: cannot read its worktree's changes: ${(error as Error).message}`);
      return options;
    }
  }

  /**
   * claude_sessions (§20): the directory's sessions from the agent CLI's store, with those of the worktrees the
   * state directory's jobs of that directory ran in, each naming the jobs that used it.
   */
  private async sessions(args: Record<string, unknown>): Promise<CallToolResult<unknown>> {
    const input = parseSessionsInput(args);
    const checked = await this.deps.checkDirectory(input.cwd);
    if (!checked.ok) throw new DispatchError(checked.code, `"cwd" ${checked.problem}`);
    const list = this.deps.sessions;
    if (!list) throw new DispatchError("INVALID_ARGUMENT", "sessions are not available on this server");
    // Every job of the state directory, whichever server started it (§15.6), as `claude-dispatch sessions` reads them.
    await this.deps.jobs.discover();
    const jobs = this.deps.jobs.list().map((job): SessionJob => ({
      id: job.id,
      cwd: job.cwd,
      submittedAt: job.submittedAt,
      // Only a worktree on this machine's disk holds sessions this listing can read (§20).
      ...(job.worktree && this.hostOf(job.hostName)?.sharesFiles ? { worktreeRepo: job.worktree.repo } : {}),
      sessionIds: [sessionIdOf(job), job.resumeSessionId],
    }));
    const found = await findSessions(list, checked.path, input.limit, jobs);
    const listed = found.map(({ session, worktree, job_ids }): ListedSession => ({
      session_id: session.session_id,
      started_at: new Date(session.started_at).toISOString(),
      last_active_at: new Date(session.last_active_at).toISOString(),
      first_prompt: session.first_prompt_preview,
      prompts: session.turns,
      prompts_exact: session.turns_exact,
      ...(worktree ? { worktree } : {}),
      job_ids,
    }));
    return renderSessions(checked.path, listed);
  }

  private async worktreeAction(args: Record<string, unknown>): Promise<CallToolResult<unknown>> {
    const input = parseWorktreeInput(args, this.settings);
    const job = await this.requireJob(input.jobId);
    const worktree = job.worktree;
    if (!worktree)
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `job ${job.id} has no worktree: it was not started with "worktree" true`,
      );
    const git = this.git(job.hostName);
    checkUndecided(job.id, worktree, worktree.state, input.action);
    // A discard removes whatever is left: a merge removed the folder already.
    if (input.action !== "discard" && !git.exists(worktree))
      throw new DispatchError("INVALID_ARGUMENT", `job ${job.id}'s worktree ${quoted(worktree.path)} is gone`);
    if (input.action === "diff")
      return renderWorktreeDiff(job, worktree, await git.diff(worktree), input.offset, input.limit);
    if (isUnfinished(job)) {
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `job ${job.id} is still ${job.status}: its worktree is merged or discarded only once it has finished ` +
          `(claude_wait for it, or claude_kill it)`,
      );
    }
    // One merge or discard at a time across every server and the CLI; the record, read under the hold, decides.
    const hold = await this.holdWorktree(job.id);
    try {
      checkUndecided(job.id, worktree, hold.state, input.action);
      if (input.action === "discard") {
        const wasMerged = hold.state === "merged";
        await git.discard(worktree);
        // Work that reached the checkout stays "merged" in the record, which this server's memory learns too.
        this.deps.jobs.setWorktreeState(job.id, wasMerged ? "merged" : "discarded");
        return renderDiscarded(job, job.worktree ?? worktree, wasMerged);
      }
      const prompt = this.deps.worktrees?.readPrompt(job.id) ?? job.promptPreview;
      const outcome = await git.merge(worktree, mergeMessage(job.id, prompt));
      if (outcome.merged) this.deps.jobs.setWorktreeState(job.id, "merged");
      const host = this.hostOf(job.hostName);
      return renderMerge(job, job.worktree ?? worktree, outcome, host?.sharesFiles ? undefined : job.hostName);
    } finally {
      hold.release();
    }
  }

  private holdWorktree(jobId: string): Promise<WorktreeHold> {
    const worktrees = this.deps.worktrees;
    if (!worktrees)
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `"worktree" is not available on this server (it keeps no state directory)`,
      );
    return worktrees.hold(jobId);
  }

  /** Waits for a claude_run's job and returns its result; a cancelled run is killed, as nobody is left to read it. */
  async awaitRun(
    job: Job,
    signal: AbortSignal,
    progressToken: ProgressToken | undefined,
  ): Promise<CallToolResult<unknown>> {
    const { deps } = this;
    let onCancel = (): void => undefined;
    const cancelled = new Promise<void>((resolve) => {
      onCancel = (): void => {
        void deps.jobs.kill(job.id, "cancelled").catch(() => undefined);
        resolve();
      };
    });
    signal.addEventListener("abort", onCancel, { once: true });
    try {
      await withProgress(deps, progressToken, job, () => Promise.race([job.done, cancelled]));
    } finally {
      signal.removeEventListener("abort", onCancel);
    }
    return renderJob(
      job,
      deps.clock.now(),
      await this.renderOptions(job, { forRun: true, maxResultChars: deps.maxResultChars }),
    );
  }

  /**
   * Applies the policy and checks every directory, then whether the request was
   * cancelled meanwhile: a job started after its request was cancelled would run
   * with nobody to collect or kill it. (That error text reaches no one: a
   * cancelled request gets no response.)
   */
  private async prepareAgent(
    cwd: string,
    requested: AgentOptions,
    signal: AbortSignal,
    agent: string,
    host: string | undefined,
  ): Promise<{ cwd: string; options: AgentOptions }> {
    // Another machine's paths are checked against its roots here, and again there with links resolved (§21).
    const there = host === undefined ? undefined : this.hostOf(host);
    if (host !== undefined && !there)
      throw new DispatchError("INVALID_ARGUMENT", `"host" ${quoted(host)} is not configured on this server`);
    const check = there ? (dir: string) => there.checkDirectory(dir) : this.deps.checkDirectory;
    const admitted = await admitAgent(cwd, requested, this.deps.policy, check, agent, host);
    // Its program missing here, the job could only fail: say so now, with the fix, and make none (§7.5).
    const offer = there ? undefined : this.deps.policy.agents?.find((candidate) => candidate.name === agent);
    const missing = offer?.missingProgram?.();
    if (missing !== undefined) throw new DispatchError("SPAWN_FAILED", missing);
    if (signal.aborted) throw new DispatchError("INVALID_ARGUMENT", "the request was cancelled before the job started");
    return admitted;
  }

  /**
   * A job this server knows, or one it takes over now from the state directory
   * (§15.3): a server that died since this one started.
   */
  private async requireJob(jobId: string): Promise<Job> {
    const { jobs } = this.deps;
    const job = jobs.get(jobId) ?? (await jobs.recover(jobId));
    if (job) return job;
    // A unique start of an id names its job, as on the command line (§5.3).
    const matches = ID_PREFIX.test(jobId) ? jobs.idsStartingWith(jobId) : [];
    const [only] = matches;
    if (matches.length === 1 && only !== undefined) return this.requireJob(only);
    if (matches.length > 1)
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `"job_id" ${quoted(jobId)} starts ${matches.length} job ids: give more of it`,
      );
    throw new DispatchError(
      "JOB_NOT_FOUND",
      `no job with id ${quoted(jobId)} in this state directory: check the id (claude_list lists the jobs); a ` +
        `finished job is forgotten ${describeDuration(this.deps.jobRetentionMs)} after it ends`,
    );
  }
}
