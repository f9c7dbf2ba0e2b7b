/**
 * Interop with the official MCP TypeScript SDK client (a devDependency only;
 * the server has none): connect over stdio, list, call every tool with the
 * SDK's own check of structuredContent against each outputSchema, receive
 * progress, and cancel through an AbortSignal.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { SERVER_INSTRUCTIONS } from "../src/server/opening.js";
import { isAlive, readPids, waitFor } from "./processes.js";
import { FAKE_CLAUDE, minimalEnvironment, SERVER_MAIN } from "./server-process.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-sdk-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

async function connect(env: Record<string, string> = {}): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [SERVER_MAIN],
    // The SDK adds its own short list (HOME, LOGNAME, PATH, SHELL, TERM, USER), as a
    // host would; no CLAUDE_DISPATCH_* of the runner.
    env: minimalEnvironment({
      CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE,
      CLAUDE_DISPATCH_KILL_GRACE_MS: "500",
      // Each client gets a server with a fresh state directory, whose agents die with it.
      CLAUDE_DISPATCH_STATE_DIR: mkdtempSync(path.join(scratch, "state-")),
      CLAUDE_DISPATCH_ON_EXIT: "kill",
      ...env,
    }),
    stderr: "ignore",
  });
  const client = new Client({ name: "sdk-interop-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

type ToolResult = {
  structuredContent?: Record<string, any>;
  content: Array<{ type: string; text?: string }>;
  isError?: boolean;
};

describe(
  "the official SDK client",
  { skip: process.platform !== "linux" && "the fake agent and the tree checks need Linux" },
  () => {
    test("connects, lists the tools, and calls each one with its structured output validated", async () => {
      const client = await connect();
      try {
        assert.equal(client.getServerVersion()?.name, "claude-dispatch");
        // SDK 1.32.2 speaks only the legacy era: initialize at 2025-11-25, no
        // server/discover probe (PROTOCOL.md §2, §16).
        assert.equal(client.getInstructions(), SERVER_INSTRUCTIONS);
        assert.ok(client.getServerCapabilities()?.tasks, "the 2025-11-25 Tasks capability");
        const { tools } = await client.listTools();
        assert.deepEqual(
          tools.map((tool) => tool.name),
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
        // callTool validates structuredContent against the outputSchema it listed, and throws on a mismatch.
        const run = (await client.callTool({
          name: "claude_run",
          arguments: { prompt: "hello sdk", cwd: scratch },
        })) as ToolResult;
        assert.equal(run.structuredContent?.status, "completed");
        assert.equal(run.structuredContent?.result, "ECHO: hello sdk");

        const started = (await client.callTool({
          name: "claude_start",
          arguments: { prompt: "@sleep 300", cwd: scratch },
        })) as ToolResult;
        const jobId = started.structuredContent?.job_id as string;
        const running = (await client.callTool({
          name: "claude_wait",
          arguments: { job_id: jobId, hold_ms: 0 },
        })) as ToolResult;
        assert.equal(running.structuredContent?.status, "running");
        const done = (await client.callTool({
          name: "claude_wait",
          arguments: { job_id: jobId, hold_ms: 30_000 },
        })) as ToolResult;
        assert.equal(done.structuredContent?.status, "completed");

        const listed = (await client.callTool({ name: "claude_list", arguments: {} })) as ToolResult;
        assert.equal(listed.structuredContent?.jobs.length, 2);
        const page = (await client.callTool({
          name: "claude_output",
          arguments: { job_id: jobId, view: "transcript" },
        })) as ToolResult;
        assert.match(page.structuredContent?.text, /\[done: success\]/);
        const killed = (await client.callTool({ name: "claude_kill", arguments: { job_id: jobId } })) as ToolResult;
        assert.equal(killed.structuredContent?.already_finished, true);

        const failure = (await client.callTool({
          name: "claude_kill",
          arguments: { job_id: "no-such-job" },
        })) as ToolResult;
        assert.equal(failure.isError, true);
        assert.equal(failure.structuredContent?.error?.code, "JOB_NOT_FOUND");
        const invalid = (await client.callTool({
          name: "claude_run",
          arguments: { prompt: "x", cwd: "relative" },
        })) as ToolResult;
        assert.equal(invalid.structuredContent?.error?.code, "INVALID_ARGUMENT");
      } finally {
        await client.close();
      }
    });

    test("progress reaches the SDK's onprogress with increasing values and the tool in use", async () => {
      const client = await connect({ CLAUDE_DISPATCH_HEARTBEAT_MS: "1000" });
      try {
        const seen: Array<{ progress: number; message?: string }> = [];
        const result = (await client.callTool(
          { name: "claude_run", arguments: { prompt: "@tools 3 600", cwd: scratch } },
          undefined,
          {
            onprogress: (progress) => seen.push(progress),
            resetTimeoutOnProgress: true,
          },
        )) as ToolResult;
        assert.equal(result.structuredContent?.status, "completed");
        assert.ok(seen.length >= 3, `${seen.length} progress notifications`);
        assert.deepEqual(
          seen.map((p) => p.progress),
          seen.map((_, index) => index + 1),
        );
        assert.ok(
          seen.some((p) => /Bash · echo step-\d/.test(p.message ?? "")),
          seen.map((p) => p.message).join(" | "),
        );
      } finally {
        await client.close();
      }
    });

    test("Tasks through the SDK's task API: callToolStream, getTask, listTasks, cancelTask", async () => {
      const client = await connect();
      try {
        const kinds: string[] = [];
        let finalResult: ToolResult | undefined;
        let taskId: string | undefined;
        const stream = client.experimental.tasks.callToolStream(
          { name: "claude_run", arguments: { prompt: "@sleep 400\nvia a task", cwd: scratch } },
          undefined,
          {
            task: { ttl: 60_000 },
          },
        );
        for await (const message of stream) {
          kinds.push(message.type);
          if (message.type === "taskCreated") taskId = message.task.taskId;
          if (message.type === "result") finalResult = message.result as ToolResult;
          if (message.type === "error") assert.fail(String(message.error));
        }
        assert.equal(kinds[0], "taskCreated");
        assert.equal(kinds.at(-1), "result");
        assert.equal(finalResult?.structuredContent?.result, "ECHO: @sleep 400\nvia a task");
        assert.ok(taskId);
        assert.equal((await client.experimental.tasks.getTask(taskId)).status, "completed");
        assert.ok((await client.experimental.tasks.listTasks()).tasks.some((task) => task.taskId === taskId));

        const pidFile = path.join(scratch, "task-cancel-pids");
        const created = client.experimental.tasks.callToolStream(
          { name: "claude_start", arguments: { prompt: `@pid ${pidFile}\n@sleep 60000`, cwd: scratch } },
          undefined,
          {
            task: {},
          },
        );
        const first = await created.next();
        assert.equal(first.value?.type, "taskCreated");
        const longTask = first.value?.type === "taskCreated" ? first.value.task.taskId : "";
        await waitFor(() => readPids(pidFile).length === 1, "the task's agent");
        const cancelled = await client.experimental.tasks.cancelTask(longTask);
        assert.equal(cancelled.status, "cancelled");
        await waitFor(() => readPids(pidFile).every((pid) => !isAlive(pid)), "the cancelled task's agent to die");
        await created.return(undefined);
      } finally {
        await client.close();
      }
    });

    test(
      "an AbortSignal cancels a claude_run: the SDK sends notifications/cancelled and the agent's " + "whole tree dies",
      async () => {
        const client = await connect();
        try {
          const pidFile = path.join(scratch, "abort-pids");
          const controller = new AbortController();
          const call = client.callTool(
            {
              name: "claude_run",
              arguments: { prompt: `@pid ${pidFile}\n@spawn ${pidFile} detached\n@sleep 60000`, cwd: scratch },
            },
            undefined,
            { signal: controller.signal },
          );
          await waitFor(() => readPids(pidFile).length === 2, "the agent and its child");
          controller.abort("user pressed stop");
          await assert.rejects(call);
          await waitFor(() => readPids(pidFile).every((pid) => !isAlive(pid)), "the agent's tree to die");
          // The connection is still good.
          await client.ping();
        } finally {
          await client.close();
        }
      },
    );
  },
);
