/**
 * The finished jobs a registry still serves (PROTOCOL.md §8, §15.5): in
 * finish order, with the disk each folder uses, including jobs known only
 * from the index of finished jobs, whose records are read when asked for.
 * Retention, the count cap, the disk cap and the shared transcript budget
 * are applied here, looking only at the oldest, never scanning every job.
 */
import type { Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { isFinishedStatus, type IndexedJob, type JobRecord } from "../store/records.js";
import type { JobEntry } from "./entry.js";
import { finishedFromRecord } from "./job-record.js";
import type { Persistence } from "./types.js";

export interface FinishedJobsOptions {
  persistence: Pick<Persistence, "store" | "replayTranscript" | "beforeRemove">;
  clock: Clock;
  logger: Logger;
  retentionMs: number;
  maxFinishedJobs: number;
  maxBytes: number;
  /** Transcript characters kept across all finished jobs in memory. */
  transcriptChars: number;
}

export class FinishedJobs {
  /** Finished job ids in finish order. */
  private readonly order: string[] = [];
  private readonly bytes = new Map<string, number>();
  private totalBytes = 0;
  /** Known from the index, not read yet: their finish times. */
  private readonly unread = new Map<string, number>();

  constructor(
    private readonly jobs: Map<string, JobEntry>,
    private readonly options: FinishedJobsOptions,
  ) {}

  /**
   * A job that just finished, or was read back from its record: last in the
   * finish order. Its folder's size is read unless given.
   */
  add(id: string, bytes = this.options.persistence.store.size(id)): void {
    this.order.push(id);
    this.bytes.set(id, bytes);
    this.totalBytes += bytes;
  }

  /** Indexed jobs (§15.5): counted now, read when asked for. */
  remember(entries: readonly IndexedJob[]): void {
    const now = this.options.clock.now();
    const fresh = entries.filter((entry) => !this.jobs.has(entry.id) && !this.unread.has(entry.id));
    for (const entry of [...fresh].sort((a, b) => a.finished_at - b.finished_at)) {
      // A finish time in the future (the clock was set back since) counts as now, as for a record.
      this.unread.set(entry.id, Math.min(entry.finished_at, now));
      this.order.push(entry.id);
      this.bytes.set(entry.id, entry.bytes);
      this.totalBytes += entry.bytes;
    }
  }

  /** A finished job from its record: reachable again, and counted for retention. */
  restore(record: JobRecord): JobEntry {
    const job = finishedFromRecord(record, this.options.persistence, this.options.clock.now());
    this.jobs.set(job.id, job);
    this.add(job.id);
    return job;
  }

  /** An indexed job's record, read now; undefined (and forgotten) when it cannot be. */
  readUnread(id: string): JobEntry | undefined {
    const record = this.options.persistence.store.read(id);
    if (record && isFinishedStatus(record.status))
      return finishedFromRecord(record, this.options.persistence, this.options.clock.now());
    this.forget(id);
    return undefined;
  }

  /** An indexed job asked for: read, then kept like a job that finished here. */
  takeUnread(id: string): JobEntry | undefined {
    const job = this.readUnread(id);
    if (job) {
      this.unread.delete(id);
      this.jobs.set(id, job);
    }
    return job;
  }

  isUnread(id: string): boolean {
    return this.unread.has(id);
  }

  unreadIds(): string[] {
    return [...this.unread.keys()];
  }

  /** Indexed jobs and ones read from their records at a takeover, in one finish order. */
  sort(): void {
    if (this.unread.size > 0) this.order.sort((a, b) => (this.finishedAtOf(a) ?? 0) - (this.finishedAtOf(b) ?? 0));
  }

  /** Forgets a finished job: from memory and from these counts (not from disk). */
  forget(id: string): void {
    const at = this.order.indexOf(id);
    if (at >= 0) this.order.splice(at, 1);
    this.totalBytes -= this.bytes.get(id) ?? 0;
    this.bytes.delete(id);
    this.unread.delete(id);
    this.jobs.delete(id);
  }

  /** Drops finished jobs past retention, and the oldest beyond the count and disk caps; from disk too. */
  reap(): void {
    const { retentionMs, maxFinishedJobs, maxBytes } = this.options;
    const now = this.options.clock.now();
    while (this.order.length > 0) {
      const oldestId = this.order[0] as string;
      const finishedAt = this.finishedAtOf(oldestId);
      const expired = finishedAt === undefined || now - finishedAt >= retentionMs;
      if (!expired && this.order.length <= maxFinishedJobs && this.totalBytes <= maxBytes) break;
      this.forget(oldestId);
      let undo: (() => void) | void = undefined;
      try {
        undo = this.options.persistence.beforeRemove?.(oldestId);
        this.options.persistence.store.remove(oldestId);
      } catch (error) {
        this.options.logger.warn(`cannot remove job ${oldestId} from the state directory: ${(error as Error).message}`);
      } finally {
        undo?.();
      }
    }
  }

  /** Finished jobs keep their results, but their transcripts share one budget, oldest dropped first. */
  boundTranscripts(): void {
    let total = 0;
    for (let i = this.order.length - 1; i >= 0; i -= 1) {
      // Only transcripts in memory count: one not rebuilt from its file yet
      // costs nothing, and is not rebuilt to be measured.
      const transcript = this.jobs.get(this.order[i] as string)?.heldTranscript();
      if (!transcript) continue;
      total += transcript.size;
      if (total > this.options.transcriptChars) {
        total -= transcript.size;
        transcript.release();
      }
    }
  }

  private finishedAtOf(id: string): number | undefined {
    return this.jobs.get(id)?.finishedAt ?? this.unread.get(id);
  }
}
