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
import type { SlotPool } from "./types.js";

/** How often a queue on shared slots looks for slots whose holder died (news of slots given back comes at once). */
const SLOT_POLL_MS = 1000;

export interface JobQueueOptions {
  slots: SlotPool;
  clock: Clock;
  logger: Logger;
  /** Starts a queued job that now holds a slot. */
  launch(job: JobEntry): void;
  /** False while a takeover counts running agents, or once shutdown began. */
  mayLaunch(): boolean;
  /** At each poll while jobs queue on shared slots: what else about them may have changed on disk. */
  onPoll?(waiting: readonly JobEntry[]): void;
}

export class JobQueue {
  private readonly waiting: JobEntry[] = [];
  private stopWaiting: (() => void) | undefined;

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

  push(job: JobEntry): void {
    this.waiting.push(job);
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
    while (this.waiting.length > 0 && this.options.mayLaunch()) {
      const next = this.waiting[0] as JobEntry;
      next.slot = this.options.slots.take(next.id);
      if (!next.slot) return;
      this.waiting.shift();
      this.options.launch(next);
    }
    if (this.waiting.length === 0) this.close();
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
      this.options.onPoll?.(this.waiting);
      void this.reclaim().catch((error: unknown) => this.options.logger.error(`cannot read the agent slots: ${String(error)}`));
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
    if (!next || !this.options.mayLaunch()) return;
    const slot = await this.options.slots.reclaim(next.id);
    if (!slot) return;
    if (this.waiting[0] !== next || !this.options.mayLaunch()) {
      this.options.slots.give(slot);
      return;
    }
    next.slot = slot;
    this.waiting.shift();
    this.options.launch(next);
    this.launchNext();
  }
}
