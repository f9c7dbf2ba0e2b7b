/**
 * git on this machine, for worktrees (PROTOCOL.md §19): found once on PATH by
 * the server's own resolver and run by that absolute path with an argv array,
 * never through a shell. Its output is bounded; a git that hangs is killed.
 */
import { execFile } from "node:child_process";

import { findProgram } from "./find-program.js";

export interface GitResult {
  code: number | null;
  stdout: string;
  stderr: string;
  spawnError?: string;
}

/** A diff larger than this is cut by git's runner, not held whole. */
const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;
const TIMEOUT_MS = 120_000;

export function createGitRunner({
  env,
  platform,
}: {
  env: Readonly<Record<string, string | undefined>>;
  platform: string;
}): (args: readonly string[], extraEnv?: Readonly<Record<string, string>>) => Promise<GitResult> {
  let program: string | undefined;
  return (args, extraEnv) => {
    program ??= findProgram("git", env, { platform });
    const bin = program;
    if (!bin) return Promise.resolve({ code: null, stdout: "", stderr: "", spawnError: "git not found on PATH" });
    return new Promise((resolve) => {
      // No prompts for credentials or editors: nothing here is interactive.
      const childEnv = { ...env, GIT_TERMINAL_PROMPT: "0", GIT_EDITOR: "true", ...extraEnv };
      execFile(
        bin,
        [...args],
        { env: childEnv, maxBuffer: MAX_OUTPUT_BYTES, timeout: TIMEOUT_MS, windowsHide: true, encoding: "utf8" },
        (error, stdout, stderr) => {
          if (error && typeof (error as NodeJS.ErrnoException).code === "string") {
            resolve({ code: null, stdout, stderr, spawnError: error.message });
            return;
          }
          const code = error ? ((error as { code?: number }).code ?? 1) : 0;
          resolve({ code: typeof code === "number" ? code : 1, stdout, stderr });
        },
      );
    });
  };
}
