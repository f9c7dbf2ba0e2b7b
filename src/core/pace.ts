/**
 * How long a poll waits before it looks again: its fast interval while it finds something, twice as long after each
 * look that found nothing, up to QUIET_SLOWDOWN times the fast interval. An agent quiet for a while (a model thinking,
 * a long test run) then wakes whatever follows it about once a second, not ten times: each wake-up costs about 0.2 ms
 * of CPU on the project's VM, even for a bare Node timer (BENCHMARKS.md, issue 29, eleventh step).
 */
export const QUIET_SLOWDOWN = 10;

export class PollPace {
  private current: number;

  constructor(readonly fastMs: number) {
    this.current = fastMs;
  }

  /** The wait before the next look. */
  get ms(): number {
    return this.current;
  }

  /** A look found something, or more is due at once (a new agent): back to the fast interval. True if it was slower. */
  found(): boolean {
    const wasSlower = this.current !== this.fastMs;
    this.current = this.fastMs;
    return wasSlower;
  }

  /** A look found nothing: the next wait is twice as long, within the bound. */
  foundNothing(): void {
    this.current = Math.min(this.current * 2, this.fastMs * QUIET_SLOWDOWN);
  }
}
