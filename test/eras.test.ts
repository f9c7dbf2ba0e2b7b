/**
 * One whole job lifecycle per protocol era, in raw JSON lines against the
 * built server, framed as each revision's own examples frame them:
 *   (a) a 2025-06-18 client: initialize, claude_start, claude_wait with progress;
 *   (b) a 2025-11-25 client using Tasks: task-augmented tools/call, tasks/get, tasks/result, tasks/cancel;
 *   (c) a 2026-07-28 client: server/discover, then per-request _meta, the tasks extension (PROTOCOL.md §16).
 * The fake agent stands in for claude; its directives (@sleep, @tools, @pid) shape each job.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, describe, test } from "node:test";

import { isAlive, readPids, waitFor } from "./processes.js";
import { ServerProcess, type RpcResponse } from "./server-process.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-eras-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const servers: ServerProcess[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.dispose();
});
function startServer(): ServerProcess {
  const server = new ServerProcess();
  servers.push(server);
  return server;
}

/** Writes one frame exactly as given and resolves with the response that carries its id. */
function exchange(
  server: ServerProcess,
  frame: { id: string | number } & Record<string, unknown>,
): Promise<RpcResponse> {
  const response = server.responseTo(frame.id);
  server.sendRaw(JSON.stringify(frame));
  return response;
}

/** Every stdout line, parsed; each must be a JSON-RPC 2.0 frame. */
function frames(server: ServerProcess): Array<Record<string, any>> {
  return server.lines.map((line) => {
    const frame = JSON.parse(line) as Record<string, any>;
    assert.equal(frame.jsonrpc, "2.0", `not a JSON-RPC frame: ${line}`);
    return frame;
  });
}

let pidFiles = 0;
const pidFile = (): string => path.join(scratch, `pids-${(pidFiles += 1)}`);

