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
import { untrackedInTheWay } from "./checkout.js";
import { worktreeGit, type GitRun, type RunGit } from "./worktree-git.js";

export type { GitRun, RunGit } from "./worktree-git.js";

export interface GitWorktreeOptions {
  git: RunGit;
  /** Where worktrees are made: one folder per job, outside every checkout. */
  root: string;
  /** The branch prefix, such as "dispatch/". */
  branchPrefix: string;
}

/** git in one place, failing with GIT_FAILED unless it exits 0; env is added to git's own. */
type GitIn = (args: readonly string[], env?: Readonly<Record<string, string>>) => Promise<string>;

type MergeRefused = Extract<MergeOutcome, { merged: false }>;

/** Who commits a job's uncommitted work when git has no identity configured. */
const FALLBACK_IDENTITY = {
  GIT_AUTHOR_NAME: "claude-dispatch",
  GIT_AUTHOR_EMAIL: "claude-dispatch@localhost",
  GIT_COMMITTER_NAME: "claude-dispatch",
  GIT_COMMITTER_EMAIL: "claude-dispatch@localhost",
};

/** The git command an argv runs, for an error: its first word after the options. */
function commandName(args: readonly string[]): string {
  const words = args.filter((arg, index) => !arg.startsWith("-") && args[index - 1] !== "-C");
  return words[0] === "worktree" ? words.slice(0, 2).join(" ") : (words[0] ?? "");
}

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
    if (run.spawnError)
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `git cannot be run (${run.spawnError}); install git to use worktrees`,
      );
    if (run.code !== 0) throw new DispatchError("GIT_FAILED", `git ${commandName(args)}: ${gitMessage(run)}`);
    return run.stdout;
  }

  /** git in the job's worktree, checked and with nothing of the agent's run (worktree-git.ts). */
  private async inWorktree(worktree: WorktreeRecord): Promise<GitIn> {
    const { args: where, env: hardened } = await worktreeGit(this.options.git, worktree);
    return (args, env) => this.git([...where, ...args], { ...hardened, ...env });
  }

  async create(cwd: string, jobId: string): Promise<{ worktree: WorktreeRecord; cwd: string }> {
    const probe = await this.options.git(["-C", cwd, "rev-parse", "--show-toplevel"]);
    if (probe.spawnError)
      throw new DispatchError("INVALID_ARGUMENT", `"worktree" needs git, which cannot be run (${probe.spawnError})`);
    if (probe.code !== 0)
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `"worktree" needs cwd inside a git repository: ${quoted(cwd)} is not (${gitMessage(probe)})`,
      );
    const repo = probe.stdout.trim();
    const head = await this.options.git(["-C", repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"]);
    if (head.code !== 0)
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `"worktree" needs a repository with a commit to start from: ${quoted(repo)} has none`,
      );
    const base = head.stdout.trim();
    const left = (await this.git(["-C", repo, "status", "--porcelain"])).trim() !== "";
    const branch = `${this.options.branchPrefix}${jobId}`;
    const folder = path.join(this.options.root, jobId);
    mkdirSync(this.options.root, { recursive: true, mode: 0o700 });
    await this.git(["-C", repo, "worktree", "add", "--quiet", "-b", branch, folder, base]);
    const worktree: WorktreeRecord = {
      repo,
      path: folder,
      branch,
      base,
      subdir: path.relative(repo, cwd),
      left_behind: left,
    };
    // Every later git call names the worktree's git folder as git names it now, before the agent runs (§19.2).
    await worktreeGit(this.options.git, worktree);
    // A cwd that git does not track (an empty or ignored folder) is made, so the agent starts where it was asked to.
    mkdirSync(this.cwdIn(worktree), { recursive: true });
    return { worktree, cwd: this.cwdIn(worktree) };
  }

  cwdIn(worktree: WorktreeRecord): string {
    return path.join(worktree.path, worktree.subdir);
  }

  async changes(worktree: WorktreeRecord): Promise<WorktreeChanges> {
    const git = await this.inWorktree(worktree);
    const log = await git(["log", "--reverse", "--format=%H%x09%s", `${worktree.base}..HEAD`]);
    const commits = log
      .split("\n")
      .filter(Boolean)
      .map((line) => ({ sha: line.slice(0, line.indexOf("\t")), subject: line.slice(line.indexOf("\t") + 1) }));
    const changed = (await git(["diff", "--name-only", "-z", worktree.base])).split("\0").filter(Boolean);
    const untracked = (await git(["ls-files", "--others", "--exclude-standard", "-z"])).split("\0").filter(Boolean);
    const uncommitted = (await git(["status", "--porcelain"])).trim() !== "";
    return { files: [...new Set([...changed, ...untracked])].sort(), commits, uncommitted };
  }

  /**
   * HEAD's files plus every change in the worktree, untracked files included, as
   * a tree; the worktree's own index is left alone.
   */
  private async snapshotTree(git: GitIn): Promise<string> {
    const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-index-"));
    const env = { GIT_INDEX_FILE: path.join(scratch, "index") };
    try {
      await git(["read-tree", "HEAD"], env);
      await git(["add", "-A"], env);
      return (await git(["write-tree"], env)).trim();
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }

  async diff(worktree: WorktreeRecord): Promise<string> {
    const git = await this.inWorktree(worktree);
    const tree = await this.snapshotTree(git);
    return git(["diff", "--no-color", "--no-ext-diff", "--no-textconv", worktree.base, tree]);
  }

  /** git's configured identity, else the fallback: `config` exits 1 when the setting is absent. */
  private async identity(git: GitIn): Promise<Record<string, string>> {
    const email = await git(["config", "user.email"]).catch(() => "");
    return email.trim() !== "" ? {} : FALLBACK_IDENTITY;
  }

  async merge(worktree: WorktreeRecord, message: string): Promise<MergeOutcome> {
    const repo = ["-C", worktree.repo];
    const operations: string[] = [];
    const refused = (reason: string, conflicts: string[] = []): MergeRefused => ({
      merged: false,
      reason,
      conflicts,
      operations,
    });
    const into = (await this.options.git([...repo, "symbolic-ref", "--quiet", "--short", "HEAD"])).stdout.trim();
    if (into === "") return refused("the repository's checkout is not on a branch (detached HEAD)");
    // "XY path" entries; -z keeps a path's own spaces and leading blanks intact.
    const dirty = (await this.git([...repo, "status", "--porcelain", "--untracked-files=no", "-z"]))
      .split("\0")
      .filter((entry) => entry.length > 3);
    if (dirty.length > 0)
      return refused(
        "the repository's checkout has uncommitted changes: commit or stash them first",
        dirty.map((entry) => entry.slice(3)),
      );
    // What merging would bring, checked first with a commit no branch points at: a refused merge changes nothing.
    const git = await this.inWorktree(worktree);
    const identity = await this.identity(git);
    const tree = await this.snapshotTree(git);
    const head = (await git(["rev-parse", "HEAD"])).trim();
    // The branch is what gets merged: it must be what was checked, the worktree's HEAD.
    if ((await git(["rev-parse", "--verify", `refs/heads/${worktree.branch}`])).trim() !== head) {
      return refused(
        `the worktree's HEAD is not its branch ${worktree.branch} any more (the agent checked out something else)`,
      );
    }
    const headTree = (await git(["rev-parse", "HEAD^{tree}"])).trim();
    const tip =
      tree === headTree ? head : (await git(["commit-tree", tree, "-p", head, "-m", message], identity)).trim();
    if (tip === worktree.base) return refused("the job changed nothing");
    operations.push(`git -C ${worktree.repo} merge-tree --write-tree --name-only HEAD <the job's changes>`);
    const check = await this.options.git([
      ...repo,
      "merge-tree",
      "--write-tree",
      "--name-only",
      "--no-messages",
      "HEAD",
      tip,
    ]);
    if (check.code === 1) {
      // Merged by hand, the branch would miss the uncommitted work: the commit made above holds all of it.
      const work = tip === head ? worktree.branch : tip;
      return {
        ...refused(`merging would conflict with ${into}`, check.stdout.split("\n").slice(1).filter(Boolean)),
        work,
      };
    }
    if (check.code !== 0) throw new DispatchError("GIT_FAILED", `git merge-tree: ${gitMessage(check)}`);
    const blocked = await this.inTheWay(worktree.repo, check.stdout.split("\n", 1)[0] ?? "");
    if (blocked) return refused(blocked.reason, blocked.paths);
    if (tip !== head) {
      // The job's uncommitted work becomes a commit on its branch, the worktree's
      // files untouched; undone if the index cannot follow.
      operations.push(`git -C ${worktree.path} update-ref refs/heads/${worktree.branch} <the job's changes>`);
      await git([
        "update-ref",
        "-m",
        "claude-dispatch: the job's uncommitted work",
        `refs/heads/${worktree.branch}`,
        tip,
        head,
      ]);
      try {
        await git(["read-tree", tip]);
      } catch (error) {
        await git(["update-ref", `refs/heads/${worktree.branch}`, head, tip]).catch(() => undefined);
        throw error;
      }
    }
    operations.push(`git -C ${worktree.repo} merge --no-edit ${worktree.branch}`);
    await this.git(
      [...repo, "merge", "--quiet", "--no-edit", worktree.branch],
      await this.identity((args) => this.git([...repo, ...args])),
    );
    const commit = (await this.git([...repo, "rev-parse", "HEAD"])).trim();
    // The work is in the checkout: the folder has nothing left to give (§19.1); the branch stays until retention.
    operations.push(`git -C ${worktree.repo} worktree remove --force --force ${worktree.path}`);
    const removed = await this.removeFolder(worktree).then(
      () => true,
      () => false,
    );
    return { merged: true, into, commit, operations, removed };
  }

  /**
   * What would stop the merge from changing only what git tracks in the user's checkout (§19.2): a file or
   * folder git does not track (ignored or untracked) where the merge writes, or a change to the hooks that git
   * runs in that checkout during the merge.
   */
  private async inTheWay(repo: string, mergedTree: string): Promise<{ reason: string; paths: string[] } | undefined> {
    const entries = (
      await this.git(["-C", repo, "diff", "--name-status", "-z", "--no-renames", "--no-ext-diff", "HEAD", mergedTree])
    ).split("\0");
    const changed = new Map<string, string>();
    for (let index = 0; index + 1 < entries.length; index += 2)
      changed.set(entries[index + 1] ?? "", entries[index] ?? "");
    const untracked = untrackedInTheWay(repo, changed);
    if (untracked.length > 0) {
      return {
        reason:
          "merging would overwrite or remove files that git does not track (ignored or untracked) in the " +
          "repository's checkout: move them away first",
        paths: untracked,
      };
    }
    const hooks = (await this.git(["-C", repo, "rev-parse", "--git-path", "hooks"])).trim();
    const inside = path.relative(repo, path.resolve(repo, hooks)).split(path.sep).join("/");
    if (inside.startsWith("..") || path.isAbsolute(inside)) return undefined;
    const touched = [...changed.keys()].filter(
      (file) => inside === "" || file === inside || file.startsWith(`${inside}/`),
    );
    return touched.length > 0
      ? {
          reason:
            `the job changed the hooks that git runs in the repository's checkout (${inside}/): ` +
            "read them, then merge with git yourself",
          paths: touched,
        }
      : undefined;
  }

  async discard(worktree: WorktreeRecord): Promise<void> {
    await this.removeFolder(worktree);
    const branch = await this.options.git([
      "-C",
      worktree.repo,
      "rev-parse",
      "--verify",
      "--quiet",
      `refs/heads/${worktree.branch}`,
    ]);
    if (branch.code === 0) await this.git(["-C", worktree.repo, "branch", "-D", "--quiet", worktree.branch]);
  }

  /** The worktree's folder, and git's note of it; a merged job's is gone already. */
  private async removeFolder(worktree: WorktreeRecord): Promise<void> {
    let intact = existsSync(worktree.path);
    if (intact) {
      intact = await worktreeGit(this.options.git, worktree).then(
        () => true,
        () => false,
      );
    }
    // A worktree whose git link was changed is removed as a folder (no link in it followed, nothing in it run).
    // Twice forced: a worktree the agent locked (`git worktree lock`) goes too.
    if (intact) await this.git(["-C", worktree.repo, "worktree", "remove", "--force", "--force", worktree.path]);
    else {
      rmSync(worktree.path, { recursive: true, force: true });
      await this.options.git(["-C", worktree.repo, "worktree", "prune"]);
    }
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
