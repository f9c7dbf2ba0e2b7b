/**
 * The 2026-07-28 era (PROTOCOL.md §16) through the handler, with fake agents
 * and a fake clock: the per-request envelope, server/discover, the methods of
 * that era, and the io.modelcontextprotocol/tasks extension over jobs.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { SERVER_INFO_KEY, TASKS_EXTENSION } from "../src/server/eras.js";
import { LISTING_TTL_MS } from "../src/server/handler.js";
import { SERVER_INSTRUCTIONS } from "../src/server/opening.js";
import type { JsonRpcResponse } from "../src/server/jsonrpc.js";
import { SYNCHRONOUS_RUN_MAX_TIMEOUT_MS } from "../src/server/tasks-extension.js";
import { TOOL_NAMES } from "../src/tools/definitions.js";
import { cancel, handlerHarness, settle, track, type HandlerHarness } from "./helpers.js";

const VERSION = "2026-07-28";
const SERVER = { name: "claude-dispatch", version: "0.0.0-test" };
const ARGS = { prompt: "p", cwd: "/w" };

/** The envelope every 2026-07-28 request carries; `tasks` adds the tasks extension to its capabilities. */
function envelope(
  options: { tasks?: boolean; version?: unknown; extra?: Record<string, unknown> } = {},
): Record<string, unknown> {
  return {
    "io.modelcontextprotocol/protocolVersion": "version" in options ? options.version : VERSION,
    "io.modelcontextprotocol/clientInfo": { name: "test-client", version: "1" },
    "io.modelcontextprotocol/clientCapabilities": options.tasks ? { extensions: { [TASKS_EXTENSION]: {} } } : {},
    ...options.extra,
  };
}

let nextId = 5000;
function send(
  h: HandlerHarness,
  method: string,
  params: Record<string, unknown>,
  id: number = (nextId += 1),
): Promise<JsonRpcResponse | null> {
  return h.handle({ jsonrpc: "2.0", id, method, params });
}
/** A 2026-07-28 request: params plus the envelope. */
function modern(
  h: HandlerHarness,
  method: string,
  params: Record<string, unknown> = {},
  options: { tasks?: boolean; id?: number } = {},
): Promise<JsonRpcResponse | null> {
  return send(h, method, { ...params, _meta: envelope(options) }, options.id);
}

const result = (response: JsonRpcResponse | null): any => {
  assert.ok(response && "result" in response, JSON.stringify(response));
  return response.result;
};
const error = (response: JsonRpcResponse | null, code: number): { message: string; data?: any } => {
  assert.ok(response && "error" in response, JSON.stringify(response));
  assert.equal(response.error.code, code, JSON.stringify(response.error));
  return response.error;
};

function assertModern(answer: any, resultType = "complete"): void {
  assert.equal(answer.resultType, resultType);
  assert.deepEqual(answer._meta?.[SERVER_INFO_KEY], SERVER);
}

test(
  "server/discover: the versions, the tasks extension, the instructions, caching hints and the " + "server's identity",
  async () => {
    const h = handlerHarness();
    const discovered = result(await modern(h, "server/discover"));
    assertModern(discovered);
    assert.deepEqual(discovered.supportedVersions, [VERSION]);
    assert.deepEqual(discovered.capabilities, { tools: { listChanged: false }, extensions: { [TASKS_EXTENSION]: {} } });
    assert.equal(discovered.instructions, SERVER_INSTRUCTIONS);
    for (const name of TOOL_NAMES) assert.ok(SERVER_INSTRUCTIONS.includes(name), `the instructions name ${name}`);
    assert.equal(discovered.ttlMs, LISTING_TTL_MS);
    assert.equal(discovered.cacheScope, "public");
  },
);

test("an unsupported version is -32022 with the versions we serve, on every method, and nothing runs", async () => {
  const h = handlerHarness();
  for (const [method, params] of [
    ["server/discover", {}],
    ["tools/list", {}],
    ["tools/call", { name: "claude_start", arguments: ARGS }],
    ["tasks/get", { taskId: "job-1" }],
    ["initialize", { protocolVersion: "2025-11-25" }],
  ] as const) {
    for (const requested of ["1900-01-01", "2025-11-25", "2026-07-28 "]) {
      const refused = error(
        await send(h, method, { ...params, _meta: envelope({ version: requested, tasks: true }) }),
        -32022,
      );
      assert.equal(refused.message, "Unsupported protocol version");
      assert.deepEqual(
        refused.data,
        { supported: [VERSION], requested },
        `${method} ${requested}: only versions an envelope may name`,
      );
    }
  }
  assert.equal(h.launcher.agents.length, 0);
});

