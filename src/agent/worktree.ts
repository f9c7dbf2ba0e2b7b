/**
 * A job's own git worktree (PROTOCOL.md §19), as the job layer and the tools
 * see it: where it is, what it was made from, and the operations on it. The
 * git side is src/worktrees/; nothing here runs a program.
 */

/** What a job's record keeps of its worktree. */
export interface WorktreeRecord {
  /** The user's repository: the top folder of the checkout the call named. */
  repo: string;
  /** The worktree's folder, outside the user's checkout. */
  path: string;
  /** The job's branch, created for it. */
  branch: string;
  /** The commit it was created from: the repository's HEAD then. */
  base: string;
  /** Where in the worktree the agent runs: the call's cwd below the repository's top, "" for the top. */
  subdir: string;
  /** The user's checkout had uncommitted changes, which the worktree does not have. */
  left_behind: boolean;
  /** Set once merged or discarded; absent while the job's changes are the user's to decide on. */
  state?: "merged" | "discarded";
}

/** What a job changed in its worktree, committed or not, against its base. */
export interface WorktreeChanges {
  /** Every file added, changed or removed, committed or not (untracked files included), sorted. */
  files: string[];
  /** The commits made on the branch since the base, oldest first. */
  commits: Array<{ sha: string; subject: string }>;
  /** Some of the changes are not committed. */
  uncommitted: boolean;
}

/**
 * On a merge, `removed` says whether the worktree's folder went with it (its branch stays until retention, §19.1).
 * On a conflict, `work` is what to merge by hand: the job's branch, or a commit of all its work when some was
 * uncommitted.
 */
export type MergeOutcome =
  | { merged: true; into: string; commit: string; operations: string[]; removed?: boolean }
  | { merged: false; reason: string; conflicts: string[]; operations: string[]; work?: string };

/**
 * A job's worktree held for a merge or discard (§19.1): no other server, nor the CLI, merges, discards or
 * retires it meanwhile; `state` is what its record says now, read under the hold.
 */
export interface WorktreeHold {
  state: "merged" | "discarded" | undefined;
  release(): void;
}

/** The git operations on worktrees; every failure is a DispatchError (INVALID_ARGUMENT, GIT_FAILED). */
export interface Worktrees {
  /**
   * Makes a worktree on a new branch from the HEAD of the repository holding
   * cwd; cwd's place in it is where the agent runs.
   */
  create(cwd: string, jobId: string): Promise<{ worktree: WorktreeRecord; cwd: string }>;
  /** Where in an existing worktree the agent runs. */
  cwdIn(worktree: WorktreeRecord): string;
  changes(worktree: WorktreeRecord): Promise<WorktreeChanges>;
  /** The unified diff of everything the job changed against its base, committed or not. */
  diff(worktree: WorktreeRecord): Promise<string>;
  /** Brings the job's changes into the user's checked-out branch, then removes the worktree; or changes nothing. */
  merge(worktree: WorktreeRecord, message: string): Promise<MergeOutcome>;
  /** Removes the worktree and its branch, whichever of them is left. */
  discard(worktree: WorktreeRecord): Promise<void>;
  /** Whether the worktree's folder is still there. */
  exists(worktree: WorktreeRecord): boolean;
  /** Whether any worktree is there at all: a resumed session looks for its job's only then. */
  any(): boolean;
}
