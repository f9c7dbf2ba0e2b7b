/**
 * The job registry and its state machine (PROTOCOL.md §8). Both tools that
 * run an agent create a job here: claude_start returns its id at once,
 * claude_run waits for it. Time and ids are injected.
 *
 *   running ──agent exits──▶ completed | failed
 *   running ──kill (claude_kill, cancel, shutdown)──▶ killed
 *   running ──timeout──▶ failed (TIMEOUT)
 */
import type { AgentLauncher, AgentOutcome, AgentSpec, LiveSummary } from "./claude.js";
import type { CancelTimer, Clock } from "./clock.js";
import { DispatchError } from "./errors.js";
import type { Logger } from "./log.js";
import type { Transcript } from "./transcript.js";

export type JobStatus = "running" | "completed" | "failed" | "killed";
export type JobKind = "run" | "start";
export type KillReason = "claude_kill" | "cancelled" | "timeout" | "shutdown";

export interface Job {
  readonly id: string;
  readonly kind: JobKind;
  readonly cwd: string;
  readonly resumeSessionId: string | undefined;
  readonly startedAt: number;
  readonly status: JobStatus;
  readonly finishedAt: number | undefined;
  /** Set when the job finishes. For a killed job it is whatever the agent left. */
  readonly outcome: AgentOutcome | undefined;
  /** Set before the kill is sent, so the exit that follows is read as a kill, not a crash. */
  readonly killReason: KillReason | undefined;
  /** Resolves when the job leaves `running`; never rejects. */
  readonly done: Promise<void>;
  readonly timeoutMs: number | undefined;
  /** The prompt's first line, clipped, for listings. */
  readonly promptPreview: string;
  /** What the agent has done so far (§5.3). */
  live(): LiveSummary;
  /** Calls listener whenever the agent reports something; returns the unsubscribe. */
  onActivity(listener: () => void): () => void;
  readonly transcript: Transcript;
}

export interface KillResult {
  /** False when the job had already finished: nothing was signalled. */
  killed: boolean;
  survivors: number[];
}

export interface JobRegistryOptions {
  launch: AgentLauncher;
  clock: Clock;
  newId(): string;
  logger: Logger;
  /** How long a finished job stays reachable. Running jobs are never reaped. */
  retentionMs: number;
  /** At most this many finished jobs are kept; the oldest go first. */
  maxFinishedJobs: number;
  /** Transcript characters kept across all finished jobs; the oldest finished transcripts are dropped first. */
  finishedTranscriptChars: number;
}

interface MutableJob {
  id: string;
  kind: JobKind;
  cwd: string;
  resumeSessionId: string | undefined;
  startedAt: number;
  status: JobStatus;
  finishedAt: number | undefined;
  outcome: AgentOutcome | undefined;
  killReason: KillReason | undefined;
  done: Promise<void>;
  timeoutMs: number | undefined;
  promptPreview: string;
  live(): LiveSummary;
  onActivity(listener: () => void): () => void;
  transcript: Transcript;
  kill(): Promise<{ survivors: number[] }>;
  killing: Promise<{ survivors: number[] }> | undefined;
  cancelTimeout: CancelTimer | undefined;
}

const PREVIEW_CHARS = 80;

function previewOf(prompt: string): string {
  const flat = prompt.replace(/\s+/g, " ").trim();
  return flat.length > PREVIEW_CHARS ? `${flat.slice(0, PREVIEW_CHARS)}…` : flat;
}

export class JobRegistry {
  private readonly jobs = new Map<string, MutableJob>();
  /** Finished job ids in finish order: reaping looks only at the head, never scans every job. */
  private readonly finishedOrder: string[] = [];
  private closing = false;

  constructor(private readonly options: JobRegistryOptions) {}

