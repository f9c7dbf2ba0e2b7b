/**
 * One agent's tree as remembered between reads of the process table, and the walk that grows it from a new
 * read: children by parent pid, and whatever is in the process groups and sessions its members lead (§6).
 */
import type { ProcessInfo } from "../types.js";
import { hasVariable } from "./marker.js";
import { isSameLiveProcess, type ProcessTable } from "./process-table.js";

export class TrackedTree {
  rootStartTime: string | undefined;
  rootExited = false;
  /** Followed after a restart, not spawned here: its pid is only as good as the process table says. */
  attached = false;
  /** Every descendant seen alive, by pid, with the start time it had then. */
  readonly members = new Map<number, ProcessInfo>();

  constructor(
    readonly rootPid: number,
    /** "NAME=value" as it appears in /proc/<pid>/environ. */
    readonly marker: string,
  ) {}

  markRootExited(): void {
    this.rootExited = true;
  }
}

type ReadEnvironment = (pid: number) => string | undefined;
type Remember = (info: ProcessInfo) => void;

/** Grows the tree from one table: the agent, the members still alive, and everything reachable from them. */
export function absorb(tree: TrackedTree, table: ProcessTable, readEnvironment: ReadEnvironment | undefined): void {
  const queue: ProcessInfo[] = [];
  const remember: Remember = (info) => {
    if (info.zombie || table.protectedIds.has(info.pid)) return;
    const known = tree.members.get(info.pid);
    if (known && known.startTime === info.startTime) return;
    tree.members.set(info.pid, info);
    queue.push(info);
  };
  const vouched = vouching(tree, readEnvironment);
  rememberRoot(tree, table, vouched, remember);
  for (const [pid, info] of tree.members) {
    if (isSameLiveProcess(table, info)) queue.push(info);
    else tree.members.delete(pid);
  }
  const followedIds = followRootGroup(tree, table, vouched, remember);
  while (queue.length > 0) {
    const info = queue.pop() as ProcessInfo;
    for (const child of table.byParent.get(info.pid) ?? []) remember(child);
    for (const id of [info.pgid, info.sid]) {
      if (id === undefined || table.protectedIds.has(id) || followedIds.has(id)) continue;
      followedIds.add(id);
      for (const member of table.byGroupOrSession.get(id) ?? []) remember(member);
    }
  }
}

/**
 * An agent an earlier server started is only as trustworthy as its record: where environments can be read,
 * the processes the tree is entered by (the agent, the members of its group and session) must carry its marker.
 */
function vouching(tree: TrackedTree, read: ReadEnvironment | undefined): (info: ProcessInfo) => boolean {
  return (info) =>
    !tree.attached || !read || tree.members.has(info.pid) || hasVariable(read(info.pid) ?? "", tree.marker);
}

/** The agent itself, while it runs and is still the process it was (same start time). */
function rememberRoot(
  tree: TrackedTree,
  table: ProcessTable,
  vouched: (info: ProcessInfo) => boolean,
  remember: Remember,
): void {
  const root = table.byPid.get(tree.rootPid);
  if (root && !tree.rootExited && (tree.rootStartTime ?? root.startTime) === root.startTime && vouched(root)) {
    tree.rootStartTime = root.startTime;
    remember(root);
  }
}

/**
 * The agent leads its own session and group (detached), so whatever is still in
 * them is ours even after the agent exited, unless its pid now names another process.
 * Returns the group and session ids followed so far.
 */
function followRootGroup(
  tree: TrackedTree,
  table: ProcessTable,
  vouched: (info: ProcessInfo) => boolean,
  remember: Remember,
): Set<number> {
  const followedIds = new Set<number>();
  const rootNow = table.byPid.get(tree.rootPid);
  const rootPidIsOurs =
    rootNow === undefined || (tree.rootStartTime !== undefined && rootNow.startTime === tree.rootStartTime);
  if (rootPidIsOurs && !table.protectedIds.has(tree.rootPid)) {
    followedIds.add(tree.rootPid);
    const rootVouched = tree.members.has(tree.rootPid);
    for (const member of table.byGroupOrSession.get(tree.rootPid) ?? [])
      if (rootVouched || vouched(member)) remember(member);
  }
  return followedIds;
}