describe(
  "each protocol era, spoken raw to the built server",
  { skip: process.platform !== "linux" && "the kill checks read /proc" },
  () => {
    test(
      "(a) 2025-06-18: initialize, claude_start, then claude_wait with a progress token " + "until the result",
      async () => {
        const server = startServer();
        const init = await exchange(server, {
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: {
            protocolVersion: "2025-06-18",
            capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: {} },
            clientInfo: { name: "ExampleClient", title: "Example Client Display Name", version: "1.0.0" },
          },
        });
        assert.equal(init.result.protocolVersion, "2025-06-18");
        assert.equal(init.result.serverInfo.name, "claude-dispatch");
        assert.equal(init.result.resultType, undefined, "no 2026-07-28 fields in a legacy answer");
        server.sendRaw(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));

        const prompt = "@sleep 3000\n@tools 2 200\nrefactor the parser";
        const started = await exchange(server, {
          jsonrpc: "2.0",
          id: 2,
          method: "tools/call",
          params: { name: "claude_start", arguments: { prompt, cwd: scratch } },
        });
        assert.equal(started.result.structuredContent.status, "running");
        const jobId = started.result.structuredContent.job_id as string;

        const done = await exchange(server, {
          jsonrpc: "2.0",
          id: 3,
          method: "tools/call",
          params: {
            name: "claude_wait",
            arguments: { job_id: jobId, hold_ms: 60_000 },
            _meta: { progressToken: "abc123" },
          },
        });
        assert.equal(done.result.structuredContent.status, "completed");
        assert.equal(done.result.structuredContent.result, `ECHO: ${prompt}`);

        const all = frames(server);
        const answeredAt = all.findIndex((frame) => frame.id === 3);
        const progress = all.filter((frame) => frame.method === "notifications/progress");
        assert.ok(progress.length >= 2, `one when the wait began, more as the agent worked: ${progress.length}`);
        assert.ok(
          progress.every(
            (frame) => frame.params.progressToken === "abc123" && typeof frame.params.message === "string",
          ),
        );
        assert.deepEqual(
          progress.map((frame) => frame.params.progress),
          progress.map((_, index) => index + 1),
        );
        assert.ok(
          all.lastIndexOf(progress.at(-1) as Record<string, any>) < answeredAt,
          "no progress after the response",
        );
      },
    );

    test(
      "(b) 2025-11-25 Tasks: a task-augmented claude_run, tasks/get, tasks/result; a claude_start task ended by " +
        "tasks/cancel",
      async () => {
        const server = startServer();
        const init = await exchange(server, {
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: {
            protocolVersion: "2025-11-25",
            capabilities: { tasks: { list: {}, cancel: {} } },
            clientInfo: { name: "ExampleClient", version: "1.0.0" },
          },
        });
        assert.deepEqual(init.result.capabilities.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
        server.sendRaw(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));

        const prompt = "@sleep 1500\nsummarise the repository";
        const created = await exchange(server, {
          jsonrpc: "2.0",
          id: 2,
          method: "tools/call",
          params: { name: "claude_run", arguments: { prompt, cwd: scratch }, task: { ttl: 60000 } },
        });
        const task = created.result.task;
        assert.equal(task.status, "working");
        assert.equal(task.pollInterval, 5000);
        const working = await exchange(server, {
          jsonrpc: "2.0",
          id: 3,
          method: "tasks/get",
          params: { taskId: task.taskId },
        });
        assert.equal(working.result.taskId, task.taskId);
        assert.equal(working.result.status, "working");

        const final = await exchange(server, {
          jsonrpc: "2.0",
          id: 4,
          method: "tasks/result",
          params: { taskId: task.taskId },
        });
        assert.equal(final.result.structuredContent.result, `ECHO: ${prompt}`);
        assert.deepEqual(final.result._meta, { "io.modelcontextprotocol/related-task": { taskId: task.taskId } });
        await waitFor(
          () => frames(server).some((frame) => frame.method === "notifications/tasks/status"),
          "the status notification",
        );
        const status = frames(server).find((frame) => frame.method === "notifications/tasks/status");
        assert.equal(status?.params.taskId, task.taskId);
        assert.equal(status?.params.status, "completed");

        const pids = pidFile();
        const long = await exchange(server, {
          jsonrpc: "2.0",
          id: 5,
          method: "tools/call",
          params: { name: "claude_start", arguments: { prompt: `@pid ${pids}\n@sleep 60000`, cwd: scratch }, task: {} },
        });
        await waitFor(() => readPids(pids).length === 1, "the task's agent");
        const cancelled = await exchange(server, {
          jsonrpc: "2.0",
          id: 6,
          method: "tasks/cancel",
          params: { taskId: long.result.task.taskId },
        });
        assert.equal(cancelled.result.status, "cancelled");
        assert.equal(isAlive(readPids(pids)[0] as number), false, "the agent is gone when tasks/cancel answers");
      },
    );

    test(
      "(c) 2026-07-28: the server/discover probe, tasks through the extension, a cancel, a refused version, and a " +
        "plain result without the extension",
      async () => {
        const server = startServer();
        const meta = (capabilities: Record<string, unknown>): Record<string, unknown> => ({
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientInfo": { name: "ExampleClient", version: "1.0.0" },
          "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        const withTasks = meta({ extensions: { "io.modelcontextprotocol/tasks": {} } });

        // A dual-era client probes first; a DiscoverResult tells it the server is modern.
        const discovered = await exchange(server, {
          jsonrpc: "2.0",
          id: "discover-1",
          method: "server/discover",
          params: { _meta: meta({}) },
        });
        assert.equal(discovered.result.resultType, "complete");
        assert.deepEqual(discovered.result.supportedVersions, ["2026-07-28"]);
        assert.deepEqual(discovered.result.capabilities.extensions, { "io.modelcontextprotocol/tasks": {} });
        assert.equal(discovered.result._meta["io.modelcontextprotocol/serverInfo"].name, "claude-dispatch");
        assert.match(discovered.result.instructions, /claude_run/);
        assert.ok(discovered.result.ttlMs >= 0);
        assert.equal(discovered.result.cacheScope, "public");

        const refused = await exchange(server, {
          jsonrpc: "2.0",
          id: "discover-2",
          method: "server/discover",
          params: { _meta: { ...meta({}), "io.modelcontextprotocol/protocolVersion": "1900-01-01" } },
        });
        assert.equal(refused.error?.code, -32022);
        assert.equal(refused.error?.message, "Unsupported protocol version");
        const data = (refused.error as { data?: { supported: string[]; requested: string } }).data;
        assert.equal(data?.requested, "1900-01-01");
        assert.ok(data?.supported.includes("2026-07-28"));

        const prompt = "@sleep 800\nadd the feature";
        const created = await exchange(server, {
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: "claude_start", arguments: { prompt, cwd: scratch }, _meta: withTasks },
        });
        assert.equal(created.result.resultType, "task");
        assert.equal(created.result.status, "working");
        assert.equal(created.result.ttlMs, null);
        assert.equal(created.result.pollIntervalMs, 5000);
        const taskId = created.result.taskId as string;

        // Poll as the extension says, only faster than pollIntervalMs to keep the test short.
        let polls = 0;
        let task: Record<string, any>;
        for (;;) {
          polls += 1;
          task = (
            await exchange(server, {
              jsonrpc: "2.0",
              id: `get-${polls}`,
              method: "tasks/get",
              params: { taskId, _meta: withTasks },
            })
          ).result;
          assert.equal(task.resultType, "complete");
          if (task.status !== "working") break;
          assert.ok(polls < 400, "the task never ended");
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        assert.equal(task.status, "completed");
        assert.equal(task.result.structuredContent.status, "completed");
        assert.equal(task.result.structuredContent.result, `ECHO: ${prompt}`);
        assert.equal(typeof task.ttlMs, "number");

        const pids = pidFile();
        const long = await exchange(server, {
          jsonrpc: "2.0",
          id: 2,
          method: "tools/call",
          params: {
            name: "claude_start",
            arguments: { prompt: `@pid ${pids}\n@sleep 60000`, cwd: scratch },
            _meta: withTasks,
          },
        });
        await waitFor(() => readPids(pids).length === 1, "the task's agent");
        const ack = await exchange(server, {
          jsonrpc: "2.0",
          id: 3,
          method: "tasks/cancel",
          params: { taskId: long.result.taskId, _meta: withTasks },
        });
        assert.equal(ack.result.resultType, "complete");
        assert.equal(isAlive(readPids(pids)[0] as number), false, "the agent is gone when tasks/cancel answers");
        const cancelled = await exchange(server, {
          jsonrpc: "2.0",
          id: 4,
          method: "tasks/get",
          params: { taskId: long.result.taskId, _meta: withTasks },
        });
        assert.equal(cancelled.result.status, "cancelled");

        const noCapability = await exchange(server, {
          jsonrpc: "2.0",
          id: 5,
          method: "tasks/get",
          params: { taskId, _meta: meta({}) },
        });
        assert.equal(noCapability.error?.code, -32021);

        const plain = await exchange(server, {
          jsonrpc: "2.0",
          id: 6,
          method: "tools/call",
          params: { name: "claude_run", arguments: { prompt: "what is this?", cwd: scratch }, _meta: meta({}) },
        });
        assert.equal(plain.result.resultType, "complete");
        assert.equal(plain.result.taskId, undefined);
        assert.equal(plain.result.structuredContent.result, "ECHO: what is this?");

        assert.equal(
          frames(server).filter(
            (frame) => typeof frame.method === "string" && frame.method.startsWith("notifications/tasks"),
          ).length,
          0,
        );
      },
    );
  },
);
