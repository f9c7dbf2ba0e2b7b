/** Linux: the process table and environments from /proc. */
import { closeSync, openSync, readFileSync, readSync, readdirSync, readlinkSync } from "node:fs";

import type { ProcessInfo, ProcessListRequest } from "../types.js";

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
  return parseProcStat(readProcFile(`${procRoot}/${pid}/stat`) ?? "");
}

/** A stat line is well under 1 KiB, /proc/stat a few; one buffer serves every read (they are synchronous). */
const readBuffer = Buffer.allocUnsafe(16 * 1024);

/**
 * A /proc file's text, undefined when it cannot be read. One read (a stat line, a counter), or with `toEnd` as many
 * as it takes (/proc/stat: its interrupt counts run long on a large machine, and the fork count comes after them).
 */
function readProcFile(file: string, toEnd = false): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(file, "r");
    let text = "";
    for (let length; (length = readSync(fd, readBuffer, 0, readBuffer.length, null)) > 0;) {
      text += readBuffer.toString("latin1", 0, length);
      if (!toEnd) break;
    }
    return text;
  } catch {
    // Gone between readdir and read, or not there.
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** The pids /proc lists: processes, not threads. */
function listedPids(procRoot: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync(procRoot)) if (/^\d+$/.test(name)) pids.push(Number(name));
  return pids;
}

/**
 * Linux: one read of /proc/<pid>/stat per process. Synchronous on purpose:
 * with a reused buffer a scan costs ~10 µs a process, about six times less
 * CPU than the fs.promises equivalent.
 */
export async function listLinuxProcesses(procRoot = "/proc"): Promise<ProcessInfo[]> {
  const found: ProcessInfo[] = [];
  for (const pid of listedPids(procRoot)) {
    const info = readLinuxProcess(pid, procRoot);
    if (info) found.push(info);
  }
  return found;
}

/** The kernel's counters that tell which pids may name a process started since they were read. */
interface PidCounters {
  /** The pid last handed out in this pid namespace (/proc/sys/kernel/ns_last_pid). */
  lastPid: number;
  /** Processes and threads created since boot, in every namespace (/proc/stat `processes`): never fewer than pids. */
  forks: number;
}

/** A full read at least this often, whatever the counters say: what a reused entry may have missed ages out. */
const FULL_READ_EVERY = 100;

/**
 * Linux: the process table read again and again, cheaply (docs/process-control.md, "Snapshots"). A stat file costs
 * 10 to 20 µs, so a laptop's 500 processes cost 5 to 9 ms a read, once a second while any agent runs. A process the
 * read before listed keeps the entry read then, unless its pid was handed out since (the pid counter moved past it,
 * and the fork count shows it cannot have gone all the way round) or the caller asks for it fresh: so an entry
 * kept is the same process, only its state, parent, group or session may be out of date. The parent, group and
 * session it names are still the processes they were, or none: an entry naming a pid handed out since is read
 * again, lest a stale parent or group tie an unrelated process to a tree through a reused pid. The tracker asks fresh
 * for whatever it decides on (the server, each agent and each member of a tree); a process started since is read
 * as new; and an older one cannot join a tree later: it would have to enter a session made after it started, or
 * become the child of a process it was not already below. Where a counter cannot be read, or /proc is another pid
 * namespace's, every read is full; and one in FULL_READ_EVERY is anyway.
 */
export class LinuxProcessLister {
  private previous:
    { counters: PidCounters; tasks: number; pidMax: number; byPid: Map<number, ProcessInfo> } | undefined;
  private readsSinceFull = 0;
  /** Whether this /proc shows this process's pid namespace, the one ns_last_pid counts in. */
  private readonly ownNamespace: boolean;

  constructor(
    private readonly procRoot = "/proc",
    selfPid?: number,
  ) {
    let self: string | undefined;
    try {
      self = readlinkSync(`${procRoot}/self`);
    } catch {
      self = undefined;
    }
    this.ownNamespace = selfPid !== undefined && self === String(selfPid);
  }

  async list(request: ProcessListRequest = {}): Promise<ProcessInfo[]> {
    const before = this.ownNamespace ? this.readCounters() : undefined;
    const limits = before && this.readLimits();
    const pids = listedPids(this.procRoot);
    // Read after the listing: a pid handed out while it ran is at most this.
    const after = limits && this.readCounters();
    const previous = request.full || this.readsSinceFull + 1 >= FULL_READ_EVERY ? undefined : this.previous;
    const reusable = previous && after && !wentRound(previous, after) ? previous : undefined;
    const byPid = new Map<number, ProcessInfo>();
    const from = reusable?.counters.lastPid ?? 0;
    const to = after?.lastPid ?? 0;
    for (const pid of pids) {
      const known = reusable?.byPid.get(pid);
      // Kept only if neither its pid nor the parent, group or session it names may stand for another process now.
      const keep =
        known !== undefined &&
        !request.fresh?.has(pid) &&
        !handedOutBetween(pid, from, to) &&
        !handedOutBetween(known.ppid, from, to) &&
        (known.pgid === undefined || !handedOutBetween(known.pgid, from, to)) &&
        (known.sid === undefined || !handedOutBetween(known.sid, from, to));
      const info = keep ? known : readLinuxProcess(pid, this.procRoot);
      if (info) byPid.set(pid, info);
    }
    // The next read's pids handed out "since" count from before this listing began.
    this.previous = before && limits && after ? { counters: before, ...limits, byPid } : undefined;
    this.readsSinceFull = reusable ? this.readsSinceFull + 1 : 0;
    return [...byPid.values()];
  }

  private readCounters(): PidCounters | undefined {
    const lastPid = Number(readProcFile(`${this.procRoot}/sys/kernel/ns_last_pid`)?.trim());
    const forks = Number(/^processes (\d+)$/m.exec(readProcFile(`${this.procRoot}/stat`, true) ?? "")?.[1]);
    return Number.isSafeInteger(lastPid) && Number.isSafeInteger(forks) ? { lastPid, forks } : undefined;
  }

  /** Threads alive now (/proc/loadavg, "running/total"), and the highest pid plus one. */
  private readLimits(): { tasks: number; pidMax: number } | undefined {
    const tasks = Number(/ \d+\/(\d+) /.exec(readProcFile(`${this.procRoot}/loadavg`) ?? "")?.[1]);
    const pidMax = Number(readProcFile(`${this.procRoot}/sys/kernel/pid_max`)?.trim());
    return Number.isSafeInteger(tasks) && Number.isSafeInteger(pidMax) && pidMax > 0 ? { tasks, pidMax } : undefined;
  }
}

/**
 * Whether the pid counter may have gone all the way round since `previous` was read, handing a pid out twice.
 * Going round takes more than pid_max steps; each step hands out a pid (counted in forks) or skips one in use
 * (alive then, or handed out since). Half of pid_max leaves room for a counter read a moment apart.
 */
function wentRound(previous: { counters: PidCounters; tasks: number; pidMax: number }, after: PidCounters): boolean {
  const forks = after.forks - previous.counters.forks;
  return forks < 0 || 2 * forks + previous.tasks >= previous.pidMax / 2;
}

/** Where the kernel's pid counter starts again once it passes pid_max (kernel/pid.c). */
const RESERVED_PIDS = 300;

/** Whether pid was handed out after the counter stood at `from`, up to `to`; the counter went round once at most. */
function handedOutBetween(pid: number, from: number, to: number): boolean {
  return from <= to ? pid > from && pid <= to : pid > from || (pid >= RESERVED_PIDS && pid <= to);
}
