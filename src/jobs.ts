/**
 * The job registry and its state machine (PROTOCOL.md §8). Both tools that
 * run an agent create a job here: claude_start returns its id at once,
 * claude_run waits for it. At most maxRunning agents run at once; the rest
 * wait their turn in FIFO order. Time and ids are injected.
 *
 *   queued ──a slot frees──▶ running ──agent exits──▶ completed | failed
 *   queued | running ──kill (claude_kill, cancel, shutdown)──▶ killed
 *   queued | running ──timeout──▶ failed (TIMEOUT)
 */
import type { AgentLauncher, AgentOutcome, AgentRun, AgentSpec, LiveSummary } from "./claude.js";
import type { CancelTimer, Clock } from "./clock.js";
import { DispatchError } from "./errors.js";
import type { Logger } from "./log.js";
import { Transcript } from "./transcript.js";

export type JobStatus = "queued" | "running" | "completed" | "failed" | "killed";
export type JobKind = "run" | "start";
export type KillReason = "claude_kill" | "cancelled" | "timeout" | "shutdown";

/** Queued or running: the job has not finished yet. */
export function isUnfinished(job: Pick<Job, "status">): boolean {
  return job.status === "queued" || job.status === "running";
}

export interface Job {
  readonly id: string;
  readonly kind: JobKind;
  readonly cwd: string;
  readonly resumeSessionId: string | undefined;
  /** When the job was submitted, then when its agent started. */
  readonly startedAt: number;
  readonly status: JobStatus;
  readonly finishedAt: number | undefined;
  /** Set when the job finishes. For a killed job it is whatever the agent left. */
  readonly outcome: AgentOutcome | undefined;
  /** Set before the kill is sent, so the exit that follows is read as a kill, not a crash. */
  readonly killReason: KillReason | undefined;
  /** Resolves when the job is finished; never rejects. */
  readonly done: Promise<void>;
  readonly timeoutMs: number | undefined;
  /** The prompt's first line, clipped, for listings. */
  readonly promptPreview: string;
  /** False while queued, and for a job killed before its turn came. */
  readonly launched: boolean;
  /** 1 for the next job to run; undefined unless queued. */
  queuePosition(): number | undefined;
  /** What the agent has done so far (§5.3). */
  live(): LiveSummary;
  /** Calls listener whenever the job starts or its agent reports something; returns the unsubscribe. */
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
  /** How long a finished job stays reachable. Running and queued jobs are never reaped. */
  retentionMs: number;
  /** At most this many finished jobs are kept; the oldest go first. */
  maxFinishedJobs: number;
  /** Transcript characters kept across all finished jobs; the oldest finished transcripts are dropped first. */
  finishedTranscriptChars: number;
  /** Agents running at once (§8); later jobs queue. */
  maxRunning: number;
}

const PREVIEW_CHARS = 80;
const NO_TRANSCRIPT = new Transcript(0);

function previewOf(prompt: string): string {
  const flat = prompt.replace(/\s+/g, " ").trim();
  return flat.length > PREVIEW_CHARS ? `${flat.slice(0, PREVIEW_CHARS)}…` : flat;
}

class JobEntry implements Job {
  status: JobStatus = "queued";
  finishedAt: number | undefined;
  outcome: AgentOutcome | undefined;
  killReason: KillReason | undefined;
  run: AgentRun | undefined;
  killing: Promise<{ survivors: number[] }> | undefined;
  cancelTimeout: CancelTimer | undefined;
  readonly done: Promise<void>;
  markDone!: () => void;
  /** Each listener, with its subscription to the agent once there is one. */
  private readonly listeners = new Map<() => void, (() => void) | undefined>();

  constructor(
    readonly id: string,
    readonly kind: JobKind,
    readonly spec: AgentSpec,
    public startedAt: number,
    readonly timeoutMs: number | undefined,
    private readonly positionOf: (job: JobEntry) => number | undefined,
  ) {
    this.done = new Promise<void>((resolve) => (this.markDone = resolve));
  }

  get cwd(): string {
    return this.spec.cwd;
  }
  get resumeSessionId(): string | undefined {
    return this.spec.resumeSessionId;
  }
  get promptPreview(): string {
    return previewOf(this.spec.prompt);
  }
  get launched(): boolean {
    return this.run !== undefined;
  }
  get transcript(): Transcript {
    return this.run?.transcript ?? NO_TRANSCRIPT;
  }
  queuePosition(): number | undefined {
    return this.status === "queued" ? this.positionOf(this) : undefined;
  }
  live(): LiveSummary {
    return this.run?.live() ?? { turns: 0, events: 0 };
  }
  onActivity(listener: () => void): () => void {
    this.listeners.set(listener, this.run?.onActivity(listener));
    return () => {
      this.listeners.get(listener)?.();
      this.listeners.delete(listener);
    };
  }
  /** The agent started: listeners that came while queued now follow it, and hear of the start. */
  attach(run: AgentRun): void {
    this.run = run;
    for (const listener of this.listeners.keys()) this.listeners.set(listener, run.onActivity(listener));
    for (const listener of [...this.listeners.keys()]) listener();
  }
}

