import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";

import { ConfigError, loadConfig } from "../src/config.js";
import { checkDirectory } from "../src/directory.js";

test("defaults", () => {
  assert.deepEqual(loadConfig({}), {
    claudeBin: "claude",
    depth: 0,
    maxDepth: 1,
    maxLineBytes: 16 * 1024 * 1024,
    maxOutputBytes: 64 * 1024 * 1024,
    killGraceMs: 3000,
    jobRetentionMs: 600_000,
    logLevel: "info",
  });
});

test("values are read and trimmed; empty means default", () => {
  const config = loadConfig({
    CLAUDE_DISPATCH_CLAUDE_BIN: " /opt/claude ",
    CLAUDE_DISPATCH_DEPTH: "2",
    CLAUDE_DISPATCH_MAX_DEPTH: "3",
    CLAUDE_DISPATCH_KILL_GRACE_MS: "0",
    CLAUDE_DISPATCH_JOB_RETENTION_MS: "",
    CLAUDE_DISPATCH_LOG_LEVEL: "debug",
  });
  assert.equal(config.claudeBin, "/opt/claude");
  assert.equal(config.depth, 2);
  assert.equal(config.maxDepth, 3);
  assert.equal(config.killGraceMs, 0);
  assert.equal(config.jobRetentionMs, 600_000);
  assert.equal(config.logLevel, "debug");
});

test("invalid values are errors that name the variable, never silent fallbacks", () => {
  const cases: Array<[string, string]> = [
    ["CLAUDE_DISPATCH_DEPTH", "-1"],
    ["CLAUDE_DISPATCH_DEPTH", "one"],
    ["CLAUDE_DISPATCH_MAX_DEPTH", "1.5"],
    ["CLAUDE_DISPATCH_MAX_LINE_BYTES", "10"],
    ["CLAUDE_DISPATCH_MAX_OUTPUT_BYTES", "1e99"],
    ["CLAUDE_DISPATCH_KILL_GRACE_MS", "60001"],
    ["CLAUDE_DISPATCH_JOB_RETENTION_MS", "forever"],
    ["CLAUDE_DISPATCH_LOG_LEVEL", "loud"],
  ];
  for (const [name, value] of cases) {
    assert.throws(() => loadConfig({ [name]: value }), (error: unknown) => error instanceof ConfigError && error.message.includes(name), `${name}=${value}`);
  }
});

test("checkDirectory: absolute existing directories only (the reference accepted any existing path, files too)", async () => {
  const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-dir-"));
  try {
    const file = path.join(scratch, "file.txt");
    writeFileSync(file, "x");
    assert.equal(await checkDirectory(scratch), undefined);
    assert.match((await checkDirectory(file)) ?? "", /^is not a directory/);
    assert.match((await checkDirectory(path.join(scratch, "missing"))) ?? "", /^does not exist/);
    assert.match((await checkDirectory(path.join(file, "below"))) ?? "", /^does not exist/);
    assert.match((await checkDirectory("relative/path")) ?? "", /^must be an absolute path/);
    assert.match((await checkDirectory("C:\\work", path.posix)) ?? "", /^must be an absolute path/);
    assert.equal(await checkDirectory("C:\\", path.win32).then((problem) => problem === undefined || !problem.startsWith("must be")), true);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});
