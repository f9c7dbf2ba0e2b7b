/**
 * Renders jobs and failures as CallToolResults (PROTOCOL.md §5.5): a readable
 * text block plus structuredContent matching OUTPUT_SCHEMA. The result text
 * is inside structuredContent too, because some hosts show the model only that;
 * so is the next step (`next`), which Claude Code would otherwise never show its model.
 */
import type { AgentResult, LiveSummary } from "../agent/types.js";
import type { WorktreeChanges } from "../agent/worktree.js";
import { formatError, type DispatchError, type ErrorCode } from "../core/errors.js";
import { KILL_REASON_TEXT, shownStatus, type Job } from "../jobs/registry.js";
import { isJobId } from "../store/records.js";
import {
  approvalsText,
  pendingLines,
  pendingReport,
  respondHint,
  unaskedHint,
  type PendingApproval,
} from "./approval-results.js";
import type { ReportStatus } from "./definitions.js";
import { toolResult, withNext, type CallToolResult as ToolResult } from "./tool-result.js";
import { worktreeHint, worktreeReport, worktreeText, type WorktreeReport } from "./worktree-results.js";

/** A tool's answer; a job's report unless it says otherwise (PROTOCOL.md §5.5). */
export type CallToolResult<Structured = Report> = ToolResult<Structured>;
export type { PendingApproval } from "./approval-results.js";
export { renderResponded } from "./approval-results.js";
export {
  renderDiscarded,
  renderMerge,
  renderWorktreeDiff,
  worktreeReport,
  type WorktreeReport,
  type WorktreeResult,
} from "./worktree-results.js";
export { renderSessions, type ListedSession } from "./session-results.js";

export interface Report {
  status: ReportStatus;
  job_id?: string;
  session_id?: string;
  result?: string;
  truncated?: boolean;
  result_chars?: number;
  queue_position?: number;
  last_activity?: string;
  recent_text?: string;
  cost_usd?: number;
  num_turns?: number;
  duration_ms?: number;
  elapsed_s?: number;
  already_finished?: boolean;
  permission_denials?: Array<{ tool_name: string; tool_input?: unknown }>;
  api_error_status?: number;
  pending_approvals?: PendingApproval[];
  /** How many requests wait, when pending_approvals lists only the first of them (§5.5). */
  pending_total?: number;
  worktree?: WorktreeReport;
  error?: { code: ErrorCode; detail: string };
  /** What to call next, as one sentence naming the tool and its arguments (§5.5). */
  next?: string;
}

/** Seconds since start; frozen at the finish so a finished job's age does not grow on every call. */
export function elapsedSeconds(job: Job, now: number): number {
  return Math.max(0, Math.round(((job.finishedAt ?? now) - job.startedAt) / 1000));
}

function withAgentResult(report: Report, result: AgentResult | undefined, text: string | undefined): Report {
  if (!result) return report;
  if (result.sessionId !== undefined) report.session_id = result.sessionId;
  if (text !== undefined) report.result = text;
  if (result.costUsd !== undefined) report.cost_usd = result.costUsd;
  if (result.numTurns !== undefined) report.num_turns = Math.round(result.numTurns);
  if (result.durationMs !== undefined) report.duration_ms = Math.round(result.durationMs);
  if (result.permissionDenials) report.permission_denials = result.permissionDenials;
  if (result.apiErrorStatus !== undefined) report.api_error_status = result.apiErrorStatus;
  return report;
}

/** "turn 4 · Edit · src/app.ts": what a running job is doing, for progress and for claude_wait. */
export function activityLine(live: LiveSummary, elapsedS: number): string {
  const parts = [`${elapsedS}s`];
  if (live.turns > 0) parts.push(`turn ${live.turns}`);
  if (live.lastActivity === "tool" && live.lastTool) parts.push(live.lastTool);
  else if (live.lastActivity === "text") parts.push("writing");
  else parts.push("starting");
  return parts.join(" · ");
}

const RECENT_TEXT_CHARS = 300;

