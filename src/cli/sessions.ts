/**
 * `sessions [DIR] [--limit N]`: the sessions of a directory, read from the
 * store of the agent CLI that keeps them (its runtime's sessions capability),
 * most recently active first, each with the jobs of the state directory that
 * ran in it, so yesterday's work can be resumed by passing its session_id to
 * claude_start. What claude_sessions lists (§20), found by the same code: the
 * sessions of jobs that ran in worktrees of DIR's repository too.
 */
import type { AgentSession } from "../agent/types.js";
import { valueForReading } from "../core/text.js";
import { sessionStore } from "../runtimes/all.js";
import type { JobRecord } from "../store/records.js";
import { findSessions, type SessionJob } from "../tools/session-results.js";
import { emit, filesHere, outputWidth, type Context } from "./context.js";
import { clip, formatAge, PREVIEW_COLUMN_CHARS, printable, table, wrap } from "./format.js";

export interface SessionsRequest {
  /** Absolute: resolved against the command's directory already. */
  dir: string;
  limit: number;
}

interface SessionRow extends AgentSession {
  /** The job's worktree folder it was found under, when not under DIR itself. */
  worktree?: string;
  /** Jobs of the state directory that resumed this session or ended in it, oldest first. */
  job_ids: string[];
}

export async function listSessions(context: Context, request: SessionsRequest): Promise<number> {
  const { io } = context;
  const store = sessionStore(io.env, io.machine.home);
  const projectFolder = store.folderOf(request.dir);
  const here = await filesHere(context.io);
  const jobs = context.store.loadAll().records.map((record) => sessionJob(record, here));
  const found = await findSessions(store.list, store.realPath(request.dir), request.limit, jobs);
  const sessions = found.map(({ session, worktree, job_ids }): SessionRow => ({
    ...session,
    ...(worktree ? { worktree } : {}),
    job_ids,
  }));
  const document = { dir: request.dir, project_folder: projectFolder, sessions };
  emit(context, valueForReading(document), sessionsText(context, request.dir, projectFolder, sessions, store.label));
  return 0;
}

/** A job as the listing needs it: a worktree's repository is compared with DIR's real path, as git names it. */
function sessionJob(record: JobRecord, here: (host: string) => boolean): SessionJob {
  return {
    id: record.id,
    cwd: record.cwd,
    submittedAt: record.submitted_at,
    // Only a worktree on this machine's disk holds sessions read here (§20).
    ...(record.worktree && here(record.host) ? { worktreeRepo: record.worktree.repo } : {}),
    sessionIds: [record.resume_session_id, record.outcome?.result?.sessionId],
  };
}

function sessionsText(
  context: Context,
  dir: string,
  folder: string,
  sessions: readonly SessionRow[],
  label: string,
): string {
  if (sessions.length === 0) return `No ${label} sessions of ${printable(dir)} (looked in ${printable(folder)}).\n`;
  const lines: string[] = [];
  const width = outputWidth(context.io);
  const [header = "", ...rows] = table(
    ["SESSION", "STARTED", "LAST ACTIVE", "TURNS", "FIRST PROMPT"],
    sessions.map((session) => [
      printable(session.session_id),
      formatAge(context.now - session.started_at),
      formatAge(context.now - session.last_active_at),
      // A lower bound: prompts in the unread middle of a long session are not counted.
      session.turns_exact ? String(session.turns) : `${session.turns}+`,
      clip(printable(session.first_prompt_preview), PREVIEW_COLUMN_CHARS),
    ]),
    new Set([3]),
    // As jobs: fitted to the terminal, the prompt cut first, the ages and turns left out before an id is cut (§17).
    { width, elide: { "FIRST PROMPT": "end" }, leaveOut: ["LAST ACTIVE", "STARTED", "TURNS"] },
  );
  lines.push(header);
  sessions.forEach((session, index) => {
    lines.push(rows[index] ?? "");
    if (session.worktree) lines.push(...wrap(`  worktree: ${printable(session.worktree)}`, width));
    if (session.job_ids.length > 0) lines.push(...wrap(`  jobs: ${session.job_ids.join(", ")}`, width));
  });
  lines.push(
    ...wrap(`(to resume one, pass its session id as session_id to claude_start, with cwd ${printable(dir)})`, width),
  );
  return `${lines.join("\n")}\n`;
}
