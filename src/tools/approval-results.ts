/**
 * What tools say of permission requests (PROTOCOL.md §18): the requests a job
 * waits on, how to answer them, every request with its input, and
 * claude_respond's answer.
 */
import { answererText } from "../jobs/approvals.js";
import { shownStatus, type Job } from "../jobs/registry.js";
import { forReading, forReadingOnOneLine } from "../core/text.js";
import type { ReportStatus } from "./definitions.js";
import type { ApprovalAnswer } from "../store/approvals.js";
import type { ApprovalSummary } from "../store/records.js";
import { toolResult, withNext, type CallToolResult } from "./tool-result.js";

/** A permission request waiting for an answer, as reports name it (§18). */
export interface PendingApproval {
  request_id: string;
  tool_name: string;
  preview: string;
  waited_s: number;
  expires_in_s: number;
}

/** A report lists at most this many pending requests, the oldest (§5.5); claude_output pages them all. */
export const PENDING_LISTED = 5;

export type PendingReport = Pick<Responded, "pending_approvals" | "pending_total">;

/**
 * The report's `pending_approvals`, and `pending_total` when it lists only some of them. The summaries' text
 * was cleaned when their requests were read (jobs/approvals.ts summaryOf, §10).
 */
export function pendingReport(approvals: readonly ApprovalSummary[], now: number): PendingReport {
  if (approvals.length === 0) return {};
  const listed = approvals.slice(0, PENDING_LISTED).map((approval) => ({
    request_id: approval.id,
    tool_name: approval.tool_name,
    preview: approval.preview,
    waited_s: Math.max(0, Math.round((now - approval.asked_at) / 1000)),
    expires_in_s: Math.max(0, Math.round((approval.expires_at - now) / 1000)),
  }));
  const total = approvals.length > listed.length ? { pending_total: approvals.length } : {};
  return { pending_approvals: listed, ...total };
}

/** The pending requests a report lists, a line each, and how many more wait. */
export function pendingLines(pending: readonly PendingApproval[], total = pending.length): string {
  const lines = pending.map((request) => {
    const unless = `denied in ${request.expires_in_s}s unless answered`;
    return `  request ${request.request_id}: ${request.preview} (${unless})`;
  });
  if (total > pending.length) lines.push(`  … and ${total - pending.length} more`);
  return lines.join("\n");
}

/** A claude_run whose client could not be asked had its requests denied at once (§18): say how to get them asked. */
export function unaskedHint(job: Job): string | undefined {
  if (!job.approvals.some((approval) => approval.by === "server" && approval.decision === "deny")) return undefined;
  return (
    "Permission requests were denied at once because this claude_run call cannot ask anyone; for work that " +
    "needs approvals, use claude_start, then claude_wait and claude_respond."
  );
}

/** How to answer the requests a job waits on; with more than are listed, where the rest are. */
export function respondHint(job: Job, pending: readonly PendingApproval[], total = pending.length): string {
  const first = pending[0];
  const which = first ? `request_id "${first.request_id}"` : "the request_id";
  const answer = `call claude_respond with job_id "${job.id}", ${which} and decision "allow" or "deny"`;
  if (total <= pending.length) {
    return `Ask the user whether to allow it, then ${answer} (claude_output view "approvals" shows the whole input).`;
  }
  return (
    `${total} requests wait; the first ${pending.length} are listed. Ask the user about each, then ${answer}; ` +
    `claude_output with job_id "${job.id}" and view "approvals" pages through all of them with their whole inputs.`
  );
}

/** Every request of the job with its whole input and its answer, as claude_output's "approvals" view pages it. */
export function approvalsText(job: Job): string {
  const known = new Map(job.approvals.map((summary) => [summary.id, summary]));
  return job
    .approvalDetails()
    .map(({ request, answer }) => {
      const unanswered = job.status === "running" ? "pending" : "unanswered";
      const state = answer ? answerState(answer, known.get(request.id)) : unanswered;
      // Read from the files: the tool's name and input are the model's, a message a person's or the file's (§10).
      const input = forReading(JSON.stringify(request.input, null, 2));
      return `request ${request.id} · ${forReadingOnOneLine(request.tool_name)} · ${state}\n${input}\n`;
    })
    .join("\n");
}

function answerState(answer: ApprovalAnswer, summary: ApprovalSummary | undefined): string {
  const message = answer.message ? `: ${forReadingOnOneLine(answer.message)}` : "";
  return `${answer.decision} (${answererText(summary, answer)})${message}`;
}

export interface Responded {
  status: "answered";
  job_id: string;
  request_id: string;
  decision: "allow" | "deny";
  tool_name: string;
  preview: string;
  job_status: ReportStatus;
  pending_approvals?: PendingApproval[];
  pending_total?: number;
  next?: string;
}

/** claude_respond's answer: what was decided, and what the job does now (§18). */
export function renderResponded(job: Job, answered: ApprovalSummary, now: number): CallToolResult<Responded> {
  const decision = answered.decision ?? "deny";
  const report: Responded = {
    status: "answered",
    job_id: job.id,
    request_id: answered.id,
    decision,
    tool_name: answered.tool_name,
    preview: answered.preview,
    job_status: shownStatus(job),
    ...pendingReport(job.pendingApprovals(), now),
  };
  const next = report.pending_approvals
    ? respondHint(job, report.pending_approvals, report.pending_total)
    : `Call claude_wait with job_id "${job.id}" to follow the job.`;
  const verb = decision === "allow" ? "Allowed" : "Denied";
  const text = `${verb} request ${answered.id} of job ${job.id} (${answered.preview}). ${next}`;
  return toolResult(text, withNext(report, next), false);
}
