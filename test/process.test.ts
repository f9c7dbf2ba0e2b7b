/**
 * The process layer with real processes: the fake agent in test/fixtures
 * (a Node script standing in for `claude`) spawns children, grandchildren in
 * new sessions, processes that ignore SIGTERM, and holds stdout open.
 * POSIX only; the Windows branch is covered in windows.test.ts.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { agentEnvironment } from "../src/runtimes/claude/index.js";
import { createClaudeAgents } from "./helpers.js";
import type { AgentOutcome, AgentRun } from "../src/agent/types.js";
import { systemClock } from "../src/core/clock.js";
import {
  createProcessControl,
  type PosixPlatform,
  type ProcessControl,
  type ProcessInfo,
} from "../src/hosts/local/index.js";
import { RecordingLogger } from "./helpers.js";
import { isAlive, LINUX_PLATFORM, readPids, waitFor } from "./processes.js";
import { minimalEnvironment } from "./server-process.js";
import { observedPlatform } from "./support/events.js";

const FAKE_CLAUDE = fileURLToPath(new URL("./fixtures/fake-claude.mjs", import.meta.url));
const isLinux = process.platform === "linux";
const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-process-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

let fileCounter = 0;
function scratchFile(name: string): string {
  fileCounter += 1;
  return path.join(scratch, `${name}-${fileCounter}`);
}

const platform: PosixPlatform = LINUX_PLATFORM;

function control(overrides: { killGraceMs?: number; maxLineBytes?: number } = {}): {
  processes: ProcessControl;
  run(prompt: string, options?: { resumeSessionId?: string; bin?: string; env?: Record<string, string> }): AgentRun;
  logger: RecordingLogger;
  tableRead: ReturnType<typeof observedPlatform>["tableRead"];
} {
  const logger = new RecordingLogger();
  const observed = observedPlatform(platform);
  const processes = createProcessControl({
    platform: observed.platform,
    clock: systemClock,
    logger,
    newMarker: () => randomUUID(),
    defer: (fn) => void setImmediate(fn),
    killGraceMs: overrides.killGraceMs ?? 400,
    treeRefreshMs: 100,
    exitDrainMs: 200,
    killPollMs: 50,
  });
  return {
    processes,
    logger,
    tableRead: observed.tableRead,
    run: (prompt, options = {}) =>
      createClaudeAgents({
        start: (request) => processes.start(request),
        attach: (request) => processes.attach(request),
        bin: options.bin ?? FAKE_CLAUDE,
        env: agentEnvironment(minimalEnvironment(), { CLAUDE_DISPATCH_DEPTH: "1", ...options.env }),
        maxLineBytes: overrides.maxLineBytes ?? 1024 * 1024,
        transcriptChars: 100_000,
        stderrTailBytes: 64 * 1024,
      }).launch({
        prompt,
        cwd: scratch,
        ...(options.resumeSessionId ? { resumeSessionId: options.resumeSessionId } : {}),
      }),
  };
}

function expectOk(outcome: AgentOutcome): Extract<AgentOutcome, { ok: true }> {
  if (!outcome.ok) assert.fail(`expected success, got ${outcome.code}: ${outcome.detail}`);
  return outcome;
}

function expectFailure(outcome: AgentOutcome, code: string): Extract<AgentOutcome, { ok: false }> {
  if (outcome.ok) assert.fail(`expected ${code}, got success`);
  assert.equal(outcome.code, code, outcome.detail);
  return outcome;
}

/**
 * An agent whose tool call (the middle process) starts a child and exits after lifetimeMs: once a read of the
 * table shows that child (the orphan) reparented away from the agent.
 */
async function orphaned(lifetimeMs: number): Promise<ReturnType<typeof control> & { agent: AgentRun; orphan: number }> {
  const controlled = control();
  const [orphanFile, agentFile] = [scratchFile("orphan"), scratchFile("orphan-agent")];
  const agent = controlled.run([`@pid ${agentFile}`, `@orphan ${orphanFile} ${lifetimeMs}`, "@sleep 60000"].join("\n"));
  await waitFor(() => readPids(orphanFile).length === 1 && readPids(agentFile).length === 1, "the two pids");
  const [orphan] = readPids(orphanFile) as [number];
  const [agentPid] = readPids(agentFile) as [number];
  const reparented = (table: ReadonlyMap<number, ProcessInfo>): boolean =>
    table.has(orphan) && grandparentOf(table, orphan) !== agentPid;
  await controlled.tableRead("the orphan reparented", reparented);
  return { ...controlled, agent, orphan };
}

