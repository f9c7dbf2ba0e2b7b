/**
 * More agents behind the same tools (PROTOCOL.md §7): the built server with
 * `agent: "codex"` and `agent: "gemini"`, each the pinned real CLI against a
 * dependency-free mock of its API (test/fixtures/mock-openai.mjs,
 * mock-gemini.mjs), in a throwaway HOME: a run with its result and session,
 * resume, a kill during a long shell call with no descendant left, an API
 * error, a server SIGKILLed mid-job, and the options and modes each refuses.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, afterEach, before, describe, test } from "node:test";

import { listLinuxProcesses } from "../src/hosts/local/index.js";
import { commandLine, isAlive, waitFor } from "./processes.js";
import { minimalEnvironment, ServerProcess, type RpcResponse } from "./server-process.js";
import { fileWritten } from "./support/events.js";
// @ts-expect-error: a plain ESM fixture without type declarations
import { codexMockConfig, startMockOpenAI } from "./fixtures/mock-openai.mjs";
// @ts-expect-error: a plain ESM fixture without type declarations
import { startMockGemini } from "./fixtures/mock-gemini.mjs";

interface Mock {
  url: string;
  requests: Array<Record<string, any>>;
  close(): Promise<void>;
}

/** An agent CLI of the pinned devDependencies: its path, or why it cannot be used here. */
function pinned(name: string): string | undefined {
  const bin = fileURLToPath(new URL(`../node_modules/.bin/${name}`, import.meta.url));
  if (process.platform !== "linux" || !existsSync(bin)) return undefined;
  return spawnSync(bin, ["--version"], { encoding: "utf8", timeout: 60_000 }).status === 0 ? bin : undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const report = (response: RpcResponse): Record<string, any> => response.result.structuredContent;
const text = (response: RpcResponse): string => response.result.content[0].text;

interface AgentSetup {
  name: "codex" | "gemini";
  bin: string | undefined;
  startMock(): Promise<Mock>;
  /** What the CLI needs in its HOME and environment to talk to the mock. */
  prepare(home: string, mock: Mock): Record<string, string>;
  /** A permission mode under which a shell command runs. */
  shellMode: string;
  dangerousMode: string;
  unsupportedOption: Record<string, unknown>;
}

const AGENTS: AgentSetup[] = [
  {
    name: "codex",
    bin: pinned("codex"),
    startMock: () => startMockOpenAI() as Promise<Mock>,
    prepare: (home, mock) => {
      const codexHome = path.join(home, "codex-home");
      mkdirSync(codexHome, { recursive: true });
      writeFileSync(path.join(codexHome, "config.toml"), codexMockConfig(mock.url) as string);
      return { CODEX_HOME: codexHome, MOCK_KEY: "dummy" };
    },
    shellMode: "workspace-write",
    dangerousMode: "dangerously-bypass-approvals-and-sandbox",
    unsupportedOption: { max_budget_usd: 1 },
  },
  {
    name: "gemini",
    bin: pinned("gemini"),
    startMock: () => startMockGemini() as Promise<Mock>,
    prepare: (home, mock) => {
      mkdirSync(path.join(home, ".gemini"), { recursive: true });
      const settings = {
        security: { auth: { selectedType: "gemini-api-key" } },
        privacy: { usageStatisticsEnabled: false },
        telemetry: { enabled: false },
        general: { disableAutoUpdate: true },
      };
      writeFileSync(path.join(home, ".gemini", "settings.json"), JSON.stringify(settings));
      return { GOOGLE_GEMINI_BASE_URL: mock.url, GEMINI_API_KEY: "dummy", GEMINI_CLI_TRUST_WORKSPACE: "true" };
    },
    shellMode: "yolo",
    dangerousMode: "yolo",
    unsupportedOption: { max_budget_usd: 1 },
  },
];

for (const agent of AGENTS) {
  if (!agent.bin) {
    const why =
      process.platform !== "linux"
        ? "these checks read /proc (Linux only)"
        : `no working ${agent.name} CLI in node_modules/.bin`;
    if (process.env.CI === "true" && process.platform === "linux")
      test(`the real ${agent.name} CLI is installed`, () => assert.fail(`${why}; run npm ci`));
    else
      process.stderr.write(
        `\n!!! SKIPPING the real ${agent.name} CLI tests: ${why}. Run \`npm ci\` to install the pinned CLI.\n\n`,
      );
  }

  describe(`agent ${agent.name}: the real CLI against a mock API`, { skip: !agent.bin }, () => {
    let mock: Mock;
    let scratch: string;
    const servers: ServerProcess[] = [];

    before(async () => {
      mock = await agent.startMock();
      scratch = mkdtempSync(path.join(tmpdir(), `claude-dispatch-${agent.name}-`));
    });
    afterEach(async () => {
      for (const server of servers.splice(0)) await server.shutdown();
    });
    after(async () => {
      await mock.close();
      rmSync(scratch, { recursive: true, force: true });
    });

    let homes = 0;
    function startServer(env: Record<string, string> = {}): ServerProcess {
      const home = path.join(scratch, `home-${(homes += 1)}`);
      mkdirSync(path.join(home, "tmp"), { recursive: true });
      const server = new ServerProcess(
        minimalEnvironment({
          HOME: home,
          TMPDIR: path.join(home, "tmp"),
          ...agent.prepare(home, mock),
          CLAUDE_DISPATCH_AGENTS: `claude,${agent.name}`,
          [`CLAUDE_DISPATCH_${agent.name.toUpperCase()}_BIN`]: agent.bin as string,
          [`CLAUDE_DISPATCH_${agent.name.toUpperCase()}_PERMISSION_MODES`]: agent.shellMode,
          CLAUDE_DISPATCH_KILL_GRACE_MS: "1000",
          ...env,
        }),
        {},
      );
      servers.push(server);
      return server;
    }

    const project = (): string => mkdtempSync(path.join(scratch, "project-"));

    test("a run answers with the result and a session id, and resuming it sends the earlier conversation", async () => {
      const server = startServer();
      await server.initialize();
      const listed = await server.request("tools/list");
      const runTool = listed.result.tools.find((tool: { name: string }) => tool.name === "claude_run");
      assert.deepEqual(runTool.inputSchema.properties.agent.enum, ["claude", agent.name]);
      const cwd = project();
      const run = await server.callTool("claude_run", { agent: agent.name, prompt: "remember the word kumquat", cwd });
      assert.equal(report(run).status, "completed", text(run));
      assert.equal(report(run).result, "MOCK-REPLY: remember the word kumquat");
      assert.match(report(run).session_id, UUID);
      const before = mock.requests.length;
      const resumed = report(
        await server.callTool("claude_run", {
          agent: agent.name,
          prompt: "which word?",
          cwd,
          session_id: report(run).session_id,
        }),
      );
      assert.equal(resumed.status, "completed", JSON.stringify(resumed));
      assert.equal(resumed.session_id, report(run).session_id);
      const seen = mock.requests
        .slice(before)
        .map((request) => JSON.stringify(request))
        .join("\n");
      assert.match(seen, /remember the word kumquat/, "the resumed request carried the first prompt");
      const jobs = report(await server.callTool("claude_list", {})).jobs as Array<Record<string, unknown>>;
      assert.deepEqual([...new Set(jobs.map((job) => job.agent))], [agent.name]);
    });

    test("start, wait, and kill during a long shell call: no descendant is left", async () => {
      const server = startServer();
      await server.initialize();
      const cwd = project();
      const token = `long-${agent.name}-${path.basename(cwd)}`;
      // The shell call says it has started with a file in the folder the agent works in (its own pid may be
      // another namespace's: Codex sandboxes it), and is then found by its command line.
      const command = `echo started > shell-started; sleep 300; echo ${token}`;
      const args = { agent: agent.name, prompt: `MOCK:BASH ${command}`, cwd, permission_mode: agent.shellMode };
      const started = report(await server.callTool("claude_start", args));
      const jobId = started.job_id as string;
      await fileWritten(path.join(cwd, "shell-started"));
      const isTheCall = (pid: number): boolean => ["sleep", token].every((word) => commandLine(pid).includes(word));
      const toolPid = (await listLinuxProcesses()).find((info) => isTheCall(info.pid))?.pid;
      assert.ok(toolPid, "the shell call runs");
      const killed = report(await server.callTool("claude_kill", { job_id: jobId }));
      assert.equal(killed.status, "killed", JSON.stringify(killed));
      assert.equal(isAlive(toolPid), false, "the shell call is gone");
      const left = (await listLinuxProcesses()).filter((info) => commandLine(info.pid).includes(token));
      assert.deepEqual(
        left.map((info) => info.pid),
        [],
        "no process of the job is left",
      );
    });

    test("the agent's tools see one more level of dispatch, so a claude-dispatch inside it is gated", async () => {
      const server = startServer();
      await server.initialize();
      const run = report(
        await server.callTool("claude_run", {
          agent: agent.name,
          prompt: "MOCK:BASH echo depth=$CLAUDE_DISPATCH_DEPTH",
          cwd: project(),
          permission_mode: agent.shellMode,
        }),
      );
      assert.equal(run.status, "completed", JSON.stringify(run));
      assert.match(run.result, /depth=1/);
    });

    test("an API error reaches the caller with its message", async () => {
      const server = startServer();
      await server.initialize();
      const run = await server.callTool("claude_run", { agent: agent.name, prompt: "MOCK:HTTP 401", cwd: project() });
      assert.equal(run.result.isError, true, text(run));
      assert.equal(report(run).error.code, "AGENT_ERROR", JSON.stringify(report(run)));
      assert.ok(report(run).error.detail.length > 0);
    });

    test("a server SIGKILLed mid-job: the next server returns the result", async () => {
      const first = startServer({ CLAUDE_DISPATCH_ON_EXIT: "keep" });
      await first.initialize();
      const started = report(
        await first.callTool("claude_start", {
          agent: agent.name,
          prompt: "MOCK:BASH sleep 2; echo slept",
          cwd: project(),
          permission_mode: agent.shellMode,
        }),
      );
      // The agent running, its pid on record: its output file alone exists before the spawn (§15.2).
      const recordFile = path.join(first.stateDir, "jobs", started.job_id, "record.json");
      const agentPid = (): number | undefined =>
        (JSON.parse(readFileSync(recordFile, "utf8")) as { agent?: { pid?: number } }).agent?.pid;
      await waitFor(() => {
        const pid = agentPid();
        return pid !== undefined && isAlive(pid);
      }, "the agent's pid on record");
      first.child.kill("SIGKILL");
      await first.exited;
      const second = startServer({ CLAUDE_DISPATCH_STATE_DIR: first.stateDir });
      await second.initialize();
      const done = await second.waitForJob(started.job_id);
      assert.equal(done.status, "completed", JSON.stringify(done));
      assert.match(done.result, /slept/);
    });

    test("an option the agent has no flag for, and a mode the operator has not allowed, are refused", async () => {
      const server = startServer();
      await server.initialize();
      const option = await server.callTool("claude_run", {
        agent: agent.name,
        prompt: "x",
        cwd: project(),
        ...agent.unsupportedOption,
      });
      assert.match(
        text(option),
        new RegExp(`^INVALID_ARGUMENT: "max_budget_usd" is not an option of agent "${agent.name}"`),
      );
      const claudeMode = await server.callTool("claude_run", {
        agent: agent.name,
        prompt: "x",
        cwd: project(),
        permission_mode: "acceptEdits",
      });
      assert.match(
        text(claudeMode),
        new RegExp(`^INVALID_ARGUMENT: "permission_mode" must be one of .* for agent "${agent.name}"`),
      );
      if (agent.dangerousMode !== agent.shellMode) {
        const dangerous = await server.callTool("claude_run", {
          agent: agent.name,
          prompt: "x",
          cwd: project(),
          permission_mode: agent.dangerousMode,
        });
        assert.match(
          text(dangerous),
          new RegExp(
            `^POLICY_DENIED: permission_mode "${agent.dangerousMode}" is not allowed for agent "${agent.name}"`,
          ),
        );
      }
      const unknown = await server.callTool("claude_run", { agent: "other", prompt: "x", cwd: project() });
      assert.match(text(unknown), /^INVALID_ARGUMENT: "agent" must be one of the agents this server offers: claude, /);
    });
  });
}
