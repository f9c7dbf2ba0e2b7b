/**
 * `sessions [DIR] [--limit N]`: the Claude Code sessions of a directory, read
 * from Claude Code's own store (runtimes/claude/sessions.ts), most recently
 * active first, each with the jobs of the state directory that ran in it, so
 * yesterday's work can be resumed by passing its session_id to claude_start.
 */
import { DispatchError } from "../core/errors.js";
import { valueForReading } from "../core/text.js";
import { claudeConfigDir, claudeSessionFolder, listClaudeSessions, type ClaudeSession } from "../runtimes/claude/index.js";
import type { JobRecord } from "../store/records.js";
import { emit, type Context } from "./context.js";
import { clip, formatAge, PREVIEW_COLUMN_CHARS, printable, table } from "./format.js";

export interface SessionsRequest {
  /** Absolute: resolved against the command's directory already. */
  dir: string;
  limit: number;
}

interface SessionRow extends ClaudeSession {
  /** Jobs of the state directory that resumed this session or ended in it, oldest first. */
  job_ids: string[];
}

export function listSessions(context: Context, request: SessionsRequest): number {
  const { io } = context;
  const home = io.host?.home;
  if (!io.env.CLAUDE_CONFIG_DIR && !home) throw new DispatchError("INVALID_ARGUMENT", "no home directory to find ~/.claude in; set CLAUDE_CONFIG_DIR");
  const configDir = claudeConfigDir(io.env, home ?? "");
  const projectFolder = claudeSessionFolder(configDir, request.dir);
  const jobs = jobsBySession(context.store.loadAll().records);
  const sessions: SessionRow[] = listClaudeSessions({ configDir, cwd: request.dir, limit: request.limit }).map((session) => ({
    ...session,
    job_ids: jobs.get(session.session_id) ?? [],
  }));
  const document = { dir: request.dir, project_folder: projectFolder, sessions };
  emit(context, valueForReading(document), sessionsText(context, request.dir, projectFolder, sessions));
  return 0;
}

/** A job belongs to the session it resumed and to the one its result names (the same, unless forked). */
function jobsBySession(records: readonly JobRecord[]): Map<string, string[]> {
  const bySession = new Map<string, string[]>();
  for (const record of records) {
    for (const sessionId of new Set([record.resume_session_id, record.outcome?.result?.sessionId])) {
      if (sessionId === undefined) continue;
      const ids = bySession.get(sessionId) ?? [];
      ids.push(record.id);
      bySession.set(sessionId, ids);
    }
  }
  return bySession;
}

function sessionsText(context: Context, dir: string, projectFolder: string, sessions: readonly SessionRow[]): string {
  if (sessions.length === 0) return `No Claude Code sessions of ${printable(dir)} (looked in ${printable(projectFolder)}).\n`;
  const lines: string[] = [];
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
  );
  lines.push(header);
  sessions.forEach((session, index) => {
    lines.push(rows[index] ?? "");
    if (session.job_ids.length > 0) lines.push(`  jobs: ${session.job_ids.join(", ")}`);
  });
  lines.push(`(to resume one, pass its session id as session_id to claude_start, with cwd ${printable(dir)})`);
  return `${lines.join("\n")}\n`;
}