/** The parent of pid's parent as one read of the table shows it. */
function grandparentOf(table: ReadonlyMap<number, ProcessInfo>, pid: number): number | undefined {
  const parent = table.get(pid)?.ppid;
  return parent === undefined ? undefined : table.get(parent)?.ppid;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("agent outcomes through real processes", { skip: !isLinux && "POSIX process tests run on Linux" }, () => {
  test("echo: the result object is parsed and the prompt went through stdin", async () => {
    const { run, processes } = control();
    const outcome = expectOk(await run("say hello").outcome);
    assert.equal(outcome.result.text, "ECHO: say hello");
    assert.match(outcome.result.sessionId ?? "", UUID);
    assert.equal(outcome.result.costUsd, 0.0123);
    assert.equal(outcome.result.numTurns, 1);
    await processes.idle();
  });

  test(
    "argv is exactly -p --output-format stream-json --verbose [--resume=id], and the environment carries the " +
      "depth without CLAUDECODE",
    async () => {
      const { run, processes } = control();
      const record = scratchFile("record");
      expectOk(await run(`@record ${record}`, { env: { CLAUDECODE: "1" } }).outcome);
      const first = JSON.parse(readFileSync(record, "utf8"));
      assert.deepEqual(first.argv, ["-p", "--output-format", "stream-json", "--verbose"]);
      assert.equal(first.depth, "1");
      assert.equal(first.claudecode, null, "CLAUDECODE makes a real claude refuse to start as a nested session");
      assert.equal(first.cwd, scratch);

      const session = "8f01635f-202a-449c-ab8a-05f75520788e";
      const resumed = expectOk(await run(`@record ${record}`, { resumeSessionId: session }).outcome);
      assert.deepEqual(JSON.parse(readFileSync(record, "utf8")).argv, [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        `--resume=${session}`,
      ]);
      assert.equal(resumed.result.sessionId, session);
      await processes.idle();
    },
  );

  test("besides stream-json, one object, an array of events and pretty-printed JSON are read", async () => {
    const { run, processes } = control();
    assert.equal(expectOk(await run("@array\nfrom array").outcome).result.text, "ECHO: @array\nfrom array");
    assert.equal(expectOk(await run("@single\nfrom one object").outcome).result.text, "ECHO: @single\nfrom one object");
    assert.equal(expectOk(await run("@pretty\npretty").outcome).result.text, "ECHO: @pretty\npretty");
    await processes.idle();
  });

  test(
    "exit 1 with the result JSON on stdout surfaces the CLI's message, not stderr (the reference " + "read stderr)",
    async () => {
      const { run, processes } = control();
      const failure = expectFailure(await run("@error-json Not logged in · Please run /login").outcome, "AGENT_ERROR");
      assert.match(failure.detail, /^Not logged in · Please run \/login/);
      assert.match(failure.detail, /API status 500/);
      assert.match(failure.result?.sessionId ?? "", UUID);
      await processes.idle();
    },
  );

  test("a max-turns result has no `result` field: its errors are the message", async () => {
    const { run, processes } = control();
    const failure = expectFailure(await run("@max-turns").outcome, "AGENT_ERROR");
    assert.match(failure.detail, /Reached maximum number of turns \(2\)/);
    assert.equal(failure.result?.numTurns, 3);
    await processes.idle();
  });

  test("non-zero exit without JSON, non-JSON output and silence each have their own code", async () => {
    const { run, processes } = control();
    const exited = expectFailure(await run("@exit 3").outcome, "AGENT_EXITED");
    assert.match(exited.detail, /exited with code 3: fake-claude: failing on purpose/);
    const garbage = expectFailure(await run("@garbage").outcome, "BAD_OUTPUT");
    assert.match(garbage.detail, /Welcome! Please log in/);
    expectFailure(await run("@silent").outcome, "BAD_OUTPUT");
    await processes.idle();
  });

  test("an unknown --resume id is SESSION_NOT_FOUND", async () => {
    const { run, processes } = control();
    const failure = expectFailure(
      await run("hi", { resumeSessionId: "00000000-0000-4000-8000-000000000000" }).outcome,
      "SESSION_NOT_FOUND",
    );
    assert.match(failure.detail, /00000000-0000-4000-8000-000000000000/);
    await processes.idle();
  });

  test("a missing binary is SPAWN_FAILED with install advice", async () => {
    const { run, processes } = control();
    const failure = expectFailure(
      await run("hi", { bin: path.join(scratch, "no-such-claude") }).outcome,
      "SPAWN_FAILED",
    );
    assert.match(failure.detail, /not found \(CLAUDE_DISPATCH_CLAUDE_BIN\)/);
    const onPath = expectFailure(await run("hi", { bin: "claude", env: { PATH: scratch } }).outcome, "SPAWN_FAILED");
    assert.equal(onPath.detail, "claude not found on PATH; install Claude Code or set CLAUDE_DISPATCH_CLAUDE_BIN");
    await processes.idle();
  });

  test("a working directory that vanished before the spawn is reported as such, not as a missing claude", async () => {
    const logger = new RecordingLogger();
    const processes = createProcessControl({
      platform,
      clock: systemClock,
      logger,
      killGraceMs: 100,
      newMarker: () => randomUUID(),
      defer: (fn) => void setImmediate(fn),
    });
    const { launch } = createClaudeAgents({
      start: (request) => processes.start(request),
      attach: (request) => processes.attach(request),
      bin: FAKE_CLAUDE,
      env: minimalEnvironment(),
      maxLineBytes: 1024,
      transcriptChars: 1024,
      stderrTailBytes: 1024,
    });
    const gone = path.join(scratch, "deleted-meanwhile");
    const failure = expectFailure(await launch({ prompt: "hi", cwd: gone }).outcome, "SPAWN_FAILED");
    assert.match(failure.detail, /working directory .*deleted-meanwhile does not exist/);
    await processes.idle();
  });

  test("output past the capture cap fails with OUTPUT_TOO_LARGE and stops the agent", async () => {
    const { run, processes } = control({ maxLineBytes: 64 * 1024 });
    const pidFile = scratchFile("big");
    const agent = run(`@pid ${pidFile}\n@spawn ${pidFile}\n@big 200000`);
    const failure = expectFailure(await agent.outcome, "OUTPUT_TOO_LARGE");
    assert.match(failure.detail, /CLAUDE_DISPATCH_MAX_OUTPUT_BYTES/);
    await processes.idle();
    const pids = readPids(pidFile);
    assert.equal(pids.length, 2, "the agent and its child wrote their pids before the output");
    for (const pid of pids) assert.equal(isAlive(pid), false, `pid ${pid} outlived OUTPUT_TOO_LARGE`);
  });

  test("large output under the cap arrives whole", async () => {
    const { run, processes } = control({ maxLineBytes: 8 * 1024 * 1024 });
    const outcome = expectOk(await run("@big 3000000").outcome);
    assert.equal(outcome.result.text?.length, 3_000_000);
    await processes.idle();
  });
});

describe("completion and tree kill", { skip: !isLinux && "POSIX process tests run on Linux" }, () => {
  test(
    "a job completes when the agent exits even though a grandchild holds its stdout; the grandchild is " +
      "then stopped",
    async () => {
      const { run, processes } = control();
      const pidFile = scratchFile("hold");
      const outcome = expectOk(await run(`@hold-stdout ${pidFile}`).outcome);
      assert.match(outcome.result.text ?? "", /ECHO/);
      const [holder] = readPids(pidFile);
      assert.ok(holder);
      // The cleanup starts only after the outcome is answered, and the holder never closes stdout on its own.
      assert.equal(isAlive(holder), true, "completion must not wait for the grandchild to close stdout");
      await processes.idle();
      assert.equal(isAlive(holder), false, "the process left holding stdout is stopped after the agent exits");
    },
  );

  test(
    "kill leaves no survivors: children in the agent's session, in new sessions, and ones " + "ignoring SIGTERM",
    async () => {
      const { run, processes, tableRead } = control({ killGraceMs: 400 });
      const pidFile = scratchFile("tree");
      const agent = run(
        [
          `@pid ${pidFile}`,
          "@ignore-term",
          `@spawn ${pidFile}`,
          `@spawn ${pidFile} detached`,
          `@spawn ${pidFile} detached ignore-term`,
          "@sleep 60000",
        ].join("\n"),
      );
      await waitFor(() => readPids(pidFile).length === 4, "the agent and its three children");
      const pids = readPids(pidFile);
      assert.ok(pids.every(isAlive));
      // A read of the table that shows them all: the detached children are remembered, as Claude Code's tool calls are.
      await tableRead("the agent and its children in one table", (table) => pids.every((pid) => table.has(pid)));

      const report = await agent.kill();
      assert.deepEqual(report.survivors, []);
      const outcome = await agent.outcome;
      assert.equal(outcome.ok, false);
      await processes.idle();
      for (const pid of pids) assert.equal(isAlive(pid), false, `pid ${pid} survived the kill`);
    },
  );

  test("a process-group kill alone would miss the new-session child (the reference's defect)", async () => {
    const pidFile = scratchFile("group");
    const { run, processes, tableRead } = control();
    const agent = run([`@pid ${pidFile}`, `@spawn ${pidFile} detached`, "@sleep 60000"].join("\n"));
    await waitFor(() => readPids(pidFile).length === 2, "agent and detached child");
    const [agentPid, detachedPid] = readPids(pidFile) as [number, number];
    await tableRead("the agent and its child in one table", (table) => table.has(agentPid) && table.has(detachedPid));
    // What the reference did: SIGKILL the agent's process group.
    process.kill(-agentPid, "SIGKILL");
    // Checked synchronously: our own cleanup cannot have run yet.
    assert.equal(isAlive(detachedPid), true, "the new-session child escapes a group kill");
    await agent.outcome;
    // Our layer still stops it once the agent is gone.
    await processes.idle();
    assert.equal(isAlive(detachedPid), false);
  });

  test(
    "a tool child whose parent already exited is still killed, because the periodic refresh " + "remembered it",
    async () => {
      // The middle process exits after 300 ms, refreshes having seen it meanwhile.
      const { agent, orphan, processes } = await orphaned(300);
      assert.equal(isAlive(orphan), true);
      const report = await agent.kill();
      assert.deepEqual(report.survivors, []);
      await processes.idle();
      assert.equal(isAlive(orphan), false, "the orphaned tool child survived");
    },
  );

  test("a child whose shell exited before any refresh saw it is found by the agent's environment marker", async () => {
    // `server &` in a tool call that returns at once: the middle lives 30 ms, far less than a refresh.
    const { agent, orphan, processes } = await orphaned(30);
    assert.equal(isAlive(orphan), true);
    assert.deepEqual((await agent.kill()).survivors, []);
    await processes.idle();
    assert.equal(isAlive(orphan), false, "the quickly orphaned child survived");
  });

  test("the same holds for what an agent that finished normally left behind", async () => {
    const { run, processes } = control();
    const pidFile = scratchFile("quick-leftover");
    expectOk(await run(`@orphan ${pidFile} 30\n@sleep 200`).outcome);
    await waitFor(() => readPids(pidFile).length === 1, "the orphan's pid");
    const [orphan] = readPids(pidFile) as [number];
    await processes.idle();
    assert.equal(isAlive(orphan), false);
  });

  test("processes left behind by an agent that finished normally are stopped", async () => {
    const { run, processes } = control();
    const pidFile = scratchFile("leftover");
    // The agent lives past one tree refresh after starting its child, as a tool call would.
    expectOk(await run(`@spawn ${pidFile} detached\n@sleep 300`).outcome);
    const [leftover] = readPids(pidFile) as [number];
    await processes.idle();
    assert.equal(isAlive(leftover), false);
  });

  test("kill is idempotent and a kill after exit signals nothing", async () => {
    const { run, processes } = control();
    const agent = run("quick");
    expectOk(await agent.outcome);
    await processes.idle();
    const first = await agent.kill();
    assert.deepEqual(first.survivors, []);
    await processes.idle();
  });
});
