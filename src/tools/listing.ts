/**
 * claude_list's pages (PROTOCOL.md §5.7): the jobs of the state directory in the order of list-cursor.ts, filtered by
 * status and cut to the limit and to the result cap, the text and structuredContent each; `next` and next_cursor say
 * how to read on. However many jobs are kept, one page costs the host's model at most the cap.
 */
import { isUnfinished, sessionIdOf, shownStatus, type Job } from "../jobs/registry.js";
import { comparePositions, encodeCursor, type ListInput, type ListPosition } from "./list-cursor.js";
import { elapsedSeconds } from "./results.js";
import { toolResult, type CallToolResult } from "./tool-result.js";

export interface ListedJob {
  job_id: string;
  kind: "run" | "start";
  /** The coding agent that runs it (§7). */
  agent: string;
  /** The other machine it runs on (§21); absent for this one. */
  host?: string;
  status: ReturnType<typeof shownStatus>;
  cwd: string;
  elapsed_s: number;
  num_turns: number;
  prompt_preview: string;
  /** The conversation to continue, once the agent has said it. */
  session_id?: string;
  /** Set for a job another live server on the state directory started and still follows (§15.6). */
  other_server?: true;
}

export interface ListPage {
  status: "listed";
  jobs: ListedJob[];
  /** How many jobs match the filter, on every page. */
  total: number;
  next_cursor?: string;
  next?: string;
}

type ListResult = CallToolResult<ListPage>;

/** A directory this long is cut in its middle when its job alone would not fit in a page at the cap. */
const SQUEEZED_CWD_CHARS = 40;

function positionOf(job: Job): ListPosition {
  const active = isUnfinished(job);
  return { active, at: Math.round(active ? job.submittedAt : (job.finishedAt ?? job.submittedAt)), id: job.id };
}

/** What a call naming neither agent nor host gets: the text names only the others (§7.5, §21). */
export interface ListHome {
  agent?: string | undefined;
  host?: string | undefined;
}

function listedJob(job: Job, status: ListedJob["status"], now: number, home: ListHome): ListedJob {
  const sessionId = sessionIdOf(job);
  return {
    job_id: job.id,
    kind: job.kind,
    agent: job.agentName,
    ...(job.hostName === home.host ? {} : { host: job.hostName }),
    status,
    cwd: job.cwd,
    elapsed_s: elapsedSeconds(job, now),
    num_turns: Math.round(job.outcome?.result?.numTurns ?? job.live().turns),
    prompt_preview: job.promptPreview,
    ...(sessionId ? { session_id: sessionId } : {}),
    ...(job.elsewhere ? { other_server: true as const } : {}),
  };
}

function lineOf(job: ListedJob, home: ListHome): string {
  const where = `${job.agent === home.agent ? "" : ` (${job.agent})`}${job.host ? ` on ${job.host}` : ""}`;
  const session = job.session_id ? `  session ${job.session_id}` : "";
  const others = job.other_server ? "  (another server's)" : "";
  const facts =
    `${job.elapsed_s}s  ${job.num_turns} turn${job.num_turns === 1 ? "" : "s"}  ${job.cwd}  ` +
    `"${job.prompt_preview}"`;
  return `${job.job_id}  ${job.status}${where}  ${facts}${session}${others}`;
}

function squeezed(job: ListedJob): ListedJob {
  if (job.cwd.length <= SQUEEZED_CWD_CHARS) return job;
  const half = SQUEEZED_CWD_CHARS / 2;
  return { ...job, cwd: `${job.cwd.slice(0, half)}…${job.cwd.slice(-half)}` };
}

/**
 * A page: as many of input.limit jobs as fit in maxChars, the text and the structuredContent each; one at least, if
 * any is left.
 */
export function renderList(
  jobs: readonly Job[],
  now: number,
  input: ListInput,
  maxChars: number,
  home: ListHome = {},
): ListResult {
  const matching = jobs
    .map((job) => ({ job, status: shownStatus(job), position: positionOf(job) }))
    .filter((entry) => input.statuses === undefined || input.statuses.includes(entry.status))
    .sort((a, b) => comparePositions(a.position, b.position));
  const after = input.after;
  const found = after === undefined ? 0 : matching.findIndex((entry) => comparePositions(entry.position, after) > 0);
  const start = found === -1 ? matching.length : found;
  const candidates = matching.slice(start, start + input.limit);
  const frame = (shown: number): { page: ListPage; header: string; footer: string } => {
    const page: ListPage = { status: "listed", jobs: [], total: matching.length };
    const last = candidates[shown - 1];
    const remaining = matching.length - start - shown;
    if (last && remaining > 0) {
      page.next_cursor = encodeCursor(last.position, input.statuses, input.limit);
      page.next = `Call claude_list with cursor "${page.next_cursor}" for the next page (${remaining} more).`;
    }
    const header = headerOf(input, matching.length, start, shown);
    return { page, header, footer: page.next ? `\n[${page.next}]` : "" };
  };
  const listed: ListedJob[] = [];
  const lines: string[] = [];
  let jsonChars = 0;
  let textChars = 0;
  for (const candidate of candidates) {
    let job = listedJob(candidate.job, candidate.status, now, home);
    const { page, header, footer } = frame(listed.length + 1);
    const fits = (entry: ListedJob): boolean =>
      JSON.stringify(page).length + jsonChars + JSON.stringify(entry).length + listed.length <= maxChars &&
      header.length + textChars + lineOf(entry, home).length + 1 + footer.length <= maxChars;
    if (!fits(job)) {
      if (listed.length > 0) break;
      // Alone on its page and still too long: a very long directory, or a small cap (§5.7).
      job = squeezed(job);
    }
    const line = lineOf(job, home);
    listed.push(job);
    lines.push(line);
    jsonChars += JSON.stringify(job).length;
    textChars += line.length + 1;
  }
  const { page, header, footer } = frame(listed.length);
  page.jobs = listed;
  return toolResult(`${header}${lines.map((line) => `\n${line}`).join("")}${footer}`, page, false);
}

function headerOf(input: ListInput, total: number, start: number, shown: number): string {
  const which = input.statuses === undefined ? "" : `${input.statuses.join(" or ")} `;
  if (total === 0) return `No ${which}jobs.`;
  if (shown === 0) return `No ${which}jobs after the cursor; ${total} in all.`;
  const jobs = which === "" ? "Jobs" : `${which[0]?.toUpperCase()}${which.slice(1)}jobs`;
  return `${jobs} ${start + 1}–${start + shown} of ${total}, the active first, then the newest finished:`;
}
