/**
 * The seven tools (PROTOCOL.md §5, §18): each call validated, admitted by the
 * operator's policy, and carried out on the job registry; the answer is a
 * rendered tool result. Failures are thrown as DispatchError and rendered by
 * the handler.
 */
import type { AgentOptions } from "../agent/options.js";
import { admitAgent } from "../agent/policy.js";
import { DispatchError, quoted } from "../core/errors.js";
import { isUnfinished, type Job } from "../jobs/registry.js";
import { renderJob, renderKill, renderList, renderOutputPage, renderResponded, renderStarted, type CallToolResult } from "../tools/results.js";
import type { ToolName } from "../tools/definitions.js";
import {
  parseKillInput,
  parseListInput,
  parseOutputInput,
  parseRespondInput,
  parseRunInput,
  parseStartInput,
  parseWaitInput,
  type ToolSettings,
} from "../tools/validation.js";
import type { HandlerDeps } from "./handler.js";
import { hold, withProgress, type ProgressToken } from "./progress.js";
import type { TaskTool } from "./tasks.js";

function describeDuration(ms: number): string {
  if (ms < 120_000) return `${Math.round(ms / 1000)} seconds`;
  if (ms < 2 * 3_600_000) return `${Math.round(ms / 60_000)} minutes`;
  if (ms < 2 * 86_400_000) return `${Math.round(ms / 3_600_000)} hours`;
  return `${Math.round(ms / 86_400_000)} days`;
}

export class ToolCalls {
  constructor(
    private readonly deps: HandlerDeps,
    private readonly settings: ToolSettings,
  ) {}

  /** Carries out one validated tool call. */
  async run(name: ToolName, args: Record<string, unknown>, signal: AbortSignal, progressToken: ProgressToken | undefined): Promise<CallToolResult<unknown>> {
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
        if (isUnfinished(job) && input.holdMs > 0) await withProgress(deps, progressToken, job, () => hold(deps.clock, job, input.holdMs, signal));
        return renderJob(job, now(), { maxResultChars: deps.maxResultChars });
      }
      case "claude_kill": {
        const input = parseKillInput(args);
        const job = await this.requireJob(input.jobId);
        const { killed, survivors } = await deps.jobs.kill(job.id, "claude_kill");
        return renderKill(job, now(), killed, survivors, deps.maxResultChars);
      }
      case "claude_list":
        parseListInput(args);
        // Every job of the state directory, whichever server started it (§15.6).
        await deps.jobs.discover();
        return renderList(deps.jobs.list(), now());
      case "claude_output": {
        const input = parseOutputInput(args, this.settings);
        return renderOutputPage(await this.requireJob(input.jobId), input.view, input.offset, input.limit);
      }
      case "claude_respond": {
        const input = parseRespondInput(args);
        const job = await this.requireJob(input.jobId);
        const answered = await deps.jobs.approvals.respond(job.id, input.requestId, input.decision, "tool", input.message);
        return renderResponded(job, answered, now());
      }
    }
  }

  /** Validates a claude_run or claude_start call and starts its job (or queues it). */
  async startJob(name: TaskTool, args: Record<string, unknown>, signal: AbortSignal): Promise<Job> {
    const run = name === "claude_run" ? parseRunInput(args, this.settings) : undefined;
    const input = run ?? parseStartInput(args, this.settings);
    const { cwd, options } = await this.prepareAgent(input.cwd, input.options, signal);
    const spec = { prompt: input.prompt, cwd, resumeSessionId: input.sessionId, options };
    return run ? this.deps.jobs.start(spec, "run", run.timeoutMs) : this.deps.jobs.start(spec, "start");
  }

  /** Waits for a claude_run's job and returns its result; a cancelled run is killed, as nobody is left to read it. */
  async awaitRun(job: Job, signal: AbortSignal, progressToken: ProgressToken | undefined): Promise<CallToolResult<unknown>> {
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
    return renderJob(job, deps.clock.now(), { forRun: true, maxResultChars: deps.maxResultChars });
  }

  /**
   * Applies the policy and checks every directory, then whether the request was
   * cancelled meanwhile: a job started after its request was cancelled would run
   * with nobody to collect or kill it. (That error text reaches no one: a
   * cancelled request gets no response.)
   */
  private async prepareAgent(cwd: string, requested: AgentOptions, signal: AbortSignal): Promise<{ cwd: string; options: AgentOptions }> {
    const admitted = await admitAgent(cwd, requested, this.deps.policy, this.deps.checkDirectory);
    if (signal.aborted) throw new DispatchError("INVALID_ARGUMENT", "the request was cancelled before the job started");
    return admitted;
  }

  /** A job this server knows, or one it takes over now from the state directory (§15.3): a server that died since this one started. */
  private async requireJob(jobId: string): Promise<Job> {
    const { jobs } = this.deps;
    const job = jobs.get(jobId) ?? (await jobs.recover(jobId));
    if (job) return job;
    throw new DispatchError(
      "JOB_NOT_FOUND",
      `no job with id ${quoted(jobId)}; finished jobs are forgotten ${describeDuration(this.deps.jobRetentionMs)} after they end, and a job another running claude-dispatch server owns is served by that server (claude-dispatch jobs lists every job)`,
    );
  }
}
