/**
 * End to end: the built server, spawned as a host spawns it, speaking raw
 * JSON lines, with the fake agent from test/fixtures standing in for claude.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, describe, test } from "node:test";

import { tokenFor } from "../src/approver/endpoint.js";

import { isAlive, readPids, waitFor } from "./processes.js";
import { ServerProcess } from "./server-process.js";
import { bounded, lineFrom } from "./support/events.js";

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
  test("initialize, list, and the four job tools through a real agent process", async () => {
    const server = startServer();
    const init = await server.initialize("2025-11-25");
    assert.equal(init.result.protocolVersion, "2025-11-25");
    assert.equal(init.result.serverInfo.name, "claude-dispatch");

    const listed = await server.request("tools/list");
    assert.deepEqual(
      listed.result.tools.map((tool: { name: string }) => tool.name),
      [
        "claude_run",
        "claude_start",
        "claude_wait",
        "claude_kill",
        "claude_list",
        "claude_output",
        "claude_respond",
        "claude_worktree",
        "claude_sessions",
      ],
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
    const victim = await server.callTool("claude_start", {
      prompt: `@pid ${pidFile}\n@spawn ${pidFile} detached\n@sleep 60000`,
      cwd: scratch,
    });
    const victimId = victim.result.structuredContent.job_id;
    await waitFor(() => readPids(pidFile).length === 2, "the agent and its child");
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
    const injection = await server.callTool("claude_run", {
      prompt: "x",
      cwd: scratch,
      session_id: "--dangerously-skip-permissions",
    });
    assert.match(injection.result.content[0].text, /^INVALID_ARGUMENT: "session_id"/);
    const apiError = await server.callTool("claude_run", {
      prompt: "@error-json Invalid API key · Fix external API key",
      cwd: scratch,
    });
    assert.match(apiError.result.content[0].text, /^AGENT_ERROR: Invalid API key · Fix external API key/);
    const unknownSession = await server.callTool("claude_run", {
      prompt: "x",
      cwd: scratch,
      session_id: "00000000-1111-4222-8333-444444444444",
    });
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
    assert.ok(
      !server.lines.some((line) => JSON.parse(line).id === "run-1"),
      "a cancelled request must not be answered",
    );
  });

  test("stdin EOF with a running job: its whole tree is gone and the server exits without waiting for it", async () => {
    const server = startServer();
    await server.initialize();
    const pidFile = scratchFile("eof");
    // An agent that never ends on its own and ignores SIGTERM, as does one child: only the kill after the grace
    // ends them, so the server's exit shows that it did not wait for them.
    const children = `@spawn ${pidFile} detached ignore-term\n@spawn ${pidFile}`;
    const prompt = `@pid ${pidFile}\n@ignore-term\n${children}\n@wait-file ${scratchFile("never")}`;
    await server.callTool("claude_start", { prompt, cwd: scratch });
    await waitFor(() => readPids(pidFile).length === 3, "the agent and its children");
    server.endInput();
    const exit = await bounded("the server to exit", server.exited);
    assert.equal(exit.code, 0);
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

  test(
    "hostile framing: garbage, an over-long line and a batch each get one error, then " + "service continues",
    async () => {
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
    },
  );

  test(
    "progress: a claude_run with a progressToken hears increasing progress naming the tool in use, and nothing " +
      "after its response",
    async () => {
      const server = startServer({ CLAUDE_DISPATCH_HEARTBEAT_MS: "1000" });
      await server.initialize();
      const response = await server.request("tools/call", {
        name: "claude_run",
        arguments: { prompt: "@tools 3 700\n@sleep 1500", cwd: scratch },
        _meta: { progressToken: "run-progress" },
      });
      assert.equal(response.result.structuredContent.status, "completed");
      // One round trip through the serialized writer: whatever the run wrote after its response is in before the pong.
      await server.request("ping");
      const messages = server.lines.map((line) => JSON.parse(line));
      const progress = messages.filter((message) => message.method === "notifications/progress");
      assert.ok(progress.length >= 4, `only ${progress.length} progress notifications`);
      for (const note of progress) assert.equal(note.params.progressToken, "run-progress");
      const values = progress.map((note) => note.params.progress);
      assert.deepEqual(
        values,
        [...values].sort((a, b) => a - b),
      );
      assert.equal(new Set(values).size, values.length, "progress must strictly increase");
      assert.ok(
        progress.some((note) => /Bash · echo step-2/.test(note.params.message)),
        progress.map((n) => n.params.message).join(" | "),
      );
      assert.ok(progress.some((note) => /turn \d/.test(note.params.message)));
      const responseAt = messages.findIndex((message) => message.id === response.id);
      assert.ok(
        messages.slice(responseAt + 1).every((message) => message.method !== "notifications/progress"),
        "progress after the response",
      );
      // Without a token, nothing.
      const before = server.lines.length;
      await server.callTool("claude_run", { prompt: "@tools 2 300", cwd: scratch });
      assert.ok(server.lines.slice(before).every((line) => JSON.parse(line).method === undefined));
    },
  );

  test(
    "a wait on a running job reports turns and the last activity; claude_list and the transcript " + "show the job",
    async () => {
      const server = startServer();
      await server.initialize();
      const started = await server.callTool("claude_start", { prompt: "@tools 2\n@linger 60000", cwd: scratch });
      const jobId = started.result.structuredContent.job_id;
      // A held wait with a progress token hears of each turn: the second one is the event waited for.
      const wait = { name: "claude_wait", arguments: { job_id: jobId, hold_ms: 60_000 } };
      const held = server.request("tools/call", { ...wait, _meta: { progressToken: "turns" } });
      const namesStep2 = (message: Record<string, any>): boolean => /Bash · echo step-2/.test(message.params?.message);
      await lineFrom(server, "progress naming the second tool call", namesStep2);
      const running = await server.callTool("claude_wait", { job_id: jobId, hold_ms: 0 });
      const report = running.result.structuredContent;
      assert.equal(report.status, "running");
      assert.equal(report.num_turns, 2);
      assert.match(report.last_activity, /turn 2 · Bash · echo step-2/);
      assert.match(report.session_id, /^[0-9a-f-]{36}$/);
      assert.match(running.result.content[0].text, /still running .*Bash · echo step-2.*Call claude_wait again/);

      const listed = await server.callTool("claude_list", {});
      const entry = listed.result.structuredContent.jobs.find((job: { job_id: string }) => job.job_id === jobId);
      assert.deepEqual(
        { ...entry, elapsed_s: 0 },
        {
          job_id: jobId,
          kind: "start",
          agent: "claude",
          status: "running",
          cwd: scratch,
          elapsed_s: 0,
          num_turns: 2,
          prompt_preview: "@tools 2 @linger 60000",
          session_id: report.session_id,
        },
      );

      const transcript = await server.callTool("claude_output", { job_id: jobId, view: "transcript" });
      assert.match(transcript.result.structuredContent.text, /tool: Bash · echo step-1\ntool result: step-1\n/);
      const noResult = await server.callTool("claude_output", { job_id: jobId });
      assert.match(noResult.result.content[0].text, /still running and has no result yet/);
      await server.callTool("claude_kill", { job_id: jobId });
      assert.equal((await held).result.structuredContent.status, "killed");
    },
  );

  test("a 200 000-character result comes back truncated, and claude_output pages the rest exactly", async () => {
    const server = startServer({ CLAUDE_DISPATCH_MAX_RESULT_CHARS: "20000" });
    await server.initialize();
    const run = await server.callTool("claude_run", { prompt: "@big 200000", cwd: scratch });
    const report = run.result.structuredContent;
    assert.equal(report.truncated, true);
    assert.equal(report.result_chars, 200_000);
    assert.equal(report.result.length, 20_000);
    assert.match(
      run.result.content[0].text,
      /Truncated: 20000 of 200000 characters shown\. Call claude_output with job_id "[^"]+" and offset 20000/,
    );
    let whole = report.result;
    let offset: number | undefined = 20_000;
    let pages = 0;
    while (offset !== undefined) {
      const page = await server.callTool("claude_output", { job_id: report.job_id, offset });
      assert.equal(page.result.structuredContent.offset, offset);
      whole += page.result.structuredContent.text;
      offset = page.result.structuredContent.next_offset;
      pages += 1;
    }
    assert.equal(pages, 9);
    assert.equal(whole, "x".repeat(200_000));
    const limited = await server.callTool("claude_output", { job_id: report.job_id, offset: 199_990, limit: 5 });
    assert.deepEqual(
      [limited.result.structuredContent.text, limited.result.structuredContent.next_offset],
      ["xxxxx", 199_995],
    );
  });

  test("agent options reach argv as documented; the operator's policy refuses what it does not allow", async () => {
    const root = path.join(scratch, `root-${(counter += 1)}`);
    mkdirSync(path.join(root, "lib"), { recursive: true });
    const server = startServer({
      CLAUDE_DISPATCH_ROOTS: root,
      CLAUDE_DISPATCH_MAX_TURNS: "20",
      CLAUDE_DISPATCH_DEFAULT_MODEL: "haiku",
    });
    await server.initialize();
    const record = scratchFile("argv");
    const environment = scratchFile("env");
    const run = await server.callTool("claude_run", {
      prompt: `@record ${record}\n@env ${environment} CLAUDE_DISPATCH_APPROVER_TOKEN`,
      cwd: root,
      permission_mode: "acceptEdits",
      allowed_tools: ["Bash(git log:*)", "Edit"],
      max_turns: 5,
      append_system_prompt: "Be brief.",
      add_dirs: [path.join(root, "lib")],
    });
    assert.equal(run.result.structuredContent.status, "completed", run.result.content[0].text);
    const argv = JSON.parse(readFileSync(record, "utf8")).argv as string[];
    // The approver comes last (§18): the state directory's endpoint, this job's path there, its token in the
    // agent's environment (the CLI expands the variable), never in argv.
    const [mcpConfig, promptTool] = argv.splice(-2);
    assert.equal(promptTool, "--permission-prompt-tool=mcp__dispatch_approver__approve");
    const approver = JSON.parse((mcpConfig ?? "").replace(/^--mcp-config=/, "")).mcpServers.dispatch_approver;
    const jobId = run.result.structuredContent.job_id;
    const endpoint = JSON.parse(readFileSync(path.join(server.stateDir, "approvals-endpoint.json"), "utf8"));
    assert.deepEqual(approver, {
      type: "http",
      url: `http://127.0.0.1:${endpoint.port}/jobs/${jobId}`,
      headers: { Authorization: "Bearer ${CLAUDE_DISPATCH_APPROVER_TOKEN}" },
      timeout: 660_000,
    });
    const token = JSON.parse(readFileSync(environment, "utf8")).CLAUDE_DISPATCH_APPROVER_TOKEN;
    assert.equal(token, tokenFor(endpoint.secret, jobId));
    assert.ok(!argv.some((arg) => arg.includes(token)), "the token is not in argv");
    assert.deepEqual(argv, [
      "-p",
      "--output-format",
      "stream-json",
      "--verbose",
      "--model=haiku",
      "--permission-mode=acceptEdits",
      "--allowedTools=Bash(git log:*)",
      "--allowedTools=Edit",
      "--max-turns=5",
      "--append-system-prompt=Be brief.",
      `--add-dir=${path.join(root, "lib")}`,
    ]);
    const bypass = await server.callTool("claude_run", {
      prompt: "x",
      cwd: root,
      permission_mode: "bypassPermissions",
    });
    assert.match(
      bypass.result.content[0].text,
      /^POLICY_DENIED: permission_mode "bypassPermissions" is not allowed here/,
    );
    const tooMany = await server.callTool("claude_start", { prompt: "x", cwd: root, max_turns: 21 });
    assert.match(tooMany.result.content[0].text, /^POLICY_DENIED: max_turns 21 is above the operator's cap of 20/);
    const outside = await server.callTool("claude_run", { prompt: "x", cwd: scratch });
    assert.match(outside.result.content[0].text, /^POLICY_DENIED: "cwd" is outside the allowed roots/);
    const outsideDir = await server.callTool("claude_run", { prompt: "x", cwd: root, add_dirs: [scratch] });
    assert.match(outsideDir.result.content[0].text, /^POLICY_DENIED: "add_dirs\[0\]" is outside the allowed roots/);
  });

  test("cancelling a claude_run leaves no descendant alive, the new-session ones included", async () => {
    const server = startServer();
    await server.initialize();
    const pidFile = scratchFile("cancel-tree");
    void server.callTool(
      "claude_run",
      { prompt: `@pid ${pidFile}\n@spawn ${pidFile} detached\n@spawn ${pidFile}\n@sleep 60000`, cwd: scratch },
      "run-tree",
    );
    await waitFor(() => readPids(pidFile).length === 3, "the agent and its children");
    server.send({ method: "notifications/cancelled", params: { requestId: "run-tree" } });
    await waitFor(() => readPids(pidFile).every((pid) => !isAlive(pid)), "every descendant to die");
    assert.ok(!server.lines.some((line) => JSON.parse(line).id === "run-tree"));
  });

  test("an invalid configuration is a startup error on stderr, exit 2", async () => {
    const server = startServer({ CLAUDE_DISPATCH_KILL_GRACE_MS: "soon" });
    const exit = await server.exited;
    assert.equal(exit.code, 2);
    assert.match(server.stderr, /CLAUDE_DISPATCH_KILL_GRACE_MS must be an integer/);
    assert.deepEqual(server.lines, []);
  });
});

test(
  "with a terminal on stdin the server says on stderr how to add it to a host; from a pipe it says " +
    "nothing of the kind",
  async () => {
    const { spawnSync } = await import("node:child_process");
    const { SERVER_MAIN, minimalEnvironment } = await import("./server-process.js");
    const stateDir = mkdtempSync(path.join(tmpdir(), "claude-dispatch-hint-"));
    try {
      // A real terminal cannot be had in CI: the preload makes stdin look like one, which is all the server asks.
      const asTerminal = "data:text/javascript,Object.defineProperty(process.stdin, 'isTTY', { value: true });";
      const env = minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: stateDir });
      const fromTerminal = spawnSync(process.execPath, ["--import", asTerminal, SERVER_MAIN], {
        input: "",
        env,
        encoding: "utf8",
      });
      assert.match(fromTerminal.stderr, /MCP server on stdio, started by an MCP host\. Add it to one/);
      assert.equal(fromTerminal.stdout, "", "the hint never reaches stdout");
      const fromPipe = spawnSync(process.execPath, [SERVER_MAIN], { input: "", env, encoding: "utf8" });
      assert.doesNotMatch(fromPipe.stderr, /Add it to one/);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  },
);
