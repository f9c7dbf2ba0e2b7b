/**
 * What becomes of a worktree when retention removes its job (PROTOCOL.md
 * §19): one merged, or holding no change, goes with it; one holding changes
 * that were neither merged nor discarded stays, and is listed by `doctor` and
 * `claude-dispatch jobs` until someone decides on it.
 */
import { readdirSync } from "node:fs";
import path from "node:path";

import type { WorktreeRecord, Worktrees } from "../agent/worktree.js";

export async function retireWorktree(git: Worktrees, worktree: WorktreeRecord): Promise<"removed" | "kept"> {
  if (worktree.state === "discarded") return "removed";
  if (worktree.state !== "merged" && git.exists(worktree)) {
    const changes = await git.changes(worktree);
    if (changes.files.length > 0 || changes.commits.length > 0) return "kept";
  }
  await git.discard(worktree);
  return "removed";
}

export interface KeptWorktree {
  path: string;
  branch: string;
  job_id: string;
}

/** Worktrees under root whose job is gone from the state directory: kept by retention for their unmerged changes. */
export function keptWorktrees(root: string, branchPrefix: string, jobExists: (id: string) => boolean): KeptWorktree[] {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  return names
    .filter((name) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(name) && !jobExists(name))
    .sort()
    .map((name) => ({ path: path.join(root, name), branch: `${branchPrefix}${name}`, job_id: name }));
}
