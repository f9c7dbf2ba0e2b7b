/**
 * What the tests spawn gets an environment built from what the test names
 * (minimalEnvironment() in test/server-process.ts), never the runner's whole
 * environment: a CLAUDE_DISPATCH_* set where the suite runs (it runs inside a
 * dispatched agent, with CLAUDE_DISPATCH_DEPTH=1) must not change what is tested.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";

import { MINIMAL_ENV_KEYS, minimalEnvironment, ServerProcess } from "./server-process.js";

const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));
const SERVER_PROCESS = new URL("./server-process.ts", import.meta.url).href;

test("minimalEnvironment passes through only its documented base, then what it is given", () => {
  const runner = {
    PATH: "/runner/bin",
    SystemRoot: "C:\\Windows",
    HOME: "/home/runner",
    TMPDIR: "/runner/tmp",
    XDG_STATE_HOME: "/runner/state",
    NODE_OPTIONS: "--inspect",
    CLAUDE_DISPATCH_DEPTH: "1",
    CLAUDE_DISPATCH_MAX_JOBS: "1",
    CLAUDE_DISPATCH_ROOTS: "/nowhere",
    CLAUDE_DISPATCH_STATE_DIR: "/runner/dispatch",
    CLAUDECODE: "1",
  };
  const built = minimalEnvironment({ CLAUDE_DISPATCH_LOG_LEVEL: "warn", PATH: "/given/bin" }, runner);
  const expectedBase = Object.fromEntries(MINIMAL_ENV_KEYS.map((key) => [key, runner[key as keyof typeof runner]]));
  assert.deepEqual(built, { ...expectedBase, CLAUDE_DISPATCH_LOG_LEVEL: "warn", PATH: "/given/bin" });
  assert.deepEqual(MINIMAL_ENV_KEYS, process.platform === "win32" ? ["PATH", "SystemRoot"] : ["PATH"]);
  assert.deepEqual(
    minimalEnvironment({}, { HOME: "/h" }),
    process.platform === "win32" ? {} : { PATH: "/usr/bin:/bin" },
    "PATH falls back; nothing else appears",
  );

  // Against the real runner's environment, whatever it holds.
  const keys = Object.keys(minimalEnvironment({ ONLY_THIS: "x" }));
  for (const key of keys)
    assert.ok(key === "ONLY_THIS" || MINIMAL_ENV_KEYS.includes(key), `${key} leaked from the runner's environment`);
});

test(
  "a server started by ServerProcess has exactly the base, the helper's defaults and the test's variables (/proc/<pid>/environ)",
  { skip: process.platform !== "linux" && "reads /proc" },
  async () => {
    const server = new ServerProcess({ TEST_ONLY_VARIABLE: "yes" });
    try {
      await server.initialize();
      const environ = readFileSync(`/proc/${server.child.pid}/environ`, "utf8").split("\0").filter(Boolean);
      const keys = environ.map((entry) => entry.slice(0, entry.indexOf("="))).sort();
      const defaults = [
        "CLAUDE_DISPATCH_CLAUDE_BIN",
        "CLAUDE_DISPATCH_KILL_GRACE_MS",
        "CLAUDE_DISPATCH_LOG_LEVEL",
        "CLAUDE_DISPATCH_ON_EXIT",
        "CLAUDE_DISPATCH_STATE_DIR",
        "TEST_ONLY_VARIABLE",
      ];
      assert.deepEqual(keys, [...defaults, ...MINIMAL_ENV_KEYS].sort());
      server.endInput();
      await server.exited;
    } finally {
      server.dispose();
    }
  },
);

test(
  "run where CLAUDE_DISPATCH_DEPTH=1 and CLAUDE_DISPATCH_MAX_DEPTH=1 are set, a ServerProcess still offers " +
    "the nine tools",
  { skip: process.platform !== "linux" && "the fake agent is an .mjs file run directly", timeout: 60_000 },
  async () => {
    // The child stands for a test runner started inside a dispatched agent; only its environment says so.
    const script = `
      import { ServerProcess } from ${JSON.stringify(SERVER_PROCESS)};
      const server = new ServerProcess();
      try {
        await server.initialize();
        const listed = await server.request("tools/list");
        process.stdout.write(JSON.stringify({ tools: listed.result?.tools?.length ?? null, error: listed.error ?? null }) + "\\n");
        server.endInput();
        await server.exited;
      } finally {
        server.dispose();
      }
    `;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      {
        cwd: REPO_ROOT,
        env: minimalEnvironment({ CLAUDE_DISPATCH_DEPTH: "1", CLAUDE_DISPATCH_MAX_DEPTH: "1" }),
        timeout: 30_000,
      },
    );
    assert.deepEqual(JSON.parse(stdout.trim()), { tools: 9, error: null });
  },
);
