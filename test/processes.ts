/** Helpers for tests that watch real processes (Linux /proc). */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

import {
  LinuxProcessLister,
  readLinuxEnvironment,
  readLinuxProcess,
  type PosixPlatform,
} from "../src/hosts/local/index.js";

const lister = new LinuxProcessLister("/proc", process.pid);

/** The real process layer's platform on Linux, as src/main.ts builds it: the table read as it changes. */
export const LINUX_PLATFORM: PosixPlatform = {
  kind: "posix",
  spawn,
  listProcesses: (request) => lister.list(request),
  signal: (pid, signal) => void process.kill(pid, signal),
  selfPid: process.pid,
  readEnvironment: (pid) => readLinuxEnvironment(pid),
  readProcess: (pid) => readLinuxProcess(pid),
};

/** Alive and not a zombie: a killed orphan may linger as a zombie until init reaps it. */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** Field 22 of /proc/<pid>/stat, as the server records a start time. */
export function procStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** A process's argv joined by spaces, or "" when it is gone. */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1").replaceAll("\0", " ");
  } catch {
    return "";
  }
}

/** The pids the fake agent appended to a file, one per line. */
export function readPids(file: string): number[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number);
}

export async function waitFor(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A job's record.json as the server last wrote it, or {} while there is none. */
export function readRecordFile(stateDir: string, id: string): Record<string, any> {
  try {
    return JSON.parse(readFileSync(path.join(stateDir, "jobs", id, "record.json"), "utf8")) as Record<string, any>;
  } catch {
    return {};
  }
}

/** The agent is recorded with its start time, so a later server can recognise it. */
export async function agentRecorded(stateDir: string, id: string): Promise<void> {
  await waitFor(
    () => readRecordFile(stateDir, id).agent?.start_time !== undefined,
    "the agent's start time in the record",
  );
}

/** Where `name` is on PATH (this process's unless given), or undefined. */
export function onPath(name: string, pathVariable = process.env.PATH ?? "/usr/bin:/bin"): string | undefined {
  for (const dir of pathVariable.split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}