test("a malformed envelope is -32602: a version that is not a string, or no client capabilities", async () => {
  const h = handlerHarness();
  for (const version of [20260728, null, {}, ["2026-07-28"]]) {
    assert.match(
      error(await send(h, "server/discover", { _meta: envelope({ version }) }), -32602).message,
      /protocolVersion/,
    );
  }
  const noCapabilities = { "io.modelcontextprotocol/protocolVersion": VERSION };
  assert.match(error(await send(h, "tools/list", { _meta: noCapabilities }), -32602).message, /clientCapabilities/);
  const notAnObject = { ...noCapabilities, "io.modelcontextprotocol/clientCapabilities": "all" };
  assert.match(
    error(await send(h, "tools/call", { name: "claude_start", arguments: ARGS, _meta: notAnObject }), -32602).message,
    /clientCapabilities/,
  );
  assert.equal(h.launcher.agents.length, 0);
});

test("the version is checked on every request: a good one earlier lets nothing through later", async () => {
  const h = handlerHarness();
  result(await modern(h, "server/discover"));
  result(await modern(h, "tools/list"));
  error(
    await send(h, "tools/call", {
      name: "claude_start",
      arguments: ARGS,
      _meta: envelope({ version: "2027-01-01", tasks: true }),
    }),
    -32022,
  );
  assert.equal(h.launcher.agents.length, 0);
  result(await modern(h, "server/discover"));
});

test(
  "methods of the legacy era only are -32601 in a 2026-07-28 request; server/discover without the " +
    "envelope is -32602",
  async () => {
    const h = handlerHarness();
    for (const method of ["initialize", "ping", "tasks/result", "tasks/list", "resources/list", "logging/setLevel"]) {
      assert.match(
        error(
          await modern(h, method, method === "initialize" ? { protocolVersion: "2025-11-25" } : {}, { tasks: true }),
          -32601,
        ).message,
        /^Method not found/,
      );
    }
    assert.match(
      error(await send(h, "server/discover", {}), -32602).message,
      /io\.modelcontextprotocol\/protocolVersion/,
    );
    assert.match(
      error(await send(h, "server/discover", { _meta: { progressToken: 1 } }), -32602).message,
      /protocolVersion/,
    );
    // The legacy era is untouched alongside.
    assert.equal(result(await send(h, "initialize", { protocolVersion: "2025-06-18" })).protocolVersion, "2025-06-18");
    assert.deepEqual(result(await send(h, "ping", {})), {});
  },
);

test(
  "tools/list: the same nine tools, cacheable, without 2025-11-25's execution; the legacy " + "list keeps it",
  async () => {
    const h = handlerHarness();
    const listed = result(await modern(h, "tools/list"));
    assertModern(listed);
    assert.equal(listed.ttlMs, LISTING_TTL_MS);
    assert.equal(listed.cacheScope, "public");
    assert.deepEqual(
      listed.tools.map((tool: { name: string }) => tool.name),
      [...TOOL_NAMES],
    );
    assert.ok(listed.tools.every((tool: Record<string, unknown>) => !("execution" in tool)));
    const legacy = result(await send(h, "tools/list", {}));
    assert.equal(legacy.resultType, undefined);
    assert.equal(legacy.tools.filter((tool: Record<string, unknown>) => "execution" in tool).length, 2);
  },
);

