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
import { DEFAULT_TERMINAL_COLUMNS, emit, filesHere, INTERRUPTED_EXIT, outputWidth, type Context } from "./context.js";
import {
  clip,
  elideEnd,
  fitTable,
  formatAge,
  formatCost,
  isoTime,
  PREVIEW_COLUMN_CHARS,
  printable,
  shortenHome,
  wrap,
} from "./format.js";
import { openScreen } from "./terminal.js";
import { progressOf } from "./job-output.js";
import { carriersText, carry, type Carriers } from "./carried.js";

/** `jobs` without --all: every unfinished job and this many of the most recently finished. */
export const RECENT_FINISHED = 20;

/** How often `jobs --watch` redraws. */
export const WATCH_INTERVAL_MS = 1000;

/** A terminal that does not say how tall it is. */
const DEFAULT_TERMINAL_ROWS = 24;
/** When the width is short (§17): the directory cut in its middle, the prompt at its end. */
const CUT_COLUMNS = { CWD: "middle", PROMPT: "end" } as const;
/** Then these go, in this order; the id and the status stay. */
const LEFT_OUT_FIRST = ["SESSION", "TURNS", "COST", "AGENT", "CWD"];

interface JobRow {
  id: string;
  kind: JobRecord["kind"];
  /** The coding agent (§7), as the record names it. */
  agent: string;
  /** The other machine it runs on (§21); absent for this one. */
  host: string;
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

export async function listJobs(
  context: Context,
  all: boolean,
  carriers: Carriers = { carriedBy: [], waiting: 0 },
): Promise<number> {
  const listing = jobsListing(context, all, carriers, outputWidth(context.io), await filesHere(context.io));
  emit(context, valueForReading(listing.document), `${[...listing.table, ...listing.notes].join("\n")}\n`);
  return 0;
}

/**
 * Redraws the table every WATCH_INTERVAL_MS on the injected clock, in place on the terminal, until q (exit 0),
 * Ctrl-C or io.interrupted (130); the terminal is given back however it ends.
 */
export async function watchJobs(context: Context, all: boolean): Promise<number> {
  const { io } = context;
  const stop = new AbortController();
  let exitCode = INTERRUPTED_EXIT;
  const quit = (code: number): void => {
    if (stop.signal.aborted) return;
    exitCode = code;
    stop.abort();
  };
  const interrupted = (): void => quit(INTERRUPTED_EXIT);
  io.interrupted?.addEventListener("abort", interrupted);
  if (io.interrupted?.aborted) interrupted();
  const screen = openScreen(io, quit);
  const here = await filesHere(context.io);
  try {
    while (!stop.signal.aborted) {
      const carriers = await carry(context);
      const now = io.clock.now();
      const size = io.terminalSize?.();
      const width = outputWidth(io) ?? DEFAULT_TERMINAL_COLUMNS;
      const listing = jobsListing({ ...context, now }, all, carriers, width, here);
      const every = `every ${WATCH_INTERVAL_MS / 1000}s`;
      const title = `claude-dispatch jobs${all ? " --all" : ""} · ${every} · ${isoTime(now)} · q to quit`;
      screen.draw(withinRows(elideEnd(title, width), listing, size?.rows || DEFAULT_TERMINAL_ROWS, width));
      await sleep(io.clock, WATCH_INTERVAL_MS, stop.signal);
    }
  } finally {
    io.interrupted?.removeEventListener("abort", interrupted);
    screen.close();
  }
  return exitCode;
}

/**
 * A screen of at most `rows` lines: the title and the table's header always, then as many of the newest jobs
 * as fit (a line says how many earlier ones are not), then the notes.
 */
function withinRows(title: string, listing: Listing, rows: number, width: number): string[] {
  const [header, ...jobRows] = listing.table;
  const top = [title, "", ...(header === undefined ? [] : [header])];
  const room = rows - top.length - listing.notes.length;
  if (jobRows.length <= room) return [...top, ...jobRows, ...listing.notes];
  // One row's room goes to the line that says what is not shown.
  const shown = room > 1 ? jobRows.slice(jobRows.length - (room - 1)) : [];
  const hidden = jobRows.length - shown.length;
  const notShown = `(${hidden} earlier job${hidden === 1 ? "" : "s"} not shown: a taller terminal shows them)`;
  return [...top, elideEnd(notShown, width), ...shown, ...listing.notes].slice(0, rows);
}

/** What `jobs` says: the document for --json; for text, the table and the notes under it, fitted to the width. */
interface Listing {
  document: unknown;
  table: string[];
  notes: string[];
}

function jobsListing(
  context: Context,
  all: boolean,
  carriers: Carriers,
  width: number | undefined,
  here: (host: string) => boolean,
): Listing {
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
  const { lines, leftOut } = jobsTable(context, rows, width, here);
  const said = [
    ...(rows.length === 0 ? [`No jobs in ${context.store.root}.`] : []),
    ...(leftOut.length > 0 ? [`(not shown at ${width} columns: ${leftOut.join(", ")}; --json has them)`] : []),
    ...notesText(rows, hidden, skipped),
    ...`${carriersText(carriers)}${keptText(kept)}`.split("\n").filter((line) => line !== ""),
  ];
  // Read from the state directory, which anything running as the user can write: cleaned for the terminal (§10).
  return { document, table: lines, notes: said.flatMap((line) => wrap(printable(line), width)) };
}

/** Worktrees retention kept for their unmerged changes after their jobs were pruned (§19). */
export function keptWorktreesOf(context: Context): KeptWorktree[] {
  const configured = context.io.env.CLAUDE_DISPATCH_WORKTREE_DIR?.trim();
  const root = configured || path.join(context.store.root, "worktrees");
  return keptWorktrees(root, "dispatch/", (id) => existsSync(path.join(context.store.jobsDir, id)));
}

function keptText(kept: readonly KeptWorktree[]): string {
  return kept
    .map(
      (worktree) =>
        `(worktree ${printable(worktree.path)}, branch ${worktree.branch}, kept with changes after its job was ` +
        `pruned: merge it with git, or remove it with git worktree remove)\n`,
    )
    .join("");
}

/** The table of jobs, fitted to the width: ids, statuses and numbers whole, the directory and prompt cut (§17). */
function jobsTable(
  context: Context,
  rows: readonly JobRow[],
  width: number | undefined,
  here: (host: string) => boolean,
): ReturnType<typeof fitTable> {
  if (rows.length === 0) return { lines: [], leftOut: [] };
  const home = context.io.machine.home;
  // The AGENT column only once the jobs listed ran more than one agent.
  const agents = new Set(rows.map((row) => row.agent)).size > 1;
  const cells = rows.map((row) => [
    row.id,
    ...(agents ? [printable(row.agent)] : []),
    row.status,
    formatAge(row.age_s * 1000),
    // A job on another machine shows where, as scp writes it: host:/path.
    printable(here(row.host) ? shortenHome(row.cwd, home) : `${row.host}:${row.cwd}`),
    String(row.turns),
    row.cost_usd === undefined ? "-" : formatCost(row.cost_usd),
    row.session_id === undefined ? "-" : printable(row.session_id),
    clip(printable(row.prompt_preview), PREVIEW_COLUMN_CHARS),
  ]);
  const headers = ["ID", ...(agents ? ["AGENT"] : []), "STATUS", "AGE", "CWD", "TURNS", "COST", "SESSION", "PROMPT"];
  const numbers = agents ? new Set([5, 6]) : new Set([4, 5]);
  return fitTable(headers, cells, numbers, { width, elide: CUT_COLUMNS, leaveOut: LEFT_OUT_FIRST });
}

/** Under the table: who waits for an answer, how many finished jobs are not listed, which records were skipped. */
function notesText(rows: readonly JobRow[], hidden: number, skipped: LoadedRecords["skipped"]): string[] {
  const lines = waitingText(rows.filter((row) => row.status === "input_required"));
  if (hidden > 0)
    lines.push(`(${hidden} older finished job${hidden === 1 ? "" : "s"} not shown; --all lists every job)`);
  for (const { id, reason } of skipped) lines.push(`(skipped ${id}: ${reason})`);
  return lines;
}

/** Under the table: each request waiting for an answer, and how to give it. */
function waitingText(waiting: readonly JobRow[]): string[] {
  return waiting.flatMap((row) =>
    (row.pending_approvals ?? []).map(
      (request) =>
        `(job ${row.id} is ` +
        `${waitingForApproval(row.id, request.request_id, clip(requestText(request), PREVIEW_COLUMN_CHARS))})`,
    ),
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
  const status = shownStatus(record, approvals, context.now);
  const row: JobRow = {
    id: record.id,
    kind: record.kind,
    agent: record.runtime,
    host: record.host,
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
    row.pending_approvals = pendingRequests(record, approvals, context.now).map(({ request }) => ({
      request_id: request.id,
      tool_name: request.tool_name,
      preview: request.preview,
    }));
  }
  return row;
}