export function jobReport(job: Job, now: number, maxResultChars = Number.POSITIVE_INFINITY): Report {
  const report: Report = { status: shownStatus(job), job_id: job.id, elapsed_s: elapsedSeconds(job, now) };
  const outcome = job.outcome;
  if (!outcome) {
    const position = job.queuePosition();
    if (position !== undefined) report.queue_position = position;
    if (job.status === "running") {
      const live = job.live();
      if (live.sessionId) report.session_id = live.sessionId;
      report.num_turns = live.turns;
      if (live.costUsd !== undefined) report.cost_usd = live.costUsd;
      report.last_activity = activityLine(live, report.elapsed_s ?? 0);
      if (live.lastText) {
        const text = live.lastText.replace(/^\u2026/, "");
        report.recent_text = text.length > RECENT_TEXT_CHARS ? `…${text.slice(-RECENT_TEXT_CHARS)}` : live.lastText;
      }
      Object.assign(report, pendingReport(job.pendingApprovals(), now));
    }
    return report;
  }
  const head = job.resultHead(Number.isFinite(maxResultChars) ? maxResultChars : Number.MAX_SAFE_INTEGER);
  withAgentResult(report, outcome.result, head?.text);
  // Hosts drop replies past ~25k tokens; the rest stays readable through claude_output (§5.7).
  if (head !== undefined && head.chars > maxResultChars) {
    report.result_chars = head.chars;
    report.truncated = true;
  }
  if (!outcome.ok && (job.status === "failed" || job.status === "lost"))
    report.error = { code: outcome.code, detail: outcome.detail };
  return report;
}

function facts(report: Report): string {
  const parts: string[] = [];
  if (report.session_id) parts.push(`session_id ${report.session_id}`);
  if (report.cost_usd !== undefined) parts.push(`cost $${report.cost_usd.toFixed(4)}`);
  if (report.num_turns !== undefined) parts.push(`${report.num_turns} turn${report.num_turns === 1 ? "" : "s"}`);
  return parts.join(" · ");
}

function denialsText(report: Report): string {
  if (!report.permission_denials?.length) return "";
  const names = report.permission_denials.map((denial) => denial.tool_name).join(", ");
  return `\nPermission was denied for: ${names}. Those actions did not happen.`;
}

/*
 * Next steps. Each sentence is both the report's `next` and, where the text gives
 * that hint, part of the text, so the two cannot drift apart.
 */

function waitHint(jobId: string, stopVerb: "drop" | "stop"): string {
  return `Call claude_wait again with job_id "${jobId}" to keep waiting, or claude_kill to ${stopVerb} it.`;
}

function collectHint(jobId: string): string {
  return (
    `Call claude_wait with job_id "${jobId}" to collect the result (each call waits up to 30s by default, ` +
    `60s at most).`
  );
}

function readOnHint(jobId: string, offset: number, view: OutputPage["view"] = "result"): string {
  const viewPart = view === "result" ? "" : `, view "${view}"`;
  return `Call claude_output with job_id "${jobId}"${viewPart} and offset ${offset} for the rest.`;
}

function truncationHint(report: Report, jobId: string): string | undefined {
  return report.truncated ? readOnHint(jobId, report.result?.length ?? 0) : undefined;
}

/** After a failed, lost or (for claude_run) killed job: see what it did, then go on from its session. */
function failedJobHint(report: Report, job: Job): string {
  const code = report.error?.code;
  if (code === "SESSION_NOT_FOUND") {
    return (
      "Call claude_run or claude_start again with the same prompt and cwd but without session_id: " +
      `${job.agentName} does not know that session in this cwd.`
    );
  }
  // Nothing ran, so there is no transcript to read.
  if (code === "SPAWN_FAILED")
    return `Retrying fails the same way until ${job.agentName} can be started: tell the user what error.detail says.`;
  const look = `Call claude_output with job_id "${job.id}" and view "transcript" to see what the agent did.`;
  // A killed or timed-out agent printed no result, but its session was seen while it ran, and can be resumed.
  const sessionId = report.session_id ?? job.live().sessionId;
  const resume = sessionId
    ? `session_id "${sessionId}", the same cwd and a prompt saying what is left`
    : "the same prompt and cwd";
  if (code === "TIMEOUT") return `${look} To go on, call claude_start (it has no timeout) with ${resume}.`;
  return sessionId ? `${look} To go on from where it stopped, call claude_start with ${resume}.` : look;
}

const FAILURE_HINTS: Partial<Record<ErrorCode, string>> = {
  POLICY_DENIED:
    "Nothing was started. Change or leave out what error.detail says the operator's policy refuses, then call again.",
  JOB_NOT_FOUND: "Call claude_list (no arguments) to see the job_id of every job this server knows.",
  SHUTTING_DOWN: "Nothing was started. Call the same tool again in a moment, once the server has restarted.",
  DEPTH_LIMIT: "Do not retry: dispatch is off here. Do the task without claude-dispatch's tools.",
};

function failureHint(error: DispatchError): string | undefined {
  if (error.code !== "INVALID_ARGUMENT") return FAILURE_HINTS[error.code];
  // Validation messages start with the argument's name in quotes ("hold_ms" must be …), or say it is unknown.
  if (error.message.startsWith("unknown argument"))
    return "Call the same tool again without the unknown argument; error.detail lists the ones it takes.";
  const argument = /^"([a-z_]{1,40})"/.exec(error.message)?.[1];
  return (
    `Fix ${argument ? `"${argument}"` : "the argument error.detail names"} as error.detail says, then call the ` +
    `same tool again.`
  );
}

