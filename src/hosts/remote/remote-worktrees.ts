/**
 * Worktrees on another machine (PROTOCOL.md §19, §21.3): every git operation runs there, by claude-dispatch there,
 * which makes them in its own worktree folder and refuses a record it did not make. This side only asks.
 */
import path from "node:path";

import type { MergeOutcome, WorktreeChanges, WorktreeRecord, Worktrees } from "../../agent/worktree.js";
import { DispatchError } from "../../core/errors.js";
import type { WorktreeAction, WorktreeRequest } from "./protocol.js";

/** What the worktrees need of their host: one request, its result. */
export interface WorktreeLink {
  readonly roots: readonly string[];
  call(request: WorktreeRequest): Promise<unknown>;
}

export class RemoteWorktrees implements Worktrees {
  constructor(private readonly host: WorktreeLink) {}

  async create(cwd: string, jobId: string): Promise<{ worktree: WorktreeRecord; cwd: string }> {
    const made = await this.host.call({
      op: "worktree",
      action: "create",
      job_id: jobId,
      cwd,
      roots: [...this.host.roots],
    });
    if (!isObject(made) || !isObject(made.worktree) || typeof made.cwd !== "string") throw unexpected("create");
    return made as unknown as { worktree: WorktreeRecord; cwd: string };
  }

  cwdIn(worktree: WorktreeRecord): string {
    return path.posix.join(worktree.path, worktree.subdir);
  }

  async changes(worktree: WorktreeRecord): Promise<WorktreeChanges> {
    const changes = await this.ask("changes", worktree);
    if (
      !isObject(changes) ||
      !Array.isArray(changes.files) ||
      !Array.isArray(changes.commits) ||
      typeof changes.uncommitted !== "boolean"
    )
      throw unexpected("changes");
    return changes as unknown as WorktreeChanges;
  }

  async diff(worktree: WorktreeRecord): Promise<string> {
    const diff = await this.ask("diff", worktree);
    if (typeof diff !== "string") throw unexpected("diff");
    return diff;
  }

  async merge(worktree: WorktreeRecord, message: string): Promise<MergeOutcome> {
    const outcome = await this.ask("merge", worktree, message);
    if (!isObject(outcome) || typeof outcome.merged !== "boolean" || !Array.isArray(outcome.operations))
      throw unexpected("merge");
    return outcome as unknown as MergeOutcome;
  }

  async discard(worktree: WorktreeRecord): Promise<void> {
    await this.ask("discard", worktree);
  }

  /** Not asked there: an operation on one that is gone fails there, saying so. */
  exists(worktree: WorktreeRecord): boolean {
    return worktree.state === undefined;
  }

  /** Unknown from here without asking: a resumed session looks among the jobs for its worktree. */
  any(): boolean {
    return true;
  }

  private ask(action: Exclude<WorktreeAction, "create">, worktree: WorktreeRecord, message?: string): Promise<unknown> {
    // Made as <its worktree folder>/<job id>: the far end checks both.
    const jobId = path.posix.basename(worktree.path);
    return this.host.call({
      op: "worktree",
      action,
      job_id: jobId,
      worktree,
      ...(message !== undefined ? { message } : {}),
    });
  }
}

function unexpected(action: string): DispatchError {
  return new DispatchError("HOST_FAILED", `the host answered a worktree ${action} with something else than its result`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
