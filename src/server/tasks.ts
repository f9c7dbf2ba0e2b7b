/**
 * MCP Tasks as of 2025-11-25 (PROTOCOL.md §14): a task-augmented tools/call
 * of claude_run or claude_start creates a job, and the task is that job seen
 * through the Tasks vocabulary. The task id is the job id.
 */
import { quoted } from "../core/errors.js";
import {
  INVALID_PARAMS,
  fail,
  respond,
  type JsonRpcNotification,
  type JsonRpcResponse,
  type RequestId,
} from "./jsonrpc.js";
import { isUnfinished, type Job, type JobRegistry } from "../jobs/registry.js";
import type { Logger } from "../core/log.js";
import type { CallToolResult } from "../tools/results.js";

export type TaskStatus = "working" | "input_required" | "completed" | "failed" | "cancelled";

/** Tools that accept `params.task`; they declare execution.taskSupport "optional". */
export const TASK_TOOLS: readonly string[] = ["claude_run", "claude_start"];

export const RELATED_TASK = "io.modelcontextprotocol/related-task";

/** Suggested time between tasks/get polls. */
export const TASK_POLL_INTERVAL_MS = 5000;

function encodeCursor(offset: number): string {
  return Buffer.from(String(offset), "utf8").toString("base64url");
}

/** tasks/list page size. */
const TASK_PAGE = 50;

export interface TaskEntry {
  readonly job: Job;
  readonly createdAt: number;
  /** Set by tasks/cancel before the kill: a cancelled task stays cancelled whatever the agent does next. */
  cancelledAt: number | undefined;
  /** What the underlying tools/call would have returned, once the job finished. */
  readonly result: Promise<CallToolResult<unknown>>;
}

export interface Task {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  /**
   * Null while the job runs (the task lives as long); once it ends, the time from creation until the job is forgotten.
   */
  ttl: number | null;
  pollInterval: number;
}

export function taskStatus(entry: Pick<TaskEntry, "job" | "cancelledAt">): TaskStatus {
  if (entry.cancelledAt !== undefined || entry.job.status === "killed") return "cancelled";
  // Waiting for a permission answer (§18): the client that can be asked has a
  // form naming the task; claude_respond answers too.
  if (entry.job.pendingApprovals().length > 0) return "input_required";
  if (isUnfinished(entry.job)) return "working";
  return entry.job.status === "completed" ? "completed" : "failed";
}

export function describeTask(entry: TaskEntry, retentionMs: number): Task {
  const { job } = entry;
  const status = taskStatus(entry);
  const lastUpdated = entry.cancelledAt ?? job.finishedAt ?? job.startedAt;
  const task: Task = {
    taskId: job.id,
    status,
    createdAt: new Date(entry.createdAt).toISOString(),
    lastUpdatedAt: new Date(Math.max(lastUpdated, entry.createdAt)).toISOString(),
    ttl: job.finishedAt === undefined ? null : Math.max(0, Math.round(job.finishedAt - entry.createdAt + retentionMs)),
    pollInterval: TASK_POLL_INTERVAL_MS,
  };
  if (status === "cancelled") task.statusMessage = TASK_CANCELLED_MESSAGE;
  else if (job.status === "queued") task.statusMessage = `Queued at position ${job.queuePosition() ?? "?"}.`;
  else if (status === "failed") {
    const failure = failureLine(job);
    if (failure !== undefined) task.statusMessage = failure;
  }
  return task;
}

export const TASK_CANCELLED_MESSAGE = "The task was cancelled.";

/** "CODE: detail" for a job that ended in failure; undefined otherwise. Both eras' statusMessage. */
export function failureLine(job: Pick<Job, "outcome">): string | undefined {
  return job.outcome && !job.outcome.ok ? `${job.outcome.code}: ${job.outcome.detail}` : undefined;
}

/**
 * Both eras answer an unknown or forgotten task id with -32602 and this text; the id is echoed as every echo is (§10).
 */
export function taskNotFound(taskId: string): string {
  return `Failed to retrieve task: Task not found: ${quoted(taskId)}`;
}

/** The tasks of one connection, in creation order; a task goes when its job is forgotten (§8). */
export class TaskBook {
  private readonly entries = new Map<string, TaskEntry>();

  constructor(private readonly stillKnown: (job: Job) => boolean) {}

  add(entry: TaskEntry): void {
    this.entries.set(entry.job.id, entry);
  }

  get(taskId: string): TaskEntry | undefined {
    const entry = this.entries.get(taskId);
    if (entry && !this.stillKnown(entry.job)) {
      this.entries.delete(taskId);
      return undefined;
    }
    return entry;
  }

  /** One page; the cursor is opaque to clients (the offset, in base64url). Throws on a cursor it did not issue. */
  /** Offsets handed out as cursors: one a page per 50 tasks, so few. */
  private readonly issuedOffsets = new Set<number>();

