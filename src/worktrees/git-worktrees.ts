/**
 * Worktrees through git (PROTOCOL.md §19): every operation is git run by its
 * absolute path with an argv array, never a shell, and `-C <folder>` naming
 * where. Reading what a job changed never touches the worktree's own index:
 * untracked files are staged into a temporary index file instead.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import type { MergeOutcome, WorktreeChanges, WorktreeRecord, Worktrees } from "../agent/worktree.js";
import { DispatchError, quoted } from "../core/errors.js";

export interface GitRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Why git could not be run at all (not found, not executable). */
  spawnError?: string;
}

/** Runs git with these arguments; env is added to git's own environment. */
export type RunGit = (args: readonly string[], env?: Readonly<Record<string, string>>) => Promise<GitRun>;

export interface GitWorktreeOptions {
  git: RunGit;
  /** Where worktrees are made: one folder per job, outside every checkout. */
  root: string;
  /** The branch prefix, such as "dispatch/". */
  branchPrefix: string;
}

/** Who commits a job's uncommitted work when git has no identity configured. */
const FALLBACK_IDENTITY = {
  GIT_AUTHOR_NAME: "claude-dispatch",
  GIT_AUTHOR_EMAIL: "claude-dispatch@localhost",
  GIT_COMMITTER_NAME: "claude-dispatch",
  GIT_COMMITTER_EMAIL: "claude-dispatch@localhost",
};

/** git's own message, on one line, for an error. */
function gitMessage(run: GitRun): string {
  const text = (run.spawnError ?? run.stderr.trim()) || run.stdout.trim() || `exit code ${String(run.code)}`;
  return text.replace(/\s+/g, " ").slice(0, 500);
}

export class GitWorktrees implements Worktrees {
  constructor(private readonly options: GitWorktreeOptions) {}

  /** git, failing with GIT_FAILED (git's message) unless it exits 0; INVALID_ARGUMENT when git cannot be run. */
  private async git(args: readonly string[], env?: Readonly<Record<string, string>>): Promise<string> {
    const run = await this.options.git(args, env);
    if (run.spawnError) throw new DispatchError("INVALID_ARGUMENT", `git cannot be run (${run.spawnError}); install git to use worktrees`);
    if (run.code !== 0) throw new DispatchError("GIT_FAILED", `git ${args.filter((arg) => arg !== "-C").slice(1, 3).join(" ")}: ${gitMessage(run)}`);
    return run.stdout;
  }

