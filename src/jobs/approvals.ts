/**
 * Permission requests of running jobs (PROTOCOL.md §18). The agent's approver
 * files each one in the job's folder; here a running job's folder is watched
 * (file-system notifications, else a poll), so the job shows
 * `input_required` while a request waits, its waiters wake, the server that
 * owns it can ask its client, and its record lists the requests and who
 * answered them, and the operator's CLAUDE_DISPATCH_ON_INPUT runs once per
 * request. Any server, and the CLI, answers by writing the answer file:
 * the first answer stands. Each change costs work that grows with the requests
 * still open, not with those answered (store/approval-follower.ts, job-record.ts).
 */
import type { CancelTimer } from "../core/clock.js";
import { DispatchError, quoted } from "../core/errors.js";
import { forReading, forReadingOnOneLine } from "../core/text.js";
import { ApprovalFollower } from "../store/approval-follower.js";
import type { AnsweredBy, Approval, ApprovalAnswer, Decision } from "../store/approvals.js";
import { isRequestId, type ApprovalSummary } from "../store/records.js";
import type { JobEntry } from "./entry.js";
import type { JobLife } from "./life.js";
import type { JobRegistryOptions } from "./types.js";

/** Without notifications, the folder is read this often while the job runs. */
const POLL_WITHOUT_NOTIFICATIONS_MS = 500;
/**
 * How long after its expiry the job's owner denies a request nobody answered. The approver holding it denies at
 * expiry; the owner's answer is for one nobody holds (§18), and this much later keeps it from racing an approver
 * whose clock is a little behind (a remote host's).
 */
const EXPIRY_BACKSTOP_MS = 5000;

export type ApprovalListener = (job: JobEntry, request: ApprovalSummary) => void;

/**
 * A request and its answer without the tool's input, which stays in the request file: what memory and the
 * record keep. The agent's text cleaned for whoever reads it (§10); `by` only when this server gave the
 * answer itself, otherwise `claimed_by`, what the answer file says (§18).
 */
export function summaryOf(approval: Approval, answeredHere?: AnsweredBy): ApprovalSummary {
  const { request, answer } = approval;
  return {
    id: request.id,
    tool_name: forReadingOnOneLine(request.tool_name),
    preview: forReadingOnOneLine(request.preview),
    asked_at: request.asked_at,
    expires_at: request.expires_at,
    ...(answer ? answerSummary(answer, answeredHere) : {}),
  };
}

function answerSummary(answer: ApprovalAnswer, answeredHere: AnsweredBy | undefined): Partial<ApprovalSummary> {
  return {
    decision: answer.decision,
    ...(answeredHere ? { by: answeredHere } : { claimed_by: answer.by }),
    answered_at: answer.at,
    ...(answer.message ? { message: forReading(answer.message) } : {}),
  };
}

/** "by tool", or, for an answer this server did not give, "its answer file says by cli" (§18). */
export function answererText(summary: ApprovalSummary | undefined, filed: ApprovalAnswer): string {
  return summary?.by ? `by ${summary.by}` : `its answer file says by ${summary?.claimed_by ?? filed.by}`;
}

/** What this server knows of one job's requests. */
interface Followed {
  readonly follower: ApprovalFollower;
  /** Every request, oldest first: the job's `approvals`, grown in place; and where each one is in it. */
  readonly list: ApprovalSummary[];
  readonly index: Map<string, number>;
  /** The answers this server wrote itself, and so knows the answerer of. */
  readonly answeredHere: Map<string, AnsweredBy>;
  /** The timer of the backstop for the open request that expires first, while this server owns the job. */
  cancelBackstop?: CancelTimer;
}

export interface ApprovalsTarget {
  readonly options: Pick<JobRegistryOptions, "persistence" | "approvals" | "onInput" | "clock" | "logger">;
  readonly life: Pick<JobLife, "save" | "find">;
}

export class Approvals {
  private readonly listeners = new Set<ApprovalListener>();
  private readonly followed = new WeakMap<JobEntry, Followed>();

  constructor(private readonly target: ApprovalsTarget) {}

