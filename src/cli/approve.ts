/**
 * `approve ID [REQUEST]` and `deny ID [REQUEST] [--message M]` (PROTOCOL.md
 * §18): answers a permission request a running job's agent filed, by writing
 * its answer file, as claude_respond does; the first answer stands. Also how
 * `jobs`, `show` and `logs` name requests and who answered them: the request
 * files are the truth, since the owning server (and so the record) may be gone.
 */
import { DispatchError } from "../core/errors.js";
import type { AnsweredBy, Approval, ApprovalAnswer, Decision } from "../store/approvals.js";
import { isFinishedStatus, type ApprovalSummary, type JobRecord } from "../store/records.js";
import { emit, notFound, type Context } from "./context.js";
import { forReading, forReadingOnOneLine } from "../core/text.js";
import { clip } from "./format.js";

/** What `jobs` and `show` call a running job with a request waiting for an answer. */
export type ShownStatus = JobRecord["status"] | "input_required";

/**
 * Where a request stands: waiting, answered, left unanswered by a job that finished, or past its expiry with no
 * answer on file yet: nothing waits for one then (its approver denied it, or was gone), and the job's owner writes
 * the timeout's denial soon after (§18).
 */
export type RequestState = "pending" | "answered" | "unanswered" | "expired";

/** A preview in an error message: enough to tell two requests apart. */
const ERROR_PREVIEW_CHARS = 60;

const ANSWERED_BY_TEXT: Readonly<Record<AnsweredBy, string>> = {
  tool: "claude_respond",
  elicitation: "the client's form",
  cli: "the command line",
  timeout: "the timeout",
  server: "the server (nobody could be asked)",
};

export function answeredByText(by: AnsweredBy): string {
  return ANSWERED_BY_TEXT[by];
}

/** "allowed by the command line", "denied by the timeout". */
export function answerText(answer: Pick<ApprovalAnswer, "decision" | "by">): string {
  return `${answer.decision === "allow" ? "allowed" : "denied"} by ${answeredByText(answer.by)}`;
}

/** A message quoted as JSON escapes it, then without what JSON leaves in (C1 controls, bidi overrides; §10). */
function quotedMessage(message: string): string {
  return forReading(JSON.stringify(message));
}

/** A denial's message as text quotes it, after a colon; nothing without one. */
export function messageText(answer: Pick<ApprovalAnswer, "message">): string {
  return answer.message ? `: ${quotedMessage(answer.message)}` : "";
}

/**
 * The request as one line: its preview, which names the tool already unless the approver left it out.
 * Both are the agent's text, from a file it could have written: cleaned whole (§10).
 */
export function requestText(request: { tool_name: string; preview: string }): string {
  const preview = request.preview.startsWith(request.tool_name)
    ? request.preview
    : `${request.tool_name} · ${request.preview}`;
  return forReadingOnOneLine(preview);
}

export function requestState(record: JobRecord, approval: Approval, now: number): RequestState {
  if (approval.answer) return "answered";
  if (isFinishedStatus(record.status)) return "unanswered";
  return approval.request.expires_at <= now ? "expired" : "pending";
}

/** The requests waiting for an answer; a finished job has none, whatever its files say. */
export function pendingRequests(record: JobRecord, approvals: readonly Approval[], now: number): Approval[] {
  return approvals.filter((approval) => requestState(record, approval, now) === "pending");
}

/** input_required for a running job with a request waiting, read from the files (the record may be stale). */
export function shownStatus(record: JobRecord, approvals: readonly Approval[], now: number): ShownStatus {
  return record.status === "running" && pendingRequests(record, approvals, now).length > 0
    ? "input_required"
    : record.status;
}

/** A request as the record lists it, for a job whose request files are gone: no input, which only the files held. */
export function approvalFromSummary(summary: ApprovalSummary): Approval {
  const { id, tool_name, preview, asked_at, expires_at, decision, answered_at, message } = summary;
  const request = { id, tool_name, preview, asked_at, expires_at, input: undefined };
  // Who answered as the record says it: known to its server, or as the answer file claimed (§18).
  const by = summary.by ?? summary.claimed_by;
  if (decision === undefined || by === undefined) return { request };
  return {
    request,
    answer: { decision, by, at: answered_at ?? asked_at, ...(message === undefined ? {} : { message }) },
  };
}

/**
 * "waiting for approval: request 1 · Bash · npm test — claude-dispatch
 * approve ID 1, or deny", as jobs and logs print it.
 */
