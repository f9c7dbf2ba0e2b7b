/** Following an agent that is not our child: liveness polling until it is gone, then the rest of its output (§15.3). */
import type { CancelTimer } from "../../core/clock.js";
import { FileFollower, readTail } from "./output.js";
import type { AttachRequest, ChildExit, ChildHandle, ProcessControlOptions } from "./types.js";

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

/** Polls liveness with a backoff (and at once after a kill), then reads the rest of the output. */
export async function followUntilGone(
  request: AttachRequest,
  options: ProcessControlOptions,
  follower: FileFollower,
  isAlive: () => Promise<boolean | undefined>,
  killed: Promise<void>,
): Promise<ChildExit> {
  const { first, max } = options.livenessMs ?? { first: 500, max: 2000 };
  let wait = first;
  // The kill cuts one wait short, once: an agent that survives it is then polled at the usual pace, not in a busy loop.
  let kill: Promise<void> | undefined = killed.then(() => (kill = undefined));
  // Unknown (the process table could not be read) counts as alive: a healthy agent is never taken for gone.
  while ((await isAlive()) !== false) {
    let cancel: CancelTimer = () => undefined;
    const timer = new Promise<void>((resolve) => (cancel = options.clock.setTimer(resolve, wait)));
    await (kill ? Promise.race([timer, kill]) : timer);
    cancel();
    wait = Math.min(max, Math.round(wait * 1.5));
  }
  await follower.finish();
  const stderrTail = await readTail(request.output.stderrPath, request.stderrTailBytes);
  return { unobserved: true, exitCode: null, signal: null, ...follower.failure(), stderrTail };
}
