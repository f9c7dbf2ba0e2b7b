/** Time is injected so tests can drive timers without sleeping (STYLE habit 5). */

export type CancelTimer = () => void;

export interface Clock {
  now(): number;
  /** Runs fn once after ms; the returned function cancels it. */
  setTimer(fn: () => void, ms: number): CancelTimer;
}

/** setTimeout fires at once for delays of 2^31 ms or more; clamp so a long wait never becomes a zero wait. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, ms) {
    const handle = setTimeout(fn, Math.min(Math.max(0, ms), MAX_TIMER_MS));
    return () => clearTimeout(handle);
  },
};

/** Resolves after ms, or at once when the signal aborts; never leaves a timer behind. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      cancel();
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const cancel = clock.setTimer(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
