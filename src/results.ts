/**
 * Renders jobs and failures as CallToolResults (PROTOCOL.md §5.5): a readable
 * text block plus structuredContent matching OUTPUT_SCHEMA. The result text
 * is inside structuredContent too, because some hosts show the model only that.
 */
import type { AgentResult } from "./claude.js";
import { formatError, type DispatchError, type ErrorCode } from "./errors.js";
import type { Job } from "./jobs.js";
import type { ReportStatus } from "./tools.js";

export interface Report {
  status: ReportStatus;
  job_id?: string;
  session_id?: string;
  result?: string;
  cost_usd?: number;
  num_turns?: number;
  duration_ms?: number;
  elapsed_s?: number;
  already_finished?: boolean;
  permission_denials?: Array<{ tool_name: string; tool_input?: unknown }>;
  api_error_status?: number;
  error?: { code: ErrorCode; detail: string };
}

export interface CallToolResult {
  content: Array<{ type: "text"; text: string }>;
  structuredContent: Report;
  isError?: true;
}

function toolResult(text: string, report: Report, isError: boolean): CallToolResult {
  return { content: [{ type: "text", text }], structuredContent: report, ...(isError ? { isError: true as const } : {}) };
}

/** Seconds since start; frozen at the finish so a finished job's age does not grow on every call. */
function elapsedSeconds(job: Job, now: number): number {
  return Math.max(0, Math.round(((job.finishedAt ?? now) - job.startedAt) / 1000));
}

function withAgentResult(report: Report, result: AgentResult | undefined): Report {
  if (!result) return report;
  if (result.sessionId !== undefined) report.session_id = result.sessionId;
  if (result.text !== undefined) report.result = result.text;
  if (result.costUsd !== undefined) report.cost_usd = result.costUsd;
  if (result.numTurns !== undefined) report.num_turns = Math.round(result.numTurns);
  if (result.durationMs !== undefined) report.duration_ms = Math.round(result.durationMs);
  if (result.permissionDenials) report.permission_denials = result.permissionDenials;
  if (result.apiErrorStatus !== undefined) report.api_error_status = result.apiErrorStatus;
  return report;
}

export function jobReport(job: Job, now: number): Report {
  const report: Report = { status: job.status, job_id: job.id, elapsed_s: elapsedSeconds(job, now) };
  const outcome = job.outcome;
  if (!outcome) return report;
  withAgentResult(report, outcome.result);
  if (!outcome.ok && job.status === "failed") report.error = { code: outcome.code, detail: outcome.detail };
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

const REASON_TEXT = {
  claude_kill: "by claude_kill",
  cancelled: "because its request was cancelled",
  shutdown: "because the server shut down",
  timeout: "at its timeout",
} as const;

/** The report for claude_wait and claude_run. `forRun`: a killed run is a failure of that call. */
export function renderJob(job: Job, now: number, forRun = false): CallToolResult {
  const report = jobReport(job, now);
  const seconds = report.elapsed_s ?? 0;
  switch (job.status) {
    case "running":
      return toolResult(
        `Job ${job.id} is still running (${seconds}s elapsed). Call claude_wait again with job_id "${job.id}" to keep waiting, or claude_kill to stop it.`,
        report,
        false,
      );
    case "completed": {
      const line = facts(report);
      const resumeHint = report.session_id ? " Pass session_id to continue this conversation." : "";
      return toolResult(
        `Job ${job.id} completed in ${seconds}s${line ? ` · ${line}` : ""}.${resumeHint}${denialsText(report)}\n\n${report.result ?? ""}`,
        report,
        false,
      );
    }
    case "failed": {
      const error = report.error ?? { code: "INTERNAL_ERROR" as const, detail: "failed without a reason" };
      const line = facts(report);
      return toolResult(
        `${formatError(error.code, error.detail)}\n(job ${job.id}, after ${seconds}s${line ? ` · ${line}` : ""})${denialsText(report)}`,
        report,
        true,
      );
    }
    case "killed": {
      const why = job.killReason ? REASON_TEXT[job.killReason] : "";
      const text = `Job ${job.id} was killed ${why} after ${seconds}s.`;
      if (!forRun) return toolResult(text, report, false);
      report.error = { code: "KILLED", detail: text };
      return toolResult(formatError("KILLED", text), report, true);
    }
  }
}

export function renderStarted(job: Job, now: number): CallToolResult {
  return toolResult(
    `Started job ${job.id}. Call claude_wait with job_id "${job.id}" to collect the result (each call waits up to 30s by default, 60s at most).`,
    jobReport(job, now),
    false,
  );
}

export function renderKill(job: Job, now: number, killed: boolean, survivors: readonly number[]): CallToolResult {
  const report = jobReport(job, now);
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
    return toolResult(`Job ${job.id} ended as ${job.status}${why} while being killed; its whole process tree is gone.`, report, false);
  }
  return toolResult(`Killed job ${job.id} after ${report.elapsed_s ?? 0}s; its whole process tree is gone.`, report, false);
}

export function renderFailure(error: DispatchError, jobId?: string): CallToolResult {
  const report: Report = { status: "error", error: { code: error.code, detail: error.message } };
  if (jobId !== undefined) report.job_id = jobId;
  return toolResult(formatError(error.code, error.message), report, true);
}
