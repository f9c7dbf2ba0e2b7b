/**
 * The io.modelcontextprotocol/tasks extension of MCP 2026-07-28 (PROTOCOL.md
 * §16.4). The server decides which calls become tasks. A task is a job and
 * its id is the job id, so these methods keep nothing of their own: they
 * read the job registry, and a task lives exactly as long as its job.
 */
import type { ModernResultType } from "./eras.js";
import { isUnfinished, type Job, type JobRegistry } from "../jobs/registry.js";
import { INVALID_PARAMS, fail, isRecord, respond, type JsonRpcResponse, type RequestId } from "./jsonrpc.js";
import type { Logger } from "../core/log.js";
import { TASK_CANCELLED_MESSAGE, TASK_POLL_INTERVAL_MS, failureLine, taskNotFound } from "./tasks.js";

/**
 * A claude_run with a timeout of at most this answers inside the 60 s a host
 * usually gives a request, even with its kill grace and drain; one that may
 * run longer becomes a task (the default timeout, 120 s, does).
 */
export const SYNCHRONOUS_RUN_MAX_TIMEOUT_MS = 30_000;

/** claude_start always; claude_run when it may outlast a host's patience. */
export function becomesTask(job: Pick<Job, "kind" | "timeoutMs">): boolean {
  return job.kind === "start" || job.timeoutMs === undefined || job.timeoutMs > SYNCHRONOUS_RUN_MAX_TIMEOUT_MS;
}

/**
 * input_required is never used: a job waiting for a permission answer stays
 * working, its statusMessage says for what, and
 * claude_respond answers it (§18). Nor failed: a job always ends in a tool result.
 */
export type ExtensionTaskStatus = "working" | "completed" | "cancelled";

export interface ExtensionTask {
  taskId: string;
  status: ExtensionTaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  /** Null while the job runs; once it ends, the time from creation until the job is forgotten (§8). */
  ttlMs: number | null;
  pollIntervalMs: number;
  /** Completed tasks only: what the tools/call would have returned had it not become a task. */
  result?: Record<string, unknown>;
}

export const TASK_EXTENSION_METHODS = ["tasks/get", "tasks/update", "tasks/cancel"] as const;
export type TaskExtensionMethod = (typeof TASK_EXTENSION_METHODS)[number];

export interface TaskExtensionDeps {
  jobs: Pick<JobRegistry, "get" | "kill" | "recover">;
  now(): number;
  logger: Logger;
  /** How long a finished job stays known (§8), for ttlMs. */
  retentionMs: number;
  /** What the job is doing, as progress notifications say it (§5.8). */
  activity(job: Job): string;
  /** The job's final tools/call result, as a synchronous 2026-07-28 call would have returned it. */
  finalResult(job: Job): Record<string, unknown>;
  /** Adds resultType and the server's identity (§16.3). */
  shape(result: object, resultType?: ModernResultType): Record<string, unknown>;
}

export function createTaskExtension(deps: TaskExtensionDeps): {
  /** The CreateTaskResult for a job just started. */
  created(job: Job): Record<string, unknown>;
  handle(id: RequestId, method: TaskExtensionMethod, params: Record<string, unknown>): Promise<JsonRpcResponse>;
} {
  function describe(job: Job, detailed: boolean): ExtensionTask {
    const status: ExtensionTaskStatus = isUnfinished(job)
      ? "working"
      : job.status === "killed"
        ? "cancelled"
        : "completed";
    const createdAt = job.submittedAt;
    const task: ExtensionTask = {
      taskId: job.id,
      status,
      createdAt: new Date(createdAt).toISOString(),
      lastUpdatedAt: new Date(Math.max(createdAt, job.finishedAt ?? job.startedAt)).toISOString(),
      ttlMs:
        job.finishedAt === undefined ? null : Math.max(0, Math.round(job.finishedAt - createdAt + deps.retentionMs)),
      pollIntervalMs: TASK_POLL_INTERVAL_MS,
    };
    const message =
      status === "working" ? deps.activity(job) : status === "cancelled" ? TASK_CANCELLED_MESSAGE : failureLine(job);
    if (message !== undefined) task.statusMessage = message;
    if (detailed && status === "completed") task.result = deps.finalResult(job);
    return task;
  }

  async function handle(
    id: RequestId,
    method: TaskExtensionMethod,
    params: Record<string, unknown>,
  ): Promise<JsonRpcResponse> {
    const taskId = params.taskId;
    if (typeof taskId !== "string") return fail(id, INVALID_PARAMS, "params.taskId must be a string");
    if (method === "tasks/update" && !isRecord(params.inputResponses))
      return fail(id, INVALID_PARAMS, "params.inputResponses must be an object");
    // A task belongs to no connection: one whose server died is taken over here, like any job (§15.3).
    const job = deps.jobs.get(taskId) ?? (await deps.jobs.recover(taskId));
    if (!job) return fail(id, INVALID_PARAMS, taskNotFound(taskId));
    if (method === "tasks/get") return respond(id, deps.shape(describe(job, true)));
    // tasks/cancel kills the tree and acknowledges once it is gone; a task that already ended stays as it ended.
    if (method === "tasks/cancel" && isUnfinished(job)) {
      await deps.jobs
        .kill(job.id, "cancelled")
        .catch((error: unknown) => deps.logger.warn(`tasks/cancel ${job.id}: ${String(error)}`));
    }
    // tasks/update: no task ever waits for input, so every response names a
    // request that is not outstanding, and is ignored.
    return respond(id, deps.shape({}));
  }

  return { created: (job) => deps.shape(describe(job, false), "task"), handle };
}
