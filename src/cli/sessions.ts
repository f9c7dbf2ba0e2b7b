/**
 * `sessions [DIR] [--limit N]`: the Claude Code sessions of a directory, read
 * from Claude Code's own store (runtimes/claude/sessions.ts), most recently
 * active first, each with the jobs of the state directory that ran in it, so
 * yesterday's work can be resumed by passing its session_id to claude_start.
 * What claude_sessions lists (§20), found by the same code: the sessions of
 * jobs that ran in worktrees of DIR's repository too.
 */
import { DispatchError } from "../core/errors.js";
import { valueForReading } from "../core/text.js";
import { claudeConfigDir, claudeSessionFolder, listClaudeSessions, type ClaudeSession } from "../runtimes/claude/index.js";
import { realDirectory } from "../runtimes/claude/sessions.js";
import type { JobRecord } from "../store/records.js";
import { findSessions, type SessionJob } from "../tools/session-results.js";
import { emit, outputWidth, type Context } from "./context.js";
import { clip, formatAge, PREVIEW_COLUMN_CHARS, printable, table, wrap } from "./format.js";

export interface SessionsRequest {
  /** Absolute: resolved against the command's directory already. */
  dir: string;
  limit: number;
}

interface SessionRow extends ClaudeSession {
  /** The job's worktree folder it was found under, when not under DIR itself. */
  worktree?: string;
  /** Jobs of the state directory that resumed this session or ended in it, oldest first. */
  job_ids: string[];
}

export async function listSessions(context: Context, request: SessionsRequest): Promise<number> {
  const { io } = context;
  const home = io.host?.home;
  if (!io.env.CLAUDE_CONFIG_DIR && !home) throw new DispatchError("INVALID_ARGUMENT", "no home directory to find ~/.claude in; set CLAUDE_CONFIG_DIR");
  const configDir = claudeConfigDir(io.env, home ?? "");
  const projectFolder = claudeSessionFolder(configDir, request.dir);
  const list = (cwd: string, limit: number): ClaudeSession[] => listClaudeSessions({ configDir, cwd, limit });
  const jobs = context.store.loadAll().records.map(sessionJob);
  const found = await findSessions(list, realDirectory(request.dir), request.limit, jobs);
  const sessions = found.map(({ session, worktree, job_ids }): SessionRow => ({ ...session, ...(worktree ? { worktree } : {}), job_ids }));
  const document = { dir: request.dir, project_folder: projectFolder, sessions };
  emit(context, valueForReading(document), sessionsText(context, request.dir, projectFolder, sessions));
  return 0;
}

/** A job as the listing needs it: a worktree's repository is compared with DIR's real path, as git names it. */
function sessionJob(record: JobRecord): SessionJob {
  return {
    id: record.id,
    cwd: record.cwd,
    submittedAt: record.submitted_at,
    ...(record.worktree && (record.host ?? "local") === "local" ? { worktreeRepo: record.worktree.repo } : {}),
    sessionIds: [record.resume_session_id, record.outcome?.result?.sessionId],
  };
}

function sessionsText(context: Context, dir: string, projectFolder: string, sessions: readonly SessionRow[]): string {
  if (sessions.length === 0) return `No Claude Code sessions of ${printable(dir)} (looked in ${printable(projectFolder)}).\n`;
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
  lines.push(...wrap(`(to resume one, pass its session id as session_id to claude_start, with cwd ${printable(dir)})`, width));
  return `${lines.join("\n")}\n`;
}
