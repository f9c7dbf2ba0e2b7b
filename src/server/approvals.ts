/**
 * What a connection does with a new permission request of a job this server
 * runs (PROTOCOL.md §18): a client that declared `elicitation` is asked with
 * `elicitation/create` (a form: allow or deny, and a message), and its
 * answer is the request's answer unless another came first (claude_respond,
 * the CLI, the timeout), in which case the form is withdrawn with
 * notifications/cancelled. A claude_run whose client cannot be asked never
 * hangs on a question: the request is denied at once.
 */
import type { Logger } from "../core/log.js";
import type { Job, JobRegistry } from "../jobs/registry.js";
import type { ApprovalSummary } from "../store/records.js";
import { isRecord, type JsonRpcNotification, type JsonRpcRequest, type RequestId } from "./jsonrpc.js";
import { RELATED_TASK } from "./tasks.js";

/** What the agent reads when nobody can be asked in this call. */
export const UNASKABLE_MESSAGE =
  "Approval is not available in this call: it was made with claude_run by a client that cannot be asked, so this " +
  "tool call was denied. " +
  "Do not retry it; finish what you can without it and say what needed approval.";

const DECLINED_MESSAGE = "The user declined this tool call.";

export interface ApprovalAskerDeps {
  jobs: Pick<JobRegistry, "approvals">;
  /** Writes a request or notification frame to the client. */
  send(frame: JsonRpcRequest | JsonRpcNotification): void;
  logger: Logger;
  /** The job is a 2025-11-25 task of this connection: the form names it (related-task). */
  isTask(job: Job): boolean;
}

export class ApprovalAsker {
  /** Set by initialize: the client declared the elicitation capability (2025-06-18 and later). */
  canElicit = false;
  private sent = 0;
  private readonly waiting = new Map<string, (response: Record<string, unknown>) => void>();
  /** Requests handled already ("<job>:<request>"), so none is asked twice; each goes when its job finishes. */
  private readonly handled = new Set<string>();

  constructor(private readonly deps: ApprovalAskerDeps) {}

  /** A response from the client; true when it answered one of our requests. */
  receive(message: Record<string, unknown>): boolean {
    if (typeof message.id !== "string" && typeof message.id !== "number") return false;
    const key = String(message.id);
    const resolve = this.waiting.get(key);
    if (!resolve) return false;
    this.waiting.delete(key);
    resolve(message);
    return true;
  }

  /** Handles a new request of a job this server runs. */
  async ask(job: Job, request: ApprovalSummary): Promise<void> {
    // A claude_start job whose client cannot be asked waits for claude_respond: nothing to do, and nothing to remember.
    if (!this.canElicit && job.kind !== "run") return;
    const key = `${job.id}:${request.id}`;
    if (this.handled.has(key)) return;
    this.handled.add(key);
    job.whenDone(() => this.handled.delete(key));
    if (!this.canElicit) {
      await this.answer(job, request, "deny", UNASKABLE_MESSAGE, "server");
      return;
    }
    const id: RequestId = `dispatch-approval-${(this.sent += 1)}`;
    const answered = (): boolean =>
      job.finishedAt !== undefined || !job.pendingApprovals().some((approval) => approval.id === request.id);
    let stopListening = (): void => undefined;
    const elsewhere = new Promise<undefined>((resolve) => {
      const check = (): void => {
        if (answered()) resolve(undefined);
      };
      const unsubscribe = job.onApprovals(check);
      const undone = job.whenDone(check);
      stopListening = () => {
        unsubscribe();
        undone();
      };
    });
    const response = new Promise<Record<string, unknown>>((resolve) => this.waiting.set(String(id), resolve));
    this.deps.send({ jsonrpc: "2.0", id, method: "elicitation/create", params: this.form(job, request) });
    const first = await Promise.race([response, elsewhere]);
    stopListening();
    if (first === undefined) {
      // Answered another way: the form is withdrawn, and its late answer, if any, is dropped.
      this.waiting.delete(String(id));
      this.deps.send({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: id, reason: "the permission request was answered another way" },
      });
      return;
    }
    const result = isRecord(first.result) ? first.result : undefined;
    const content = isRecord(result?.content) ? result.content : {};
    if (result?.action === "accept" && (content.decision === "allow" || content.decision === "deny")) {
      const message = typeof content.message === "string" ? content.message.trim().slice(0, 2000) : "";
      await this.answer(job, request, content.decision, message, "elicitation");
    } else if (result?.action === "decline") {
      await this.answer(job, request, "deny", DECLINED_MESSAGE, "elicitation");
    } else if (job.kind === "run") {
      // Dismissed (cancel) or an error: a claude_start job stays asked for claude_respond; a run must not hang.
      await this.answer(job, request, "deny", UNASKABLE_MESSAGE, "server");
    }
  }

  private form(job: Job, request: ApprovalSummary): Record<string, unknown> {
    // The tool's name and preview were cleaned when the request was read (jobs/approvals.ts summaryOf, §10).
    const asks = `Claude Code (job ${job.id.slice(0, 8)}, in ${job.cwd}) asks to use ${request.tool_name}`;
    return {
      message: `${asks}:\n${request.preview}\nAllow it?`,
      requestedSchema: {
        type: "object",
        properties: {
          decision: { type: "string", title: "Allow this tool call?", enum: ["allow", "deny"] },
          message: {
            type: "string",
            title: "Message to the agent",
            description: "Optional, with deny: what to do instead.",
            maxLength: 2000,
          },
        },
        required: ["decision"],
      },
      ...(this.deps.isTask(job) ? { _meta: { [RELATED_TASK]: { taskId: job.id } } } : {}),
    };
  }

  private async answer(
    job: Job,
    request: ApprovalSummary,
    decision: "allow" | "deny",
    message: string,
    by: "elicitation" | "server",
  ): Promise<void> {
    try {
      await this.deps.jobs.approvals.respond(job.id, request.id, decision, by, message || undefined);
    } catch (error) {
      // Another answer came first: it stands.
      this.deps.logger.debug(`job ${job.id}: request ${request.id} not answered by ${by}: ${(error as Error).message}`);
    }
  }
}
