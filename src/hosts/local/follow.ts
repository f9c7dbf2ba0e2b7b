/** Following an agent that is not our child: liveness polls until it is gone, then the rest of its output (§15.3). */
import { lstatSync } from "node:fs";

import type { CancelTimer } from "../../core/clock.js";
import { FileFollower, readTail } from "./output.js";
import type { AttachRequest, ChildExit, ChildHandle, OutputFiles, ProcessControlOptions } from "./types.js";

/** No back-off: an adopted agent's end is recorded within half a second of its exit (§15.3). */
const LIVENESS_MS = { first: 500, max: 500 };

/** An agent that is gone and whose pid nobody knows: its output is all there is, and there is nothing to kill. */
export function outputOnly(request: AttachRequest, options: ProcessControlOptions): ChildHandle {
  const follower = new FileFollower(request.output.stdoutPath, request.onStdout, options);
  const ready = follower.catchUp();
  const exited = followUntilGone(request, options, follower, async () => false, new Promise<void>(() => undefined));
  return {
    pid: undefined,
    marker: request.marker,
    identity: async () => ({ pid: undefined, startTime: undefined, marker: request.marker }),
    exited,
    killTree: async () => ({ signalled: 0, survivors: [] }),
    settled: exited.then(() => undefined),
    ready,
  };
}

/** Polls liveness (at once after a kill), then reads the rest of the output; the exit says when the agent ended. */
export async function followUntilGone(
  request: AttachRequest,
  options: ProcessControlOptions,
  follower: FileFollower,
  isAlive: () => Promise<boolean | undefined>,
  killed: Promise<void>,
): Promise<ChildExit> {
  const { clock } = options;
  const { first, max } = options.livenessMs ?? LIVENESS_MS;
  let wait = first;
  // Lower bounds of the agent's end: the last poll that saw it alive, and the end of the kill we sent it.
  let seenAlive: number | undefined;
  let killedAt: number | undefined;
  // The kill cuts one wait short, once: an agent that survives it is then polled at the usual pace, not in a busy loop.
  let kill: Promise<void> | undefined = killed.then(() => {
    killedAt = clock.now();
    kill = undefined;
  });
  for (;;) {
    const polledAt = clock.now();
    const alive = await isAlive();
    // Unknown (the process table could not be read) counts as alive: a healthy agent is never taken for gone.
    if (alive === false) break;
    if (alive) seenAlive = polledAt;
    let cancel: CancelTimer = () => undefined;
    // On the clock's multiples of the wait: the polls of all adopted agents fall together and share one table read.
    const timer = new Promise<void>((resolve) => (cancel = clock.setTimer(resolve, wait - (clock.now() % wait))));
    await (kill ? Promise.race([timer, kill]) : timer);
    cancel();
    wait = Math.min(max, Math.round(wait * 1.5));
  }
  await follower.finish();
  const stderrTail = await readTail(request.output.stderrPath, request.stderrTailBytes);
  const written = lastWritten(request.output);
  const bounds = [seenAlive, killedAt, written].filter((bound) => bound !== undefined);
  // A write stamped in the future (the clock was set back since) is no later than now.
  const endedAt = bounds.length > 0 ? Math.min(clock.now(), Math.max(...bounds)) : undefined;
  const ended = endedAt === undefined ? {} : { endedAt };
  return { unobserved: true, exitCode: null, signal: null, ...follower.failure(), stderrTail, ...ended };
}

/**
 * When the agent last wrote its output (it ends by writing its result); a link or an unreadable file tells nothing.
 * Two stats, read at once as the output itself is: no extra turn between the agent's end and its record.
 */
function lastWritten(output: OutputFiles): number | undefined {
  const times = [output.stdoutPath, output.stderrPath].map((file) => {
    try {
      const stats = lstatSync(file);
      return stats.isFile() ? Math.round(stats.mtimeMs) : undefined;
    } catch {
      return undefined;
    }
  });
  const known = times.filter((time) => time !== undefined);
  return known.length > 0 ? Math.max(...known) : undefined;
}
