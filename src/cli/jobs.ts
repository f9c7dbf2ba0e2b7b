/**
 * `jobs [--all]` (PROTOCOL.md §17): a table of the queued and running jobs
 * and the most recently finished ones (`--all`: every job).
 */
import { isFinishedStatus, type JobRecord } from "../store/records.js";
import type { LoadedRecords } from "../store/state-store.js";
import { emit, type Context } from "./context.js";
import { clip, formatAge, formatCost, PREVIEW_COLUMN_CHARS, printable, shortenHome, table } from "./format.js";
import { progressOf } from "./job-output.js";

/** `jobs` without --all: every unfinished job and this many of the most recently finished. */
export const RECENT_FINISHED = 20;

interface JobRow {
  id: string;
  kind: JobRecord["kind"];
  status: JobRecord["status"];
  cwd: string;
  submitted_at: number;
  started_at?: number;
  finished_at?: number;
  age_s: number;
  turns: number;
  cost_usd?: number;
  prompt_preview: string;
}

export function listJobs(context: Context, all: boolean): number {
  const { records, skipped } = context.store.loadAll();
  const shown = all ? records : unfinishedAndRecent(records);
  const rows = shown.map((record) => jobRow(context, record));
  const hidden = records.length - shown.length;
  const document = { state_dir: context.store.root, jobs: rows, hidden_finished: hidden, skipped };
  emit(context, document, jobsText(context, rows, hidden, skipped));
  return 0;
}

function jobsText(context: Context, rows: readonly JobRow[], hidden: number, skipped: LoadedRecords["skipped"]): string {
  const home = context.io.host?.home;
  const lines: string[] = [];
  if (rows.length === 0) lines.push(`No jobs in ${context.store.root}.`);
  else {
    const cells = rows.map((row) => [
      row.id,
      row.status,
      formatAge(row.age_s * 1000),
      printable(shortenHome(row.cwd, home)),
      String(row.turns),
      row.cost_usd === undefined ? "-" : formatCost(row.cost_usd),
      printable(clip(row.prompt_preview, PREVIEW_COLUMN_CHARS)),
    ]);
    lines.push(...table(["ID", "STATUS", "AGE", "CWD", "TURNS", "COST", "PROMPT"], cells, new Set([4, 5])));
  }
  if (hidden > 0) lines.push(`(${hidden} older finished job${hidden === 1 ? "" : "s"} not shown; --all lists every job)`);
  for (const { id, reason } of skipped) lines.push(`(skipped ${id}: ${reason})`);
  return `${lines.join("\n")}\n`;
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
  const { turns, costUsd } = progressOf(context.store, record);
  const row: JobRow = {
    id: record.id,
    kind: record.kind,
    status: record.status,
    cwd: record.cwd,
    submitted_at: record.submitted_at,
    age_s: Math.max(0, Math.round((context.now - record.submitted_at) / 1000)),
    turns,
    prompt_preview: record.prompt_preview,
  };
  if (record.started_at !== undefined) row.started_at = record.started_at;
  if (record.finished_at !== undefined) row.finished_at = record.finished_at;
  if (costUsd !== undefined) row.cost_usd = costUsd;
  return row;
}
