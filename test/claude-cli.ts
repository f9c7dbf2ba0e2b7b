/**
 * The real Claude Code CLI the real-CLI suites drive: the pinned
 * devDependency, or CLAUDE_DISPATCH_CLAUDE_BIN when the runner sets it.
 * Without a working one (or off Linux, whose /proc these suites read), a
 * suite fails under CI=true and is skipped, with one loud line, elsewhere.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { minimalEnvironment } from "./server-process.js";

const PINNED_CLI = fileURLToPath(new URL("../node_modules/.bin/claude", import.meta.url));
export const cliPath = process.env.CLAUDE_DISPATCH_CLAUDE_BIN || PINNED_CLI;

function probeVersion(): string | undefined {
  if (path.isAbsolute(cliPath) && !existsSync(cliPath)) return undefined;
  const probe = spawnSync(cliPath, ["--version"], { encoding: "utf8", timeout: 30_000 });
  return probe.status === 0 ? probe.stdout.trim() : undefined;
}

/** The CLI's version, or undefined after failing (CI) or announcing the skip of `suite`. */
export function realCliVersion(suite: string): string | undefined {
  const version = process.platform === "linux" ? probeVersion() : undefined;
  if (version) return version;
  const why =
    process.platform !== "linux" ? "these checks read /proc (Linux only)" : `no working Claude Code CLI at ${cliPath}`;
  if (process.env.CI === "true" && process.platform === "linux") {
    test(`the real Claude Code CLI is installed (${suite})`, () =>
      assert.fail(`${why}; run npm ci with install scripts enabled`));
  } else {
    process.stderr.write(
      `\n!!! SKIPPING the real Claude Code CLI tests (${suite}): ${why}. Run \`npm ci\` to install the pinned CLI.\n\n`,
    );
  }
  return undefined;
}

/**
 * The environment the real CLI runs in against the mock API, built from nothing but what it names: a throwaway
 * HOME and TMPDIR, the mock's URL and a dummy key, no traffic of its own, no retries; then `extra`.
 */
export function mockedCliEnvironment(
  home: string,
  tmp: string,
  mockUrl: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return minimalEnvironment({
    HOME: home,
    TMPDIR: tmp,
    ANTHROPIC_BASE_URL: mockUrl,
    ANTHROPIC_API_KEY: "dummy",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_AUTOUPDATER: "1",
    CLAUDE_CODE_MAX_RETRIES: "0",
    ...extra,
  });
}
