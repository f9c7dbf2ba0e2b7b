/** MCP 2025-11-25 Tasks over jobs (PROTOCOL.md §14), with fake agents and a fake clock. */
import assert from "node:assert/strict";
import { test } from "node:test";

import type { JsonRpcResponse } from "../src/server/jsonrpc.js";
import { RELATED_TASK } from "../src/server/tasks.js";
import { TOOL_NAMES } from "../src/tools/definitions.js";
import { cancel, handlerHarness, settle, track, type HandlerHarness } from "./helpers.js";

let nextId = 1;
function request(
  h: HandlerHarness,
  method: string,
  params: Record<string, unknown>,
  id: number = (nextId += 1),
): Promise<JsonRpcResponse | null> {
  return h.handle({ jsonrpc: "2.0", id, method, params });
}
const result = (response: JsonRpcResponse | null): any => {
  assert.ok(response && "result" in response, JSON.stringify(response));
  return response.result;
};
const errorCode = (response: JsonRpcResponse | null): number | undefined =>
  response && "error" in response ? response.error.code : undefined;

async function createTask(
  h: HandlerHarness,
  name = "claude_run",
  args: Record<string, unknown> = { prompt: "p", cwd: "/w" },
  extra: Record<string, unknown> = {},
): Promise<string> {
  const created = result(await request(h, "tools/call", { name, arguments: args, task: { ttl: 60_000 }, ...extra }));
  assert.equal(created.task.status, "working");
  assert.equal(created.task.ttl, null);
  assert.equal(created.task.pollInterval, 5000);
  assert.match(created.task.createdAt, /^\d{4}-\d\d-\d\dT/);
  return created.task.taskId as string;
}

test("the capability and the tools' execution.taskSupport are declared, never as required", async () => {
  const h = handlerHarness();
  const init = result(await request(h, "initialize", { protocolVersion: "2025-11-25" }));
  assert.deepEqual(init.capabilities.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
  const tools = result(await request(h, "tools/list", {})).tools as Array<{ name: string; execution?: unknown }>;
  assert.deepEqual(
    tools.filter((tool) => tool.execution).map((tool) => [tool.name, tool.execution]),
    [
      ["claude_run", { taskSupport: "optional" }],
      ["claude_start", { taskSupport: "optional" }],
    ],
  );
});

test(
  "a task-augmented claude_run answers at once; tasks/get follows it; tasks/result blocks, then returns the run's " +
    "result with related-task",
  async () => {
    const h = handlerHarness();
    const taskId = await createTask(h);
    assert.equal(h.launcher.agents.length, 1);
    assert.equal(result(await request(h, "tasks/get", { taskId })).status, "working");
    const pending = track(request(h, "tasks/result", { taskId }));
    await settle();
    assert.equal(pending.done, false, "tasks/result blocks while the task works");
    h.launcher.last.succeed("the answer");
    await settle();
    const final = result(pending.value ?? null);
    assert.equal(final.structuredContent.status, "completed");
    assert.equal(final.structuredContent.result, "the answer");
    assert.deepEqual(final._meta, { [RELATED_TASK]: { taskId } });
    assert.equal(result(await request(h, "tasks/get", { taskId })).status, "completed");
    const status = h.notifications.filter((note) => note.method === "notifications/tasks/status");
    assert.deepEqual(
      status.map((note) => note.params?.status),
      ["completed"],
    );
  },
);

test("statuses map as documented: an isError result is failed, a killed job is cancelled", async () => {
  const h = handlerHarness();
  const failing = await createTask(h);
  h.launcher.last.finish({ ok: false, code: "AGENT_ERROR", detail: "Not logged in" });
  await settle();
  const failed = result(await request(h, "tasks/get", { taskId: failing }));
  assert.equal(failed.status, "failed");
  assert.equal(failed.statusMessage, "AGENT_ERROR: Not logged in");
  assert.equal(result(await request(h, "tasks/result", { taskId: failing })).isError, true);

  const killedByTool = await createTask(h, "claude_start");
  await request(h, "tools/call", { name: "claude_kill", arguments: { job_id: killedByTool } });
  assert.equal(result(await request(h, "tasks/get", { taskId: killedByTool })).status, "cancelled");
});

test(
  "tasks/cancel kills the job's tree and answers cancelled; a terminal task cannot be " + "cancelled (-32602)",
  async () => {
    const h = handlerHarness();
    const taskId = await createTask(h, "claude_start");
    const agent = h.launcher.last;
    const cancelled = result(await request(h, "tasks/cancel", { taskId }));
    assert.equal(cancelled.status, "cancelled");
    assert.equal(agent.killCalls, 1);
    assert.equal(errorCode(await request(h, "tasks/cancel", { taskId })), -32602);
    // Cancelled stays cancelled whatever the agent does next.
    agent.succeed();
    await settle();
    assert.equal(result(await request(h, "tasks/get", { taskId })).status, "cancelled");
  },
);

test(
  "unknown task ids, bad params, and task augmentation of other tools are refused with the " + "spec's codes",
  async () => {
    const h = handlerHarness();
    for (const method of ["tasks/get", "tasks/result", "tasks/cancel"]) {
      assert.equal(errorCode(await request(h, method, { taskId: "nope" })), -32602, method);
      assert.equal(errorCode(await request(h, method, {})), -32602, method);
    }
    assert.equal(
      errorCode(await request(h, "tools/call", { name: "claude_wait", arguments: { job_id: "x" }, task: {} })),
      -32601,
    );
    assert.equal(
      errorCode(
        await request(h, "tools/call", { name: "claude_run", arguments: { prompt: "p", cwd: "/w" }, task: "soon" }),
      ),
      -32602,
    );
    assert.equal(
      errorCode(
        await request(h, "tools/call", {
          name: "claude_run",
          arguments: { prompt: "p", cwd: "/w" },
          task: { ttl: -1 },
        }),
      ),
      -32602,
    );
    assert.equal(h.launcher.agents.length, 0);
    assert.equal(errorCode(await request(h, "tasks/list", { cursor: "not-ours" })), -32602);
    assert.equal(errorCode(await request(h, "tasks/list", { cursor: 5 })), -32602);
  },
);

test("tasks/list pages with an opaque cursor and holds every task tasks/get can see", async () => {
  const h = handlerHarness();
  const ids: string[] = [];
  for (let i = 0; i < 120; i += 1) ids.push(await createTask(h, "claude_start", { prompt: `p${i}`, cwd: "/w" }));
  const seen: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = result(await request(h, "tasks/list", cursor === undefined ? {} : { cursor }));
    seen.push(...page.tasks.map((task: { taskId: string }) => task.taskId));
    cursor = page.nextCursor;
    pages += 1;
  } while (cursor !== undefined);
  assert.equal(pages, 3);
  assert.deepEqual(seen, ids);
});

