/**
 * git on a job's worktree without trusting anything the agent could have
 * written there (PROTOCOL.md §19.2, docs/worktrees.md): the repository is the
 * one the worktree was made from, named explicitly, never what
 * `<worktree>/.git` says; and every setting that would make git run a program
 * is turned off for the call.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, realpathSync } from "node:fs";
import { devNull } from "node:os";
import path from "node:path";

import { DispatchError, quoted } from "../core/errors.js";
import type { WorktreeRecord } from "../agent/worktree.js";

export interface GitRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Why git could not be run at all (not found, not executable). */
  spawnError?: string;
}

/** Runs git with these arguments; env is added to git's own environment. */
export type RunGit = (args: readonly string[], env?: Readonly<Record<string, string>>) => Promise<GitRun>;

/**
 * Settings that run a program (or reach one) when git works in a folder, each set to do nothing. They come
 * after every configuration file git reads, so they win over the user's and over any the agent planted.
 */
const NEUTRAL_SETTINGS: ReadonlyArray<readonly [string, string]> = [
  ["core.fsmonitor", "false"],
  // A relative hooks path is resolved inside the worktree, where the agent writes: no hook runs at all.
  ["core.hooksPath", devNull],
  ["core.sshCommand", "false"],
  ["core.askPass", ""],
  ["core.pager", "cat"],
  // No transport at all: a partial clone's lazy fetch, or a promisor remote, would start one.
  ["protocol.allow", "never"],
  ["credential.helper", ""],
  ["diff.external", ""],
  ["commit.gpgSign", "false"],
  ["gc.auto", "0"],
  ["maintenance.auto", "false"],
  // A folder with a .git of its own inside the worktree is the agent's repository: git is not run in it.
  ["submodule.recurse", "false"],
  ["diff.ignoreSubmodules", "all"],
  ["status.submoduleSummary", "false"],
];

/**
 * Per-driver settings that name a program; the worktree's .gitattributes
 * choose the driver, so each configured one is emptied.
 */
const DRIVER_PROGRAMS: Readonly<Record<string, readonly string[]>> = {
  filter: ["clean", "smudge", "process"],
  diff: ["textconv", "command"],
};

/** The longest .git link file read: a path and a line. */
const MAX_LINK_BYTES = 8192;

/** How git is run on one worktree: the arguments that come before the command, and the environment. */
export interface WorktreeGit {
  args: readonly string[];
  env: Readonly<Record<string, string>>;
  /** The worktree's own git folder, inside the user's repository's. */
  gitDir: string;
}

function refused(worktree: WorktreeRecord, problem: string): DispatchError {
  return new DispatchError(
    "GIT_FAILED",
    `the worktree ${quoted(worktree.path)} ${problem}; git is not run there (discard it, or look at it yourself)`,
  );
}

/**
 * The `.git` link file of a worktree, read without following a link or blocking
 * on a FIFO; undefined if it is not a regular file.
 */
function readLink(file: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0));
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    const buffer = Buffer.alloc(MAX_LINK_BYTES);
    const length = readSync(fd, buffer, 0, buffer.length, 0);
    return buffer.toString("utf8", 0, length);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

function samePlace(a: string, b: string): boolean {
  if (a === b) return true;
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}

/** The worktree's git folder as git made it: `<the repository's git folder>/worktrees/<the worktree's folder name>`. */
export async function worktreeGitDir(git: RunGit, repo: string, worktreePath: string): Promise<string> {
  const common = await git(["-C", repo, "rev-parse", "--path-format=absolute", "--git-common-dir"]);
  const dir = common.stdout.trim();
  if (common.code !== 0 || dir === "") {
    throw new DispatchError(
      "GIT_FAILED",
      `git rev-parse in ${quoted(repo)}: ` +
        `${(common.spawnError ?? common.stderr.trim()) || `exit code ${String(common.code)}`}`.slice(0, 600),
    );
  }
  return path.join(dir, "worktrees", path.basename(worktreePath));
}

/**
 * Checks that the worktree's git link is still the one git wrote when the worktree was made (GIT_FAILED
 * naming the problem if not), and returns how to run git there: with that git folder named, and with every
 * program-running setting turned off.
 */
export async function worktreeGit(git: RunGit, worktree: WorktreeRecord): Promise<WorktreeGit> {
  const gitDir = await worktreeGitDir(git, worktree.repo, worktree.path);
  const link = readLink(path.join(worktree.path, ".git"));
  if (link === undefined)
    throw refused(
      worktree,
      "has no .git link file any more (it was removed, or replaced by a folder, a link or something else)",
    );
  const named = /^gitdir: (.+?)\r?\n?$/.exec(link)?.[1];
  if (named === undefined || !samePlace(named, gitDir))
    throw refused(worktree, `has a changed .git link (it should name ${quoted(gitDir)})`);
  try {
    if (!lstatSync(gitDir).isDirectory()) throw new Error("not a folder");
  } catch {
    throw refused(worktree, `has lost its git folder ${quoted(gitDir)} in the repository`);
  }
  const settings = [...NEUTRAL_SETTINGS, ...(await driverSettings(git, gitDir))];
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(settings.length), GIT_NO_LAZY_FETCH: "1" };
  settings.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${index}`] = key;
    env[`GIT_CONFIG_VALUE_${index}`] = value;
  });
  return { args: ["-C", worktree.path, `--git-dir=${gitDir}`, `--work-tree=${worktree.path}`], env, gitDir };
}

/**
 * Each filter and diff driver git's configuration defines, with its programs
 * emptied (and a required filter made optional).
 */
async function driverSettings(git: RunGit, gitDir: string): Promise<Array<readonly [string, string]>> {
  const listed = await git([`--git-dir=${gitDir}`, "config", "-z", "--get-regexp", "^(filter|diff)\\."]);
  // Exit code 1: no such setting.
  if (listed.code === 1) return [];
  if (listed.code !== 0)
    throw new DispatchError(
      "GIT_FAILED",
      `git config: ${(listed.spawnError ?? listed.stderr.trim()) || `exit code ${String(listed.code)}`}`.slice(0, 600),
    );
  const drivers = new Map<string, Set<string>>();
  for (const entry of listed.stdout.split("\0")) {
    const key = entry.split("\n", 1)[0] ?? "";
    const section = key.slice(0, key.indexOf("."));
    const name = key.slice(section.length + 1, key.lastIndexOf("."));
    if (!(section in DRIVER_PROGRAMS) || name === "") continue;
    drivers.set(section, (drivers.get(section) ?? new Set()).add(name));
  }
  const settings: Array<readonly [string, string]> = [];
  for (const [section, names] of drivers) {
    for (const name of names) {
      for (const program of DRIVER_PROGRAMS[section] ?? []) settings.push([`${section}.${name}.${program}`, ""]);
      if (section === "filter") settings.push([`filter.${name}.required`, "false"]);
    }
  }
  return settings;
}
