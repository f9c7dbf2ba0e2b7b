/**
 * End to end: the built server, spawned as a host spawns it, speaking raw
 * JSON lines, with the fake agent from test/fixtures standing in for claude.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, describe, test } from "node:test";

import { isAlive, readPids, waitFor } from "./processes.js";
import { ServerProcess } from "./server-process.js";

const isLinux = process.platform === "linux";
const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-e2e-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const servers: ServerProcess[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.dispose();
});

function startServer(env: Record<string, string> = {}): ServerProcess {
  const server = new ServerProcess(env);
  servers.push(server);
  return server;
}

let counter = 0;
const scratchFile = (name: string): string => path.join(scratch, `${name}-${(counter += 1)}`);

function assertStdoutIsFrames(server: ServerProcess): void {
  for (const line of server.lines) {
    const message = JSON.parse(line);
    assert.equal(message.jsonrpc, "2.0", `not a JSON-RPC frame: ${line}`);
  }
}

describe("the built server over stdio", { skip: !isLinux && "end-to-end process checks read /proc" }, () => {
  test("initialize, list, and all four tools through a real agent process", async () => {
    const server = startServer();
    const init = await server.initialize("2025-11-25");
    assert.equal(init.result.protocolVersion, "2025-11-25");
    assert.equal(init.result.serverInfo.name, "claude-dispatch");

    const listed = await server.request("tools/list");
    assert.deepEqual(
      listed.result.tools.map((tool: { name: string }) => tool.name),
      ["claude_run", "claude_start", "claude_wait", "claude_kill"],
    );

    // claude_run, then continue the same session.
    const run = await server.callTool("claude_run", { prompt: "what is this project?", cwd: scratch });
    assert.equal(run.result.isError, undefined);
    assert.equal(run.result.structuredContent.status, "completed");
    assert.equal(run.result.structuredContent.result, "ECHO: what is this project?");
    const sessionId = run.result.structuredContent.session_id;
    assert.match(sessionId, /^[0-9a-f-]{36}$/);
    const resumed = await server.callTool("claude_run", { prompt: "and then?", cwd: scratch, session_id: sessionId });
    assert.equal(resumed.result.structuredContent.session_id, sessionId);

    // claude_start + claude_wait: running, then completed.
    const started = await server.callTool("claude_start", { prompt: "@sleep 700\nlong task", cwd: scratch });
    const jobId = started.result.structuredContent.job_id;
    assert.equal(started.result.structuredContent.status, "running");
    const early = await server.callTool("claude_wait", { job_id: jobId, hold_ms: 0 });
    assert.equal(early.result.structuredContent.status, "running");
    assert.match(early.result.content[0].text, /call claude_wait again/i);
    const done = await server.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 });
    assert.equal(done.result.structuredContent.status, "completed");
    assert.equal(done.result.structuredContent.result, "ECHO: @sleep 700\nlong task");

    // claude_kill of a running job, then of the same job again.
    const pidFile = scratchFile("kill");
    const victim = await server.callTool("claude_start", { prompt: `@pid ${pidFile}\n@spawn ${pidFile} detached\n@sleep 60000`, cwd: scratch });
    const victimId = victim.result.structuredContent.job_id;
    await waitFor(() => readPids(pidFile).length === 2, "the agent and its child");
    await new Promise((resolve) => setTimeout(resolve, 1200)); // one tree refresh (1 s)
    const killed = await server.callTool("claude_kill", { job_id: victimId });
    assert.equal(killed.result.isError, undefined);
    assert.equal(killed.result.structuredContent.status, "killed");
    for (const pid of readPids(pidFile)) assert.equal(isAlive(pid), false, `pid ${pid} survived claude_kill`);
    const again = await server.callTool("claude_kill", { job_id: victimId });
    assert.equal(again.result.structuredContent.already_finished, true);
    const waitKilled = await server.callTool("claude_wait", { job_id: victimId });
    assert.equal(waitKilled.result.structuredContent.status, "killed");
    assert.equal(waitKilled.result.isError, undefined);

    assertStdoutIsFrames(server);
  });

  test("failures come back as coded tool results, and bad input never reaches the agent", async () => {
    const server = startServer();
    await server.initialize();
    const file = scratchFile("not-a-dir");
    writeFileSync(file, "x");
    const notDir = await server.callTool("claude_run", { prompt: "x", cwd: file });
    assert.equal(notDir.result.isError, true);
    assert.match(notDir.result.content[0].text, /^INVALID_ARGUMENT: "cwd" is not a directory/);
    const relative = await server.callTool("claude_start", { prompt: "x", cwd: "relative/dir" });
    assert.match(relative.result.content[0].text, /^INVALID_ARGUMENT: "cwd" must be an absolute path/);
    const injection = await server.callTool("claude_run", { prompt: "x", cwd: scratch, session_id: "--dangerously-skip-permissions" });
    assert.match(injection.result.content[0].text, /^INVALID_ARGUMENT: "session_id"/);
    const apiError = await server.callTool("claude_run", { prompt: "@error-json Invalid API key · Fix external API key", cwd: scratch });
    assert.match(apiError.result.content[0].text, /^AGENT_ERROR: Invalid API key · Fix external API key/);
    const unknownSession = await server.callTool("claude_run", { prompt: "x", cwd: scratch, session_id: "00000000-1111-4222-8333-444444444444" });
    assert.match(unknownSession.result.content[0].text, /^SESSION_NOT_FOUND: /);
    const timeout = await server.callTool("claude_run", { prompt: "@sleep 60000", cwd: scratch, timeout_ms: 1000 });
    assert.match(timeout.result.content[0].text, /^TIMEOUT: no result within 1s/);
    const unknownJob = await server.callTool("claude_wait", { job_id: "nope" });
    assert.match(unknownJob.result.content[0].text, /^JOB_NOT_FOUND: /);
    assertStdoutIsFrames(server);
  });

  test("a slow claude_wait does not hold back a ping or a claude_kill sent after it", async () => {
    const server = startServer();
    await server.initialize();
    const started = await server.callTool("claude_start", { prompt: "@sleep 60000", cwd: scratch });
    const jobId = started.result.structuredContent.job_id;
    const waiting = server.callTool("claude_wait", { job_id: jobId, hold_ms: 60_000 });
    const ping = await server.request("ping");
    assert.deepEqual(ping.result, {});
    const kill = await server.callTool("claude_kill", { job_id: jobId });
    assert.equal(kill.result.structuredContent.status, "killed");
    const waited = await waiting;
    assert.equal(waited.result.structuredContent.status, "killed");
    // The wait was answered after the ping although it was sent first.
    const order = server.lines.map((line) => JSON.parse(line).id);
    assert.ok(order.indexOf(ping.id) < order.indexOf(waited.id));
  });

  test("notifications/cancelled kills a claude_run's tree and the request gets no response", async () => {
    const server = startServer();
    await server.initialize();
    const pidFile = scratchFile("cancel");
    void server.callTool("claude_run", { prompt: `@pid ${pidFile}\n@sleep 60000`, cwd: scratch }, "run-1");
    await waitFor(() => readPids(pidFile).length === 1, "the agent");
    const [agentPid] = readPids(pidFile) as [number];
    server.send({ method: "notifications/cancelled", params: { requestId: "run-1", reason: "user pressed stop" } });
    await waitFor(() => !isAlive(agentPid), "the cancelled agent to die");
    const ping = await server.request("ping");
    assert.deepEqual(ping.result, {});
    assert.ok(!server.lines.some((line) => JSON.parse(line).id === "run-1"), "a cancelled request must not be answered");
  });

  test("stdin EOF with a running job: the job's whole tree is gone and the server exits promptly", async () => {
    const server = startServer();
    await server.initialize();
    const pidFile = scratchFile("eof");
    await server.callTool("claude_start", {
      prompt: `@pid ${pidFile}\n@ignore-term\n@spawn ${pidFile} detached ignore-term\n@spawn ${pidFile}\n@sleep 60000`,
      cwd: scratch,
    });
    await waitFor(() => readPids(pidFile).length === 3, "the agent and its children");
    await new Promise((resolve) => setTimeout(resolve, 1200)); // one tree refresh (1 s)
    const started = Date.now();
    server.endInput();
    const exit = await server.exited;
    const took = Date.now() - started;
    assert.equal(exit.code, 0);
    // Grace is 500 ms here; the brief allows about 2 s beyond it.
    assert.ok(took < 2500 + 500, `shutdown took ${took} ms`);
    for (const pid of readPids(pidFile)) assert.equal(isAlive(pid), false, `pid ${pid} survived shutdown`);
    assertStdoutIsFrames(server);
  });

  test("SIGTERM answers the in-flight claude_run with KILLED, kills the tree, and exits", async () => {
    const server = startServer();
    await server.initialize();
    const pidFile = scratchFile("sigterm");
    const running = server.callTool("claude_run", { prompt: `@pid ${pidFile}\n@sleep 60000`, cwd: scratch });
    await waitFor(() => readPids(pidFile).length === 1, "the agent");
    server.child.kill("SIGTERM");
    const answer = await running;
    assert.equal(answer.result.isError, true);
    assert.match(answer.result.content[0].text, /^KILLED: .*because the server shut down/);
    assert.equal((await server.exited).code, 0);
    for (const pid of readPids(pidFile)) assert.equal(isAlive(pid), false);
  });

  test("the recursion guard: a server inside a dispatched agent offers no tools", async () => {
    const server = startServer({ CLAUDE_DISPATCH_DEPTH: "1" });
    await server.initialize();
    const listed = await server.request("tools/list");
    assert.deepEqual(listed.result.tools, []);
    const refused = await server.callTool("claude_run", { prompt: "x", cwd: scratch });
    assert.match(refused.result.content[0].text, /^DEPTH_LIMIT: /);
    server.endInput();
    assert.equal((await server.exited).code, 0);
  });

  test("the agent is told its depth, so a server it loads is gated", async () => {
    const server = startServer();
    await server.initialize();
    const record = scratchFile("record");
    await server.callTool("claude_run", { prompt: `@record ${record}`, cwd: scratch });
    assert.equal(JSON.parse(readFileSync(record, "utf8")).depth, "1");
  });

  test("hostile framing: garbage, an over-long line and a batch each get one error, then service continues", async () => {
    const server = startServer({ CLAUDE_DISPATCH_MAX_LINE_BYTES: "4096" });
    server.sendRaw("{not json");
    server.sendRaw(`{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":"${"x".repeat(10_000)}"}}`);
    server.sendRaw('[{"jsonrpc":"2.0","id":1,"method":"ping"}]');
    const ping = await server.request("ping", undefined, "after");
    assert.deepEqual(ping.result, {});
    const errors = server.lines.map((line) => JSON.parse(line)).filter((message) => message.error);
    assert.deepEqual(
      errors.map((message) => [message.id, message.error.code]),
      [
        [null, -32700],
        [null, -32600],
        [null, -32600],
      ],
    );
  });

  test("an invalid configuration is a startup error on stderr, exit 2", async () => {
    const server = startServer({ CLAUDE_DISPATCH_KILL_GRACE_MS: "soon" });
    const exit = await server.exited;
    assert.equal(exit.code, 2);
    assert.match(server.stderr, /CLAUDE_DISPATCH_KILL_GRACE_MS must be an integer/);
    assert.deepEqual(server.lines, []);
  });
});
