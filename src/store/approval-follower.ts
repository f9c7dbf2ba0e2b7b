/**
 * A job's permission requests followed as they come and are answered (PROTOCOL.md §18), in work linear in
 * their number: requests are numbered without gaps (approvals.ts fileRequest) and an answer never changes
 * once given (the first one stands), so each look reads only the answers of the requests still open and
 * the numbers after the last one seen; never the whole folder. No file access of its own: `lookUp` is the
 * store's, so the job layer and the remote mode (§21.3) share it.
 */
import type { Approval, ApprovalLookup, ApprovalRequest } from "./approvals.js";
import { isRequestId } from "./records.js";

export class ApprovalFollower {
  private next = 1;
  /** Numbers seen without an answer: the request as first read, or undefined while its file is not readable. */
  private readonly open = new Map<string, ApprovalRequest | undefined>();

  /** `known`: the request as read before, so that only its answer is read (and checked against its nonce). */
  constructor(private readonly lookUp: (requestId: string, known?: ApprovalRequest) => ApprovalLookup) {}

  /** Requests filed and answers given since the last call, oldest request first. */
  news(): Approval[] {
    const news: Approval[] = [];
    for (const [id, known] of [...this.open]) {
      const found = this.lookUp(id, known);
      if (found === undefined) this.open.delete(id);
      else if (found !== "unreadable" && (found.answer || !known)) {
        news.push(found);
        if (found.answer) this.open.delete(id);
        else this.open.set(id, found.request);
      }
    }
    for (let id = String(this.next); isRequestId(id); id = String(this.next)) {
      const found = this.lookUp(id);
      if (found === undefined) break;
      this.next += 1;
      if (found === "unreadable") this.open.set(id, undefined);
      else {
        news.push(found);
        if (!found.answer) this.open.set(id, found.request);
      }
    }
    return news;
  }
}