test(
  "claude_start with the tasks extension is a task: CreateTaskResult, then tasks/get until completed, with the " +
    "final report as result",
  async () => {
    const h = handlerHarness();
    const created = result(await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true }));
    assertModern(created, "task");
    const { taskId } = created;
    assert.equal(taskId, "job-1", "the task id is the job id");
    assert.equal(created.status, "working");
    assert.equal(created.ttlMs, null);
    assert.equal(created.pollIntervalMs, 5000);
    assert.equal(created.createdAt, new Date(h.clock.now()).toISOString());
    assert.equal(created.result, undefined);
    assert.equal(h.launcher.agents.length, 1);

    await h.clock.advance(12_000);
    h.launcher.last.report({ turns: 2, lastTool: "Bash · npm test", lastActivity: "tool" });
    const working = result(await modern(h, "tasks/get", { taskId }, { tasks: true }));
    assertModern(working);
    assert.equal(working.status, "working");
    assert.equal(working.statusMessage, "12s · turn 2 · Bash · npm test");
    assert.equal(working.result, undefined);

    h.launcher.last.succeed("all done");
    await settle();
    const completed = result(await modern(h, "tasks/get", { taskId }, { tasks: true }));
    assertModern(completed);
    assert.equal(completed.status, "completed");
    assertModern(completed.result);
    assert.equal(completed.result.structuredContent.status, "completed");
    assert.equal(completed.result.structuredContent.job_id, taskId);
    assert.equal(completed.result.structuredContent.result, "all done");
    assert.equal(completed.ttlMs, 12_000 + 600_000, "from creation until the job is forgotten");
    assert.equal(completed.lastUpdatedAt, new Date(h.clock.now()).toISOString());
    // The 2025-11-25 status notification is not part of this era, and claude_wait still sees the job.
    assert.equal(h.notifications.filter((note) => note.method.startsWith("notifications/tasks")).length, 0);
    const waited = result(await modern(h, "tools/call", { name: "claude_wait", arguments: { job_id: taskId } }));
    assert.equal(waited.structuredContent.status, "completed");
  },
);

test(
  "claude_run becomes a task unless its timeout_ms is at most the synchronous limit; the default timeout " +
    "makes it one",
  async () => {
    const h = handlerHarness();
    assert.equal(SYNCHRONOUS_RUN_MAX_TIMEOUT_MS, 30_000);
    const byDefault = result(await modern(h, "tools/call", { name: "claude_run", arguments: ARGS }, { tasks: true }));
    assert.equal(byDefault.resultType, "task");
    const justOver = result(
      await modern(
        h,
        "tools/call",
        { name: "claude_run", arguments: { ...ARGS, timeout_ms: 30_001 } },
        { tasks: true },
      ),
    );
    assert.equal(justOver.resultType, "task");

    const short = track(
      modern(h, "tools/call", { name: "claude_run", arguments: { ...ARGS, timeout_ms: 30_000 } }, { tasks: true }),
    );
    await settle();
    assert.equal(short.done, false, "a short run waits for its answer, as without the extension");
    h.launcher.last.succeed("quick answer");
    const answered = result(await short.promise);
    assertModern(answered);
    assert.equal(answered.structuredContent.result, "quick answer");

    // A run task's result is the run's own result, as claude_run would have returned it.
    h.launcher.agents[0]?.succeed("slow answer");
    await settle();
    const finished = result(await modern(h, "tasks/get", { taskId: byDefault.taskId }, { tasks: true }));
    assert.equal(finished.result.structuredContent.result, "slow answer");
  },
);

test(
  "capabilities come from each request alone: without the extension, claude_start answers with a " + "plain result",
  async () => {
    const h = handlerHarness();
    result(
      await send(h, "initialize", {
        protocolVersion: "2025-11-25",
        capabilities: { extensions: { [TASKS_EXTENSION]: {} } },
      }),
    );
    result(await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true }));
    const plain = result(await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }));
    assertModern(plain);
    assert.equal(plain.taskId, undefined);
    assert.equal(plain.structuredContent.status, "running");
    assert.equal(plain.structuredContent.job_id, "job-2");
    // Declaring other extensions, or the tasks one with settings that are not an object, is not declaring it.
    for (const capabilities of [
      { extensions: { "com.example/other": {} } },
      { extensions: { [TASKS_EXTENSION]: true } },
      { extensions: [] },
    ]) {
      const meta = { ...envelope(), "io.modelcontextprotocol/clientCapabilities": capabilities };
      const answer = result(await send(h, "tools/call", { name: "claude_start", arguments: ARGS, _meta: meta }));
      assert.equal(answer.resultType, "complete", JSON.stringify(capabilities));
    }
  },
);

test("tasks/get, tasks/update and tasks/cancel need the extension on that very request (-32021)", async () => {
  const h = handlerHarness();
  const { taskId } = result(await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true }));
  for (const method of ["tasks/get", "tasks/update", "tasks/cancel"]) {
    const refused = error(await modern(h, method, { taskId, inputResponses: {} }), -32021);
    assert.deepEqual(refused.data, { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } });
  }
  assert.equal(h.launcher.last.killCalls, 0);
});

