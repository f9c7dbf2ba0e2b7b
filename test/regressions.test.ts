/** Behaviours fixed after a documentation audit, each pinned by a test. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { ClaudeStream } from "../src/runtimes/claude/index.js";
import type { JsonRpcResponse } from "../src/server/jsonrpc.js";
import { cancel, handlerHarness, settle, track, type HandlerHarness } from "./helpers.js";

let nextId = 1;
function call(
  h: HandlerHarness,
  name: string,
  args: Record<string, unknown>,
  options: { id?: number; token?: string } = {},
): Promise<JsonRpcResponse | null> {
  const params: Record<string, unknown> = { name, arguments: args };
  if (options.token !== undefined) params._meta = { progressToken: options.token };
  return h.handle({ jsonrpc: "2.0", id: options.id ?? (nextId += 1), method: "tools/call", params });
}
const resultOf = (response: JsonRpcResponse | null): any => (response as { result: any }).result;

test("claude_kill of a finished job respects the result cap", async () => {
  const h = handlerHarness({ maxResultChars: 1000 });
  resultOf(await call(h, "claude_start", { prompt: "p", cwd: "/w" }));
  h.launcher.last.succeed("r".repeat(5000));
  await settle();
  const killed = resultOf(await call(h, "claude_kill", { job_id: "job-1" }));
  assert.equal(killed.structuredContent.result.length, 1000);
  assert.equal(killed.structuredContent.truncated, true);
});

test("recent_text is the end of the agent's latest text, not its start", () => {
  const stream = new ClaudeStream({ maxLineBytes: 1 << 20, transcriptChars: 10_000, onOverflow: () => undefined });
  const text = `${"a".repeat(2000)}THE END`;
  stream.push(
    Buffer.from(`${JSON.stringify({ type: "assistant", message: { id: "m1", content: [{ type: "text", text }] } })}\n`),
  );
  const last = stream.live().lastText ?? "";
  assert.ok(last.endsWith("THE END"), last.slice(-20));
  assert.ok(last.length <= 501);
});

test("a cancelled claude_run stops its progress at once, even while the kill is still under way", async () => {
  const h = handlerHarness();
  const run = track(call(h, "claude_run", { prompt: "p", cwd: "/w" }, { id: 777, token: "t" }));
  await settle();
  const agent = h.launcher.last;
  agent.exitsOnKill = false; // the kill takes its time
  await cancel(h, 777);
  await settle();
  const sent = h.notifications.length;
  agent.report({ turns: 2, lastTool: "Bash · x", lastActivity: "tool" });
  await h.clock.advance(60_000);
  assert.equal(h.notifications.length, sent, "no progress after the cancel");
  assert.equal(run.done, true);
  assert.equal(run.value, null);
});

test("a kill that leaves survivors ends the job, so a waiting claude_run answers instead of hanging", async () => {
  const h = handlerHarness();
  const run = track(call(h, "claude_run", { prompt: "p", cwd: "/w", timeout_ms: 5000 }));
  await settle();
  const agent = h.launcher.last;
  agent.exitsOnKill = false;
  agent.survivors = [agent.pid];
  await h.clock.advance(5000);
  assert.equal(run.done, true, "claude_run answered");
  const result = resultOf(run.value ?? null);
  assert.equal(result.isError, true);
  assert.equal(h.jobs.get("job-1")?.status, "failed");
  // The slot is free again: the next job starts at once.
  resultOf(await call(h, "claude_start", { prompt: "next", cwd: "/w" }));
  assert.equal(h.launcher.agents.length, 2);
});