  /** Starts an agent. Throws SHUTTING_DOWN once shutdown began. */
  start(spec: AgentSpec, kind: JobKind, timeoutMs?: number): Job {
    if (this.closing) throw new DispatchError("SHUTTING_DOWN", "the server is shutting down and starts no new jobs");
    this.reap();
    const { clock } = this.options;
    const run = this.options.launch(spec);
    let markDone!: () => void;
    const job: MutableJob = {
      id: this.options.newId(),
      kind,
      cwd: spec.cwd,
      resumeSessionId: spec.resumeSessionId,
      startedAt: clock.now(),
      status: "running",
      finishedAt: undefined,
      outcome: undefined,
      killReason: undefined,
      done: new Promise<void>((resolve) => (markDone = resolve)),
      timeoutMs,
      promptPreview: previewOf(spec.prompt),
      live: () => run.live(),
      onActivity: (listener) => run.onActivity(listener),
      transcript: run.transcript,
      kill: () => run.kill(),
      killing: undefined,
      cancelTimeout: undefined,
    };
    this.jobs.set(job.id, job);
    this.options.logger.info(`job ${job.id} started (${kind}, pid ${run.pid ?? "none"}) in ${spec.cwd}`);

    if (timeoutMs !== undefined) {
      job.cancelTimeout = clock.setTimer(() => {
        this.kill(job.id, "timeout").catch((error: unknown) => this.options.logger.error(`timeout kill of job ${job.id}: ${String(error)}`));
      }, timeoutMs);
    }

    run.outcome
      .catch((error: unknown): AgentOutcome => ({ ok: false, code: "INTERNAL_ERROR", detail: String(error) }))
      .then((outcome) => this.finish(job, outcome))
      .catch((error: unknown) => this.options.logger.error(`job ${job.id}: ${String(error)}`))
      .finally(markDone);
    return job;
  }

  get(id: string): Job | undefined {
    this.reap();
    return this.jobs.get(id);
  }

  /** Jobs still running, for shutdown and diagnostics. */
  running(): Job[] {
    return [...this.jobs.values()].filter((job) => job.status === "running");
  }

  /** Every job still known, oldest first. */
  list(): Job[] {
    this.reap();
    return [...this.jobs.values()];
  }

  /**
   * Kills a job's whole process tree and waits for it to finish. The reason is
   * recorded before the kill is sent, and the first reason wins.
   */
  async kill(id: string, reason: KillReason): Promise<KillResult> {
    const job = this.jobs.get(id);
    if (!job) throw new DispatchError("JOB_NOT_FOUND", `no job with id ${id}`);
    if (job.status !== "running") return { killed: false, survivors: [] };
    job.killReason ??= reason;
    job.killing ??= job.kill();
    const { survivors } = await job.killing;
    // With survivors the agent itself may never exit; report now rather than hang.
    if (survivors.length === 0) await job.done;
    return { killed: true, survivors };
  }

  /** Refuses new jobs, kills every running one, and waits until all have finished. */
  async shutdown(): Promise<void> {
    this.closing = true;
    const running = this.running();
    if (running.length > 0) this.options.logger.info(`shutdown: killing ${running.length} running job(s)`);
    await Promise.all(running.map((job) => this.kill(job.id, "shutdown").catch(() => undefined)));
  }

  private finish(job: MutableJob, outcome: AgentOutcome): void {
    const { clock, logger } = this.options;
    job.cancelTimeout?.();
    job.cancelTimeout = undefined;
    job.finishedAt = clock.now();
    if (job.killReason === "timeout") {
      job.status = "failed";
      const seconds = Math.round((job.timeoutMs ?? 0) / 1000);
      job.outcome = {
        ok: false,
        code: "TIMEOUT",
        detail: `no result within ${seconds}s; the agent's process tree was killed`,
        ...(outcome.ok || outcome.result ? { result: outcome.result } : {}),
      };
    } else if (job.killReason) {
      job.status = "killed";
      job.outcome = outcome;
    } else {
      job.status = outcome.ok ? "completed" : "failed";
      job.outcome = outcome;
    }
    this.finishedOrder.push(job.id);
    logger.info(`job ${job.id} ${job.status}${outcome.ok ? "" : ` (${outcome.code})`}`);
    this.reap();
    this.boundTranscripts();
  }

  /** Finished jobs keep their results, but their transcripts share one budget, oldest dropped first. */
  private boundTranscripts(): void {
    let total = 0;
    for (let i = this.finishedOrder.length - 1; i >= 0; i -= 1) {
      const job = this.jobs.get(this.finishedOrder[i] as string);
      if (!job) continue;
      total += job.transcript.size;
      if (total > this.options.finishedTranscriptChars) {
        total -= job.transcript.size;
        job.transcript.release();
      }
    }
  }

  /** Drops finished jobs past retention, and the oldest beyond the count cap. */
  private reap(): void {
    const { retentionMs, maxFinishedJobs } = this.options;
    const now = this.options.clock.now();
    while (this.finishedOrder.length > 0) {
      const oldest = this.jobs.get(this.finishedOrder[0] as string);
      const expired = oldest === undefined || now - (oldest.finishedAt ?? now) >= retentionMs;
      if (!expired && this.finishedOrder.length <= maxFinishedJobs) break;
      this.jobs.delete(this.finishedOrder.shift() as string);
    }
  }
}