function truncationText(report: Report, jobId: string): string {
  const hint = truncationHint(report, jobId);
  if (!hint) return "";
  return `\n\n[Truncated: ${report.result?.length ?? 0} of ${report.result_chars ?? 0} characters shown. ${hint}]`;
}

export interface RenderOptions {
  /** A killed run is a failure of that call. */
  forRun?: boolean;
  maxResultChars?: number;
  /** What a finished job changed in its worktree, read for this report (§19). */
  worktreeChanges?: WorktreeChanges;
}

/** The report for claude_wait and claude_run. */
export function renderJob(
  job: Job,
  now: number,
  { forRun = false, maxResultChars, worktreeChanges }: RenderOptions = {},
): CallToolResult {
  const report = jobReport(job, now, maxResultChars);
  if (job.worktree) report.worktree = worktreeReport(job.worktree, worktreeChanges);
  const changesHint =
    report.worktree?.state === "active" && report.worktree.changed_files?.length ? worktreeHint(job.id) : undefined;
  const seconds = report.elapsed_s ?? 0;
  switch (job.status) {
    case "queued": {
      const next = waitHint(job.id, "drop");
      return toolResult(
        `Job ${job.id} is queued (position ${report.queue_position ?? "?"}, ${seconds}s so far): it starts when a ` +
          `running agent finishes. ${next}`,
        withNext(report, next),
        false,
      );
    }
    case "running": {
      const pending = report.pending_approvals;
      if (pending?.length) {
        const next = respondHint(job, pending, report.pending_total);
        const lines = pendingLines(pending, report.pending_total);
        return toolResult(
          `Job ${job.id} waits for permission (input_required, ${seconds}s so far):\n${lines}\n${next}`,
          withNext(report, next),
          false,
        );
      }
      const recent = report.recent_text ? `\nLatest text: ${report.recent_text}` : "";
      const next = waitHint(job.id, "stop");
      return toolResult(
        `Job ${job.id} is still running (${report.last_activity ?? `${seconds}s`}). ${next}${recent}`,
        withNext(report, next),
        false,
      );
    }
    case "completed": {
      const line = facts(report);
      const resumeHint = report.session_id ? " Pass session_id to continue this conversation." : "";
      const unasked = unaskedHint(job);
      return toolResult(
        `Job ${job.id} completed in ${seconds}s${line ? ` · ${line}` : ""}.${resumeHint}${denialsText(report)}` +
          (unasked ? `\n${unasked}` : "") +
          `${worktreeText(report.worktree, job.id)}\n\n${report.result ?? ""}${truncationText(report, job.id)}`,
        withNext(report, truncationHint(report, job.id), unasked, changesHint),
        false,
      );
    }
    case "failed":
    case "lost": {
      const error = report.error ?? { code: "INTERNAL_ERROR" as const, detail: "failed without a reason" };
      const line = facts(report);
      return toolResult(
        `${formatError(error.code, error.detail)}\n(job ${job.id}, after ${seconds}s${line ? ` · ${line}` : ""})` +
          `${denialsText(report)}${worktreeText(report.worktree, job.id)}${truncationText(report, job.id)}`,
        withNext(report, truncationHint(report, job.id), failedJobHint(report, job), changesHint),
        true,
      );
    }
    case "killed": {
      const why = job.killReason ? KILL_REASON_TEXT[job.killReason] : "";
      const text =
        `Job ${job.id} was killed ${why} after ` +
        `${seconds}s.${worktreeText(report.worktree, job.id)}${truncationText(report, job.id)}`;
      if (!forRun) return toolResult(text, withNext(report, truncationHint(report, job.id)), false);
      report.error = { code: "KILLED", detail: text };
      return toolResult(
        formatError("KILLED", text),
        withNext(report, truncationHint(report, job.id), failedJobHint(report, job)),
        true,
      );
    }
  }
}

export function renderStarted(job: Job, now: number): CallToolResult {
  const queued =
    job.status === "queued"
      ? `Queued job ${job.id} at position ${job.queuePosition() ?? "?"}: it starts when a running agent finishes. `
      : `Started job ${job.id}. `;
  const report = jobReport(job, now);
  if (job.worktree) report.worktree = worktreeReport(job.worktree);
  const next = collectHint(job.id);
  return toolResult(
    `${queued}${worktreeText(report.worktree, job.id).trim()}${report.worktree ? " " : ""}${next}`,
    withNext(report, next),
    false,
  );
}

