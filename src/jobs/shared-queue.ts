/**
 * One queue across the servers of a state directory (PROTOCOL.md §15.7): the
 * oldest queued job starts first, whichever server queued it, and once. A
 * queued job is started by whoever claims its start (`claim.<g+1>`, as a
 * takeover claims a job); a server with a free slot takes another server's
 * older queued job over by that claim, and the server that queued it sees at
 * its next poll (or its own claim failing) that the job is now served from its
 * files.
 */
import type { JobEntry } from "./entry.js";
import type { Observer } from "./observed.js";
import type { Elsewhere, JobQueue } from "./queue.js";
import type { Takeover } from "./takeover.js";
import type { JobLife } from "./life.js";
import { outsideKillReason, type JobRegistryOptions, type Slot } from "./types.js";

export interface SharedQueueTarget {
  readonly options: Pick<JobRegistryOptions, "persistence" | "logger">;
  readonly jobs: Map<string, JobEntry>;
  readonly queue: JobQueue;
  readonly observer: Observer;
  readonly takeover: Takeover;
  readonly life: Pick<JobLife, "kill" | "launch" | "busy" | "discover">;
}

export class SharedQueue implements Elsewhere {
  /** Starts this server tried to claim and lost: the generation each was at, not tried again (gone with the entry). */
  private readonly lost = new WeakMap<JobEntry, number>();

  constructor(private readonly target: SharedQueueTarget) {}

  /** Another server's queued job submitted before `than`, that this server has not already lost. */
  olderElsewhere(than: number): JobEntry | undefined {
    return this.target.observer.oldestQueued(than, (job) => this.lost.get(job) === job.generation);
  }

  /**
   * Claims the start of this server's own queued job; false, and the job
   * served from its files, when another server has it.
   */
  claimStart(job: JobEntry): boolean {
    const { store, owner } = this.target.options.persistence;
    if (store.claimStart(job.id, job.generation + 1, owner)) {
      job.generation += 1;
      return true;
    }
    this.lostTo(job);
    return false;
  }

  /** Takes another server's queued job over with this slot and starts it; false when another server has it. */
  async takeFromElsewhere(observed: JobEntry, slot: Slot): Promise<boolean> {
    const { persistence } = this.target.options;
    const record = persistence.store.read(observed.id);
    if (
      !record ||
      record.status !== "queued" ||
      !persistence.store.claimStart(observed.id, record.generation + 1, persistence.owner)
    ) {
      this.lost.set(observed, observed.generation);
      return false;
    }
    // Ours now, as a restarting server takes a queued job: today's policy is checked again (§15.3). The
    // observed entry stays served until the new one replaces it, so no lookup meanwhile observes the job again.
    await this.target.takeover.takeQueued(record);
    const successor = this.target.jobs.get(observed.id);
    if (!successor) return false;
    this.target.observer.handTo(observed.id, successor);
    if (successor.status !== "queued" || this.target.life.busy()) return false;
    this.target.queue.remove(successor);
    successor.slot = slot;
    this.target.options.logger.info(`job ${successor.id} taken from the queue of server ${record.owner.pid}`);
    this.target.life.launch(successor);
    return true;
  }

  /**
   * The queue's poll: kills asked for from outside, queued jobs another server took, and other servers' queued jobs.
   */
  poll(waiting: readonly JobEntry[]): void {
    const { store, owner } = this.target.options.persistence;
    const { logger } = this.target.options;
    void this.target.life
      .discover()
      .catch((error: unknown) => logger.error(`cannot read the state directory: ${String(error)}`));
    for (const job of [...waiting]) {
      const by = store.killRequested(job.id);
      if (by) {
        void this.target.life
          .kill(job.id, outsideKillReason(by))
          .catch((error: unknown) => logger.error(`kill of job ${job.id}: ${String(error)}`));
        continue;
      }
      const record = store.read(job.id);
      if (record && (record.generation !== job.generation || record.owner.pid !== owner.pid)) this.lostTo(job);
    }
  }

  /** Another server started (or took) this server's queued job: it is served from its files from now on. */
  private lostTo(job: JobEntry): void {
    if (job.slot) this.target.queue.release(job);
    const record = this.target.options.persistence.store.read(job.id);
    // A folder removed meanwhile: the job stays queued here, and its start fails on its record (STATE_ERROR).
    if (!record) return;
    this.target.queue.remove(job);
    this.target.options.logger.info(`job ${job.id}: started by server ${record.owner.pid}; followed from its files`);
    this.target.observer.observeEntry(job, record);
  }
}