  async create(cwd: string, jobId: string): Promise<{ worktree: WorktreeRecord; cwd: string }> {
    const probe = await this.options.git(["-C", cwd, "rev-parse", "--show-toplevel"]);
    if (probe.spawnError) throw new DispatchError("INVALID_ARGUMENT", `"worktree" needs git, which cannot be run (${probe.spawnError})`);
    if (probe.code !== 0) throw new DispatchError("INVALID_ARGUMENT", `"worktree" needs cwd inside a git repository: ${quoted(cwd)} is not (${gitMessage(probe)})`);
    const repo = probe.stdout.trim();
    const head = await this.options.git(["-C", repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"]);
    if (head.code !== 0) throw new DispatchError("INVALID_ARGUMENT", `"worktree" needs a repository with a commit to start from: ${quoted(repo)} has none`);
    const base = head.stdout.trim();
    const left = (await this.git(["-C", repo, "status", "--porcelain"])).trim() !== "";
    const branch = `${this.options.branchPrefix}${jobId}`;
    const folder = path.join(this.options.root, jobId);
    mkdirSync(this.options.root, { recursive: true, mode: 0o700 });
    await this.git(["-C", repo, "worktree", "add", "--quiet", "-b", branch, folder, base]);
    const worktree: WorktreeRecord = { repo, path: folder, branch, base, subdir: path.relative(repo, cwd), left_behind: left };
    // A cwd that git does not track (an empty or ignored folder) is made, so the agent starts where it was asked to.
    mkdirSync(this.cwdIn(worktree), { recursive: true });
    return { worktree, cwd: this.cwdIn(worktree) };
  }

  cwdIn(worktree: WorktreeRecord): string {
    return path.join(worktree.path, worktree.subdir);
  }

  async changes(worktree: WorktreeRecord): Promise<WorktreeChanges> {
    const where = ["-C", worktree.path];
    const log = await this.git([...where, "log", "--reverse", "--format=%H%x09%s", `${worktree.base}..HEAD`]);
    const commits = log
      .split("\n")
      .filter(Boolean)
      .map((line) => ({ sha: line.slice(0, line.indexOf("\t")), subject: line.slice(line.indexOf("\t") + 1) }));
    const changed = (await this.git([...where, "diff", "--name-only", "-z", worktree.base])).split("\0").filter(Boolean);
    const untracked = (await this.git([...where, "ls-files", "--others", "--exclude-standard", "-z"])).split("\0").filter(Boolean);
    const uncommitted = (await this.git([...where, "status", "--porcelain"])).trim() !== "";
    return { files: [...new Set([...changed, ...untracked])].sort(), commits, uncommitted };
  }

  /** HEAD's files plus every change in the worktree, untracked files included, as a tree; the worktree's own index is left alone. */
  private async snapshotTree(worktree: WorktreeRecord): Promise<string> {
    const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-index-"));
    const env = { GIT_INDEX_FILE: path.join(scratch, "index") };
    try {
      await this.git(["-C", worktree.path, "read-tree", "HEAD"], env);
      await this.git(["-C", worktree.path, "add", "-A"], env);
      return (await this.git(["-C", worktree.path, "write-tree"], env)).trim();
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }

  async diff(worktree: WorktreeRecord): Promise<string> {
    const tree = await this.snapshotTree(worktree);
    return this.git(["-C", worktree.path, "diff", "--no-color", "--no-ext-diff", worktree.base, tree]);
  }

  private async identity(folder: string): Promise<Record<string, string>> {
    const email = await this.options.git(["-C", folder, "config", "user.email"]);
    return email.code === 0 && email.stdout.trim() !== "" ? {} : FALLBACK_IDENTITY;
  }

  async merge(worktree: WorktreeRecord, message: string): Promise<MergeOutcome> {
    const repo = ["-C", worktree.repo];
    const operations: string[] = [];
    const refused = (reason: string, conflicts: string[] = []): MergeOutcome => ({ merged: false, reason, conflicts, operations });
    const into = (await this.options.git([...repo, "symbolic-ref", "--quiet", "--short", "HEAD"])).stdout.trim();
    if (into === "") return refused("the repository's checkout is not on a branch (detached HEAD)");
    // "XY path" entries; -z keeps a path's own spaces and leading blanks intact.
    const dirty = (await this.git([...repo, "status", "--porcelain", "--untracked-files=no", "-z"])).split("\0").filter((entry) => entry.length > 3);
    if (dirty.length > 0) return refused("the repository's checkout has uncommitted changes: commit or stash them first", dirty.map((entry) => entry.slice(3)));
    // What merging would bring, checked first with a commit no branch points at: a refused merge changes nothing.
    const identity = await this.identity(worktree.path);
    const tree = await this.snapshotTree(worktree);
    const headTree = (await this.git(["-C", worktree.path, "rev-parse", "HEAD^{tree}"])).trim();
    const tip = tree === headTree ? (await this.git(["-C", worktree.path, "rev-parse", "HEAD"])).trim() : (await this.git(["-C", worktree.path, "commit-tree", tree, "-p", "HEAD", "-m", message], identity)).trim();
    if (tip === worktree.base) return refused("the job changed nothing");
    operations.push(`git -C ${worktree.repo} merge-tree --write-tree --name-only HEAD <the job's changes>`);
    const check = await this.options.git([...repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", "HEAD", tip]);
    if (check.code === 1) return refused(`merging would conflict with ${into}`, check.stdout.split("\n").slice(1).filter(Boolean));
    if (check.code !== 0) throw new DispatchError("GIT_FAILED", `git merge-tree: ${gitMessage(check)}`);
    if (tree !== headTree) {
      operations.push(`git -C ${worktree.path} add -A`, `git -C ${worktree.path} commit -m ${JSON.stringify(message)}`);
      await this.git(["-C", worktree.path, "add", "-A"]);
      await this.git(["-C", worktree.path, "commit", "--quiet", "--no-verify", "-m", message], identity);
    }
    operations.push(`git -C ${worktree.repo} merge --no-edit ${worktree.branch}`);
    await this.git([...repo, "merge", "--quiet", "--no-edit", worktree.branch], await this.identity(worktree.repo));
    const commit = (await this.git([...repo, "rev-parse", "HEAD"])).trim();
    return { merged: true, into, commit, operations };
  }

  async discard(worktree: WorktreeRecord): Promise<void> {
    if (existsSync(worktree.path)) await this.git(["-C", worktree.repo, "worktree", "remove", "--force", worktree.path]);
    else await this.options.git(["-C", worktree.repo, "worktree", "prune"]);
    const branch = await this.options.git(["-C", worktree.repo, "rev-parse", "--verify", "--quiet", `refs/heads/${worktree.branch}`]);
    if (branch.code === 0) await this.git(["-C", worktree.repo, "branch", "-D", "--quiet", worktree.branch]);
  }

  exists(worktree: WorktreeRecord): boolean {
    return existsSync(worktree.path);
  }

  any(): boolean {
    try {
      return readdirSync(this.options.root).length > 0;
    } catch {
      return false;
    }
  }
}
