/**
 * Jobs another live server owns (PROTOCOL.md §15.6), served here from their
 * files: the record says where the job is, the output file what its agent has
 * done. The owner follows the agent's exit and writes the final record; this
 * server notices the change through the store's watch (file-system
 * notifications) or at the latest at the next poll, which also checks that
 * the owner lives. An owner found gone hands the job to a takeover, as a
 * lookup would.
 */
import type { CancelTimer } from "../core/clock.js";
import { isFinishedStatus, type JobRecord } from "../store/records.js";
import type { Approvals } from "./approvals.js";
import type { JobEntry } from "./entry.js";
import type { FinishedJobs } from "./finished.js";
import type { JobLife } from "./life.js";
import { entryFromRecord, finishedFromRecord } from "./job-record.js";
import type { JobRegistryOptions, KillReason, KillResult } from "./types.js";

/** With notifications, the poll only checks that owners live; without them it is how changes are seen. */
const POLL_WITH_NOTIFICATIONS_MS = 2000;
const POLL_WITHOUT_NOTIFICATIONS_MS = 200;
/** How long claude_kill waits for the owner's final record once the tree is dead. */
const OWNER_RECORD_WAIT_MS = 10_000;

/** What the observer needs of the registry it serves jobs for. */
export interface ObserverTarget {
  readonly options: Pick<JobRegistryOptions, "persistence" | "hosts" | "attach" | "ready" | "clock" | "logger">;
  readonly life: Pick<JobLife, "takeOver">;
  /** Where a job now finished is counted for retention. */
  readonly finished: Pick<FinishedJobs, "add">;
  /** A job whose agent is followed from here now: so are its permission requests (§18). */
  readonly approvals: Pick<Approvals, "watch">;
}

interface Observed {
  job: JobEntry;
  record: JobRecord;
  stopWatching: (() => void) | undefined;
  checking: boolean;
  checkAgain: boolean;
}

export class Observer {
  private readonly observed = new Map<string, Observed>();
  private cancelPoll: CancelTimer | undefined;

  /** jobs: the registry's, where an observed job is served under its id. */
  constructor(
    private readonly jobs: Map<string, JobEntry>,
    private readonly target: ObserverTarget,
  ) {}

  has(id: string): boolean {
    return this.observed.has(id);
  }

  /** How many jobs are served from their files now. */
  get size(): number {
    return this.observed.size;
  }

  /** The oldest queued job of another server submitted before `than`, skipping those `skip` names. */
  oldestQueued(than: number, skip: (job: JobEntry) => boolean): JobEntry | undefined {
    let oldest: JobEntry | undefined;
    for (const { job } of this.observed.values()) {
      if (job.status === "queued" && job.submittedAt < (oldest?.submittedAt ?? than) && !skip(job)) oldest = job;
    }
    return oldest;
  }

  /**
   * Stops serving a job from its files: this server now owns it. Whoever waits on the entry sees the successor's end.
   */
  handTo(id: string, successor: JobEntry): void {
    const entry = this.observed.get(id);
    if (!entry) return;
    this.stop(entry);
    successor.whenDone(() => mirrorEnd(entry.job, successor));
  }

  /** Serves an unfinished job whose owner lives: queued, or running with its agent followed from its output file. */
  observe(record: JobRecord): JobEntry {
    return this.observeEntry(entryFromRecord(record), record);
  }

  /** A job of this server's queue that another server took (§15.7): the same entry, so whoever waits on it keeps it. */
  observeEntry(job: JobEntry, record: JobRecord): JobEntry {
    const { store } = this.target.options.persistence;
    job.generation = record.generation;
    job.elsewhere = true;
    job.cancelTimeout?.();
    job.cancelTimeout = undefined;
    const entry: Observed = { job, record, stopWatching: undefined, checking: false, checkAgain: false };
    this.observed.set(record.id, entry);
    entry.stopWatching = store.watchRecord(record.id, () => void this.check(record.id));
    this.apply(entry, record);
    this.jobs.set(job.id, job);
    this.schedulePoll();
    return job;
  }

  /**
   * Kills another server's job: the kill is asked for in its folder, so its owner records it as this
   * reason, then its agent's whole tree is killed from here; the answer comes with the owner's final record.
   */
  async kill(id: string, reason: KillReason): Promise<KillResult> {
    const entry = this.observed.get(id);
    if (!entry) return { killed: false, survivors: [] };
    const { store } = this.target.options.persistence;
    store.requestKill(id, reason, this.target.options.clock.now());
    // A queued job never starts now: its owner reads the request at its queue's next poll (§15.7).
    if (!entry.job.run) return { killed: true, survivors: [] };
    const report = await entry.job.run.kill();
    await this.check(id);
    // The tree is dead either way: an owner slow to record it delays the answer a bounded time, never forever.
    let cancel: CancelTimer = () => undefined;
    await Promise.race([
      entry.job.done,
      new Promise<void>((resolve) => (cancel = this.target.options.clock.setTimer(resolve, OWNER_RECORD_WAIT_MS))),
    ]);
    cancel();
    return { killed: true, survivors: report.survivors };
  }

