/**
 * Progress while a request waits on a job (PROTOCOL.md §5.8): notifications
 * on agent activity, coalesced, and a heartbeat after every quiet spell; and
 * the wait itself, which ends when the job does, the hold runs out, or the
 * request is cancelled, with no polling (§5.3).
 */
import { sleep, type CancelTimer, type Clock } from "../core/clock.js";
import { isUnfinished, type Job } from "../jobs/registry.js";
import { activityLine } from "../tools/results.js";
import type { JsonRpcNotification } from "./jsonrpc.js";
import { RELATED_TASK } from "./tasks.js";

export type ProgressToken = string | number;

/** Bursts of agent events are coalesced into at most one progress notification per this interval. */
const PROGRESS_MIN_GAP_MS = 500;

export interface ProgressDeps {
  clock: Clock;
  /** Longest quiet spell between progress notifications (§5.8). */
  heartbeatMs: number;
  notify(notification: JsonRpcNotification): void;
}

/**
 * "12s · turn 2 · Bash · npm test", or "3s · queued at position 2": progress
 * (§5.8) and a working task's statusMessage (§16.4).
 */
export function describeActivity(job: Job, now: number): string {
  const elapsed = Math.max(0, Math.round((now - job.startedAt) / 1000));
  if (job.status === "queued") return `${elapsed}s · queued at position ${job.queuePosition() ?? "?"}`;
  const pending = job.pendingApprovals()[0];
  // A job waiting on a person says so, and for what (§18).
  if (pending) return `${elapsed}s · waits for approval (request ${pending.id}): ${pending.preview}`;
  return activityLine(job.live(), elapsed);
}

/**
 * Sends notifications/progress for a job while a request waits on it. The
 * returned stop must run before the response, so none follows it. A task's
 * progress names its task (2025-11-25: related-task _meta).
 */
export function followProgress(deps: ProgressDeps, token: ProgressToken, job: Job, relatedTask = false): () => void {
  const { clock } = deps;
  const meta = relatedTask ? { _meta: { [RELATED_TASK]: { taskId: job.id } } } : {};
  let progress = 0;
  let stopped = false;
  let lastSentAt = Number.NEGATIVE_INFINITY;
  let cancelTimer: CancelTimer | undefined;
  const send = (): void => {
    cancelTimer?.();
    cancelTimer = undefined;
    if (stopped || !isUnfinished(job)) return;
    progress += 1;
    lastSentAt = clock.now();
    const message = describeActivity(job, lastSentAt);
    deps.notify({
      jsonrpc: "2.0",
      method: "notifications/progress",
      params: { progressToken: token, progress, message, ...meta },
    });
    cancelTimer = clock.setTimer(send, deps.heartbeatMs);
  };
  const unsubscribe = job.onActivity(() => {
    if (stopped) return;
    const wait = lastSentAt + PROGRESS_MIN_GAP_MS - clock.now();
    if (wait <= 0) return send();
    cancelTimer?.();
    cancelTimer = clock.setTimer(send, wait);
  });
  send();
  return () => {
    stopped = true;
    cancelTimer?.();
    unsubscribe();
  };
}

/** Runs work while sending progress for the job, when the request asked for it. */
export async function withProgress<T>(
  deps: ProgressDeps,
  token: ProgressToken | undefined,
  job: Job,
  work: () => Promise<T>,
): Promise<T> {
  const stop = token === undefined ? undefined : followProgress(deps, token, job);
  try {
    return await work();
  } finally {
    stop?.();
  }
}

/** Why a hold ended early, given to its own AbortController (see hold). */
const HOLD_OVER = "hold over";

/**
 * Waits until the job finishes, asks for permission (§18), the hold runs out, or the request is
 * cancelled; no polling (§5.3).
 */
export async function hold(clock: Clock, job: Job, holdMs: number, signal: AbortSignal): Promise<void> {
  if (!isUnfinished(job) || holdMs === 0 || job.pendingApprovals().length > 0 || signal.aborted) return;
  const stop = new AbortController();
  // With a reason of its own: an abort without one builds a DOMException with a stack, once per wait.
  const onCancel = (): void => stop.abort(HOLD_OVER);
  signal.addEventListener("abort", onCancel, { once: true });
  // Listeners dropped when the hold ends: a job polled for days does not collect one per call.
  const stopWatching = job.whenDone(onCancel);
  const stopListening = job.onApprovals(() => {
    if (job.pendingApprovals().length > 0) onCancel();
  });
  try {
    await sleep(clock, holdMs, stop.signal);
  } finally {
    signal.removeEventListener("abort", onCancel);
    stopWatching();
    stopListening();
  }
}
