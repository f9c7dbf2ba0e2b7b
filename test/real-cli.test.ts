/**
 * The built server driving the real Claude Code CLI, whose only fake part is
 * the model: a Messages API mock on 127.0.0.1 (test/fixtures/mock-anthropic.mjs).
 *
 * The CLI is the pinned devDependency, or CLAUDE_DISPATCH_CLAUDE_BIN when the
 * runner sets it. Without a working CLI the suite fails under CI=true and is
 * skipped, loudly, elsewhere.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, before, describe, test } from "node:test";

import { listLinuxProcesses, type ProcessInfo } from "../src/hosts/local/index.js";
import { cliPath, mockedCliEnvironment, realCliVersion } from "./claude-cli.js";
import { commandLine, isAlive, waitFor } from "./processes.js";
import { minimalEnvironment, ServerProcess, type RpcResponse } from "./server-process.js";
// @ts-expect-error: a plain ESM fixture without type declarations
import { startMockAnthropic } from "./fixtures/mock-anthropic.mjs";

interface MockRequest {
  stream: boolean;
  tools: string[];
  system: string;
  messageCount: number;
  prompt: string;
  toolResults: string[];
  allText: string;
  apiKey: string | null;
}
interface Mock {
  url: string;
  requests: MockRequest[];
  close(): Promise<void>;
}

const version = realCliVersion("the tools");

/** Feeds stdin, collects stdout and stderr, and resolves at exit. */
function runToEnd(
  child: ChildProcessWithoutNullStreams,
  input: string,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end(input);
  return new Promise((resolve) => child.once("close", (status) => resolve({ status, stdout, stderr })));
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe(`real Claude Code CLI (${version ?? "missing"}) against a mock API`, { skip: !version }, () => {
  let mock: Mock;
  let scratch: string;
  /** A HOME whose user settings allow Bash, so tool calls run headless. */
  let permissiveHome: string;
  /** A HOME with no settings: Claude Code's defaults apply. */
  let plainHome: string;
  let project: string;
  const servers: ServerProcess[] = [];

  before(async () => {
    mock = (await startMockAnthropic()) as Mock;
    scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-real-cli-"));
    permissiveHome = path.join(scratch, "home-permissive");
    plainHome = path.join(scratch, "home-plain");
    project = path.join(scratch, "project");
    for (const dir of [permissiveHome, plainHome, project, path.join(scratch, "tmp")])
      mkdirSync(dir, { recursive: true });
    mkdirSync(path.join(permissiveHome, ".claude"));
    writeFileSync(
      path.join(permissiveHome, ".claude", "settings.json"),
      JSON.stringify({ permissions: { allow: ["Bash"] } }),
    );
  });

  afterEach(() => {
    for (const server of servers.splice(0)) server.dispose();
  });

  after(async () => {
    await mock.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  /**
   * The server as a host would start it, with an environment built from
   * nothing: no real API key or user setting of the runner can leak in.
   */
  function startServer(
    options: { home?: string; apiKey?: string | null; env?: Record<string, string> } = {},
  ): ServerProcess {
    const env = minimalEnvironment({
      HOME: options.home ?? permissiveHome,
      TMPDIR: path.join(scratch, "tmp"),
      ANTHROPIC_BASE_URL: mock.url,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      CLAUDE_CODE_MAX_RETRIES: "0",
      CLAUDE_DISPATCH_CLAUDE_BIN: cliPath,
      CLAUDE_DISPATCH_KILL_GRACE_MS: "1000",
      ...(options.apiKey === null ? {} : { ANTHROPIC_API_KEY: options.apiKey ?? "dummy" }),
      ...options.env,
    });
    const server = new ServerProcess(env, {});
    servers.push(server);
    return server;
  }

  const report = (response: RpcResponse): Record<string, any> => response.result.structuredContent;
  const text = (response: RpcResponse): string => response.result.content[0].text;

  /** Every process descended from pid, by parent and by the sessions they lead. */
  async function treeOf(rootPid: number): Promise<ProcessInfo[]> {
    const table = await listLinuxProcesses();
    const found = new Map<number, ProcessInfo>();
    const queue = table.filter((info) => info.pid === rootPid);
    while (queue.length > 0) {
      const info = queue.pop() as ProcessInfo;
      if (found.has(info.pid)) continue;
      found.set(info.pid, info);
      queue.push(
        ...table.filter((other) => other.ppid === info.pid || (other.sid === info.pid && other.pid !== info.pid)),
      );
    }
    return [...found.values()];
  }

  async function agentsOf(server: ServerProcess): Promise<number[]> {
    return (await listLinuxProcesses()).filter((info) => info.ppid === server.child.pid).map((info) => info.pid);
  }

  /** Waits for a process whose command line holds `token`, and returns the agent's whole tree then. */
  async function waitForToolProcess(
    server: ServerProcess,
    token: string,
  ): Promise<{ agent: number; tree: ProcessInfo[]; tool: number }> {
    let found: { agent: number; tree: ProcessInfo[]; tool: number } | undefined;
    // The tool's own session is what the tests are about: a process naming the token that is still in the
    // agent's session (a wrapper on its way to the tool's shell) is taken only if none other appears in 5 s.
    let firstSeen: number | undefined;
    const deadline = Date.now() + 20_000;
    for (;;) {
      assert.ok(Date.now() < deadline, `no tool process with ${token} appeared`);
      for (const agent of await agentsOf(server)) {
        const tree = await treeOf(agent);
        const named = tree.filter((info) => commandLine(info.pid).includes(token));
        const tool = named.find((info) => info.sid !== agent) ?? named[0];
        if (tool) found = { agent, tree, tool: tool.pid };
        if (tool && tool.sid !== agent) return { agent, tree, tool: tool.pid };
      }
      if (found) firstSeen ??= Date.now();
      if (found && Date.now() - (firstSeen ?? 0) > 5000) return found;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  test("1. claude_run: the answer, a session UUID, cost and turns", async () => {
    const server = startServer();
    await server.initialize();
    const run = await server.callTool("claude_run", { prompt: "what is this project?", cwd: project });
    assert.equal(run.result.isError, undefined, text(run));
    assert.equal(report(run).status, "completed");
    assert.equal(report(run).result, "MOCK-REPLY: what is this project?");
    assert.match(report(run).session_id, UUID);
    assert.ok(report(run).cost_usd > 0);
    assert.equal(report(run).num_turns, 1);
    assert.equal(mock.requests.at(-1)?.apiKey, "dummy");
  });

  test("2. resume: the second run continues the session and the model sees the first exchange", async () => {
    const server = startServer();
    await server.initialize();
    const first = await server.callTool("claude_run", { prompt: "remember the word kumquat", cwd: project });
    const sessionId = report(first).session_id;
    const second = await server.callTool("claude_run", { prompt: "which word?", cwd: project, session_id: sessionId });
    assert.equal(report(second).status, "completed", text(second));
    assert.equal(report(second).session_id, sessionId);
    const seen = mock.requests.at(-1);
    assert.ok(seen);
    assert.equal(seen.prompt, "which word?");
    assert.ok(seen.messageCount >= 3, `the resumed request carried ${seen.messageCount} messages`);
    assert.match(seen.allText, /remember the word kumquat/);
    assert.match(seen.allText, /MOCK-REPLY: remember the word kumquat/);
  });

  test("3. start and wait across a Bash tool turn that writes a file in cwd", async () => {
    const server = startServer();
    await server.initialize();
    const workdir = mkdtempSync(path.join(scratch, "tool-"));
    const started = await server.callTool("claude_start", {
      prompt: "MOCK:BASH echo written-by-tool > out.txt",
      cwd: workdir,
    });
    const jobId = report(started).job_id;
    let waited = await server.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 });
    while (report(waited).status === "running")
      waited = await server.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 });
    assert.equal(report(waited).status, "completed", text(waited));
    assert.equal(report(waited).num_turns, 2);
    assert.equal(report(waited).permission_denials, undefined);
    assert.ok(existsSync(path.join(workdir, "out.txt")), "the tool did not write out.txt");
    assert.deepEqual(mock.requests.at(-1)?.toolResults.length, 1);
  });

  test("4. a permission denial is surfaced, and the denied action did not happen", async () => {
    const server = startServer({ home: plainHome });
    await server.initialize();
    const workdir = mkdtempSync(path.join(scratch, "denied-"));
    const run = await server.callTool("claude_run", { prompt: "MOCK:BASH echo hi > out.txt", cwd: workdir });
    assert.equal(report(run).status, "completed", text(run));
    assert.deepEqual(
      report(run).permission_denials.map((denial: { tool_name: string }) => denial.tool_name),
      ["Bash"],
    );
    assert.match(text(run), /Permission was denied for: Bash/);
    assert.equal(existsSync(path.join(workdir, "out.txt")), false);
  });

  test(
    "5. claude_kill during a long Bash tool call: no descendant survives, the tool's own " + "session included",
    async () => {
      const server = startServer();
      await server.initialize();
      const token = `kill-${Date.now()}`;
      const started = await server.callTool("claude_start", {
        prompt: `MOCK:BASH echo ${token}; sleep 300; echo end`,
        cwd: project,
      });
      const { agent, tree, tool } = await waitForToolProcess(server, token);
      const toolInfo = tree.find((info) => info.pid === tool);
      assert.ok(toolInfo);
      assert.notEqual(
        toolInfo.sid,
        agent,
        "Claude Code no longer runs tools in their own session; revisit the tree walk",
      );
      const killed = await server.callTool("claude_kill", { job_id: report(started).job_id });
      assert.equal(report(killed).status, "killed", text(killed));
      const table = await listLinuxProcesses();
      const survivors = table.filter(
        (info) =>
          !info.zombie &&
          (tree.some((member) => member.pid === info.pid && member.startTime === info.startTime) ||
            info.sid === toolInfo.sid),
      );
      assert.deepEqual(survivors, [], "processes of the killed job survived");
    },
  );

  test(
    "the premises: a group kill misses the tool's session, and an API error exits 1 with an " + "empty stderr",
    async () => {
      // What the reference server did, against the real CLI. If either stops being true, scenarios 5
      // and 7 no longer prove what they claim.
      const env = mockedCliEnvironment(permissiveHome, path.join(scratch, "tmp"), mock.url);
      const token = `premise-${Date.now()}`;
      const agent = spawn(cliPath, ["-p", "--output-format", "json"], {
        cwd: project,
        env,
        detached: true,
        stdio: ["pipe", "ignore", "ignore"],
      });
      agent.stdin.end(`MOCK:BASH echo ${token}; sleep 300; echo end`);
      let tool: ProcessInfo | undefined;
      try {
        const deadline = Date.now() + 20_000;
        while (!tool && Date.now() < deadline) {
          tool = (await treeOf(agent.pid as number)).find((info) => commandLine(info.pid).includes(token));
          if (!tool) await new Promise((resolve) => setTimeout(resolve, 100));
        }
        assert.ok(tool, "the tool never started");
        process.kill(-(agent.pid as number), "SIGKILL");
        // The group's kill has landed once the agent is gone; the tool, in a session of its own, is not in it.
        await waitFor(() => !isAlive(agent.pid as number), "the agent killed with its group");
        assert.equal(isAlive(tool.pid), true, "a group SIGKILL now reaches the tool's shell");
      } finally {
        const leftovers = (await listLinuxProcesses()).filter(
          (other) => other.pid === agent.pid || (tool !== undefined && other.sid === tool.sid),
        );
        for (const info of leftovers) {
          try {
            process.kill(info.pid, "SIGKILL");
          } catch {
            // already gone
          }
        }
      }

      // Not spawnSync: the mock answers from this very event loop.
      const failing = await runToEnd(
        spawn(cliPath, ["-p", "--output-format", "json"], { cwd: project, env }),
        "MOCK:HTTP 500\nMOCK:NO_RETRY",
      );
      assert.equal(failing.status, 1);
      assert.equal(failing.stderr, "", "the message is only in the stdout JSON");
      assert.match(failing.stdout, /"is_error":true/);
    },
  );

  test("progress names the tool in use while a real agent runs it", async () => {
    const server = startServer({ env: { CLAUDE_DISPATCH_HEARTBEAT_MS: "1000" } });
    await server.initialize();
    const response = await server.request("tools/call", {
      name: "claude_run",
      arguments: { prompt: "MOCK:BASH echo progress-check; sleep 2; echo done", cwd: project },
      _meta: { progressToken: 7 },
    });
    assert.equal(report(response).status, "completed", text(response));
    const progress = server.lines
      .map((line) => JSON.parse(line))
      .filter((message) => message.method === "notifications/progress");
    assert.ok(
      progress.some((note) => /turn 1 · Bash · echo progress-check; sleep 2; echo done/.test(note.params.message)),
      progress.map((note) => note.params.message).join(" | "),
    );
    const values = progress.map((note) => note.params.progress);
    assert.deepEqual(
      values,
      values.map((_, index) => index + 1),
    );
  });

  test(
    "agent options reach the real CLI: a disallowed tool is gone, the appended system prompt is sent, " +
      "max_turns stops it",
    async () => {
      const server = startServer({ home: plainHome });
      await server.initialize();
      const run = await server.callTool("claude_run", {
        prompt: "options check",
        cwd: project,
        disallowed_tools: ["Bash"],
        append_system_prompt: "--not-a-flag: be terse",
        model: "sonnet",
      });
      assert.equal(report(run).status, "completed", text(run));
      const seen = mock.requests.at(-1);
      assert.ok(seen && !seen.tools.includes("Bash") && seen.tools.length > 0, `tools sent: ${seen?.tools.join(",")}`);
      assert.match(seen.system, /--not-a-flag: be terse/);
      const limited = await server.callTool("claude_run", {
        prompt: "MOCK:REPEAT 5",
        cwd: project,
        max_turns: 2,
        allowed_tools: ["Bash"],
      });
      assert.equal(limited.result.isError, true);
      assert.match(text(limited), /^AGENT_ERROR: Reached maximum number of turns \(2\)/);
    },
  );

  test("6. claude_run timeout against a hanging API: TIMEOUT, and the whole tree is gone", async () => {
    const server = startServer();
    await server.initialize();
    const running = server.callTool("claude_run", { prompt: "MOCK:HANG", cwd: project, timeout_ms: 2000 });
    await waitFor(() => mock.requests.some((request) => request.prompt === "MOCK:HANG"), "the hanging request");
    const [agent] = await agentsOf(server);
    assert.ok(agent);
    const tree = await treeOf(agent);
    const run = await running;
    assert.equal(run.result.isError, true);
    assert.match(text(run), /^TIMEOUT: no result within 2s/);
    for (const info of tree) assert.equal(isAlive(info.pid), false, `pid ${info.pid} survived the timeout`);
  });

  test("7. API 401 and 500 (retries off): the CLI's message and api_error_status reach the caller", async () => {
    const server = startServer();
    await server.initialize();
    const unauthorized = await server.callTool("claude_run", { prompt: "MOCK:HTTP 401\nMOCK:NO_RETRY", cwd: project });
    assert.equal(unauthorized.result.isError, true);
    assert.match(text(unauthorized), /^AGENT_ERROR: Invalid API key/);
    assert.equal(report(unauthorized).api_error_status, 401);
    assert.equal(report(unauthorized).error.code, "AGENT_ERROR");
    const serverError = await server.callTool("claude_run", { prompt: "MOCK:HTTP 500\nMOCK:NO_RETRY", cwd: project });
    assert.match(text(serverError), /^AGENT_ERROR: API Error: 500 Internal server error \(mock\)/);
    assert.equal(report(serverError).api_error_status, 500);
    assert.match(report(serverError).session_id, UUID);
  });

  test("8. no API key: 'Not logged in' reaches the caller", async () => {
    const server = startServer({ apiKey: null, home: plainHome });
    await server.initialize();
    const run = await server.callTool("claude_run", { prompt: "hello", cwd: project });
    assert.equal(run.result.isError, true);
    assert.match(text(run), /^AGENT_ERROR: Not logged in · Please run \/login/);
  });

  test("9. an unknown resume id is SESSION_NOT_FOUND", async () => {
    const server = startServer();
    await server.initialize();
    const run = await server.callTool("claude_run", {
      prompt: "hello",
      cwd: project,
      session_id: "11111111-2222-4333-8444-555555555555",
    });
    assert.equal(run.result.isError, true);
    assert.match(
      text(run),
      /^SESSION_NOT_FOUND: No conversation found with session ID 11111111-2222-4333-8444-555555555555/,
    );
  });

  test("10. stdin EOF while a real agent runs a tool: the tree is gone and the server exits", async () => {
    const server = startServer();
    await server.initialize();
    const token = `eof-${Date.now()}`;
    await server.callTool("claude_start", { prompt: `MOCK:BASH echo ${token}; sleep 300; echo end`, cwd: project });
    const { tree } = await waitForToolProcess(server, token);
    const startedAt = Date.now();
    server.endInput();
    const exit = await server.exited;
    assert.equal(exit.code, 0);
    assert.ok(Date.now() - startedAt < 6000, "the server took too long to exit");
    for (const info of tree) assert.equal(isAlive(info.pid), false, `pid ${info.pid} survived shutdown`);
  });

  test(
    "11. the server is SIGKILLed while a real agent runs a tool: the next server takes the job over and " +
      "gets its result",
    async () => {
      const stateDir = mkdtempSync(path.join(scratch, "state-"));
      const gate = path.join(stateDir, "gate");
      const token = `crash-${Date.now()}`;
      const first = startServer({ env: { CLAUDE_DISPATCH_STATE_DIR: stateDir, CLAUDE_DISPATCH_ON_EXIT: "keep" } });
      await first.initialize();
      const started = await first.callTool("claude_start", {
        prompt: `MOCK:BASH echo ${token}; while [ ! -e ${gate} ]; do sleep 0.05; done; echo released-${token}`,
        cwd: project,
      });
      const jobId = report(started).job_id as string;
      const { agent, tool } = await waitForToolProcess(first, token);
      try {
        const recordFile = path.join(stateDir, "jobs", jobId, "record.json");
        await waitFor(
          () => JSON.parse(readFileSync(recordFile, "utf8")).agent?.start_time !== undefined,
          "the agent's identity in its record",
        );
        first.child.kill("SIGKILL");
        await first.exited;
        assert.ok(
          isAlive(agent) && isAlive(tool),
          "the agent and its tool outlive the server (its output goes to a file, not a pipe)",
        );

        const second = startServer({ env: { CLAUDE_DISPATCH_STATE_DIR: stateDir, CLAUDE_DISPATCH_ON_EXIT: "kill" } });
        await second.initialize();
        const following = await second.callTool("claude_wait", { job_id: jobId, hold_ms: 200 });
        assert.equal(report(following).status, "running", text(following));
        assert.match(
          report(following).last_activity,
          /Bash/,
          "what the agent did before the crash is read back from its output file",
        );
        writeFileSync(gate, "");
        let waited = await second.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 });
        while (report(waited).status === "running")
          waited = await second.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 });
        assert.equal(report(waited).status, "completed", text(waited));
        assert.match(report(waited).result, new RegExp(`released-${token}`));
        assert.match(report(waited).session_id, /^[0-9a-f-]{36}$/);
        await waitFor(() => !isAlive(agent) && !isAlive(tool), "the agent and its tool to be gone");
      } finally {
        // On failure too: nothing may be left waiting on the gate.
        writeFileSync(gate, "");
        for (const pid of [tool, agent]) if (isAlive(pid)) process.kill(pid, "SIGKILL");
      }
    },
  );
});
