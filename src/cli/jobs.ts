/**
 * `jobs [--all] [--watch]` (PROTOCOL.md §17): a table of the queued and
 * running jobs and the most recently finished ones (`--all`: every job), with
 * the session each can be resumed in; `--watch` redraws it on a terminal.
 * A running job whose agent waits for a permission answer is input_required.
 */
import { existsSync } from "node:fs";
import path from "node:path";

import { keptWorktrees, type KeptWorktree } from "../worktrees/retire.js";
import { sleep } from "../core/clock.js";
import { valueForReading } from "../core/text.js";
import { isFinishedStatus, type JobRecord } from "../store/records.js";
import type { LoadedRecords } from "../store/state-store.js";
import { pendingRequests, requestText, shownStatus, waitingForApproval, type ShownStatus } from "./approve.js";
import { emit, INTERRUPTED_EXIT, type Context } from "./context.js";
import { clip, formatAge, formatCost, isoTime, PREVIEW_COLUMN_CHARS, printable, shortenHome, table } from "./format.js";
import { progressOf } from "./job-output.js";
import { carriersText, carry, type Carriers } from "./carried.js";

/** `jobs` without --all: every unfinished job and this many of the most recently finished. */
export const RECENT_FINISHED = 20;

/** How often `jobs --watch` redraws. */
export const WATCH_INTERVAL_MS = 1000;

/** Cursor to the top left, then erase the screen: each redraw replaces the last. */
const CLEAR_SCREEN = "\u001b[H\u001b[2J";

interface JobRow {
  id: string;
  kind: JobRecord["kind"];
  /** The coding agent (§7): "claude" for records of earlier versions. */
  agent: string;
  /** The other machine it runs on (§21); absent for this one. */
  host?: string;
  status: ShownStatus;
  cwd: string;
  submitted_at: number;
  started_at?: number;
  finished_at?: number;
  age_s: number;
  turns: number;
  cost_usd?: number;
  session_id?: string;
  prompt_preview: string;
  /** While input_required: the requests waiting for an answer. */
  pending_approvals?: PendingApproval[];
}

interface PendingApproval {
  request_id: string;
  tool_name: string;
  preview: string;
}

export function listJobs(context: Context, all: boolean, carriers: Carriers = { carriedBy: [], waiting: 0 }): number {
  const { document, text } = jobsListing(context, all, carriers);
  emit(context, valueForReading(document), text);
  return 0;
}

/**
 * Redraws the table every WATCH_INTERVAL_MS on the injected clock until
 * io.interrupted aborts (without one, until the process is interrupted).
 */
export async function watchJobs(context: Context, all: boolean): Promise<number> {
  const { io } = context;
  const interrupted = io.interrupted;
  while (!interrupted?.aborted) {
    const carriers = await carry(context);
    const now = io.clock.now();
    const { text } = jobsListing({ ...context, now }, all, carriers);
    io.stdout.write(`${CLEAR_SCREEN}Every ${WATCH_INTERVAL_MS / 1000}s: claude-dispatch jobs${all ? " --all" : ""}  ${isoTime(now)}  (Ctrl-C to stop)\n\n${text}`);
    await sleep(io.clock, WATCH_INTERVAL_MS, interrupted);
  }
  return INTERRUPTED_EXIT;
}

function jobsListing(context: Context, all: boolean, carriers: Carriers): { document: unknown; text: string } {
  const { records, skipped } = context.store.loadAll();
  const shown = all ? records : unfinishedAndRecent(records);
  const rows = shown.map((record) => jobRow(context, record));
  const hidden = records.length - shown.length;
  const kept = keptWorktreesOf(context);
  const document = {
    state_dir: context.store.root,
    jobs: rows,
    hidden_finished: hidden,
    skipped,
    kept_worktrees: kept,
    carried_by: carriers.carriedBy,
    ...(carriers.waiting > 0 ? { not_carried: { jobs: carriers.waiting, why: carriers.why ?? null } } : {}),
  };
  // Read from the state directory, which anything running as the user can write: cleaned for the terminal (§10).
  return { document, text: printable(jobsText(context, rows, hidden, skipped) + carriersText(carriers) + keptText(kept)) };
}

