/**
 * claude_sessions' answer (PROTOCOL.md §20), and which sessions it lists: also
 * those of `claude-dispatch sessions`.
 */
import type { AgentSession } from "../agent/types.js";
import { toolResult, withNext, type CallToolResult } from "./tool-result.js";

/** What the listing needs of a job: where it ran, and the sessions it used. */
export interface SessionJob {
  id: string;
  /** The folder the agent ran in: inside its worktree, for a job in one. */
  cwd: string;
  submittedAt: number;
  /** The repository of the worktree it ran in, on this machine: this machine's store holds only its sessions (§21). */
  worktreeRepo?: string;
  /** The session it resumed and the one it ended in (the same, unless forked). */
  sessionIds: ReadonlyArray<string | undefined>;
}

export interface FoundSession<Session extends AgentSession> {
  session: Session;
  /** The job's worktree folder it was found under, when not under the directory itself. */
  worktree?: string;
  /** The jobs that used it, oldest first. */
  job_ids: string[];
}

/**
 * The sessions of a directory and of the worktrees that jobs of its repository ran in (§19, §20), most recently
 * active first, at most `limit`, each with the jobs that used it.
 */
export async function findSessions<Session extends AgentSession>(
  list: (dir: string, limit: number) => Session[] | Promise<Session[]>,
  dir: string,
  limit: number,
  jobs: readonly SessionJob[],
): Promise<Array<FoundSession<Session>>> {
  const ofRepository = jobs.filter((job) => job.worktreeRepo !== undefined && isInside(job.worktreeRepo, dir));
  const inWorktrees = await Promise.all(
    [...new Set(ofRepository.map((job) => job.cwd))].map(async (worktree) => {
      try {
        return (await list(worktree, limit)).map((session) => ({ session, worktree }));
      } catch {
        // A worktree discarded meanwhile has no sessions left to list.
        return [];
      }
    }),
  );
  const inDir = (await list(dir, limit)).map((session): { session: Session; worktree?: string } => ({ session }));
  const oldestFirst = [...jobs].sort((a, b) => a.submittedAt - b.submittedAt);
  const jobsOf = (sessionId: string): string[] =>
    oldestFirst.filter((job) => job.sessionIds.includes(sessionId)).map((job) => job.id);
  return [...inDir, ...inWorktrees.flat()]
    .sort((a, b) => b.session.last_active_at - a.session.last_active_at)
    .slice(0, limit)
    .map((entry) => ({ ...entry, job_ids: jobsOf(entry.session.session_id) }));
}

/** The directory is the repository's top, or inside it. */
function isInside(repo: string, dir: string): boolean {
  return dir === repo || dir.startsWith(`${repo}/`) || dir.startsWith(`${repo}\\`);
}

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
export function renderSessions(
  cwd: string,
  sessions: readonly ListedSession[],
): CallToolResult<{ status: "listed"; cwd: string; sessions: ListedSession[]; next?: string }> {
  const lines = sessions.map(
    (session) =>
      `${session.session_id}  last active ${session.last_active_at}  ` +
      `${session.prompts}${session.prompts_exact ? "" : "+"} ` +
      `prompt${session.prompts === 1 && session.prompts_exact ? "" : "s"}  "${session.first_prompt}"` +
      (session.worktree ? `  (worktree ${session.worktree})` : "") +
      (session.job_ids.length ? `  jobs ${session.job_ids.join(", ")}` : ""),
  );
  const report: { status: "listed"; cwd: string; sessions: ListedSession[]; next?: string } = {
    status: "listed",
    cwd,
    sessions: [...sessions],
  };
  const first = sessions[0];
  const next = first
    ? `To continue one, call claude_start with cwd "${cwd}" and its session_id, such as "${first.session_id}".`
    : undefined;
  withNext(report, next);
  const text =
    sessions.length === 0
      ? `No Claude Code sessions of ${cwd}.`
      : `${sessions.length} Claude Code session${sessions.length === 1 ? "" : "s"} of ${cwd}, most recently active ` +
        `first:\n${lines.join("\n")}\n${next ?? ""}`;
  return toolResult(text, report, false);
}