export class JobRegistry {
  private readonly jobs = new Map<string, JobEntry>();
  /** Finished job ids in finish order: reaping looks only at the head, never scans every job. */
  private readonly finishedOrder: string[] = [];
  private readonly queue: JobEntry[] = [];
  private runningCount = 0;
  private closing = false;

  constructor(private readonly options: JobRegistryOptions) {}

  /** Starts an agent, or queues it when maxRunning agents already run. Throws SHUTTING_DOWN once shutdown began. */
  start(spec: AgentSpec, kind: JobKind, timeoutMs?: number): Job {
    if (this.closing) throw new DispatchError("SHUTTING_DOWN", "the server is shutting down and starts no new jobs");
    this.reap();
    const { clock } = this.options;
    const job = new JobEntry(this.options.newId(), kind, spec, clock.now(), timeoutMs, (entry) => this.queue.indexOf(entry) + 1);
    this.jobs.set(job.id, job);
    // The timeout counts from submission: it is the caller's budget, queueing included.
    if (timeoutMs !== undefined) {
      job.cancelTimeout = clock.setTimer(() => {
        this.kill(job.id, "timeout").catch((error: unknown) => this.options.logger.error(`timeout kill of job ${job.id}: ${String(error)}`));
      }, timeoutMs);
    }
    if (this.runningCount < this.options.maxRunning) {
      this.launch(job);
    } else {
      this.queue.push(job);
      this.options.logger.info(`job ${job.id} queued (${kind}, position ${this.queue.length}) for ${spec.cwd}`);
    }
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
   * Kills a job's whole process tree and waits for it to finish; a queued job
   * is removed without starting. The reason is recorded before the kill is
   * sent, and the first reason wins.
   */
  async kill(id: string, reason: KillReason): Promise<KillResult> {
    const job = this.jobs.get(id);
    if (!job) throw new DispatchError("JOB_NOT_FOUND", `no job with id ${id}`);
    if (job.status === "queued") {
      this.queue.splice(this.queue.indexOf(job), 1);
      job.killReason = reason;
      this.finish(job, { ok: false, code: "KILLED", detail: "removed from the queue before it started" });
      return { killed: true, survivors: [] };
    }
    if (job.status !== "running" || !job.run) return { killed: false, survivors: [] };
    job.killReason ??= reason;
    job.killing ??= job.run.kill();
    const { survivors } = await job.killing;
    if (survivors.length === 0) {
      await job.done;
    } else if (job.status === "running") {
      // The agent itself may never exit: end the job now, so nothing waits on it forever.
      this.release();
      this.finish(job, { ok: false, code: "KILL_FAILED", detail: `processes ${survivors.join(", ")} survived SIGKILL` });
    }
    return { killed: true, survivors };
  }

  /** Refuses new jobs, drops the queue, kills every running job, and waits until all have finished. */
  async shutdown(): Promise<void> {
    this.closing = true;
    for (const job of [...this.queue]) await this.kill(job.id, "shutdown");
    const running = this.running();
    if (running.length > 0) this.options.logger.info(`shutdown: killing ${running.length} running job(s)`);
    await Promise.all(running.map((job) => this.kill(job.id, "shutdown").catch(() => undefined)));
  }

  private launch(job: JobEntry): void {
    const { clock, logger } = this.options;
    this.runningCount += 1;
    job.status = "running";
    job.startedAt = clock.now();
    const run = this.options.launch(job.spec);
    job.attach(run);
    logger.info(`job ${job.id} started (${job.kind}, pid ${run.pid ?? "none"}) in ${job.cwd}`);
    run.outcome
      .catch((error: unknown): AgentOutcome => ({ ok: false, code: "INTERNAL_ERROR", detail: String(error) }))
      .then((outcome) => {
        // A job ended by a failed kill already finished; its late exit changes nothing.
        if (job.status !== "running") return;
        this.release();
        this.finish(job, outcome);
      })
      .catch((error: unknown) => logger.error(`job ${job.id}: ${String(error)}`));
  }

  /** Frees a running slot and gives it to the next queued job, once the finished one is settled. */
  private release(): void {
    this.runningCount -= 1;
    queueMicrotask(() => this.launchNext());
  }

  private launchNext(): void {
    while (this.runningCount < this.options.maxRunning && this.queue.length > 0 && !this.closing) {
      this.launch(this.queue.shift() as JobEntry);
    }
  }

  private finish(job: JobEntry, outcome: AgentOutcome): void {
    const { clock, logger } = this.options;
    job.cancelTimeout?.();
    job.cancelTimeout = undefined;
    job.finishedAt = clock.now();
    if (job.killReason === "timeout") {
      job.status = "failed";
      const seconds = Math.round((job.timeoutMs ?? 0) / 1000);
      const where = job.launched ? "the agent's process tree was killed" : "it was still queued and never started";
      job.outcome = {
        ok: false,
        code: "TIMEOUT",
        detail: `no result within ${seconds}s; ${where}`,
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
    job.markDone();
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
