/**
 * Permission prompts forwarded (PROTOCOL.md §18), end to end: the built
 * server, the pinned Claude Code CLI in its default permission mode (a HOME
 * with no settings, so a Bash redirection needs approval), the CLI's own
 * --permission-prompt-tool call to the approver this server names, and a
 * mock Messages API on loopback. Answered by claude_respond, by the official
 * SDK client's elicitation handler, by `claude-dispatch approve`, by the
 * timeout, after a server SIGKILL, and not at all under APPROVALS=deny.
 *
 * Without a working CLI the suite fails under CI=true and is skipped, loudly,
 * elsewhere (claude-cli.ts).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { after, afterEach, before, describe, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

import { listLinuxProcesses } from "../src/hosts/local/index.js";
import { cliPath, mockedCliEnvironment, realCliVersion } from "./claude-cli.js";
import { commandLine, isAlive } from "./processes.js";
import { minimalEnvironment, SERVER_MAIN, ServerProcess, type RpcResponse } from "./server-process.js";
// @ts-expect-error: a plain ESM fixture without type declarations
import { startMockAnthropic } from "./fixtures/mock-anthropic.mjs";

interface Mock {
  url: string;
  requests: Array<{ prompt: string; toolResults: string[] }>;
  close(): Promise<void>;
}

const version = realCliVersion("approvals");

const COMMAND = "echo approved > out.txt";
const PROMPT = `MOCK:BASH ${COMMAND}`;

describe(`permission prompts through the real Claude Code CLI (${version ?? "missing"})`, { skip: !version }, () => {
  let mock: Mock;
  let scratch: string;
  let home: string;
  const servers: ServerProcess[] = [];
  const clients: Client[] = [];

  before(async () => {
    mock = (await startMockAnthropic()) as Mock;
    scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-approvals-"));
    // No settings: Claude Code's defaults, under which an output redirection needs approval.
    home = path.join(scratch, "home");
    for (const dir of [home, path.join(scratch, "tmp")]) mkdirSync(dir, { recursive: true });
  });

  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close();
    // Ended as a host ends them, so CLAUDE_DISPATCH_ON_EXIT=kill takes any
    // agent a failed test left waiting for an answer.
    // Latest first: a server started on another's state directory must be gone before the owner removes it.
    for (const server of servers.splice(0).reverse()) await server.shutdown();
  });

  after(async () => {
    await mock.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  function agentEnv(env: Record<string, string> = {}): Record<string, string> {
    return mockedCliEnvironment(home, path.join(scratch, "tmp"), mock.url, {
      CLAUDE_DISPATCH_CLAUDE_BIN: cliPath,
      CLAUDE_DISPATCH_KILL_GRACE_MS: "1000",
      ...env,
    });
  }

  function startServer(env: Record<string, string> = {}): ServerProcess {
    const server = new ServerProcess(agentEnv(env), {});
    servers.push(server);
    return server;
  }

  const project = (): string => mkdtempSync(path.join(scratch, "project-"));
  const report = (response: RpcResponse): Record<string, any> => response.result.structuredContent;

  async function startAsking(
    server: ServerProcess,
    cwd: string,
  ): Promise<{ jobId: string; waited: Record<string, any> }> {
    const jobId = report(await server.callTool("claude_start", { prompt: PROMPT, cwd })).job_id as string;
    const waited = await server.waitForJob(jobId);
    return { jobId, waited };
  }

  test("input_required names Bash and the command; claude_respond allow runs it and the job completes", async () => {
    const server = startServer();
    await server.initialize("2025-11-25");
    const cwd = project();
    const { jobId, waited } = await startAsking(server, cwd);
    assert.equal(waited.status, "input_required", JSON.stringify(waited));
    assert.equal(waited.pending_approvals.length, 1);
    assert.equal(waited.pending_approvals[0].tool_name, "Bash");
    assert.equal(waited.pending_approvals[0].preview, `Bash · ${COMMAND}`);
    assert.equal(existsSync(path.join(cwd, "out.txt")), false, "nothing ran before the answer");
    const answered = await server.callTool("claude_respond", {
      job_id: jobId,
      request_id: waited.pending_approvals[0].request_id,
      decision: "allow",
    });
    assert.equal(report(answered).status, "answered", answered.result.content[0].text);
    const done = await server.waitForJob(jobId);
    assert.equal(done.status, "completed", JSON.stringify(done));
    assert.equal(readFileSync(path.join(cwd, "out.txt"), "utf8"), "approved\n");
    assert.equal(done.permission_denials, undefined);
    const record = JSON.parse(readFileSync(path.join(server.stateDir, "jobs", jobId, "record.json"), "utf8"));
    assert.deepEqual(
      record.approvals.map((approval: Record<string, unknown>) => [approval.tool_name, approval.decision, approval.by]),
      [["Bash", "allow", "tool"]],
    );
  });

  test(
    "escape sequences and bidi overrides in a tool's input reach no reader of its request " + "(issue 24, item 5)",
    async () => {
      const server = startServer();
      await server.initialize();
      const cwd = project();
      const unsafe = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
      // Claude Code itself refuses a Bash command with control characters ("would be hidden in the approval dialog"),
      // but not one with bidirectional overrides, nor a file to write whose content holds escape sequences.
      // A JSON string after the marker is decoded by the mock API, so the model's tool_use holds the raw characters.
      const command = "echo \u202eevil\u202c done > out.txt";
      const content = "\u001b[2J\u001b]0;owned\u0007text \u202egnp.exe";
      const asked = async (prompt: string): Promise<{ jobId: string; waited: Record<string, any> }> => {
        const jobId = report(await server.callTool("claude_start", { prompt, cwd })).job_id as string;
        return { jobId, waited: await server.waitForJob(jobId) };
      };
      const bash = await asked(`MOCK:BASH ${JSON.stringify(command)}`);
      assert.equal(bash.waited.status, "input_required", JSON.stringify(bash.waited));
      assert.equal(bash.waited.pending_approvals[0].preview, "Bash · echo \uFFFDevil\uFFFD done > out.txt");
      // The request file keeps the input whole: what runs once allowed is what the model asked for.
      const filed = JSON.parse(readFileSync(path.join(server.stateDir, "jobs", bash.jobId, "approval.1.json"), "utf8"));
      assert.equal(filed.input.command, command);
      const approve = await promisify(execFile)(process.execPath, [SERVER_MAIN, "approve", bash.jobId], {
        env: minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: server.stateDir }),
      });
      assert.equal(
        approve.stdout,
        `Allowed request 1 of job ${bash.jobId}: Bash · echo \uFFFDevil\uFFFD done > out.txt\n`,
      );
      assert.equal((await server.waitForJob(bash.jobId)).status, "completed");

      const write = await asked(`MOCK:WRITE ${JSON.stringify(`${path.join(cwd, "notes.txt")} ${content}`)}`);
      assert.equal(write.waited.status, "input_required", JSON.stringify(write.waited));
      const page = (await server.callTool("claude_output", { job_id: write.jobId, view: "approvals" })).result
        .content[0].text as string;
      assert.match(page, /request 1 · Write · pending/);
      assert.doesNotMatch(page, unsafe);
      for (const request of [bash, write].map((job) => job.waited.pending_approvals[0]))
        assert.doesNotMatch(JSON.stringify(request), unsafe);
      await server.callTool("claude_respond", { job_id: write.jobId, request_id: "1", decision: "deny" });
      assert.equal((await server.waitForJob(write.jobId)).status, "completed");
    },
  );

  test(
    "deny with a message: no file, the agent reads the message, and the denial is in " + "permission_denials",
    async () => {
      const server = startServer();
      await server.initialize();
      const cwd = project();
      const { jobId, waited } = await startAsking(server, cwd);
      assert.equal(waited.status, "input_required");
      await server.callTool("claude_respond", {
        job_id: jobId,
        request_id: "1",
        decision: "deny",
        message: "write to notes.txt instead",
      });
      const done = await server.waitForJob(jobId);
      assert.equal(done.status, "completed");
      assert.equal(existsSync(path.join(cwd, "out.txt")), false);
      assert.match(done.result, /write to notes\.txt instead/);
      assert.deepEqual(
        done.permission_denials.map((denial: { tool_name: string }) => denial.tool_name),
        ["Bash"],
      );
    },
  );

  test("the official SDK client's elicitation handler answers: accept allows, decline denies", async () => {
    const forms: string[] = [];
    let nextAnswer: "allow" | "decline" = "allow";
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [SERVER_MAIN],
      env: agentEnv({
        CLAUDE_DISPATCH_STATE_DIR: mkdtempSync(path.join(scratch, "state-")),
        CLAUDE_DISPATCH_ON_EXIT: "kill",
      }),
      stderr: "ignore",
    });
    const client = new Client(
      { name: "elicitation-test", version: "1.0.0" },
      { capabilities: { elicitation: { form: {} } } },
    );
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      forms.push(String(request.params.message));
      return nextAnswer === "allow" ? { action: "accept", content: { decision: "allow" } } : { action: "decline" };
    });
    await client.connect(transport);
    clients.push(client);
    const allowedIn = project();
    const allowed = (await client.callTool({ name: "claude_run", arguments: { prompt: PROMPT, cwd: allowedIn } })) as {
      structuredContent: Record<string, any>;
    };
    assert.equal(allowed.structuredContent.status, "completed");
    assert.equal(readFileSync(path.join(allowedIn, "out.txt"), "utf8"), "approved\n");
    assert.match(forms[0] ?? "", /asks to use Bash:\nBash · echo approved > out\.txt/);
    nextAnswer = "decline";
    const declinedIn = project();
    const declined = (await client.callTool({
      name: "claude_run",
      arguments: { prompt: PROMPT, cwd: declinedIn },
    })) as { structuredContent: Record<string, any> };
    assert.equal(declined.structuredContent.status, "completed");
    assert.equal(existsSync(path.join(declinedIn, "out.txt")), false);
    assert.match(declined.structuredContent.result, /The user declined this tool call/);
    assert.equal(forms.length, 2);
  });

  test("claude-dispatch approve answers from a terminal", async () => {
    const server = startServer();
    await server.initialize();
    const cwd = project();
    const { jobId, waited } = await startAsking(server, cwd);
    assert.equal(waited.status, "input_required");
    const { stdout } = await promisify(execFile)(process.execPath, [SERVER_MAIN, "approve", jobId.slice(0, 8)], {
      env: minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: server.stateDir }),
    });
    assert.match(stdout, /Allowed request 1 of job/);
    const done = await server.waitForJob(jobId);
    assert.equal(done.status, "completed");
    assert.equal(readFileSync(path.join(cwd, "out.txt"), "utf8"), "approved\n");
    const record = JSON.parse(readFileSync(path.join(server.stateDir, "jobs", jobId, "record.json"), "utf8"));
    // Another process wrote the answer: the server records what its file says, not a fact it cannot know (§18).
    assert.deepEqual([record.approvals[0].by, record.approvals[0].claimed_by], [undefined, "cli"]);
  });

  test("a pending request survives a SIGKILLed server: the next server answers it, and the agent goes on", async () => {
    const first = startServer();
    await first.initialize();
    const cwd = project();
    const { jobId, waited } = await startAsking(first, cwd);
    assert.equal(waited.status, "input_required");
    first.child.kill("SIGKILL");
    await first.exited;
    const second = startServer({ CLAUDE_DISPATCH_STATE_DIR: first.stateDir });
    await second.initialize();
    const again = report(await second.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 }));
    assert.equal(again.status, "input_required", JSON.stringify(again));
    assert.equal(again.pending_approvals[0].preview, `Bash · ${COMMAND}`);
    await second.callTool("claude_respond", { job_id: jobId, request_id: "1", decision: "allow" });
    const done = await second.waitForJob(jobId);
    assert.equal(done.status, "completed", JSON.stringify(done));
    assert.equal(readFileSync(path.join(cwd, "out.txt"), "utf8"), "approved\n");
  });

  test("another server of the state directory sees input_required and answers; the owner's agent goes on", async () => {
    const owner = startServer();
    await owner.initialize();
    const other = startServer({ CLAUDE_DISPATCH_STATE_DIR: owner.stateDir });
    await other.initialize();
    const cwd = project();
    const { jobId, waited } = await startAsking(owner, cwd);
    assert.equal(waited.status, "input_required");
    const seen = report(await other.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 }));
    assert.equal(seen.status, "input_required", JSON.stringify(seen));
    const listed = report(await other.callTool("claude_list", {}));
    assert.deepEqual(
      listed.jobs.map((job: Record<string, unknown>) => [job.status, job.other_server]),
      [["input_required", true]],
    );
    await other.callTool("claude_respond", { job_id: jobId, request_id: "1", decision: "allow" });
    const done = await owner.waitForJob(jobId);
    assert.equal(done.status, "completed");
    assert.equal(readFileSync(path.join(cwd, "out.txt"), "utf8"), "approved\n");
  });

  test("claude_kill while a request waits: the agent is gone, and no approver process ran beside it", async () => {
    const server = startServer();
    await server.initialize();
    const { jobId, waited } = await startAsking(server, project());
    assert.equal(waited.status, "input_required");
    const approvers = async (): Promise<number[]> =>
      (await listLinuxProcesses())
        .filter(
          (info) =>
            commandLine(info.pid).includes(`approver --state-dir=`) && commandLine(info.pid).trimEnd().endsWith(jobId),
        )
        .map((info) => info.pid);
    // The state directory's endpoint answers it (§18): no process of ours runs beside the agent.
    assert.deepEqual(await approvers(), [], "no approver process");
    const killed = report(await server.callTool("claude_kill", { job_id: jobId }));
    assert.equal(killed.status, "killed", JSON.stringify(killed));
    assert.deepEqual(await approvers(), []);
    const record = JSON.parse(readFileSync(path.join(server.stateDir, "jobs", jobId, "record.json"), "utf8"));
    assert.equal(record.approvals[0].decision, undefined, "the request went unanswered");
    assert.equal(isAlive(record.agent.pid), false, "the agent is gone");
    const late = await server.callTool("claude_respond", { job_id: jobId, request_id: "1", decision: "allow" });
    assert.match(late.result.content[0].text, /has finished \(killed\): request "1" is no longer pending/);
  });

  test("an unanswered request is denied at the timeout, with a message saying so", async () => {
    const server = startServer({ CLAUDE_DISPATCH_APPROVAL_TIMEOUT_MS: "1000" });
    await server.initialize("2025-11-25");
    const cwd = project();
    // As a task, so tasks/result waits through input_required to the end, answering nothing.
    const created = await server.request("tools/call", {
      name: "claude_start",
      arguments: { prompt: PROMPT, cwd },
      task: {},
    });
    const jobId = created.result.task.taskId as string;
    const done = (await server.request("tasks/result", { taskId: jobId })).result.structuredContent;
    assert.equal(done.status, "completed");
    assert.equal(existsSync(path.join(cwd, "out.txt")), false);
    assert.match(done.result, /No one answered this permission request within 1 seconds, so it was denied/);
    const record = JSON.parse(readFileSync(path.join(server.stateDir, "jobs", jobId, "record.json"), "utf8"));
    assert.deepEqual([record.approvals[0].by, record.approvals[0].claimed_by], [undefined, "timeout"]);
  });

  test("a claude_run whose client cannot be asked is denied at once, and says to use claude_start", async () => {
    const server = startServer();
    await server.initialize();
    const cwd = project();
    const run = report(await server.callTool("claude_run", { prompt: PROMPT, cwd }));
    assert.equal(run.status, "completed");
    assert.equal(existsSync(path.join(cwd, "out.txt")), false);
    assert.match(run.result, /Approval is not available in this call/);
    assert.match(run.next, /use claude_start, then claude_wait and claude_respond/);
  });

  test("CLAUDE_DISPATCH_APPROVALS=deny: nothing is forwarded, the CLI refuses as it does headless", async () => {
    const server = startServer({ CLAUDE_DISPATCH_APPROVALS: "deny" });
    await server.initialize();
    const cwd = project();
    const { jobId, waited } = await startAsking(server, cwd);
    assert.equal(waited.status, "completed", JSON.stringify(waited));
    assert.equal(existsSync(path.join(cwd, "out.txt")), false);
    assert.deepEqual(
      waited.permission_denials.map((denial: { tool_name: string }) => denial.tool_name),
      ["Bash"],
    );
    assert.deepEqual(
      readdirSync(path.join(server.stateDir, "jobs", jobId)).filter((name) => name.startsWith("approval.")),
      [],
    );
  });
});