export function renderKill(
  job: Job,
  now: number,
  killed: boolean,
  survivors: readonly number[],
  maxResultChars?: number,
): CallToolResult {
  const report = jobReport(job, now, maxResultChars);
  // The kill is done either way; what may be left to do is read the rest of a long result.
  withNext(report, truncationHint(report, job.id));
  if (!killed) {
    report.already_finished = true;
    delete report.error;
    return toolResult(`Job ${job.id} had already finished (${job.status}); nothing to kill.`, report, false);
  }
  if (survivors.length > 0) {
    const detail = `job ${job.id}: processes ${survivors.join(", ")} survived SIGKILL`;
    return toolResult(formatError("KILL_FAILED", detail), { ...report, error: { code: "KILL_FAILED", detail } }, true);
  }
  if (job.status !== "killed") {
    // Another stop (its timeout) got there first; the tree is gone all the same.
    const why = report.error ? ` (${report.error.code})` : "";
    return toolResult(
      `Job ${job.id} ended as ${job.status}${why} while being killed; its whole process tree is gone.`,
      report,
      false,
    );
  }
  if (!job.launched) return toolResult(`Removed job ${job.id} from the queue; it never started.`, report, false);
  return toolResult(
    `Killed job ${job.id} after ${report.elapsed_s ?? 0}s; its whole process tree is gone.`,
    report,
    false,
  );
}

export function renderFailure(error: DispatchError, jobId?: string): CallToolResult {
  const report: Report = { status: "error", error: { code: error.code, detail: error.message } };
  // Only a well-formed id is echoed: a caller's megabyte of garbage is not worth repeating.
  if (jobId !== undefined && isJobId(jobId)) report.job_id = jobId;
  return toolResult(formatError(error.code, error.message), withNext(report, failureHint(error)), true);
}

export interface OutputPage {
  status: ReportStatus;
  job_id: string;
  view: "result" | "transcript" | "approvals";
  offset: number;
  text: string;
  total_chars: number;
  next_offset?: number;
  dropped_chars?: number;
  /** The call that reads on, as for Report.next. */
  next?: string;
}

/** One page of a job's result or transcript (§5.7). Offsets count UTF-16 characters, as JavaScript strings do. */
export function renderOutputPage(
  job: Job,
  view: OutputPage["view"],
  offset: number,
  limit: number,
): CallToolResult<OutputPage> {
  let page: OutputPage;
  let note = "";
  const status = shownStatus(job);
  if (view === "approvals") {
    const whole = approvalsText(job);
    const from = Math.min(offset, whole.length);
    const text = whole.slice(from, from + limit);
    page = { status, job_id: job.id, view, offset: from, text, total_chars: whole.length };
    if (from + text.length < whole.length) page.next_offset = from + text.length;
    if (whole === "") note = `[Job ${job.id} has asked for no permission.]\n`;
  } else if (view === "transcript") {
    const slice = job.transcript.page(offset, limit);
    page = { status, job_id: job.id, view, offset: slice.offset, text: slice.text, total_chars: slice.end };
    if (slice.start > 0) page.dropped_chars = slice.start;
    if (offset < slice.start)
      note =
        `[The first ${slice.start} characters were dropped to keep the transcript small; starting at ` +
        `${slice.start}.]\n`;
    if (slice.offset + slice.text.length < slice.end) page.next_offset = slice.offset + slice.text.length;
  } else {
    const whole = job.resultText() ?? "";
    const from = Math.min(offset, whole.length);
    const text = whole.slice(from, from + limit);
    page = { status, job_id: job.id, view, offset: from, text, total_chars: whole.length };
    if (from + text.length < whole.length) page.next_offset = from + text.length;
    if (job.status === "running")
      note = `[Job ${job.id} is still running and has no result yet; view "transcript" shows what it has done.]\n`;
  }
  const readOn = page.next_offset === undefined ? undefined : readOnHint(job.id, page.next_offset, view);
  const noResultYet =
    view === "result" && (job.status === "queued" || job.status === "running")
      ? `It has no result yet: call claude_wait with job_id "${job.id}" to wait for it, or claude_output with job_id ` +
        `"${job.id}" and view "transcript" to see what it has done so far.`
      : undefined;
  withNext(page, readOn ?? noResultYet);
  const more = readOn === undefined ? "[End.]" : `[${readOn}]`;
  const header =
    `${view} of job ${job.id} (${status}), characters ${page.offset}–${page.offset + page.text.length} ` +
    `of ${page.total_chars}:\n`;
  return toolResult(`${note}${header}${page.text}\n${more}`, page, false);
}
