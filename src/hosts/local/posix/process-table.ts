/** One read of the process table, indexed for the tree walk: by pid, by parent, and by group or session. */
import type { ProcessInfo } from "../types.js";

export interface ProcessTable {
  byPid: Map<number, ProcessInfo>;
  byParent: Map<number, ProcessInfo[]>;
  byGroupOrSession: Map<number, ProcessInfo[]>;
  /** The server's own group and session: never followed, never signalled. */
  protectedIds: Set<number>;
}

export function indexProcesses(list: readonly ProcessInfo[], selfPid: number): ProcessTable {
  const byPid = new Map<number, ProcessInfo>();
  const byParent = new Map<number, ProcessInfo[]>();
  const byGroupOrSession = new Map<number, ProcessInfo[]>();
  const push = (map: Map<number, ProcessInfo[]>, key: number, info: ProcessInfo): void => {
    const bucket = map.get(key);
    if (bucket) bucket.push(info);
    else map.set(key, [info]);
  };
  for (const info of list) {
    byPid.set(info.pid, info);
    push(byParent, info.ppid, info);
    if (info.pgid !== undefined) push(byGroupOrSession, info.pgid, info);
    if (info.sid !== undefined && info.sid !== info.pgid) push(byGroupOrSession, info.sid, info);
  }
  const protectedIds = new Set<number>([0, 1, selfPid]);
  const self = byPid.get(selfPid);
  if (self?.pgid !== undefined) protectedIds.add(self.pgid);
  if (self?.sid !== undefined) protectedIds.add(self.sid);
  return { byPid, byParent, byGroupOrSession, protectedIds };
}

/**
 * This server's own tree as one table shows it: itself, its ancestors, the members of its process group and
 * session, and its descendants (its agents and everything under them). No agent an earlier server started is here.
 */
export function ownTree(table: ProcessTable, selfPid: number): Set<number> {
  const own = new Set<number>(table.protectedIds);
  const self = table.byPid.get(selfPid);
  const above = new Set<number>();
  // Up to init; a table torn into a loop stops where it repeats.
  for (let info = self; info && info.ppid > 0 && !above.has(info.ppid); info = table.byPid.get(info.ppid)) {
    above.add(info.ppid);
  }
  for (const id of [self?.pgid, self?.sid]) {
    for (const member of id === undefined ? [] : (table.byGroupOrSession.get(id) ?? [])) own.add(member.pid);
  }
  const below = new Set<number>();
  for (const queue = [selfPid]; queue.length > 0;) {
    for (const child of table.byParent.get(queue.pop() as number) ?? []) {
      if (below.has(child.pid)) continue;
      below.add(child.pid);
      queue.push(child.pid);
    }
  }
  for (const pid of [...above, ...below]) own.add(pid);
  return own;
}

export function isSameLiveProcess(table: ProcessTable, remembered: ProcessInfo): boolean {
  const current = table.byPid.get(remembered.pid);
  return current !== undefined && !current.zombie && current.startTime === remembered.startTime;
}

/** Linux start times are clock ticks since boot; other formats cannot be ordered, so never exclude on them. */
export function startedBefore(a: string, b: string): boolean {
  return /^\d+$/.test(a) && /^\d+$/.test(b) && Number(a) < Number(b);
}
