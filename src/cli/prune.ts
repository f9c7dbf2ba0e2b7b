/**
 * `prune --all | --older-than AGE` (PROTOCOL.md §17): deletes the folders of
 * finished jobs, all or those finished more than AGE ago, and says how much
 * disk that freed; a bare `prune` asks first, on a terminal. Queued and
 * running jobs are never touched. A pruned job's worktree goes with it unless
 * it holds changes nobody merged or discarded (§19): those are kept, and said.
 */
import type { WorktreeHold, WorktreeRecord } from "../agent/worktree.js";
import { retireWorktree } from "../worktrees/retire.js";
import { choosePrunable, isFinishedStatus, type JobRecord } from "../store/records.js";
import type { StateStore } from "../store/state-store.js";
import { emit, loadProcessControl, type Context } from "./context.js";
import { holdWorktree } from "./worktree.js";
import { formatAge, formatBytes } from "./format.js";
import { readLine } from "./terminal.js";

interface JobSize {
  id: string;
  bytes: number;
}

interface Removal {
  removed: string[];
  failed: { id: string; reason: string }[];
  bytesFreed: number;
}

/** A bare `prune` (no age, no --all): on a terminal it asks first; without one run.ts refuses it (§17). */
export async function prune(context: Context, olderThanMs: number | undefined, ask = false): Promise<number> {
  const { store } = context;
  const { records } = store.loadAll();
  const sizes = records.map((record) => ({
    id: record.id,
    status: record.status,
    finished_at: record.finished_at,
    // Unfinished jobs are never chosen, and no disk cap applies here: their size does not matter.
    bytes: isFinishedStatus(record.status) ? store.size(record.id) : 0,
  }));
  const prunable = choosePrunable(sizes, context.now, olderThanMs ?? 0, Number.POSITIVE_INFINITY);
  if (ask && prunable.length > 0 && !(await confirmed(context, prunable, sizes))) {
    const document = { state_dir: store.root, removed: [], bytes_freed: 0, kept: records.length, failed: [] };
    emit(context, { ...document, kept_worktrees: [] }, "Deleted nothing.\n");
    return 0;
  }
  // A job whose worktree a merge or discard holds now is left alone (§19.1); the others' holds end with their folders.
  const busy: { id: string; reason: string }[] = [];
  const chosen: string[] = [];
  const holds: WorktreeHold[] = [];
  for (const id of prunable) {
    if (!records.find((record) => record.id === id)?.worktree) chosen.push(id);
    else {
      await holdWorktree(context, id).then(
        (hold) => (holds.push(hold), chosen.push(id)),
        (error: unknown) => busy.push({ id, reason: (error as Error).message }),
      );
    }
  }
  const worktrees = chosen.flatMap((id) => {
    const record = store.read(id);
    return record?.worktree ? [{ worktree: record.worktree, host: record.host }] : [];
  });
  const keptWorktrees = await retireWorktrees(context, worktrees);
  const removal = removeJobs(store, chosen, sizes);
  for (const hold of holds) hold.release();
  const failed = [...busy, ...removal.failed];
  report(context, records, olderThanMs, { ...removal, failed }, keptWorktrees);
  return failed.length > 0 ? 1 : 0;
}

/** Asks the person at the terminal, on stderr, whether every finished job goes: only y or yes is a yes. */
async function confirmed(context: Context, prunable: readonly string[], sizes: readonly JobSize[]): Promise<boolean> {
  const bytes = sizes.filter((job) => prunable.includes(job.id)).reduce((total, job) => total + job.bytes, 0);
  const what = prunable.length === 1 ? "the 1 finished job" : `all ${prunable.length} finished jobs`;
  context.io.stderr.write(`Delete ${what} (${formatBytes(bytes)})? [y/N] `);
  const answer = context.io.stdin ? await readLine(context.io.stdin) : "";
  return /^y(es)?$/i.test(answer.trim());
}

function report(
  context: Context,
  records: readonly JobRecord[],
  olderThanMs: number | undefined,
  removal: Removal,
  keptWorktrees: readonly WorktreeRecord[],
): void {
  const { store } = context;
  const { removed, bytesFreed, failed } = removal;
  const unfinished = records.filter((record) => !isFinishedStatus(record.status)).length;
  const kept = records.length - removed.length;
  const lines = [
    `Removed ${removed.length} finished job${removed.length === 1 ? "" : "s"} from ${store.root}, freeing ` +
      `${formatBytes(bytesFreed)}.`,
    `Kept ${kept} (${unfinished} queued or ` +
      `running${olderThanMs === undefined ? "" : `, and those finished within ${formatAge(olderThanMs)}`}).`,
    ...failed.map(({ id, reason }) => `Could not remove ${id}: ${reason}`),
    ...keptWorktrees.map(
      (worktree) =>
        `Kept the worktree ${worktree.path} (branch ${worktree.branch}): it has changes nobody merged or discarded.`,
    ),
  ];
  const keptJson = keptWorktrees.map(({ path, branch }) => ({ path, branch }));
  emit(
    context,
    { state_dir: store.root, removed, bytes_freed: bytesFreed, kept, failed, kept_worktrees: keptJson },
    `${lines.join("\n")}\n`,
  );
}

/** Removes each chosen job's folder; one that cannot be removed is reported, and the rest still go. */
function removeJobs(store: StateStore, chosen: readonly string[], sizes: readonly JobSize[]): Removal {
  const removal: Removal = { removed: [], failed: [], bytesFreed: 0 };
  for (const id of chosen) {
    try {
      store.remove(id);
      removal.removed.push(id);
      removal.bytesFreed += sizes.find((job) => job.id === id)?.bytes ?? 0;
    } catch (error) {
      removal.failed.push({ id, reason: (error as Error).message });
    }
  }
  return removal;
}

/**
 * Removes the worktrees that hold nothing unmerged; returns those kept. A git failure keeps the worktree and says so.
 */
async function retireWorktrees(
  context: Context,
  worktrees: readonly { worktree: WorktreeRecord; host: string }[],
): Promise<WorktreeRecord[]> {
  if (worktrees.length === 0) return [];
  const hosts = await context.io.hosts?.(() => loadProcessControl(context.io));
  const kept: WorktreeRecord[] = [];
  for (const { worktree, host } of worktrees) {
    // Through the same git code as the server's; one on another machine is that machine's retention's (§21.3).
    const there = hosts?.get(host);
    if (!there?.sharesFiles) continue;
    try {
      if ((await retireWorktree(there.worktrees, worktree)) === "kept") kept.push(worktree);
    } catch (error) {
      context.io.stderr.write(`claude-dispatch: the worktree ${worktree.path} was kept: ${(error as Error).message}\n`);
      kept.push(worktree);
    }
  }
  return kept;
}
