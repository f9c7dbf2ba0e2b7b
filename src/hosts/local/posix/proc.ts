/** Linux: the process table and environments from /proc. */
import { closeSync, openSync, readFileSync, readSync, readdirSync } from "node:fs";

import type { ProcessInfo } from "../types.js";

/** Linux: a process's environment, or undefined when it is gone or not ours to read. */
export function readLinuxEnvironment(pid: number, procRoot = "/proc"): string | undefined {
  try {
    return readFileSync(`${procRoot}/${pid}/environ`, "latin1");
  } catch {
    return undefined;
  }
}

/** Parses /proc/<pid>/stat. The command name may hold spaces and parentheses, so split after the last ')'. */
export function parseProcStat(text: string): ProcessInfo | undefined {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) return undefined;
  const pid = Number(text.slice(0, open).trim());
  // fields[0] is field 3 of proc(5): state, ppid, pgrp, session, …, starttime is field 22. The thirty
  // fields after it are never read: a table of a few hundred processes is read several times a second.
  const fields = text.slice(close + 2).split(" ", 20);
  const state = fields[0];
  const ppid = Number(fields[1]);
  const pgid = Number(fields[2]);
  const sid = Number(fields[3]);
  const startTime = fields[19];
  if (!Number.isInteger(pid) || !Number.isInteger(ppid) || state === undefined || startTime === undefined)
    return undefined;
  return {
    pid,
    ppid,
    pgid: Number.isInteger(pgid) ? pgid : undefined,
    sid: Number.isInteger(sid) ? sid : undefined,
    startTime,
    zombie: state === "Z" || state === "X",
  };
}

/**
 * Linux: one process as /proc/<pid>/stat shows it now, or undefined when it is gone or unreadable. One open, one read.
 */
export function readLinuxProcess(pid: number, procRoot = "/proc"): ProcessInfo | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(`${procRoot}/${pid}/stat`, "r");
    const length = readSync(fd, statBuffer, 0, statBuffer.length, 0);
    return parseProcStat(statBuffer.toString("latin1", 0, length));
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** A stat line is well under 1 KiB; one buffer serves every read (they are synchronous). */
const statBuffer = Buffer.allocUnsafe(4096);

/**
 * Linux: one read of /proc/<pid>/stat per process. Synchronous on purpose:
 * with a reused buffer a scan costs ~10 µs a process, about six times less
 * CPU than the fs.promises equivalent, and it runs once a second at most.
 */
export async function listLinuxProcesses(procRoot = "/proc"): Promise<ProcessInfo[]> {
  const found: ProcessInfo[] = [];
  const buffer = statBuffer;
  for (const name of readdirSync(procRoot)) {
    if (!/^\d+$/.test(name)) continue;
    let fd: number | undefined;
    try {
      fd = openSync(`${procRoot}/${name}/stat`, "r");
      const length = readSync(fd, buffer, 0, buffer.length, 0);
      const info = parseProcStat(buffer.toString("latin1", 0, length));
      if (info) found.push(info);
    } catch {
      // The process exited between readdir and read.
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
  return found;
}
