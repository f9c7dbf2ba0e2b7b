/** The concurrency queue as the tools report it (PROTOCOL.md §8). */
import assert from "node:assert/strict";
import { test } from "node:test";

import type { JsonRpcResponse } from "../src/server/jsonrpc.js";
import type { Report } from "../src/tools/results.js";
import { handlerHarness, settle, type HandlerHarness } from "./helpers.js";

let nextId = 1;
async function call(
  h: HandlerHarness,
  name: string,
  args: Record<string, unknown>,
  token?: string,
): Promise<{ report: Report; text: string; isError: boolean }> {
  const params: Record<string, unknown> = { name, arguments: args };
  if (token !== undefined) params._meta = { progressToken: token };
  const response = (await h.handle({
    jsonrpc: "2.0",
    id: (nextId += 1),
    method: "tools/call",
    params,
  })) as JsonRpcResponse & { result: any };
  return {
    report: response.result.structuredContent,
    text: response.result.content[0].text,
    isError: response.result.isError === true,
  };
}

test(
  "beyond the limit claude_start queues: its report says queued and where, and claude_wait follows " + "the position",
  async () => {
    const h = handlerHarness({}, { maxRunning: 1 });
    const first = await call(h, "claude_start", { prompt: "one", cwd: "/w" });
    const second = await call(h, "claude_start", { prompt: "two", cwd: "/w" });
    const third = await call(h, "claude_start", { prompt: "three", cwd: "/w" });
    assert.equal(first.report.status, "running");
    assert.deepEqual([second.report.status, second.report.queue_position], ["queued", 1]);
    assert.deepEqual([third.report.status, third.report.queue_position], ["queued", 2]);
    assert.match(third.text, /^Queued job job-3 at position 2: it starts when a running agent finishes/);

    await h.clock.advance(7_000);
    const waiting = await call(h, "claude_wait", { job_id: "job-3", hold_ms: 0 });
    assert.deepEqual(
      [waiting.report.status, waiting.report.queue_position, waiting.report.elapsed_s],
      ["queued", 2, 7],
    );
    assert.match(waiting.text, /is queued \(position 2, 7s so far\)/);
    assert.equal(waiting.isError, false);

    h.launcher.agents[0]?.succeed();
    await settle();
    const moved = await call(h, "claude_wait", { job_id: "job-3", hold_ms: 0 });
    assert.deepEqual([moved.report.status, moved.report.queue_position], ["queued", 1]);
    const listed = await call(h, "claude_list", {});
    assert.deepEqual(
      (listed.report as unknown as { jobs: Array<{ status: string }> }).jobs.map((job) => job.status),
      ["running", "queued", "completed"],
    );
  },
);

test("claude_kill of a queued job removes it without starting it", async () => {
  const h = handlerHarness({}, { maxRunning: 1 });
  await call(h, "claude_start", { prompt: "one", cwd: "/w" });
  await call(h, "claude_start", { prompt: "two", cwd: "/w" });
  const killed = await call(h, "claude_kill", { job_id: "job-2" });
  assert.equal(killed.report.status, "killed");
  assert.equal(killed.isError, false);
  assert.match(killed.text, /^Removed job job-2 from the queue; it never started\./);
  h.launcher.agents[0]?.succeed();
  await settle();
  assert.equal(h.launcher.agents.length, 1, "the removed job never launched");
});

test("a queued claude_run with a progress token hears its position, then its start", async () => {
  const h = handlerHarness({}, { maxRunning: 1 });
  await call(h, "claude_start", { prompt: "hog", cwd: "/w" });
  const run = call(h, "claude_run", { prompt: "later", cwd: "/w" }, "q");
  await settle();
  const messages = (): string[] => h.notifications.map((note) => String(note.params?.message));
  assert.deepEqual(messages(), ["0s · queued at position 1"]);
  await h.clock.advance(2_000);
  h.launcher.agents[0]?.succeed();
  await settle();
  assert.equal(messages().length, 2, "the start is heard at once");
  assert.match(messages()[1] ?? "", /^0s · starting$/);
  h.launcher.last.succeed("answer");
  const result = await run;
  assert.equal(result.report.status, "completed");
  assert.equal(result.report.result, "answer");
});
