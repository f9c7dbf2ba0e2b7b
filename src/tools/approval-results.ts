/**
 * What tools say of permission requests (PROTOCOL.md §18): the requests a job
 * waits on, how to answer them, every request with its input, and
 * claude_respond's answer.
 */
import { shownStatus, type Job } from "../jobs/registry.js";
import type { ReportStatus } from "./definitions.js";
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

export function pendingOf(approvals: readonly ApprovalSummary[], now: number): PendingApproval[] {
  return approvals.map((approval) => ({
    request_id: approval.id,
    tool_name: approval.tool_name,
    preview: approval.preview,
    waited_s: Math.max(0, Math.round((now - approval.asked_at) / 1000)),
    expires_in_s: Math.max(0, Math.round((approval.expires_at - now) / 1000)),
  }));
}

/** A claude_run whose client could not be asked had its requests denied at once (§18): say how to get them asked. */
export function unaskedHint(job: Job): string | undefined {
  if (!job.approvals.some((approval) => approval.by === "server" && approval.decision === "deny")) return undefined;
  return "Permission requests were denied at once because this claude_run call cannot ask anyone; for work that needs approvals, use claude_start, then claude_wait and claude_respond.";
}

/** How to answer the requests a job waits on. */
export function respondHint(job: Job, pending: readonly PendingApproval[]): string {
  const first = pending[0];
  const which = first ? `request_id "${first.request_id}"` : "the request_id";
  return `Ask the user whether to allow it, then call claude_respond with job_id "${job.id}", ${which} and decision "allow" or "deny" (claude_output view "approvals" shows the whole input).`;
}

/** Every request of the job with its whole input and its answer, as claude_output's "approvals" view pages it. */
export function approvalsText(job: Job): string {
  return job
    .approvalDetails()
    .map(({ request, answer }) => {
      const state = answer ? `${answer.decision} (by ${answer.by})${answer.message ? `: ${answer.message}` : ""}` : job.status === "running" ? "pending" : "unanswered";
      return `request ${request.id} · ${request.tool_name} · ${state}\n${JSON.stringify(request.input, null, 2)}\n`;
    })
    .join("\n");
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
  };
  const pending = job.pendingApprovals();
  if (pending.length > 0) report.pending_approvals = pendingOf(pending, now);
  const next = pending.length > 0 ? respondHint(job, report.pending_approvals ?? []) : `Call claude_wait with job_id "${job.id}" to follow the job.`;
  const verb = decision === "allow" ? "Allowed" : "Denied";
  return toolResult(`${verb} request ${answered.id} of job ${job.id} (${answered.preview}). ${next}`, withNext(report, next), false);
}