  /** Stops watching every job (the server is leaving); their owners carry on. */
  close(): void {
    for (const entry of this.observed.values()) entry.stopWatching?.();
    this.observed.clear();
    this.cancelPoll?.();
    this.cancelPoll = undefined;
  }

  /** Reads the record again; a second call while one runs makes it read once more after. */
  private async check(id: string): Promise<void> {
    const entry = this.observed.get(id);
    if (!entry) return;
    if (entry.checking) {
      entry.checkAgain = true;
      return;
    }
    entry.checking = true;
    try {
      do {
        entry.checkAgain = false;
        await this.checkOnce(entry);
      } while (entry.checkAgain && this.observed.has(id));
    } finally {
      entry.checking = false;
    }
  }

  private async checkOnce(entry: Observed): Promise<void> {
    const { persistence, ready } = this.target.options;
    const { store, isAlive } = persistence;
    // The agent is followed by its runtime's reader once the record says it runs.
    await ready?.();
    const record = store.read(entry.job.id);
    if (!record) {
      this.stop(entry);
      this.finishWith(
        entry,
        finishedFromRecord(
          {
            ...entry.record,
            status: "lost",
            outcome: { ok: false, code: "AGENT_LOST", detail: "its record is gone from the state directory" },
          },
          this.target.options.persistence,
          this.target.options.clock.now(),
        ),
      );
      return;
    }
    this.apply(entry, record);
    if (isFinishedStatus(record.status) || (await isAlive(record.owner)) !== false) return;
    await this.handOver(entry, record);
  }

  /** What the record says now: the agent followed once it runs, the job finished when the record says so. */
  private apply(entry: Observed, record: JobRecord): void {
    entry.record = record;
    const { job } = entry;
    if (isFinishedStatus(record.status)) {
      this.stop(entry);
      this.finishWith(
        entry,
        finishedFromRecord(record, this.target.options.persistence, this.target.options.clock.now()),
      );
      return;
    }
    job.generation = record.generation;
    job.agent = record.agent;
    if (record.status !== "running" || job.run) return;
    job.status = "running";
    job.startedAt = record.started_at ?? job.startedAt;
    const output = this.target.options.persistence.store.outputFiles(job.id);
    // Followed once its host can follow it: here, once its pid is on record (a moment after the spawn) (§15.2).
    const host = this.target.options.hosts.get(job.hostName);
    if (!output || !host?.canFollow({ jobId: job.id, agent: record.agent })) return;
    const run = this.target.options.attach({
      pid: record.agent?.pid,
      startTime: record.agent?.start_time,
      marker: record.agent?.tree_marker,
      output,
      jobId: job.id,
      runtime: job.agentName,
      host: job.hostName,
    });
    job.attach(run);
    this.target.approvals.watch(job);
    // The agent is gone: its owner's final record follows within moments.
    void run.outcome.then(() => this.check(job.id));
  }

  /**
   * The job ended on record. Its transcript is read from the output file from now on: the follower here
   * may not have read the last lines when the record arrives.
   */
  private finishWith(entry: Observed, finished: JobEntry): void {
    const { job } = entry;
    job.run = undefined;
    job.replayTranscript = finished.replayTranscript;
    mirrorEnd(job, finished);
    this.target.finished.add(job.id);
  }

  /** The owner died: the job is taken over here (or by another server first, and then watched on). */
  private async handOver(entry: Observed, record: JobRecord): Promise<void> {
    this.stop(entry);
    const successor = await this.target.life.takeOver(record);
    if (successor) {
      // Whoever waits on the entry they had sees the successor's end.
      successor.whenDone(() => mirrorEnd(entry.job, successor));
      return;
    }
    const now = this.target.options.persistence.store.read(record.id);
    if (now && !isFinishedStatus(now.status)) {
      this.observeEntry(entry.job, now);
    } else if (now) {
      this.finishWith(entry, finishedFromRecord(now, this.target.options.persistence, this.target.options.clock.now()));
    }
  }

  private stop(entry: Observed): void {
    entry.stopWatching?.();
    entry.stopWatching = undefined;
    this.observed.delete(entry.job.id);
  }

  private schedulePoll(): void {
    if (this.cancelPoll || this.observed.size === 0) return;
    const notified = [...this.observed.values()].every((entry) => entry.stopWatching !== undefined);
    this.cancelPoll = this.target.options.clock.setTimer(
      () => {
        this.cancelPoll = undefined;
        void Promise.all([...this.observed.keys()].map((id) => this.check(id))).finally(() => this.schedulePoll());
      },
      notified ? POLL_WITH_NOTIFICATIONS_MS : POLL_WITHOUT_NOTIFICATIONS_MS,
    );
  }
}

/** An observed entry takes the end another entry has. */
function mirrorEnd(job: JobEntry, ended: JobEntry): void {
  if (job.finishedAt !== undefined) return;
  job.status = ended.status;
  job.outcome = ended.outcome;
  job.killReason = ended.killReason;
  job.resultFile = ended.resultFile;
  job.agent = ended.agent;
  job.elsewhere = false;
  job.finishedAt = ended.finishedAt;
  job.markDone();
}