  /** Hears of each new request of a job this server owns, once per server; returns the unsubscribe. */
  onRequest(listener: ApprovalListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Follows a running job's requests until it finishes (markDone stops it). */
  watch(job: JobEntry): void {
    const { persistence, clock, approvals } = this.target.options;
    if (!approvals || job.stopApprovals) return;
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
      this.followed.get(job)?.cancelBackstop?.();
      // A finished job's requests are its `approvals`, on record: what found their news is no longer needed.
      this.followed.delete(job);
    };
    // A job taken over may have a request waiting already; a new one has none yet.
    if (stopWatching) this.refresh(job);
    else poll();
    this.backstop(job);
  }

  /**
   * The owner denies (`timeout`) each open request EXPIRY_BACKSTOP_MS past its expiry. Its approver denies it at
   * expiry, but none does when no process of ours held the endpoint then: without this, the request would stay
   * pending, the job input_required, until the job ended. The first answer stands, so the two never disagree.
   */
  private backstop(job: JobEntry, retryInMs?: number): void {
    const followed = this.followed.get(job);
    if (!followed) return;
    followed.cancelBackstop?.();
    followed.cancelBackstop = undefined;
    if (job.elsewhere || job.finishedAt !== undefined || job.unanswered.length === 0) return;
    const { clock } = this.target.options;
    const due = Math.min(...job.unanswered.map((request) => request.expires_at)) + EXPIRY_BACKSTOP_MS;
    followed.cancelBackstop = clock.setTimer(
      () => {
        followed.cancelBackstop = undefined;
        this.denyExpired(job, followed);
      },
      retryInMs ?? Math.max(0, due - clock.now()),
    );
  }

  private denyExpired(job: JobEntry, followed: Followed): void {
    const { persistence, clock, logger } = this.target.options;
    const now = clock.now();
    let failed = false;
    for (const request of job.unanswered) {
      if (request.expires_at + EXPIRY_BACKSTOP_MS > now) continue;
      try {
        const timeout = { decision: "deny", by: "timeout", at: now } as const;
        const result = persistence.store.answerApproval(job.id, request.id, timeout);
        if (result?.won) {
          followed.answeredHere.set(request.id, "timeout");
          logger.info(`job ${job.id}: request ${request.id}: deny (by timeout, written by the job's owner)`);
        }
        // No answer of its own stands there yet (a planted one its approver removes): tried again later.
        failed ||= result === undefined;
      } catch (error) {
        failed = true;
        logger.warn(`job ${job.id}: cannot record the timeout of request ${request.id}: ${(error as Error).message}`);
      }
    }
    this.refresh(job);
    this.backstop(job, failed ? EXPIRY_BACKSTOP_MS : undefined);
  }

  private followedOf(job: JobEntry): Followed {
    let followed = this.followed.get(job);
    if (!followed) {
      const { store } = this.target.options.persistence;
      const list: ApprovalSummary[] = [];
      const follower = new ApprovalFollower((requestId, known) => store.lookUpApproval(job.id, requestId, known));
      followed = { follower, list, index: new Map(), answeredHere: new Map() };
      this.followed.set(job, followed);
      job.approvals = list;
    }
    return followed;
  }

  /**
   * Reads what changed in the job's requests (new ones, and answers to open ones; store/approval-follower.ts):
   * on news, its waiters wake, its owner's record is written, and new requests are announced.
   */
  refresh(job: JobEntry): void {
    if (job.finishedAt !== undefined) return;
    const followed = this.followedOf(job);
    let news: Approval[];
    try {
      news = followed.follower.news();
    } catch (error) {
      this.target.options.logger.warn(
        `job ${job.id}: cannot read its permission requests: ${(error as Error).message}`,
      );
      return;
    }
    if (news.length === 0) return;
    const asked: ApprovalSummary[] = [];
    const answered = new Set<string>();
    for (const approval of news) {
      const summary = summaryOf(approval, followed.answeredHere.get(approval.request.id));
      const at = followed.index.get(summary.id);
      if (at === undefined) {
        followed.index.set(summary.id, followed.list.length);
        followed.list.push(summary);
      } else followed.list[at] = summary;
      if (summary.decision !== undefined) answered.add(summary.id);
      else if (at === undefined) asked.push(summary);
    }
    const open = [...job.unanswered.filter((approval) => !answered.has(approval.id)), ...asked];
    job.unanswered = open.sort((a, b) => Number(a.id) - Number(b.id));
    this.backstop(job);
    if (!job.elsewhere) this.target.life.save(job);
    job.announce();
    if (job.elsewhere) return;
    for (const approval of asked) {
      this.target.options.logger.info(`job ${job.id}: permission request ${approval.id} waits: ${approval.preview}`);
      this.tell(job, approval);
      for (const listener of [...this.listeners]) listener(job, approval);
    }
  }

