/**
 * claude_sessions' answer (PROTOCOL.md §20).
 */
import { toolResult, withNext, type CallToolResult } from "./tool-result.js";

export interface ListedSession {
  session_id: string;
  started_at: string;
  last_active_at: string;
  first_prompt: string;
  prompts: number;
  prompts_exact: boolean;
  worktree?: string;
  job_ids: string[];
}

/** claude_sessions (§20): newest first, each with the jobs that used it and how to go on from it. */
export function renderSessions(cwd: string, sessions: readonly ListedSession[]): CallToolResult<{ status: "listed"; cwd: string; sessions: ListedSession[]; next?: string }> {
  const lines = sessions.map(
    (session) =>
      `${session.session_id}  last active ${session.last_active_at}  ${session.prompts}${session.prompts_exact ? "" : "+"} prompt${session.prompts === 1 && session.prompts_exact ? "" : "s"}  "${session.first_prompt}"` +
      `${session.worktree ? `  (worktree ${session.worktree})` : ""}${session.job_ids.length ? `  jobs ${session.job_ids.join(", ")}` : ""}`,
  );
  const report: { status: "listed"; cwd: string; sessions: ListedSession[]; next?: string } = { status: "listed", cwd, sessions: [...sessions] };
  const first = sessions[0];
  const next = first ? `To continue one, call claude_start with cwd "${cwd}" and its session_id, such as "${first.session_id}".` : undefined;
  withNext(report, next);
  const text = sessions.length === 0 ? `No Claude Code sessions of ${cwd}.` : `${sessions.length} Claude Code session${sessions.length === 1 ? "" : "s"} of ${cwd}, most recently active first:\n${lines.join("\n")}\n${next ?? ""}`;
  return toolResult(text, report, false);
}