/** Worktrees retention kept for their unmerged changes after their jobs were pruned (§19). */
export function keptWorktreesOf(context: Context): KeptWorktree[] {
  const configured = context.io.env.CLAUDE_DISPATCH_WORKTREE_DIR?.trim();
  const root = configured || path.join(context.store.root, "worktrees");
  return keptWorktrees(root, "dispatch/", (id) => existsSync(path.join(context.store.jobsDir, id)));
}

function keptText(kept: readonly KeptWorktree[]): string {
  return kept
    .map((worktree) => `(worktree ${printable(worktree.path)}, branch ${worktree.branch}, kept with changes after its job was pruned: merge it with git, or remove it with git worktree remove)\n`)
    .join("");
}

function jobsText(context: Context, rows: readonly JobRow[], hidden: number, skipped: LoadedRecords["skipped"]): string {
  const home = context.io.host?.home;
  const lines: string[] = [];
  if (rows.length === 0) lines.push(`No jobs in ${context.store.root}.`);
  else {
    // The AGENT column only once another agent than Claude Code ran a job listed.
    const agents = rows.some((row) => row.agent !== "claude");
    const cells = rows.map((row) => [
      row.id,
      ...(agents ? [printable(row.agent)] : []),
      row.status,
      formatAge(row.age_s * 1000),
      // A job on another machine shows where, as scp writes it: host:/path.
      printable(row.host ? `${row.host}:${row.cwd}` : shortenHome(row.cwd, home)),
      String(row.turns),
      row.cost_usd === undefined ? "-" : formatCost(row.cost_usd),
      row.session_id === undefined ? "-" : printable(row.session_id),
      clip(printable(row.prompt_preview), PREVIEW_COLUMN_CHARS),
    ]);
    const headers = ["ID", ...(agents ? ["AGENT"] : []), "STATUS", "AGE", "CWD", "TURNS", "COST", "SESSION", "PROMPT"];
    lines.push(...table(headers, cells, agents ? new Set([5, 6]) : new Set([4, 5])));
  }
  const waiting = rows.filter((row) => row.status === "input_required");
  lines.push(...waitingText(waiting));
  if (hidden > 0) lines.push(`(${hidden} older finished job${hidden === 1 ? "" : "s"} not shown; --all lists every job)`);
  for (const { id, reason } of skipped) lines.push(`(skipped ${id}: ${reason})`);
  return `${lines.join("\n")}\n`;
}

/** Under the table: each request waiting for an answer, and how to give it. */
function waitingText(waiting: readonly JobRow[]): string[] {
  return waiting.flatMap((row) =>
    (row.pending_approvals ?? []).map((request) => `(job ${row.id} is ${waitingForApproval(row.id, request.request_id, clip(requestText(request), PREVIEW_COLUMN_CHARS))})`),
  );
}

/** Every queued or running job, and the most recently finished ones; oldest first, as loadAll sorts them. */
function unfinishedAndRecent(records: readonly JobRecord[]): JobRecord[] {
  const recent = new Set(
    records
      .filter((record) => isFinishedStatus(record.status))
      .sort((a, b) => (b.finished_at ?? b.submitted_at) - (a.finished_at ?? a.submitted_at))
      .slice(0, RECENT_FINISHED),
  );
  return records.filter((record) => !isFinishedStatus(record.status) || recent.has(record));
}

function jobRow(context: Context, record: JobRecord): JobRow {
  const { turns, costUsd, sessionId } = progressOf(context.store, record);
  // Only a running job can wait for an answer: the others' folders are not read for it.
  const approvals = record.status === "running" ? context.store.approvals(record.id) : [];
  const status = shownStatus(record, approvals);
  const row: JobRow = {
    id: record.id,
    kind: record.kind,
    agent: record.runtime ?? "claude",
    ...(record.host !== undefined && record.host !== "local" ? { host: record.host } : {}),
    status,
    cwd: record.cwd,
    submitted_at: record.submitted_at,
    age_s: Math.max(0, Math.round((context.now - record.submitted_at) / 1000)),
    turns,
    prompt_preview: record.prompt_preview,
  };
  if (record.started_at !== undefined) row.started_at = record.started_at;
  if (record.finished_at !== undefined) row.finished_at = record.finished_at;
  if (costUsd !== undefined) row.cost_usd = costUsd;
  if (sessionId !== undefined) row.session_id = sessionId;
  if (status === "input_required") {
    row.pending_approvals = pendingRequests(record, approvals).map(({ request }) => ({ request_id: request.id, tool_name: request.tool_name, preview: request.preview }));
  }
  return row;
}