  list(cursor: string | undefined, retentionMs: number): { tasks: Task[]; nextCursor?: string } {
    for (const [id, entry] of this.entries) if (!this.stillKnown(entry.job)) this.entries.delete(id);
    let offset = 0;
    if (cursor !== undefined) {
      const decoded = Number(Buffer.from(cursor, "base64url").toString("utf8"));
      // Only a cursor this server could have issued: a positive offset, encoded exactly as encodeCursor does.
      if (!this.issuedOffsets.has(decoded) || encodeCursor(decoded) !== cursor) throw new Error("Invalid cursor");
      // Tasks forgotten since that page may leave fewer: the rest is empty, not an error.
      offset = Math.min(decoded, this.entries.size);
    }
    const page = [...this.entries.values()]
      .slice(offset, offset + TASK_PAGE)
      .map((entry) => describeTask(entry, retentionMs));
    const next = offset + page.length;
    if (next >= this.entries.size) return { tasks: page };
    this.issuedOffsets.add(next);
    return { tasks: page, nextCursor: encodeCursor(next) };
  }
}

export type TaskTool = "claude_run" | "claude_start";

export const TASK_METHODS = ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"] as const;

export interface TaskMethodsDeps {
  jobs: Pick<JobRegistry, "get" | "kill">;
  now(): number;
  logger: Logger;
  notify(notification: JsonRpcNotification): void;
  /** What the tools/call would have returned had it waited for the job. */
  finalResult(job: Job): CallToolResult<unknown>;
  /** Starts progress notifications for the job; returns their stop. */
  followProgress(token: string | number, job: Job): () => void;
  /** How long a finished job stays reachable, which is how long its task does (§8). */
  retentionMs: number;
}

/** The task side of one connection: adopting jobs as tasks, and the tasks/* methods. */
export function createTaskMethods(deps: TaskMethodsDeps): {
  adopt(job: Job, progressToken: string | number | undefined): { task: Task };
  /** Whether the job is a task of this connection. */
  has(job: Job): boolean;
  handle(
    id: RequestId,
    method: (typeof TASK_METHODS)[number],
    params: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<JsonRpcResponse>;
} {
  const book = new TaskBook((job) => deps.jobs.get(job.id) === job);

  function adopt(job: Job, progressToken: string | number | undefined): { task: Task } {
    const entry: TaskEntry = {
      job,
      createdAt: deps.now(),
      cancelledAt: undefined,
      result: job.done.then(() => deps.finalResult(job)),
    };
    book.add(entry);
    // The token stays valid until the task ends, not until the CreateTaskResult.
    if (progressToken !== undefined) void job.done.then(deps.followProgress(progressToken, job));
    const notifyStatus = (): void =>
      deps.notify({
        jsonrpc: "2.0",
        method: "notifications/tasks/status",
        params: { ...describeTask(entry, deps.retentionMs) },
      });
    // A task that starts or stops waiting for a permission answer says so, as one that ends does.
    let shown = taskStatus(entry);
    const stopListening = job.onApprovals(() => {
      const now = taskStatus(entry);
      if (now === shown || !isUnfinished(job)) return;
      shown = now;
      notifyStatus();
    });
    void job.done.then(() => {
      stopListening();
      notifyStatus();
    });
    return { task: describeTask(entry, deps.retentionMs) };
  }

  async function cancel(id: RequestId, entry: TaskEntry): Promise<JsonRpcResponse> {
    const status = taskStatus(entry);
    if (status !== "working")
      return fail(id, INVALID_PARAMS, `Cannot cancel task ${entry.job.id}: it is already ${status}`);
    // Cancelled before the answer, as the spec requires, and before the kill, so the kill's outcome cannot change it.
    entry.cancelledAt = deps.now();
    await deps.jobs
      .kill(entry.job.id, "cancelled")
      .catch((error: unknown) => deps.logger.warn(`tasks/cancel ${entry.job.id}: ${String(error)}`));
    return respond(id, describeTask(entry, deps.retentionMs));
  }

  async function handle(
    id: RequestId,
    method: (typeof TASK_METHODS)[number],
    params: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<JsonRpcResponse> {
    if (method === "tasks/list") {
      const cursor = params.cursor;
      if (cursor !== undefined && typeof cursor !== "string")
        return fail(id, INVALID_PARAMS, "params.cursor must be a string");
      try {
        return respond(id, book.list(cursor, deps.retentionMs));
      } catch {
        return fail(id, INVALID_PARAMS, "Invalid cursor: use a nextCursor from an earlier tasks/list");
      }
    }
    const taskId = params.taskId;
    if (typeof taskId !== "string") return fail(id, INVALID_PARAMS, "params.taskId must be a string");
    const entry = book.get(taskId);
    if (!entry) return fail(id, INVALID_PARAMS, taskNotFound(taskId));
    if (method === "tasks/get") return respond(id, describeTask(entry, deps.retentionMs));
    if (method === "tasks/cancel") return cancel(id, entry);
    // tasks/result blocks until the task ends; a cancelled request stops waiting (its answer is dropped, §4).
    const aborted = new Promise<undefined>((resolve) =>
      signal.addEventListener("abort", () => resolve(undefined), { once: true }),
    );
    const result = await Promise.race([entry.result, aborted]);
    if (result === undefined) return fail(id, INVALID_PARAMS, "the request was cancelled");
    return respond(id, { ...result, _meta: { [RELATED_TASK]: { taskId: entry.job.id } } });
  }

  return { adopt, handle, has: (job) => book.get(job.id)?.job === job };
}