  /**
   * CLAUDE_DISPATCH_ON_INPUT for a request new to this process, unless it has expired: run only by the
   * process that marks it told, so once however many servers own the job in turn or look at once (§18).
   * A process that is leaving makes no mark, and so leaves the request to the next owner.
   */
  private tell(job: JobEntry, request: ApprovalSummary): void {
    const { onInput, persistence, clock, logger } = this.target.options;
    if (!onInput || onInput.closed || request.expires_at <= clock.now()) return;
    const what = `CLAUDE_DISPATCH_ON_INPUT for request ${request.id} of job ${job.id}`;
    try {
      if (persistence.store.markTold?.(job.id, request.id) === false) return;
    } catch (error) {
      logger.warn(`${what} does not run: its mark cannot be made: ${(error as Error).message}`);
      return;
    }
    void onInput.run({ job, request }).catch((error: unknown) => logger.error(`${what}: ${String(error)}`));
  }

  /**
   * Answers a request of any job of the state directory. Throws JOB_NOT_FOUND, or INVALID_ARGUMENT when
   * the request does not exist or is no longer pending (answered, or its job finished).
   */
  async respond(
    jobId: string,
    requestId: string,
    decision: Decision,
    by: AnsweredBy,
    message?: string,
  ): Promise<ApprovalSummary> {
    const job = await this.target.life.find(jobId);
    if (!job) throw new DispatchError("JOB_NOT_FOUND", `no job with id ${quoted(jobId)}`);
    if (!isRequestId(requestId))
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `"request_id" must be a request number such as "1", got ${quoted(requestId)}`,
      );
    const { store } = this.target.options.persistence;
    if (job.finishedAt !== undefined) {
      // A request it never filed is not "no longer pending": it never was.
      const filed = store.lookUpApproval(job.id, requestId) !== undefined;
      if (!filed) throw new DispatchError("INVALID_ARGUMENT", `job ${job.id} has no request ${quoted(requestId)}`);
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `job ${job.id} has finished (${job.status}): request ${quoted(requestId)} is no longer pending`,
      );
    }
    const result = store.answerApproval(job.id, requestId, {
      decision,
      by,
      at: this.target.options.clock.now(),
      ...(message ? { message } : {}),
    });
    if (!result) throw this.unanswerable(job, requestId);
    const followed = this.followedOf(job);
    // This server wrote the standing answer, so it knows who answered; read before any notification of it is.
    if (result.won) followed.answeredHere.set(requestId, by);
    this.refresh(job);
    const at = followed.index.get(requestId);
    const summary = at === undefined ? undefined : followed.list[at];
    if (!result.won) {
      const standing = `${result.answer.decision} (${answererText(summary, result.answer)})`;
      const what = `request ${requestId} of job ${job.id} was already answered: ${standing}; it is no longer pending`;
      throw new DispatchError("INVALID_ARGUMENT", what);
    }
    return (
      summary ?? {
        id: requestId,
        tool_name: "",
        preview: "",
        asked_at: 0,
        expires_at: 0,
        decision,
        by,
        answered_at: result.answer.at,
      }
    );
  }

  private unanswerable(job: JobEntry, requestId: string): DispatchError {
    const found = this.target.options.persistence.store.lookUpApproval(job.id, requestId);
    if (found !== undefined && found !== "unreadable") {
      // Planted, or left by an earlier request of that number: the approver that filed this one removes it (§18).
      const why = "a file that does not answer it is in its answer's place; try again";
      return new DispatchError("INVALID_ARGUMENT", `request ${requestId} of job ${job.id} cannot be answered: ${why}`);
    }
    const pending = job.pendingApprovals().map((approval) => approval.id);
    const which = pending.length ? `pending: ${pending.join(", ")}` : "none is pending";
    return new DispatchError("INVALID_ARGUMENT", `job ${job.id} has no request ${quoted(requestId)}; ${which}`);
  }
}
