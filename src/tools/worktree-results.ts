/**
 * What tools say of a job's worktree (PROTOCOL.md §19): in its reports, and
 * as claude_worktree's diff, merge and discard answer.
 */
import type { MergeOutcome, WorktreeChanges, WorktreeRecord } from "../agent/worktree.js";
import type { Job } from "../jobs/registry.js";
import { toolResult, withNext, type CallToolResult } from "./tool-result.js";

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
  const changed = files === undefined ? "" : files.length === 0 ? ", no changes" : `, ${files.length} file${files.length === 1 ? "" : "s"} changed: ${files.slice(0, 20).join(", ")}${files.length > 20 ? ", …" : ""}`;
  return `\nWorktree ${worktree.path} (branch ${worktree.branch}, from ${worktree.base.slice(0, 12)}${changed}).${left}${files?.length ? ` ${worktreeHint(jobId)}` : ""}`;
}

export function worktreeHint(jobId: string): string {
  return `Call claude_worktree with job_id "${jobId}" and action "diff" to review the changes, then "merge" to bring them into your checkout or "discard" to drop them.`;
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
  reason?: string;
  conflicts?: string[];
  operations?: string[];
  next?: string;
}

/** A page of a job's worktree diff (§19), offsets in UTF-16 characters as claude_output's. */
export function renderWorktreeDiff(job: Job, worktree: WorktreeRecord, diff: string, offset: number, limit: number): CallToolResult<WorktreeResult> {
  const from = Math.min(offset, diff.length);
  const text = diff.slice(from, from + limit);
  const result: WorktreeResult = { status: "diff", job_id: job.id, action: "diff", worktree: worktreeReport(worktree), text, offset: from, total_chars: diff.length };
  if (from + text.length < diff.length) result.next_offset = from + text.length;
  const readOn = result.next_offset === undefined ? undefined : `Call claude_worktree with job_id "${job.id}", action "diff" and offset ${result.next_offset} for the rest.`;
  withNext(result, readOn);
  const header = diff === "" ? `Job ${job.id} changed nothing in its worktree (branch ${worktree.branch}).` : `diff of job ${job.id}'s worktree against ${worktree.base.slice(0, 12)} (branch ${worktree.branch}), characters ${from}–${from + text.length} of ${diff.length}:`;
  return toolResult(`${header}\n${text}${readOn ? `\n[${readOn}]` : diff === "" ? "" : "\n[End.]"}`, result, false);
}

export function renderMerge(job: Job, worktree: WorktreeRecord, outcome: MergeOutcome): CallToolResult<WorktreeResult> {
  if (outcome.merged) {
    const result: WorktreeResult = { status: "merged", job_id: job.id, action: "merge", worktree: worktreeReport(worktree), into: outcome.into, commit: outcome.commit, operations: outcome.operations };
    return toolResult(`Merged job ${job.id}'s branch ${worktree.branch} into ${outcome.into} (now at ${outcome.commit.slice(0, 12)}) in ${worktree.repo}.\nRan: ${outcome.operations.join("; ")}`, result, false);
  }
  const result: WorktreeResult = { status: "not_merged", job_id: job.id, action: "merge", worktree: worktreeReport(worktree), reason: outcome.reason, conflicts: outcome.conflicts, operations: outcome.operations };
  const files = outcome.conflicts.length ? `: ${outcome.conflicts.join(", ")}` : "";
  const next = `Nothing changed. Resolve it (or call claude_worktree with job_id "${job.id}" and action "diff" to see the job's changes), then call merge again, or discard.`;
  return toolResult(`Not merged: ${outcome.reason}${files}. ${next}`, withNext(result, next), false);
}

export function renderDiscarded(job: Job, worktree: WorktreeRecord): CallToolResult<WorktreeResult> {
  const result: WorktreeResult = { status: "discarded", job_id: job.id, action: "discard", worktree: worktreeReport(worktree) };
  return toolResult(`Discarded job ${job.id}'s worktree ${worktree.path} and its branch ${worktree.branch}.`, result, false);
}

