/**
 * MCP Tasks as of 2025-11-25 (PROTOCOL.md §14): a task-augmented tools/call
 * of claude_run or claude_start creates a job, and the task is that job seen
 * through the Tasks vocabulary. The task id is the job id.
 */
import { isUnfinished, type Job } from "./jobs.js";
import type { CallToolResult } from "./results.js";

export type TaskStatus = "working" | "completed" | "failed" | "cancelled";

/** Tools that accept `params.task`; they declare execution.taskSupport "optional". */
export const TASK_TOOLS: readonly string[] = ["claude_run", "claude_start"];

export const RELATED_TASK = "io.modelcontextprotocol/related-task";

/** Suggested time between tasks/get polls. */
export const TASK_POLL_INTERVAL_MS = 5000;

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
  /** Null: a task lives while its job runs and for the job retention after it ends, not a fixed time from creation. */
  ttl: null;
  pollInterval: number;
}

export function taskStatus(entry: Pick<TaskEntry, "job" | "cancelledAt">): TaskStatus {
  if (entry.cancelledAt !== undefined || entry.job.status === "killed") return "cancelled";
  if (isUnfinished(entry.job)) return "working";
  return entry.job.status === "completed" ? "completed" : "failed";
}

export function describeTask(entry: TaskEntry): Task {
  const { job } = entry;
  const status = taskStatus(entry);
  const lastUpdated = entry.cancelledAt ?? job.finishedAt ?? job.startedAt;
  const task: Task = {
    taskId: job.id,
    status,
    createdAt: new Date(entry.createdAt).toISOString(),
    lastUpdatedAt: new Date(Math.max(lastUpdated, entry.createdAt)).toISOString(),
    ttl: null,
    pollInterval: TASK_POLL_INTERVAL_MS,
  };
  if (status === "cancelled") task.statusMessage = "The task was cancelled.";
  else if (job.status === "queued") task.statusMessage = `Queued at position ${job.queuePosition() ?? "?"}.`;
  else if (status === "failed" && job.outcome && !job.outcome.ok) task.statusMessage = `${job.outcome.code}: ${job.outcome.detail}`;
  return task;
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
  list(cursor: string | undefined): { tasks: Task[]; nextCursor?: string } {
    for (const [id, entry] of this.entries) if (!this.stillKnown(entry.job)) this.entries.delete(id);
    let offset = 0;
    if (cursor !== undefined) {
      const decoded = Number(Buffer.from(cursor, "base64url").toString("utf8"));
      if (!Number.isInteger(decoded) || decoded < 0 || decoded > this.entries.size) throw new Error("Invalid cursor");
      offset = decoded;
    }
    const page = [...this.entries.values()].slice(offset, offset + TASK_PAGE).map(describeTask);
    const next = offset + page.length;
    return next < this.entries.size ? { tasks: page, nextCursor: Buffer.from(String(next), "utf8").toString("base64url") } : { tasks: page };
  }
}
