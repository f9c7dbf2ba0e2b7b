/**
 * This server as its records name it (§15.2), told without loading the process layer (BENCHMARKS.md (a)):
 * whether the platform has a process table at all, and its start time where /proc gives it at once.
 */
import { readFileSync } from "node:fs";

import { parseProcStat } from "./posix/proc.js";
import type { ProcessControl } from "./types.js";

/**
 * The one test for Windows: the platform switch, the PATH resolver, the
 * state location and the command line all ask here.
 */
export function isWindowsPlatform(platform: string | undefined): boolean {
  return platform === "win32";
}

/** Windows has no process table with start times: a record names the pid alone. */
export function hasProcessTable(platform: string): boolean {
  return !isWindowsPlatform(platform);
}

/**
 * This process's start time from /proc/self/stat on Linux; undefined
 * elsewhere (ask the process table) or when unreadable.
 */
export function ownLinuxStartTime(platform: string, procRoot = "/proc"): string | undefined {
  if (platform !== "linux") return undefined;
  try {
    return parseProcStat(readFileSync(`${procRoot}/self/stat`, "latin1"))?.startTime;
  } catch {
    return undefined;
  }
}

/** This process as a claim names it, without asking the process table: the start time on Linux only. */
export function ownIdentityAtOnce(machine: { pid: number; platform: string }): { pid: number; start_time?: string } {
  const startTime = ownLinuxStartTime(machine.platform);
  return startTime ? { pid: machine.pid, start_time: startTime } : { pid: machine.pid };
}

/**
 * This process as its records name it, with its start time so that a later
 * process can tell it from one that reused its pid: from /proc on Linux,
 * from the process table (ps) elsewhere on POSIX, none on Windows.
 */
export async function ownIdentity(
  machine: { pid: number; platform: string },
  processes: () => Promise<Pick<ProcessControl, "startTimeOf">>,
): Promise<{ pid: number; start_time?: string }> {
  if (!hasProcessTable(machine.platform)) return { pid: machine.pid };
  const startTime = ownLinuxStartTime(machine.platform) ?? (await (await processes()).startTimeOf(machine.pid));
  return startTime ? { pid: machine.pid, start_time: startTime } : { pid: machine.pid };
}