test("an isError outcome is a completed task whose result has isError, never failed", async () => {
  const h = handlerHarness();
  const { taskId } = result(await modern(h, "tools/call", { name: "claude_run", arguments: ARGS }, { tasks: true }));
  h.launcher.last.finish({ ok: false, code: "AGENT_ERROR", detail: "Not logged in" });
  await settle();
  const task = result(await modern(h, "tasks/get", { taskId }, { tasks: true }));
  assert.equal(task.status, "completed");
  assert.equal(task.statusMessage, "AGENT_ERROR: Not logged in");
  assert.equal(task.result.isError, true);
  assert.equal(task.result.structuredContent.error.code, "AGENT_ERROR");
});

test(
  "tasks/cancel kills the job's tree and acknowledges; the task is cancelled; cancelling an ended task " +
    "changes nothing",
  async () => {
    const h = handlerHarness();
    const { taskId } = result(
      await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true }),
    );
    const agent = h.launcher.last;
    const ack = result(await modern(h, "tasks/cancel", { taskId }, { tasks: true }));
    assert.deepEqual(ack, { resultType: "complete", _meta: { [SERVER_INFO_KEY]: SERVER } });
    assert.equal(agent.killCalls, 1);
    const cancelled = result(await modern(h, "tasks/get", { taskId }, { tasks: true }));
    assert.equal(cancelled.status, "cancelled");
    assert.equal(cancelled.result, undefined);
    result(await modern(h, "tasks/cancel", { taskId }, { tasks: true }));
    assert.equal(agent.killCalls, 1);

    const finished = result(await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true }));
    h.launcher.last.succeed();
    await settle();
    result(await modern(h, "tasks/cancel", { taskId: finished.taskId }, { tasks: true }));
    assert.equal(
      result(await modern(h, "tasks/get", { taskId: finished.taskId }, { tasks: true })).status,
      "completed",
    );
  },
);

test(
  "tasks/update is acknowledged and ignored (nothing waits for input); bad params and unknown " + "ids are -32602",
  async () => {
    const h = handlerHarness();
    const { taskId } = result(
      await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true }),
    );
    const ack = result(
      await modern(
        h,
        "tasks/update",
        { taskId, inputResponses: { name: { action: "accept", content: {} } } },
        { tasks: true },
      ),
    );
    assert.equal(ack.resultType, "complete");
    assert.equal(result(await modern(h, "tasks/get", { taskId }, { tasks: true })).status, "working");
    error(await modern(h, "tasks/update", { taskId }, { tasks: true }), -32602);
    for (const method of ["tasks/get", "tasks/update", "tasks/cancel"]) {
      const missing = error(await modern(h, method, { taskId: "nope", inputResponses: {} }, { tasks: true }), -32602);
      assert.equal(missing.message, 'Failed to retrieve task: Task not found: "nope"');
      error(await modern(h, method, { taskId: 7, inputResponses: {} }, { tasks: true }), -32602);
    }
  },
);

test("a job started without a task is a task too: tasks/get follows any job by its id", async () => {
  const h = handlerHarness();
  const started = result(await send(h, "tools/call", { name: "claude_start", arguments: ARGS }));
  const jobId = started.structuredContent.job_id;
  assert.equal(result(await modern(h, "tasks/get", { taskId: jobId }, { tasks: true })).status, "working");
});

test(
  "both eras see one job: a 2025-11-25 task cancelled through the extension is cancelled for its own " +
    "connection too",
  async () => {
    const h = handlerHarness();
    const legacy = result(await send(h, "tools/call", { name: "claude_start", arguments: ARGS, task: {} }));
    const taskId = legacy.task.taskId;
    assert.equal(result(await modern(h, "tasks/get", { taskId }, { tasks: true })).status, "working");
    result(await modern(h, "tasks/cancel", { taskId }, { tasks: true }));
    assert.equal(result(await send(h, "tasks/get", { taskId })).status, "cancelled");
    // The extension's tasks are not in the 2025-11-25 list, which holds what that era created.
    const modernTask = result(
      await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true }),
    );
    const listed = result(await send(h, "tasks/list", {})).tasks.map((task: { taskId: string }) => task.taskId);
    assert.deepEqual(listed, [taskId]);
    assert.notEqual(modernTask.taskId, taskId);
  },
);

