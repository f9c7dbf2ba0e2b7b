/**
 * The queue and the agent slots (PROTOCOL.md §8, §15.7): a job runs while it
 * holds a slot, and queued jobs take slots as they come free, oldest first.
 * Slots are this server's own (in memory) or shared by every server on the
 * state directory; then a queue waits for news of slots given back, and polls
 * for slots whose holder died.
 */
import type { CancelTimer, Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import type { JobEntry } from "./entry.js";
import type { JobLife } from "./life.js";
import type { Slot, SlotPool } from "./types.js";

/** How often a queue on shared slots looks for slots whose holder died (news of slots given back comes at once). */
const SLOT_POLL_MS = 1000;

export interface JobQueueOptions {
  slots: SlotPool;
  clock: Clock;
  logger: Logger;
  /** launch starts a queued job that now holds a slot; none is while busy (a takeover counts running agents). */
  life: Pick<JobLife, "launch" | "busy">;
  /** The other servers' queued jobs (jobs/shared-queue.ts), when slots are shared. */
  elsewhere?(): Elsewhere;
}

/** One queue across the servers of a state directory (§15.7). */
export interface Elsewhere {
  /** At each poll while jobs queue on shared slots: what else about them may have changed on disk. */
  poll(waiting: readonly JobEntry[]): void;
  /** Another server's queued job submitted before `than`. */
  olderElsewhere(than: number): JobEntry | undefined;
  /**
   * Takes that job over with this slot and starts it; false when another server has it (the slot is then given back).
   */
  takeFromElsewhere(job: JobEntry, slot: Slot): Promise<boolean>;
}

export class JobQueue {
  private readonly waiting: JobEntry[] = [];
  private stopWaiting: (() => void) | undefined;
  /** Set while another server's queued job is being taken over: one at a time. */
  private taking: Promise<void> | undefined;

  constructor(private readonly options: JobQueueOptions) {}

  get length(): number {
    return this.waiting.length;
  }

  jobs(): readonly JobEntry[] {
    return this.waiting;
  }

  /** 1 for the next job to run; 0 when the job is not queued. */
  position(job: JobEntry): number {
    return this.waiting.indexOf(job) + 1;
  }

  /** A slot for a new job: only when nobody queues, since a slot just freed belongs to the oldest queued job. */
  slotForNewcomer(job: JobEntry): boolean {
    job.slot = this.waiting.length === 0 ? this.options.slots.take(job.id) : undefined;
    return job.slot !== undefined;
  }

  /** A running job taken over holds a slot: the one its dead server held for it, else any free one. */
  hold(job: JobEntry): void {
    job.slot = this.options.slots.inherit(job.id) ?? this.options.slots.take(job.id);
  }

  /** In submission order: a job taken over from another server may be older than those queued here. */
  push(job: JobEntry): void {
    const after = this.waiting.findIndex((queued) => queued.submittedAt > job.submittedAt);
    if (after < 0) this.waiting.push(job);
    else this.waiting.splice(after, 0, job);
    this.waitForSlots();
  }

  remove(job: JobEntry): void {
    const at = this.waiting.indexOf(job);
    if (at >= 0) this.waiting.splice(at, 1);
  }

  /** Gives the job's slot back, for the next queued job once the finished one is settled. */
  release(job: JobEntry): void {
    if (job.slot) this.options.slots.give(job.slot);
    job.slot = undefined;
    queueMicrotask(() => this.launchNext());
  }

  launchNext(): void {
    while (!this.options.life.busy() && !this.taking) {
      const next = this.waiting[0];
      const older = this.options.elsewhere?.().olderElsewhere(next?.submittedAt ?? Number.POSITIVE_INFINITY);
      if (older) {
        this.takeFromElsewhere(older);
        return;
      }
      if (!next) break;
      next.slot = this.options.slots.take(next.id);
      if (!next.slot) return;
      this.waiting.shift();
      this.options.life.launch(next);
    }
    if (this.waiting.length === 0) this.close();
  }

  /** The oldest queued job is another server's: started here if a slot is free and this server claims it first. */
  private takeFromElsewhere(job: JobEntry): void {
    const slot = this.options.slots.take(job.id);
    const elsewhere = this.options.elsewhere?.();
    if (!slot || !elsewhere) {
      if (slot) this.options.slots.give(slot);
      return;
    }
    this.taking = elsewhere
      .takeFromElsewhere(job, slot)
      .then((taken) => {
        if (!taken) this.options.slots.give(slot);
      })
      .catch((error: unknown) => {
        this.options.slots.give(slot);
        this.options.logger.error(`cannot take job ${job.id} over from its server: ${String(error)}`);
      })
      .finally(() => {
        this.taking = undefined;
        this.launchNext();
      });
  }

  /** Stops waiting for other servers' slots (shutdown); queued jobs stay queued. */
  close(): void {
    this.stopWaiting?.();
    this.stopWaiting = undefined;
  }

  private waitForSlots(): void {
    const { slots, clock } = this.options;
    if (!slots.shared || this.stopWaiting) return;
    const unsubscribe = slots.onChange(() => this.launchNext());
    let cancel: CancelTimer = () => undefined;
    const tick = (): void => {
      if (this.waiting.length === 0) return this.close();
      this.options.elsewhere?.().poll(this.waiting);
      void this.reclaim().catch((error: unknown) =>
        this.options.logger.error(`cannot read the agent slots: ${String(error)}`),
      );
      cancel = clock.setTimer(tick, SLOT_POLL_MS);
    };
    cancel = clock.setTimer(tick, SLOT_POLL_MS);
    this.stopWaiting = () => {
      unsubscribe();
      cancel();
    };
  }

  /** A slot whose holder died, for the oldest queued job if it is still there to take it. */
  private async reclaim(): Promise<void> {
    const next = this.waiting[0];
    if (!next || !!this.options.life.busy()) return;
    const slot = await this.options.slots.reclaim(next.id);
    if (!slot) return;
    if (this.waiting[0] !== next || !!this.options.life.busy()) {
      this.options.slots.give(slot);
      return;
    }
    next.slot = slot;
    this.waiting.shift();
    this.options.life.launch(next);
    this.launchNext();
  }
}
