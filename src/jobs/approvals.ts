/**
 * Permission requests of running jobs (PROTOCOL.md §18). The agent's approver
 * files each one in the job's folder; here a running job's folder is watched
 * (file-system notifications, else a poll), so the job shows
 * `input_required` while a request waits, its waiters wake, the server that
 * owns it can ask its client, and its record lists every request and who
 * answered it. Any server, and the CLI, answers by writing the answer file:
 * the first answer stands.
 */
import type { CancelTimer } from "../core/clock.js";
import { DispatchError, quoted } from "../core/errors.js";
import type { AnsweredBy, Approval, Decision } from "../store/approvals.js";
import { isRequestId, type ApprovalSummary } from "../store/records.js";
import type { JobEntry } from "./entry.js";
import type { JobRegistryOptions } from "./types.js";

/** Without notifications, the folder is read this often while the job runs. */
const POLL_WITHOUT_NOTIFICATIONS_MS = 500;

export type ApprovalListener = (job: JobEntry, request: ApprovalSummary) => void;

/** A request and its answer without the tool's input, which stays in the request file: what memory and the record keep. */
export function summaryOf(approval: Approval): ApprovalSummary {
  const { request, answer } = approval;
  return {
    id: request.id,
    tool_name: request.tool_name,
    preview: request.preview,
    asked_at: request.asked_at,
    expires_at: request.expires_at,
    ...(answer ? { decision: answer.decision, by: answer.by, answered_at: answer.at, ...(answer.message ? { message: answer.message } : {}) } : {}),
  };
}

function sameState(a: readonly ApprovalSummary[], b: readonly ApprovalSummary[]): boolean {
  return a.length === b.length && a.every((summary, index) => summary.id === b[index]?.id && summary.decision === b[index]?.decision);
}

export interface ApprovalsTarget {
  readonly options: JobRegistryOptions;
  /** Writes the job's record (its owner only). */
  save(job: JobEntry): void;
  find(id: string): Promise<JobEntry | undefined>;
}

export class Approvals {
  private readonly listeners = new Set<ApprovalListener>();

  constructor(private readonly target: ApprovalsTarget) {}

  /** Hears of each new request of a job this server owns, once per server; returns the unsubscribe. */
  onRequest(listener: ApprovalListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Follows a running job's requests until it finishes (markDone stops it). */
  watch(job: JobEntry): void {
    const { persistence, clock } = this.target.options;
    if (!persistence.approvals || job.stopApprovals) return;
    job.approvalFiles = persistence.store;
    let cancelPoll: CancelTimer | undefined;
    let stopped = false;
    const stopWatching = persistence.store.watchApprovals(job.id, () => this.refresh(job));
    const poll = (): void => {
      this.refresh(job);
      if (!stopped) cancelPoll = clock.setTimer(poll, POLL_WITHOUT_NOTIFICATIONS_MS);
    };
    job.stopApprovals = () => {
      stopped = true;
      stopWatching?.();
      cancelPoll?.();
    };
    // A job taken over may have a request waiting already; a new one has none yet.
    if (stopWatching) this.refresh(job);
    else poll();
  }

  /** Reads the job's requests again: on news, its waiters wake, its owner's record is written, and new requests are announced. */
  refresh(job: JobEntry): void {
    if (job.finishedAt !== undefined) return;
    let approvals: ApprovalSummary[];
    try {
      approvals = this.target.options.persistence.store.approvals(job.id).map(summaryOf);
    } catch (error) {
      this.target.options.logger.warn(`job ${job.id}: cannot read its permission requests: ${(error as Error).message}`);
      return;
    }
    if (sameState(job.approvals, approvals)) return;
    const known = new Set(job.approvals.map((approval) => approval.id));
    job.approvals = approvals;
    if (!job.elsewhere) this.target.save(job);
    job.announce();
    if (job.elsewhere) return;
    for (const approval of approvals) {
      if (approval.decision !== undefined || known.has(approval.id)) continue;
      this.target.options.logger.info(`job ${job.id}: permission request ${approval.id} waits: ${approval.preview}`);
      for (const listener of [...this.listeners]) listener(job, approval);
    }
  }

  /**
   * Answers a request of any job of the state directory. Throws JOB_NOT_FOUND, or INVALID_ARGUMENT when
   * the request does not exist or is no longer pending (answered, or its job finished).
   */
  async respond(jobId: string, requestId: string, decision: Decision, by: AnsweredBy, message?: string): Promise<ApprovalSummary> {
    const job = await this.target.find(jobId);
    if (!job) throw new DispatchError("JOB_NOT_FOUND", `no job with id ${quoted(jobId)}`);
    if (!isRequestId(requestId)) throw new DispatchError("INVALID_ARGUMENT", `"request_id" must be a request number such as "1", got ${quoted(requestId)}`);
    const { store } = this.target.options.persistence;
    if (job.finishedAt !== undefined) {
      throw new DispatchError("INVALID_ARGUMENT", `job ${job.id} has finished (${job.status}): request ${quoted(requestId)} is no longer pending`);
    }
    const result = store.answerApproval(job.id, requestId, { decision, by, at: this.target.options.clock.now(), ...(message ? { message } : {}) });
    if (!result) {
      const pending = job.approvals.filter((approval) => approval.decision === undefined).map((approval) => approval.id);
      throw new DispatchError("INVALID_ARGUMENT", `job ${job.id} has no request ${quoted(requestId)}; ${pending.length ? `pending: ${pending.join(", ")}` : "none is pending"}`);
    }
    this.refresh(job);
    const summary = job.approvals.find((approval) => approval.id === requestId);
    if (!result.won) {
      throw new DispatchError("INVALID_ARGUMENT", `request ${requestId} of job ${job.id} was already answered: ${result.answer.decision} (by ${result.answer.by}); it is no longer pending`);
    }
    return summary ?? { id: requestId, tool_name: "", preview: "", asked_at: 0, expires_at: 0, decision, by, answered_at: result.answer.at };
  }
}
