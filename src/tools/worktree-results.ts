/**
 * What tools say of a job's worktree (PROTOCOL.md §19): in its reports, and
 * as claude_worktree's diff, merge and discard answer.
 */
import type { MergeOutcome, WorktreeChanges, WorktreeRecord } from "../agent/worktree.js";
import { DispatchError } from "../core/errors.js";
import { forReadingOnOneLine } from "../core/text.js";
import type { Job } from "../jobs/registry.js";
import { toolResult, withNext, type CallToolResult } from "./tool-result.js";

/** How many paths a refused merge names; the rest are counted (§19.1). */
export const LISTED_CONFLICTS = 20;
/** A merge commit's subject from the prompt is cut here: git's tools show about that much of a line. */
const SUBJECT_CHARS = 60;

/** A job's worktree as reports show it (§19); what it changed only when that was read for this report. */
export interface WorktreeReport {
  path: string;
  branch: string;
  base: string;
  state: "active" | "merged" | "discarded";
  changed_files?: string[];
  commits?: Array<{ sha: string; subject: string }>;
  uncommitted?: boolean;
  left_behind?: true;
}

export function worktreeReport(worktree: WorktreeRecord, changes?: WorktreeChanges): WorktreeReport {
  return {
    path: worktree.path,
    branch: worktree.branch,
    base: worktree.base,
    state: worktree.state ?? "active",
    ...(changes ? { changed_files: changes.files, commits: changes.commits, uncommitted: changes.uncommitted } : {}),
    ...(worktree.left_behind ? { left_behind: true as const } : {}),
  };
}

/** What a report says of the worktree in its text: one line, then what to do with it. */
export function worktreeText(worktree: WorktreeReport | undefined, jobId: string): string {
  if (!worktree) return "";
  const left = worktree.left_behind ? " Uncommitted changes in your checkout were not carried into it." : "";
  if (worktree.state !== "active") return `\nWorktree ${worktree.path} (branch ${worktree.branch}): ${worktree.state}.`;
  const files = worktree.changed_files;
  const changed =
    files === undefined
      ? ""
      : files.length === 0
        ? ", no changes"
        : `, ${files.length} file${files.length === 1 ? "" : "s"} changed: ` +
          `${files.slice(0, 20).join(", ")}${files.length > 20 ? ", …" : ""}`;
  return (
    `\nWorktree ${worktree.path} (branch ${worktree.branch}, from ` +
    `${worktree.base.slice(0, 12)}${changed}).${left}${files?.length ? ` ${worktreeHint(jobId)}` : ""}`
  );
}

export function worktreeHint(jobId: string): string {
  return (
    `Call claude_worktree with job_id "${jobId}" and action "diff" to review the changes, then "merge" to bring ` +
    `them into your checkout or "discard" to drop them.`
  );
}

export interface WorktreeResult {
  status: "diff" | "merged" | "not_merged" | "discarded";
  job_id: string;
  action: "diff" | "merge" | "discard";
  worktree: WorktreeReport;
  text?: string;
  offset?: number;
  total_chars?: number;
  next_offset?: number;
  into?: string;
  commit?: string;
  branch?: string;
  reason?: string;
  conflicts?: string[];
  conflicts_total?: number;
  operations?: string[];
  next?: string;
}

/** A page of a job's worktree diff (§19), offsets in UTF-16 characters as claude_output's. */
export function renderWorktreeDiff(
  job: Job,
  worktree: WorktreeRecord,
  diff: string,
  offset: number,
  limit: number,
): CallToolResult<WorktreeResult> {
  const from = Math.min(offset, diff.length);
  const text = diff.slice(from, from + limit);
  const result: WorktreeResult = {
    status: "diff",
    job_id: job.id,
    action: "diff",
    worktree: worktreeReport(worktree),
    text,
    offset: from,
    total_chars: diff.length,
  };
  if (from + text.length < diff.length) result.next_offset = from + text.length;
  const readOn =
    result.next_offset === undefined
      ? undefined
      : `Call claude_worktree with job_id "${job.id}", action "diff" and offset ${result.next_offset} for the rest.`;
  withNext(result, readOn);
  const header =
    diff === ""
      ? `Job ${job.id} changed nothing in its worktree (branch ${worktree.branch}).`
      : `diff of job ${job.id}'s worktree against ${worktree.base.slice(0, 12)} (branch ${worktree.branch}), ` +
        `characters ${from}–${from + text.length} of ${diff.length}:`;
  return toolResult(`${header}\n${text}${readOn ? `\n[${readOn}]` : diff === "" ? "" : "\n[End.]"}`, result, false);
}

type Merged = Extract<MergeOutcome, { merged: true }>;
type Refused = Extract<MergeOutcome, { merged: false }>;

/**
 * Refuses an action on a worktree that was decided on already (§19.1): a merged one's folder is gone, and only a
 * discard of what is left of it remains; a discarded one takes nothing.
 */
export function checkUndecided(
  jobId: string,
  worktree: WorktreeRecord,
  state: WorktreeRecord["state"],
  action: WorktreeResult["action"],
): void {
  if (state === undefined || (state === "merged" && action === "discard")) return;
  const kept =
    state === "merged"
      ? ` (its worktree is removed; its branch ${worktree.branch} is kept until the job is pruned)`
      : "";
  throw new DispatchError("INVALID_ARGUMENT", `job ${jobId}'s worktree was ${state} already${kept}`);
}

/**
 * The message of the commit a merge makes of the job's work (§19.1): a short subject from the prompt's first line,
 * cleaned onto one line, with the job's id; the whole id in the body.
 */