test(
  "no progress follows a CreateTaskResult, though the call carried a token; a synchronous call still " +
    "gets progress",
  async () => {
    const h = handlerHarness();
    await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true });
    const withToken = await send(h, "tools/call", {
      name: "claude_start",
      arguments: ARGS,
      _meta: { ...envelope({ tasks: true }), progressToken: "t1" },
    });
    assert.equal(result(withToken).resultType, "task");
    h.launcher.last.report({ turns: 1, lastActivity: "text" });
    await h.clock.advance(60_000);
    assert.equal(h.notifications.length, 0);

    const waiting = track(
      send(h, "tools/call", {
        name: "claude_run",
        arguments: { ...ARGS, timeout_ms: 5000 },
        _meta: { ...envelope({ tasks: true }), progressToken: "t2" },
      }),
    );
    await settle();
    assert.deepEqual(
      h.notifications.map((note) => note.params?.progressToken),
      ["t2"],
    );
    h.launcher.last.succeed();
    assert.equal(result(await waiting.promise).resultType, "complete");
  },
);

test("a queued task says so, and keeps its createdAt when it starts", async () => {
  const h = handlerHarness({}, { maxRunning: 1 });
  await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true });
  const queued = result(await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true }));
  assert.equal(queued.status, "working");
  assert.equal(queued.statusMessage, "0s · queued at position 1");
  await h.clock.advance(5000);
  h.launcher.agents[0]?.succeed();
  await settle();
  const running = result(await modern(h, "tasks/get", { taskId: queued.taskId }, { tasks: true }));
  assert.equal(running.createdAt, queued.createdAt);
  assert.equal(running.lastUpdatedAt, new Date(h.clock.now()).toISOString());
  assert.match(running.statusMessage, /^0s · starting$/);
});

test("a call that fails its checks is a plain failed result, not a task; other tools never become tasks", async () => {
  const h = handlerHarness();
  const refused = result(
    await modern(h, "tools/call", { name: "claude_start", arguments: { prompt: "", cwd: "/w" } }, { tasks: true }),
  );
  assertModern(refused);
  assert.equal(refused.isError, true);
  assert.equal(refused.structuredContent.error.code, "INVALID_ARGUMENT");
  const outside = result(
    await modern(
      h,
      "tools/call",
      { name: "claude_run", arguments: { prompt: "p", cwd: "/outside/x" } },
      { tasks: true },
    ),
  );
  assert.equal(outside.structuredContent.error.code, "POLICY_DENIED");
  const listed = result(await modern(h, "tools/call", { name: "claude_list", arguments: {} }, { tasks: true }));
  assert.equal(listed.resultType, "complete");
  assert.equal(h.launcher.agents.length, 0);
  // A 2025-11-25 `task` param means nothing in this era: the server alone decides.
  const ignored = result(
    await modern(h, "tools/call", { name: "claude_list", arguments: {}, task: "soon" }, { tasks: true }),
  );
  assert.equal(ignored.resultType, "complete");
});

test(
  "notifications/cancelled of a synchronous 2026-07-28 claude_run kills its job and drops " + "the response",
  async () => {
    const h = handlerHarness();
    const call = track(modern(h, "tools/call", { name: "claude_run", arguments: ARGS }, { id: 77 }));
    await settle();
    await cancel(h, 77);
    await settle();
    assert.equal(call.done, true);
    assert.equal(call.value, null);
    assert.equal(h.launcher.last.killCalls, 1);
  },
);

test("under the recursion guard, discovery offers no tools and no extension, and calls are DEPTH_LIMIT", async () => {
  const h = handlerHarness({ depth: { current: 1, max: 1 } });
  const discovered = result(await modern(h, "server/discover"));
  assert.deepEqual(discovered.capabilities, { tools: { listChanged: false } });
  assert.match(discovered.instructions, /offers no tools/);
  assert.deepEqual(result(await modern(h, "tools/list")).tools, []);
  const refused = result(await modern(h, "tools/call", { name: "claude_start", arguments: ARGS }, { tasks: true }));
  assertModern(refused);
  assert.equal(refused.structuredContent.error.code, "DEPTH_LIMIT");
});
