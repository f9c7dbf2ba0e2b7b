/**
 * Writing job records (PROTOCOL.md §15.2). A write that fails (a full disk) leaves the job going on in
 * memory and its record behind; the record is written again after the next write that succeeds, so every
 * record catches up once space is freed, and another server never reads a finished job as running for ever.
 */
import type { JobEntry } from "./entry.js";
import { recordOf } from "./job-record.js";
import type { JobRegistryOptions } from "./types.js";

export class RecordWrites {
  /** Jobs whose record on disk is older than the job, by id. */
  private readonly behind = new Map<string, JobEntry>();

  /** isCurrent: whether the job is still this registry's to record (not forgotten, not another server's). */
  constructor(
    private readonly options: Pick<JobRegistryOptions, "persistence" | "logger">,
    private readonly isCurrent: (job: JobEntry) => boolean,
  ) {}

  /** Writes the job's record; a finished job's folder size, when written. A failure is logged once, not thrown. */
  save(job: JobEntry): number | undefined {
    let bytes: number | undefined;
    try {
      bytes = this.write(job);
    } catch (error) {
      const message = `job ${job.id}: cannot write its record: ${(error as Error).message}`;
      if (!this.behind.has(job.id)) this.options.logger.error(message);
      this.behind.set(job.id, job);
      return undefined;
    }
    this.catchUp();
    return bytes;
  }

  private write(job: JobEntry): number | undefined {
    const bytes = this.options.persistence.store.write(recordOf(job, this.options.persistence));
    this.behind.delete(job.id);
    return bytes;
  }

  /** The records left behind, written now that a write got through; the first that fails again waits for the next. */
  private catchUp(): void {
    // Deleting the entry a Map iteration is at is safe: no copy of it at every save.
    for (const job of this.behind.values()) {
      if (!this.isCurrent(job)) {
        this.behind.delete(job.id);
        continue;
      }
      try {
        this.write(job);
      } catch {
        return;
      }
      this.options.logger.info(`job ${job.id}: its record is written again`);
    }
  }
}
