/**
 * `diff ID`, `merge ID` and `discard ID` (PROTOCOL.md §19): claude_worktree's
 * three actions for a person at a terminal, on the job's record and its
 * worktree, through the same git code as the server. A merge or discard is
 * recorded in the job's record, as the server records it.
 */
import type { MergeOutcome, WorktreeHold, WorktreeRecord } from "../agent/worktree.js";
import { DispatchError } from "../core/errors.js";
import { isFinishedStatus, type JobRecord, type ProcessIdentity } from "../store/records.js";
import { lockWorktree } from "../store/worktree-lock.js";
import { checkUndecided, discardedText, mergedText, mergeMessage, refusedMerge } from "../tools/worktree-results.js";
import { emit, loadProcessControl, notFound, type Context } from "./context.js";
import { printable } from "./format.js";

export type WorktreeCommand = "diff" | "merge" | "discard";

export async function worktreeCommand(context: Context, command: WorktreeCommand, id: string): Promise<number> {
  const { store } = context;
  const record = store.read(id);
  if (!record) throw notFound(context, id);
  const worktree = record.worktree;
  if (!worktree)
    throw new DispatchError("INVALID_ARGUMENT", `job ${id} has no worktree: it was not started with "worktree" true`);
  checkUndecided(id, worktree, worktree.state, command);
  // The same worktrees as the server's, through the host the job ran on; one on another machine is worked on there.
  const host = (await context.io.hosts?.(() => loadProcessControl(context.io)))?.get(record.host);
  if (!host?.sharesFiles) {
    throw new DispatchError(
      "INVALID_ARGUMENT",
      `job ${id}'s worktree is on host ${record.host}: use claude_worktree through the server, or claude-dispatch ` +
        `${command} ${id} on that machine`,
    );
  }
  const git = host.worktrees;
  // A discard removes whatever is left: a merge removed the folder already.
  if (command !== "discard" && !git.exists(worktree)) {
    throw new DispatchError("INVALID_ARGUMENT", `job ${id}'s worktree ${worktree.path} is gone`);
  }
  if (command === "diff") {
    const diff = await git.diff(worktree);
    emit(
      context,
      { id, branch: worktree.branch, base: worktree.base, path: worktree.path, diff },
      diff === "" ? `Job ${id} changed nothing in its worktree.\n` : printable(diff),
    );
    return 0;
  }
  if (!isFinishedStatus(record.status)) {
    throw new DispatchError(
      "INVALID_ARGUMENT",
      `job ${id} is still ${record.status}: its worktree is merged or discarded only once it has finished ` +
        `(claude-dispatch kill ${id} stops it)`,
    );
  }
  // One merge or discard at a time across every server and the CLI; the record, read under the hold, decides.
  const hold = await holdWorktree(context, id);
  let outcome: MergeOutcome;
  try {
    checkUndecided(id, worktree, hold.state, command);
    if (command === "discard") {
      const wasMerged = hold.state === "merged";
      await git.discard(worktree);
      // Work that reached the checkout stays "merged" in the record.
      if (!wasMerged) markWorktree(context, record, "discarded");
      const document = { id, discarded: true, was_merged: wasMerged, path: worktree.path, branch: worktree.branch };
      emit(context, document, printable(`${discardedText(id, worktree, wasMerged)}\n`));
      return 0;
    }
    outcome = await git.merge(worktree, mergeMessage(id, context.store.readPrompt(id) ?? record.prompt_preview));
    if (outcome.merged) markWorktree(context, record, "merged");
  } finally {
    hold.release();
  }
  return printMerge(context, id, worktree, outcome);
}

/** What a merge did, as claude_worktree says it (§19.1); exit 1 when it was refused. */
function printMerge(context: Context, id: string, worktree: WorktreeRecord, outcome: MergeOutcome): number {
  if (outcome.merged) {
    emit(context, { id, ...outcome, branch: worktree.branch }, printable(`${mergedText(id, worktree, outcome)}\n`));
    return 0;
  }
  const refused = refusedMerge(id, worktree, outcome);
  const document = { id, ...outcome, conflicts: refused.conflicts, conflicts_total: refused.total, next: refused.next };
  emit(context, document, printable(`${refused.text}\n${refused.next}\n`));
  return 1;
}

/** Holds the job's worktree for a merge, discard or retirement (§19.1), in this process's name. */
export async function holdWorktree(context: Context, id: string): Promise<WorktreeHold> {
  const { io, store } = context;
  let control: ReturnType<typeof loadProcessControl> | undefined;
  const isAlive = async (holder: ProcessIdentity) =>
    (await (control ??= loadProcessControl(io))).isAlive(holder.pid, holder.start_time);
  const held = await lockWorktree(store.jobDir(id), id, io.identity(), isAlive, io.randomName, io.clock);
  return { state: store.read(id)?.worktree?.state, release: held.release };
}

/** The record says what became of the worktree, as the server's record would. */
function markWorktree(context: Context, record: JobRecord, state: "merged" | "discarded"): void {
  const now = context.store.read(record.id) ?? record;
  if (now.worktree) context.store.write({ ...now, worktree: { ...now.worktree, state } });
}