test("a progress token stays valid until the task ends, not until the CreateTaskResult", async () => {
  const h = handlerHarness();
  const taskId = await createTask(h, "claude_start", { prompt: "p", cwd: "/w" }, { _meta: { progressToken: "tp" } });
  const agent = h.launcher.last;
  await h.clock.advance(1000);
  agent.report({ turns: 2, lastTool: "Bash · npm test", lastActivity: "tool" });
  await h.clock.advance(1000);
  const progress = h.notifications.filter((note) => note.method === "notifications/progress");
  assert.ok(progress.some((note) => String(note.params?.message).includes("Bash · npm test")));
  for (const note of progress) {
    assert.deepEqual(
      note.params?._meta,
      { "io.modelcontextprotocol/related-task": { taskId } },
      "every message about a task names it",
    );
  }
  agent.succeed();
  await settle();
  const count = h.notifications.filter((note) => note.method === "notifications/progress").length;
  await h.clock.advance(60_000);
  assert.equal(
    h.notifications.filter((note) => note.method === "notifications/progress").length,
    count,
    "none after the task ended",
  );
  const done = result(await request(h, "tasks/get", { taskId }));
  assert.equal(done.status, "completed");
  const lifetime = Date.parse(done.lastUpdatedAt) - Date.parse(done.createdAt) + 600_000;
  assert.equal(
    done.ttl,
    lifetime,
    "once ended, the task's ttl is how long it is still kept: until its job is forgotten",
  );
});

test("under the recursion guard the task augmentation is ignored, as without the tasks capability", async () => {
  const h = handlerHarness({ depth: { current: 1, max: 1 } });
  const answer = result(
    await request(h, "tools/call", { name: "claude_list", arguments: {}, task: "not even an object" }),
  );
  assert.equal(answer.isError, true);
  assert.match(answer.content[0].text, /^DEPTH_LIMIT/);
});

test("a cancelled tasks/result gets no response; the task goes on", async () => {
  const h = handlerHarness();
  const taskId = await createTask(h, "claude_start");
  const waiting = track(request(h, "tasks/result", { taskId }, 9001));
  await settle();
  await cancel(h, 9001);
  await settle();
  assert.equal(waiting.done, true);
  assert.equal(waiting.value, null);
  assert.equal(result(await request(h, "tasks/get", { taskId })).status, "working");
});

test("tools/list issues no cursor, so any cursor is -32602; without one, every tool in one page", async () => {
  const h = handlerHarness();
  assert.equal(errorCode(await request(h, "tools/list", { cursor: "abc" })), -32602);
  assert.equal(result(await request(h, "tools/list", {})).tools.length, TOOL_NAMES.length);
});

test("an issued cursor still works when tasks were forgotten since: the rest is shorter, or empty", async () => {
  const h = handlerHarness();
  const ids: string[] = [];
  for (let i = 0; i < 60; i += 1) ids.push(await createTask(h, "claude_start", { prompt: `p${i}`, cwd: "/w" }));
  const first = result(await request(h, "tasks/list", {}));
  assert.equal(first.tasks.length, 50);
  assert.ok(first.nextCursor);
  for (const agent of h.launcher.agents.slice(0, 15)) agent.succeed();
  await settle();
  await h.clock.advance(600_000);
  h.jobs.list(); // forgets the finished jobs past retention, and with them their tasks
  const rest = result(await request(h, "tasks/list", { cursor: first.nextCursor }));
  assert.deepEqual(rest.tasks, [], "45 tasks are left, all before the cursor's offset of 50");
  assert.equal(
    errorCode(await request(h, "tasks/list", { cursor: Buffer.from("40").toString("base64url") })),
    -32602,
    "a well-formed cursor never issued is refused",
  );
});

test("tasks/list refuses every cursor it did not issue, even ones that decode to an offset", async () => {
  const h = handlerHarness();
  for (const cursor of ["", "MA", " ", "abc", "MQ"]) {
    assert.equal(errorCode(await request(h, "tasks/list", { cursor })), -32602, JSON.stringify(cursor));
  }
});

test("a cancellation naming tasks/get or tasks/list is ignored: they are answered", async () => {
  const h = handlerHarness();
  const taskId = await createTask(h, "claude_start");
  const get = track(request(h, "tasks/get", { taskId }, 7001));
  const list = track(request(h, "tasks/list", {}, 7002));
  await cancel(h, 7001);
  await cancel(h, 7002);
  await settle();
  assert.equal(result(get.value as never).taskId, taskId);
  assert.ok(Array.isArray(result(list.value as never).tasks));
});