export function waitingForApproval(jobId: string, requestId: string, shownRequest: string): string {
  return (
    `waiting for approval: request ${requestId} · ${shownRequest} — claude-dispatch approve ${jobId} ` +
    `${requestId}, or deny`
  );
}

export interface AnswerArguments {
  decision: Decision;
  /** Absent: the job's only pending request. */
  requestId: string | undefined;
  /** A denial's reason, told to the agent. */
  message: string | undefined;
}

/** Answers one request of a running job; exit 0, or a DispatchError (exit 1) saying why it could not. */
export function answerJob(context: Context, id: string, { decision, requestId, message }: AnswerArguments): number {
  const { store, io } = context;
  const record = store.read(id);
  if (!record) throw notFound(context, id);
  const approvals = store.approvals(id);
  const pending = pendingRequests(record, approvals, context.now);
  if (isFinishedStatus(record.status)) {
    // A request it never filed is not "no longer pending": it never was.
    if (requestId !== undefined && !approvals.some(({ request }) => request.id === requestId))
      throw new DispatchError("INVALID_ARGUMENT", `job ${id} has no request ${requestId}`);
    const which = requestId === undefined ? "none of its requests is" : `request ${requestId} is no longer`;
    throw new DispatchError("INVALID_ARGUMENT", `job ${id} has finished (${record.status}): ${which} pending`);
  }
  const chosen = requestId === undefined ? onlyPending(id, pending) : named(id, requestId, approvals, pending);
  const answer: ApprovalAnswer = {
    decision,
    by: "cli",
    at: io.clock.now(),
    ...(message === undefined ? {} : { message }),
  };
  const result = store.answerApproval(id, chosen.request.id, answer);
  // Gone since it was read (pruned), or an answer file nobody can read: either way this answer was not written.
  if (!result)
    throw new DispatchError(
      "INVALID_ARGUMENT",
      `request ${chosen.request.id} of job ${id} cannot be answered: its files are gone or unreadable`,
    );
  if (!result.won) throw alreadyAnswered(id, chosen.request.id, result.answer);
  const { request } = chosen;
  const verb = decision === "allow" ? "Allowed" : "Denied";
  const said = message === undefined ? "" : ` (message: ${quotedMessage(message)})`;
  emit(
    context,
    {
      job_id: id,
      request_id: request.id,
      decision,
      by: answer.by,
      tool_name: forReadingOnOneLine(request.tool_name),
      preview: forReadingOnOneLine(request.preview),
      ...(message === undefined ? {} : { message }),
    },
    `${verb} request ${request.id} of job ${id}: ${requestText(request)}${said}\n`,
  );
  return 0;
}

function onlyPending(id: string, pending: readonly Approval[]): Approval {
  const [only] = pending;
  if (pending.length === 1 && only) return only;
  if (pending.length === 0) throw new DispatchError("INVALID_ARGUMENT", `job ${id} has no pending request`);
  throw new DispatchError(
    "INVALID_ARGUMENT",
    `job ${id} has ${pending.length} pending requests: ${pendingList(pending)}; name one`,
  );
}

function named(id: string, requestId: string, approvals: readonly Approval[], pending: readonly Approval[]): Approval {
  const approval = approvals.find((candidate) => candidate.request.id === requestId);
  if (!approval) {
    throw new DispatchError(
      "INVALID_ARGUMENT",
      `job ${id} has no request ${requestId}; ` +
        `${pending.length > 0 ? `pending: ${pendingList(pending)}` : "none is pending"}`,
    );
  }
  if (approval.answer) throw alreadyAnswered(id, requestId, approval.answer);
  if (!pending.includes(approval)) {
    const expired = `request ${requestId} of job ${id} went unanswered until its time ran out`;
    throw new DispatchError("INVALID_ARGUMENT", `${expired}; it is no longer pending`);
  }
  return approval;
}

function alreadyAnswered(id: string, requestId: string, answer: ApprovalAnswer): DispatchError {
  return new DispatchError(
    "INVALID_ARGUMENT",
    `request ${requestId} of job ${id} was already answered: ${answer.decision} (by ${answer.by})`,
  );
}

/** "1 (Bash · npm test), 2 (Edit · src/a.ts)". */
function pendingList(pending: readonly Approval[]): string {
  return pending.map(({ request }) => `${request.id} (${clip(requestText(request), ERROR_PREVIEW_CHARS)})`).join(", ");
}