export function mergeMessage(jobId: string, prompt: string): string {
  const firstLine = forReadingOnOneLine(
    prompt
      .slice(0, 4096)
      .split("\n")
      .find((line) => line.trim() !== "") ?? "",
  );
  const characters = Array.from(firstLine);
  const cut = characters.length > SUBJECT_CHARS;
  const subject = cut ? `${characters.slice(0, SUBJECT_CHARS).join("").trimEnd()}…` : firstLine;
  return `claude-dispatch: ${subject || "a job's work"} (job ${jobId.slice(0, 8)}…)\n\nclaude-dispatch job ${jobId}.`;
}

/** A merged job's worktree, for a person or a model: where its work went, and what is kept. */
export function mergedText(jobId: string, worktree: WorktreeRecord, outcome: Merged): string {
  const { path: folder, branch } = worktree;
  // An older claude-dispatch on a host (§21) does not say.
  const removed =
    outcome.removed === undefined
      ? ""
      : outcome.removed
        ? `; its worktree ${folder} is removed; its branch ${branch} is kept until the job is pruned`
        : `; its worktree ${folder} could not be removed (discard removes it and the branch)`;
  const now = `now at ${outcome.commit.slice(0, 12)}`;
  return (
    `Merged job ${jobId}'s branch ${branch} into ${outcome.into} (${now}) in ${worktree.repo}${removed}.\nRan: ` +
    `${outcome.operations.join("; ")}`
  );
}

export interface RefusedMerge {
  text: string;
  next: string;
  /** The first LISTED_CONFLICTS paths, cleaned. */
  conflicts: string[];
  total: number;
}

/** A refused merge, for a person or a model (§19.1): the paths cleaned (§10) and bounded, and what to do next. */
/** `elsewhere`: the host the worktree is on, when that is another machine (§21.3). */
export function refusedMerge(
  jobId: string,
  worktree: WorktreeRecord,
  outcome: Refused,
  elsewhere?: string,
): RefusedMerge {
  const conflicts = outcome.conflicts.slice(0, LISTED_CONFLICTS).map(forReadingOnOneLine);
  const more = outcome.conflicts.length - conflicts.length;
  const named = conflicts.length === 0 ? "" : `: ${conflicts.join(", ")}${more > 0 ? ` and ${more} more` : ""}`;
  const text = `Not merged: ${forReadingOnOneLine(outcome.reason)}${named}. Nothing changed.`;
  const discard = `\`claude-dispatch discard ${jobId}\` (or claude_worktree action "discard")`;
  const next =
    outcome.work === undefined
      ? `Once that is dealt with, merge again (\`claude-dispatch merge ${jobId}\`, or claude_worktree ` +
        `action "merge"); ` +
        `or drop the job's work: ${discard}.`
      : `${byHand(worktree, forReadingOnOneLine(outcome.work), elsewhere)} Then, or to drop the job's work ` +
        `instead, ${discard} ` +
        "removes its worktree and branch.";
  return { text, next, conflicts, total: outcome.conflicts.length };
}

/** The commands that resolve a conflict by hand, in the user's checkout: a merge of all the job's work. */
function byHand(worktree: WorktreeRecord, work: string, elsewhere: string | undefined): string {
  const where = elsewhere === undefined ? worktree.repo : `${worktree.repo} on host ${elsewhere}`;
  const all =
    work === worktree.branch
      ? ""
      : ` (the job's work with its uncommitted changes; its branch ${worktree.branch} has only its commits)`;
  return `To resolve it by hand, in ${where}: \`git merge ${work}\`${all}, resolve the conflicts, \`git commit\`.`;
}

/** A discarded worktree; one merged already keeps its work in the checkout, and loses what was left of it. */
export function discardedText(jobId: string, worktree: WorktreeRecord, wasMerged: boolean): string {
  const { path: folder, branch } = worktree;
  if (!wasMerged) return `Discarded job ${jobId}'s worktree ${folder} and its branch ${branch}.`;
  const left = `the folder ${folder}, if it was still there, and its branch ${branch}`;
  return (
    `Job ${jobId}'s worktree was merged already, so its work stays in ${worktree.repo}; removed what was left ` +
    `of it: ${left}.`
  );
}

export function renderMerge(
  job: Job,
  worktree: WorktreeRecord,
  outcome: MergeOutcome,
  elsewhere?: string,
): CallToolResult<WorktreeResult> {
  const report = { job_id: job.id, action: "merge" as const, worktree: worktreeReport(worktree) };
  if (outcome.merged) {
    const { into, commit, operations } = outcome;
    const result: WorktreeResult = { status: "merged", ...report, into, commit, branch: worktree.branch, operations };
    return toolResult(mergedText(job.id, worktree, outcome), result, false);
  }
  const refused = refusedMerge(job.id, worktree, outcome, elsewhere);
  const result: WorktreeResult = {
    status: "not_merged",
    ...report,
    reason: outcome.reason,
    conflicts: refused.conflicts,
    operations: outcome.operations,
  };
  if (refused.total > refused.conflicts.length) result.conflicts_total = refused.total;
  return toolResult(`${refused.text} ${refused.next}`, withNext(result, refused.next), false);
}

export function renderDiscarded(
  job: Job,
  worktree: WorktreeRecord,
  wasMerged: boolean,
): CallToolResult<WorktreeResult> {
  const result: WorktreeResult = {
    status: "discarded",
    job_id: job.id,
    action: "discard",
    worktree: worktreeReport(worktree),
  };
  return toolResult(discardedText(job.id, worktree, wasMerged), result, false);
}
