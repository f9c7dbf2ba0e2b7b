/** A start that failed before any agent ran: the spawn itself, or the job's files it needed. */
import { existsSync } from "node:fs";

import type { ChildExit, ChildHandle } from "./types.js";

export function describeSpawnError(error: NodeJS.ErrnoException, cwd: string): NonNullable<ChildExit["spawnError"]> {
  if (error.code === "ENOENT" && !existsSync(cwd)) {
    return { code: error.code, message: `the working directory ${cwd} does not exist (any more)`, missingCwd: true };
  }
  return { code: error.code, message: error.message };
}

/** The job's prompt or output files could not be opened (the state directory is gone, or full): nothing was started. */
export function outputFailure(error: unknown): ChildHandle {
  const { code } = error as NodeJS.ErrnoException;
  return failedStart({ code, message: `cannot open the job's files: ${(error as Error).message}`, outputFiles: true });
}

export function spawnFailure(error: unknown, cwd: string): ChildHandle {
  return failedStart(
    describeSpawnError(error instanceof Error ? (error as NodeJS.ErrnoException) : new Error(String(error)), cwd),
  );
}

function failedStart(spawnError: NonNullable<ChildExit["spawnError"]>): ChildHandle {
  const exit: ChildExit = {
    spawnError,
    exitCode: null,
    signal: null,
    stderrTail: "",
  };
  return {
    pid: undefined,
    marker: undefined,
    identity: async () => ({ pid: undefined, startTime: undefined, marker: undefined }),
    exited: Promise.resolve(exit),
    killTree: async () => ({ signalled: 0, survivors: [] }),
    settled: Promise.resolve(),
  };
}
