/**
 * git for the worktree tests: an environment of its own (no system or user configuration of the runner's,
 * a fixed identity) and a runner of git in a folder with it.
 */
import { execFileSync } from "node:child_process";

import { minimalEnvironment } from "./server-process.js";

export function gitEnvironment(home: string): Record<string, string> {
  return minimalEnvironment({
    HOME: home,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_AUTHOR_NAME: "tester",
    GIT_AUTHOR_EMAIL: "tester@localhost",
    GIT_COMMITTER_NAME: "tester",
    GIT_COMMITTER_EMAIL: "tester@localhost",
  });
}

/** git in cwd with that environment; throws on a non-zero exit, with git's message. */
export function gitRunner(env: Record<string, string>): (cwd: string, ...args: string[]) => string {
  return (cwd, ...args) => execFileSync("git", args, { cwd, env, encoding: "utf8" });
}
