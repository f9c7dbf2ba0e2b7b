/**
 * The handler's newer surface (src/handler.ts) over a real JobRegistry, a
 * FakeClock and fake agents: progress notifications (§5.8), the inline
 * result cap, claude_list, claude_output paging, and the agent options as
 * validated and as the operator's policy shapes them.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import type { AgentOptions } from "../src/agent/options.js";
import type { JsonRpcNotification } from "../src/server/jsonrpc.js";
import type { AgentOffer } from "../src/agent/options.js";
import type { Policy } from "../src/agent/policy.js";
import { DEFAULT_POLICY } from "../src/config.js";
import { LIMITS, type ToolDefinition } from "../src/tools/definitions.js";
import { cancel, handlerHarness, jobFinished, settle, track, type HandlerHarness } from "./helpers.js";
import { bounded } from "./support/events.js";
import {
  assertError,
  assertNotError,
  callTool,
  request,
  startJob,
  textOf,
  tool,
  toolResultOf,
} from "./support/tool-calls.js";

/* ------------------------------------------------------------------ *
 * Helpers: progress notifications and tool definitions
 * ------------------------------------------------------------------ */

const CWD = "/work/project";
const SESSION = "8f01635f-202a-449c-ab8a-05f75520788e";
const RUN_ARGS = { prompt: "What does this repo do?", cwd: CWD };

interface Progress {
  progressToken: string | number;
  progress: number;
  message: string;
}

/** Every notification the handler sent, each checked to be a well-formed progress notification. */
function progressOf(h: HandlerHarness): Progress[] {
  return h.notifications.map((notification: JsonRpcNotification) => {
    assert.equal(notification.jsonrpc, "2.0");
    assert.equal(notification.method, "notifications/progress");
    const params = notification.params as unknown as Progress;
    assert.deepEqual(Object.keys(params).sort(), ["message", "progress", "progressToken"]);
    assert.equal(typeof params.progress, "number");
    assert.equal(typeof params.message, "string");
    return params;
  });
}

function messages(h: HandlerHarness): string[] {
  return progressOf(h).map((p) => p.message);
}

function assertIncreasing(list: readonly Progress[]): void {
  for (let i = 1; i < list.length; i += 1) {
    assert.ok(
      (list[i] as Progress).progress > (list[i - 1] as Progress).progress,
      `progress did not increase: ${JSON.stringify(list)}`,
    );
  }
}

function definitionOf(h: HandlerHarness, name: string): Promise<ToolDefinition> {
  return h.handle(request("tools/list")).then((response) => {
    assert.ok(response && "result" in response);
    const tools = (response.result as { tools: ToolDefinition[] }).tools;
    const found = tools.find((definition) => definition.name === name);
    assert.ok(found, `${name} is not listed`);
    return found;
  });
}

function propertyOf(definition: ToolDefinition, key: string): Record<string, unknown> {
  const properties = definition.inputSchema.properties as Record<string, Record<string, unknown>>;
  const property = properties[key];
  assert.ok(property, `${definition.name} has no property ${key}`);
  return property;
}

const BASH_REPORT = { turns: 2, lastTool: "Bash · npm test", lastActivity: "tool" } as const;

/* ------------------------------------------------------------------ *
 * Progress: claude_run
 * ------------------------------------------------------------------ */

for (const token of ["run-token-1", 7, 0] as const) {
  test(
    `claude_run with progress token ${JSON.stringify(token)}: at once, then on activity, same token, ` +
      `increasing progress`,
    async () => {
      const h = handlerHarness();
      const run = track(callTool(h, "claude_run", RUN_ARGS, { token }));
      await h.notified(1);
      assert.equal(run.done, false);

      let sent = progressOf(h);
      assert.equal(sent.length, 1, "the first notification is sent at once");
      assert.deepEqual(sent[0], { progressToken: token, progress: sent[0]?.progress, message: "0s · starting" });
      assert.equal(typeof sent[0]?.progressToken, typeof token, "the token keeps its type");

      await h.clock.advance(2_000);
      const agent = h.launcher.last;
      agent.report(BASH_REPORT);
      sent = progressOf(h);
      assert.equal(sent.length, 2, "activity after a quiet spell is sent at once");
      assert.equal(sent[1]?.message, "2s · turn 2 · Bash · npm test");
      assert.match(sent[1]?.message ?? "", /turn 2 · Bash · npm test/);

      await h.clock.advance(1_000);
      agent.report({ turns: 3, lastText: "Looking at the failures", lastActivity: "text" });
      sent = progressOf(h);
      assert.equal(sent.length, 3);
      assert.equal(sent[2]?.message, "3s · turn 3 · writing");

      for (const p of sent) assert.equal(p.progressToken, token);
      assertIncreasing(sent);

      agent.succeed("All green.");
      const result = toolResultOf(await run.promise);
      assertNotError(result);
      assert.equal(result.structuredContent.status, "completed");
      assert.equal(progressOf(h).length, 3, "nothing is sent for the finish itself");
    },
  );
}

test(
  "coalescing: a burst at the instant of the last notification waits 500 ms and sends once, with the " +
    "latest activity",
  async () => {
    const h = handlerHarness();
    const run = track(callTool(h, "claude_run", RUN_ARGS, { token: "burst" }));
    await h.notified(1);
    assert.equal(progressOf(h).length, 1);
    const agent = h.launcher.last;

    agent.report({ turns: 1, lastTool: "Read · a.ts", lastActivity: "tool" });
    agent.report({ turns: 2, lastTool: "Read · b.ts", lastActivity: "tool" });
    agent.report({ turns: 3, lastTool: "Read · c.ts", lastActivity: "tool" });
    assert.equal(progressOf(h).length, 1, "nothing more within 500 ms of the last notification");

    await h.clock.advance(499);
    assert.equal(progressOf(h).length, 1);
    await h.clock.advance(1);
    const sent = progressOf(h);
    assert.equal(sent.length, 2, "exactly one more at 500 ms");
    assert.equal(sent[1]?.message, "1s · turn 3 · Read · c.ts");

    await h.clock.advance(5_000);
    assert.equal(progressOf(h).length, 2, "the burst is not sent twice");
    assertIncreasing(progressOf(h));
    agent.succeed();
    await run.promise;
  },
);

test(
  "coalescing: three reports in one instant give at most one notification now and exactly one more " + "after 500 ms",
  async () => {
    const h = handlerHarness();
    const run = track(callTool(h, "claude_run", RUN_ARGS, { token: "burst-2" }));
    await h.notified(1);
    const agent = h.launcher.last;
    await h.clock.advance(3_000);
    assert.equal(progressOf(h).length, 1);

    agent.report({ turns: 1, lastTool: "Grep · TODO", lastActivity: "tool" });
    agent.report({ turns: 1, lastTool: "Read · src/a.ts", lastActivity: "tool" });
    agent.report({ turns: 2, lastTool: "Edit · src/a.ts", lastActivity: "tool" });
    let sent = progressOf(h);
    assert.ok(sent.length <= 2, `at most one extra notification, got ${sent.length - 1}`);
    assert.equal(sent.length, 2, "the first report after a quiet spell goes out at once");
    assert.equal(sent[1]?.message, "3s · turn 1 · Grep · TODO");

    await h.clock.advance(499);
    assert.equal(progressOf(h).length, 2);
    await h.clock.advance(1);
    sent = progressOf(h);
    assert.equal(sent.length, 3);
    assert.equal(sent[2]?.message, "4s · turn 2 · Edit · src/a.ts", "it carries the latest activity");

    // A burst spread over the window still gives one notification at its end.
    await h.clock.advance(2_000);
    agent.report({ turns: 3, lastTool: "Bash · ls", lastActivity: "tool" }); // sent at once
    await h.clock.advance(100);
    agent.report({ turns: 4, lastTool: "Bash · pwd", lastActivity: "tool" });
    await h.clock.advance(300);
    agent.report({ turns: 5, lastTool: "Bash · make", lastActivity: "tool" });
    assert.equal(progressOf(h).length, 4);
    await h.clock.advance(99);
    assert.equal(progressOf(h).length, 4);
    await h.clock.advance(1);
    sent = progressOf(h);
    assert.equal(sent.length, 5, "one notification 500 ms after the one before");
    assert.match(sent[4]?.message ?? "", /turn 5 · Bash · make$/);
    await h.clock.advance(1_000);
    assert.equal(progressOf(h).length, 5);
    assertIncreasing(progressOf(h));

    agent.succeed();
    await run.promise;
  },
);

test("heartbeat: with no activity a notification every heartbeatMs; activity resets the timer", async () => {
  const h = handlerHarness({ heartbeatMs: 15_000 });
  const run = track(callTool(h, "claude_run", { ...RUN_ARGS, timeout_ms: 3_600_000 }, { token: "hb" }));
  await h.notified(1);
  assert.equal(progressOf(h).length, 1);

  await h.clock.advance(14_999);
  assert.equal(progressOf(h).length, 1, "none before the heartbeat");
  await h.clock.advance(1);
  assert.equal(progressOf(h).length, 2, "one at 15 s");
  assert.equal(progressOf(h)[1]?.message, "15s · starting");

  await h.clock.advance(14_999);
  assert.equal(progressOf(h).length, 2);
  await h.clock.advance(1);
  assert.equal(progressOf(h).length, 3, "and again 15 s later");
  assert.equal(progressOf(h)[2]?.message, "30s · starting");

  // Activity at 35 s is sent at once and moves the next heartbeat to 50 s.
  await h.clock.advance(5_000);
  h.launcher.last.report(BASH_REPORT);
  assert.equal(progressOf(h).length, 4);
  assert.equal(progressOf(h)[3]?.message, "35s · turn 2 · Bash · npm test");
  await h.clock.advance(10_000); // 45 s: the old heartbeat would have fired here
  assert.equal(progressOf(h).length, 4, "the activity reset the heartbeat");
  await h.clock.advance(4_999);
  assert.equal(progressOf(h).length, 4);
  await h.clock.advance(1);
  assert.equal(progressOf(h).length, 5, "heartbeat 15 s after the activity");
  assert.equal(progressOf(h)[4]?.message, "50s · turn 2 · Bash · npm test", "a heartbeat repeats the latest activity");

  // A coalesced notification also resets it: 15 s after it, not after the one before.
  h.launcher.last.report({ turns: 3, lastTool: "Read · x", lastActivity: "tool" }); // 50 s, same instant: waits 500 ms
  await h.clock.advance(500);
  assert.equal(progressOf(h).length, 6);
  await h.clock.advance(14_999);
  assert.equal(progressOf(h).length, 6);
  await h.clock.advance(1);
  assert.equal(progressOf(h).length, 7);
  assertIncreasing(progressOf(h));

  h.launcher.last.succeed();
  await run.promise;
});

test("heartbeat: another heartbeatMs is honoured", async () => {
  const h = handlerHarness({ heartbeatMs: 2_000 });
  const run = track(callTool(h, "claude_run", RUN_ARGS, { token: "hb2" }));
  await h.notified(1);
  await h.clock.advance(1_999);
  assert.equal(progressOf(h).length, 1);
  await h.clock.advance(1);
  assert.equal(progressOf(h).length, 2);
  await h.clock.advance(10_000);
  assert.equal(progressOf(h).length, 7);
  h.launcher.last.succeed();
  await run.promise;
});

/* ------------------------------------------------------------------ *
 * Progress: when none is sent
 * ------------------------------------------------------------------ */

test("no progress for claude_run without a token; it does not even listen", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", RUN_ARGS));
  await settle();
  const agent = h.launcher.last;
  assert.equal(agent.activityListeners, 0);
  await h.clock.advance(40_000);
  agent.report(BASH_REPORT);
  await h.clock.advance(40_000);
  agent.succeed();
  assertNotError(toolResultOf(await run.promise));
  assert.deepEqual(h.notifications, []);
});

test("no progress for claude_wait without a token", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const wait = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: 60_000 }));
  await h.clock.pending(1);
  assert.equal(h.launcher.last.activityListeners, 0);
  await h.clock.advance(20_000);
  h.launcher.last.report(BASH_REPORT);
  await h.clock.advance(40_000);
  assert.equal(wait.done, true);
  assert.deepEqual(h.notifications, []);
});

test("no progress for claude_start, claude_kill, claude_list or claude_output, even with a token", async () => {
  const h = handlerHarness();
  const started = await tool(h, "claude_start", RUN_ARGS, { token: "s" });
  assertNotError(started);
  const jobId = started.structuredContent.job_id as string;
  const agent = h.launcher.last;
  assert.equal(agent.activityListeners, 0, "claude_start does not follow its job");
  await h.clock.advance(20_000);
  agent.report(BASH_REPORT, "Bash · npm test");
  await h.clock.advance(20_000);

  assertNotError(await tool(h, "claude_list", {}, { token: "l" }));
  assertNotError(await tool(h, "claude_output", { job_id: jobId, view: "transcript" }, { token: "o" }));
  assertNotError(await tool(h, "claude_output", { job_id: jobId }, { token: 3 }));
  assertNotError(await tool(h, "claude_kill", { job_id: jobId }, { token: "k" }));
  await h.clock.advance(60_000);
  assert.deepEqual(h.notifications, []);
});

test("none after the response: listeners unsubscribed, timers back to before", async () => {
  const h = handlerHarness();
  const timersBefore = h.clock.pendingTimers;
  const run = track(callTool(h, "claude_run", RUN_ARGS, { token: "after" }));
  await h.notified(1);
  const agent = h.launcher.last;
  assert.equal(agent.activityListeners, 1, "the run follows its job while it waits");
  await h.clock.advance(16_000);
  agent.report(BASH_REPORT);
  const before = progressOf(h).length;
  assert.equal(before, 3);

  agent.succeed("done");
  const result = toolResultOf(await run.promise);
  assertNotError(result);
  assert.equal(progressOf(h).length, before, "nothing between the finish and the response");
  assert.equal(agent.activityListeners, 0, "the listener is unsubscribed");
  assert.equal(h.clock.pendingTimers, timersBefore, "no heartbeat or timeout timer is left");

  await h.clock.advance(10 * 60_000);
  agent.report({ turns: 9, lastTool: "Bash · late", lastActivity: "tool" });
  await h.clock.advance(10 * 60_000);
  assert.equal(progressOf(h).length, before, "nothing after the response");
});

test("none after the response, even with a coalesced notification pending at the finish", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", RUN_ARGS, { token: "pending" }));
  await h.notified(1);
  const agent = h.launcher.last;
  agent.report(BASH_REPORT); // same instant as the first: a send is scheduled at +500 ms
  agent.finish({ ok: false, code: "AGENT_ERROR", detail: "boom" });
  const result = toolResultOf(await run.promise);
  assert.equal(result.isError, true);
  assert.equal(result.structuredContent.status, "failed");
  assert.equal(result.structuredContent.error?.code, "AGENT_ERROR");
  assert.equal(progressOf(h).length, 1);
  assert.equal(agent.activityListeners, 0);
  assert.equal(h.clock.pendingTimers, 0);
  await h.clock.advance(10 * 60_000);
  assert.equal(progressOf(h).length, 1);
});

test("a run stopped by its timeout sends nothing after its response", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", { ...RUN_ARGS, timeout_ms: 20_000 }, { token: "to" }));
  await h.notified(1);
  await h.clock.advance(20_000);
  assert.equal(run.done, true);
  const result = toolResultOf(run.value ?? null);
  assert.equal(result.structuredContent.status, "failed");
  assert.equal(result.structuredContent.error?.code, "TIMEOUT");
  const count = progressOf(h).length;
  assert.equal(count, 2, "at 0 s and 15 s");
  assert.equal(h.launcher.last.activityListeners, 0);
  assert.equal(h.clock.pendingTimers, 0);
  await h.clock.advance(10 * 60_000);
  assert.equal(progressOf(h).length, count);
});

test("a cancelled claude_run sends no more progress", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", RUN_ARGS, { id: 4242, token: "cx" }));
  await h.notified(1);
  await cancel(h, 4242);
  assert.equal(await bounded("the cancelled run to end", run.promise), null);
  assert.equal(h.launcher.last.activityListeners, 0);
  await h.clock.advance(10 * 60_000);
  assert.equal(progressOf(h).length, 1);
});

/* ------------------------------------------------------------------ *
 * Progress: claude_wait
 * ------------------------------------------------------------------ */

test("claude_wait with a token sends progress while it holds, and none after", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const agent = h.launcher.last;
  await h.clock.advance(4_000);
  const timersBefore = h.clock.pendingTimers;
  const wait = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: 20_000 }, { token: "w" }));
  await h.notified(1);
  assert.deepEqual(
    progressOf(h).map((p) => [p.progressToken, p.message]),
    [["w", "4s · starting"]],
  );
  assert.equal(agent.activityListeners, 1);

  await h.clock.advance(2_000);
  agent.report({ turns: 1, lastTool: "Glob · **/*.ts", lastActivity: "tool" });
  assert.equal(progressOf(h).length, 2);
  assert.equal(progressOf(h)[1]?.message, "6s · turn 1 · Glob · **/*.ts");

  await h.clock.advance(14_999); // 20.999 s
  assert.equal(progressOf(h).length, 2);
  await h.clock.advance(1); // 21 s: the heartbeat, 15 s after the activity
  assert.equal(progressOf(h).length, 3);
  assert.equal(progressOf(h)[2]?.message, "21s · turn 1 · Glob · **/*.ts");
  assert.equal(wait.done, false);

  await h.clock.advance(3_000); // 24 s: the hold of 20 s runs out
  assert.equal(wait.done, true);
  const result = toolResultOf(wait.value ?? null);
  assert.equal(result.structuredContent.status, "running");
  const count = progressOf(h).length;
  assert.equal(count, 3);
  assertIncreasing(progressOf(h));
  assert.equal(agent.activityListeners, 0);
  assert.equal(h.clock.pendingTimers, timersBefore);

  agent.report(BASH_REPORT);
  await h.clock.advance(10 * 60_000);
  assert.equal(progressOf(h).length, count, "none after the response");
});

test("claude_wait with a token: heartbeats while holding; stops when the job finishes", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const wait = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: 60_000 }, { token: 99 }));
  await h.notified(1);
  await h.clock.advance(15_000);
  await h.clock.advance(15_000);
  assert.deepEqual(messages(h), ["0s · starting", "15s · starting", "30s · starting"]);
  await h.clock.advance(5_000);
  h.launcher.last.succeed("finished");
  assert.equal(toolResultOf(await bounded("the wait to answer", wait.promise)).structuredContent.status, "completed");
  await h.clock.advance(10 * 60_000);
  assert.equal(progressOf(h).length, 3);
  for (const p of progressOf(h)) assert.equal(p.progressToken, 99);
});

test("claude_wait with a token sends nothing when the job already finished", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  h.launcher.last.succeed();
  await jobFinished(h, jobId);
  const result = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 60_000 }, { token: "done" });
  assert.equal(result.structuredContent.status, "completed");
  await h.clock.advance(60_000);
  assert.deepEqual(h.notifications, []);
});

test("claude_wait with a token and hold_ms 0 sends nothing", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const result = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 }, { token: "zero" });
  assert.equal(result.structuredContent.status, "running");
  assert.equal(h.launcher.last.activityListeners, 0);
  h.launcher.last.report(BASH_REPORT);
  await h.clock.advance(60_000);
  assert.deepEqual(h.notifications, []);
});

test("a cancelled claude_wait stops its progress", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const agent = h.launcher.last;
  const wait = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: 60_000 }, { id: "wait-c", token: "wc" }));
  await h.notified(1);
  await h.clock.advance(15_000);
  assert.equal(progressOf(h).length, 2);

  assert.equal(await cancel(h, "wait-c"), null);
  assert.equal(await bounded("the cancelled wait to end", wait.promise), null, "a cancelled request gets no response");
  assert.equal(agent.activityListeners, 0);
  assert.equal(h.clock.pendingTimers, 0);

  agent.report(BASH_REPORT);
  await h.clock.advance(10 * 60_000);
  assert.equal(progressOf(h).length, 2, "nothing after the cancel");
  assert.equal(h.jobs.get(jobId)?.status, "running");
});

test("two waits on one job each follow it with their own token", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const first = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: 10_000 }, { token: "a" }));
  await h.clock.advance(2_000);
  const second = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: 30_000 }, { token: "b" }));
  await h.notified(2);
  assert.equal(h.launcher.last.activityListeners, 2);
  await h.clock.advance(8_000);
  assert.equal(first.done, true);
  assert.equal(second.done, false);
  assert.equal(h.launcher.last.activityListeners, 1);
  h.launcher.last.report(BASH_REPORT);
  const sent = progressOf(h);
  assert.deepEqual(sent.filter((p) => p.progressToken === "a").length, 1);
  assert.equal(sent.at(-1)?.progressToken, "b");
  assertIncreasing(sent.filter((p) => p.progressToken === "b"));
  h.launcher.last.succeed();
  await second.promise;
  assert.equal(h.launcher.last.activityListeners, 0);
});

test("a running claude_wait report shows turns, session, latest activity and the tail of the text", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  await h.clock.advance(12_000);
  const longText = `${"x".repeat(400)}THE END`;
  h.launcher.last.report({
    sessionId: SESSION,
    turns: 3,
    lastTool: "Edit · src/app.ts",
    lastActivity: "tool",
    lastText: longText,
  });
  const result = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
  assertNotError(result);
  const report = result.structuredContent;
  assert.equal(report.status, "running");
  assert.equal(report.num_turns, 3);
  assert.equal(report.session_id, SESSION);
  assert.equal(report.elapsed_s, 12);
  assert.equal(report.last_activity, "12s · turn 3 · Edit · src/app.ts");
  assert.match(report.last_activity, /turn 3 · Edit · src\/app\.ts/);
  const recent = report.recent_text as string;
  assert.ok(recent.length <= 301, `recent_text is ${recent.length} characters`);
  assert.equal(recent.length, 301);
  assert.ok(recent.startsWith("…"));
  assert.equal(recent, `…${longText.slice(-300)}`);
  assert.ok(recent.endsWith("THE END"));
  const text = textOf(result);
  assert.match(text, /Call claude_wait again/);
  assert.match(text, /still running \(12s · turn 3 · Edit · src\/app\.ts\)/);
  assert.ok(text.includes(`Latest text: ${recent}`));
});

test("recent_text is whole up to 300 characters and cut from 301", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  for (const [length, expected] of [
    [1, 1],
    [300, 300],
    [301, 301],
    [5_000, 301],
  ] as const) {
    const text = "y".repeat(length - 1) + "z";
    h.launcher.last.report({ turns: 1, lastText: text, lastActivity: "text" });
    const report = (await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 })).structuredContent;
    assert.equal(report.recent_text.length, expected, `lastText of ${length}`);
    assert.equal(report.recent_text.startsWith("…"), length > 300);
    assert.ok(report.recent_text.endsWith("z"));
    assert.equal(report.last_activity, "0s · turn 1 · writing");
  }
});

/* ------------------------------------------------------------------ *
 * The inline result cap
 * ------------------------------------------------------------------ */

test("maxResultChars 1000: a 2500-character result is cut at 1000 and points to claude_output", async () => {
  const h = handlerHarness({ maxResultChars: 1000 });
  const run = callTool(h, "claude_run", RUN_ARGS);
  const whole = "a".repeat(1000) + "Z".repeat(1500);
  (await h.launcher.launched(1)).succeed(whole);
  const result = toolResultOf(await run);
  assertNotError(result);
  const report = result.structuredContent;
  assert.equal(report.status, "completed");
  assert.equal(report.result, "a".repeat(1000));
  assert.equal(report.truncated, true);
  assert.equal(report.result_chars, 2500);
  const text = textOf(result);
  assert.ok(!text.includes("Z"), "the text carries only the shown part");
  assert.ok(text.includes("a".repeat(1000)));
  assert.match(text, /claude_output/);
  assert.match(text, /offset 1000/);
  assert.ok(text.includes('Call claude_output with job_id "job-1" and offset 1000'), text);
  assert.match(text, /1000 of 2500 characters/);

  // claude_wait reports the same cut.
  const again = (await tool(h, "claude_wait", { job_id: "job-1", hold_ms: 0 })).structuredContent;
  assert.equal(again.result, "a".repeat(1000));
  assert.equal(again.truncated, true);
  assert.equal(again.result_chars, 2500);
});

test("maxResultChars 1000: a result of exactly 1000 characters is not truncated; 1001 is", async () => {
  const h = handlerHarness({ maxResultChars: 1000 });
  const exact = callTool(h, "claude_run", RUN_ARGS);
  (await h.launcher.launched(1)).succeed("c".repeat(1000));
  const result = toolResultOf(await exact);
  assert.equal(result.structuredContent.result, "c".repeat(1000));
  assert.ok(!("truncated" in result.structuredContent));
  assert.ok(!("result_chars" in result.structuredContent));
  assert.doesNotMatch(textOf(result), /Truncated|claude_output/);

  const over = callTool(h, "claude_run", RUN_ARGS);
  (await h.launcher.launched(2)).succeed("d".repeat(1001));
  const cut = toolResultOf(await over).structuredContent;
  assert.equal(cut.result.length, 1000);
  assert.equal(cut.truncated, true);
  assert.equal(cut.result_chars, 1001);
});

/* ------------------------------------------------------------------ *
 * claude_list
 * ------------------------------------------------------------------ */

test("claude_list with no jobs says so", async () => {
  const h = handlerHarness();
  const result = await tool(h, "claude_list", {});
  assertNotError(result);
  assert.equal(textOf(result), "No jobs.");
  assert.deepEqual(result.structuredContent, { status: "listed", jobs: [], total: 0 });
  // Without arguments at all, too.
  assert.deepEqual((await tool(h, "claude_list")).structuredContent, { status: "listed", jobs: [], total: 0 });
});

test("claude_list lists a run and a start, the running one first, with previews", async () => {
  const h = handlerHarness();
  const run = callTool(h, "claude_run", { prompt: "  Fix   the\n\tfailing\r\n  build  ", cwd: CWD });
  const agent = await h.launcher.launched(1);
  await h.clock.advance(3_000);
  agent.succeed("fixed");
  assertNotError(toolResultOf(await run));

  await h.clock.advance(2_000);
  const longPrompt = `Refactor\n\nthe   ${"module ".repeat(30)}`;
  await startJob(h, { prompt: longPrompt, cwd: "/work/other" });
  await h.clock.advance(4_000);
  h.launcher.last.report({ turns: 2, lastTool: "Read · x", lastActivity: "tool" });

  const result = await tool(h, "claude_list", {});
  assertNotError(result);
  const flat = longPrompt.replace(/\s+/g, " ").trim();
  assert.ok(flat.length > 80);
  assert.deepEqual(result.structuredContent, {
    status: "listed",
    jobs: [
      {
        job_id: "job-2",
        kind: "start",
        agent: "claude",
        status: "running",
        cwd: "/work/other",
        elapsed_s: 4,
        num_turns: 2,
        prompt_preview: `${flat.slice(0, 80)}…`,
      },
      {
        job_id: "job-1",
        kind: "run",
        agent: "claude",
        status: "completed",
        cwd: CWD,
        elapsed_s: 3,
        num_turns: 3,
        prompt_preview: "Fix the failing build",
        session_id: "8f01635f-202a-449c-ab8a-05f75520788e",
      },
    ],
    total: 2,
  });
  const preview = result.structuredContent.jobs?.[0]?.prompt_preview as string;
  assert.equal(preview.length, 81);
  const text = textOf(result);
  assert.ok(text.startsWith("Jobs 1–2 of 2, the active first, then the newest finished:\n"), text);
  const lines = text.split("\n").slice(1);
  assert.equal(lines.length, 2);
  assert.ok(lines[0]?.startsWith("job-2  running  4s  2 turns  /work/other"), lines[0]);
  assert.ok(lines[1]?.startsWith("job-1  completed  3s  3 turns  /work/project"), lines[1]);
});

test("claude_list: a prompt of exactly 80 characters is not cut", async () => {
  const h = handlerHarness();
  const prompt = "p".repeat(80);
  await startJob(h, { prompt, cwd: CWD });
  const listed = (await tool(h, "claude_list", {})).structuredContent.jobs;
  assert.equal(listed[0].prompt_preview, prompt);
  assert.equal(
    textOf(await tool(h, "claude_list", {})).split("\n")[0],
    "Jobs 1–1 of 1, the active first, then the newest finished:",
  );
});

test("claude_list refuses unknown arguments", async () => {
  const h = handlerHarness();
  const text = assertError(await tool(h, "claude_list", { state: "running" }), "INVALID_ARGUMENT");
  assert.match(text, /unknown argument "state"/);
});

test("claude_list forgets reaped jobs and keeps running ones", async () => {
  const h = handlerHarness();
  const finished = await startJob(h, RUN_ARGS);
  h.launcher.last.succeed();
  await jobFinished(h, finished);
  const running = await startJob(h, RUN_ARGS);
  assert.deepEqual(
    (await tool(h, "claude_list", {})).structuredContent.jobs.map((job: { job_id: string }) => job.job_id),
    [running, finished],
  );
  await h.clock.advance(600_000);
  const listed = (await tool(h, "claude_list", {})).structuredContent.jobs;
  assert.deepEqual(
    listed.map((job: { job_id: string }) => job.job_id),
    [running],
  );
  assert.equal(listed[0].status, "running");
  assert.equal(listed[0].elapsed_s, 600);
});

/* ------------------------------------------------------------------ *
 * claude_output
 * ------------------------------------------------------------------ */

/** A result whose every window is distinct, so a wrong slice cannot pass. */
function distinctText(length: number): string {
  let text = "";
  for (let i = 0; text.length < length; i += 1) text += `${i},`;
  return text.slice(0, length);
}

async function completedJob(h: HandlerHarness, text: string): Promise<string> {
  const jobId = await startJob(h, RUN_ARGS);
  h.launcher.last.succeed(text);
  await jobFinished(h, jobId);
  return jobId;
}

test("claude_output view result pages the whole result by maxResultChars", async () => {
  const h = handlerHarness({ maxResultChars: 1000 });
  const whole = distinctText(2500);
  const jobId = await completedJob(h, whole);

  const first = await tool(h, "claude_output", { job_id: jobId });
  assertNotError(first);
  assert.deepEqual(first.structuredContent, {
    status: "completed",
    job_id: jobId,
    view: "result",
    offset: 0,
    text: whole.slice(0, 1000),
    total_chars: 2500,
    next_offset: 1000,
    next: `Call claude_output with job_id "${jobId}" and offset 1000 for the rest.`,
  });
  assert.ok(
    textOf(first).endsWith(`[Call claude_output with job_id "${jobId}" and offset 1000 for the rest.]`),
    textOf(first),
  );
  assert.ok(textOf(first).includes(whole.slice(0, 1000)));

  const second = (await tool(h, "claude_output", { job_id: jobId, offset: 1000 })).structuredContent;
  assert.equal(second.text, whole.slice(1000, 2000));
  assert.equal(second.next_offset, 2000);

  const last = await tool(h, "claude_output", { job_id: jobId, offset: 2000 });
  assert.equal(last.structuredContent.text, whole.slice(2000));
  assert.equal(last.structuredContent.offset, 2000);
  assert.ok(!("next_offset" in last.structuredContent), "no next_offset at the end");
  assert.match(textOf(last), /\[End\.\]$/);

  // Reading on from next_offset gives the whole result back.
  let offset: number | undefined = 0;
  let read = "";
  while (offset !== undefined) {
    const page: Record<string, unknown> = (await tool(h, "claude_output", { job_id: jobId, offset, view: "result" }))
      .structuredContent;
    read += page.text as string;
    offset = page.next_offset as number | undefined;
  }
  assert.equal(read, whole);
});

test("claude_output view result at and past the end, and with small limits", async () => {
  const h = handlerHarness({ maxResultChars: 1000 });
  const whole = distinctText(2500);
  const jobId = await completedJob(h, whole);

  const atEnd = await tool(h, "claude_output", { job_id: jobId, offset: 2500 });
  assertNotError(atEnd);
  assert.deepEqual(atEnd.structuredContent, {
    status: "completed",
    job_id: jobId,
    view: "result",
    offset: 2500,
    text: "",
    total_chars: 2500,
  });

  const beyond = (await tool(h, "claude_output", { job_id: jobId, offset: 10_000 })).structuredContent;
  assert.deepEqual(
    beyond,
    { status: "completed", job_id: jobId, view: "result", offset: 2500, text: "", total_chars: 2500 },
    "offset clamped to total",
  );

  const one = (await tool(h, "claude_output", { job_id: jobId, offset: 17, limit: 1 })).structuredContent;
  assert.equal(one.text, whole.charAt(17));
  assert.equal(one.offset, 17);
  assert.equal(one.next_offset, 18);

  const lastChar = (await tool(h, "claude_output", { job_id: jobId, offset: 2499, limit: 1 })).structuredContent;
  assert.equal(lastChar.text, whole.charAt(2499));
  assert.ok(!("next_offset" in lastChar));

  const full = (await tool(h, "claude_output", { job_id: jobId, offset: 1, limit: 1000 })).structuredContent;
  assert.equal(full.text, whole.slice(1, 1001));
  assert.equal(full.next_offset, 1001);
});

test("claude_output refuses bad offsets, limits and views", async () => {
  const h = handlerHarness({ maxResultChars: 1000 });
  const jobId = await completedJob(h, distinctText(2500));
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ limit: 0 }, /"limit"/],
    [{ limit: 1001 }, /"limit"/],
    [{ limit: 2.5 }, /"limit"/],
    [{ limit: "10" }, /"limit"/],
    [{ offset: -1 }, /"offset"/],
    [{ offset: 1.5 }, /"offset"/],
    [{ offset: "0" }, /"offset"/],
    [{ offset: Number.NaN }, /"offset"/],
    [{ view: "other" }, /"view"/],
    [{ view: 1 }, /"view"/],
    [{ page: 2 }, /unknown argument "page"/],
  ];
  for (const [extra, pattern] of cases) {
    const result = await tool(h, "claude_output", { job_id: jobId, ...extra });
    const text = assertError(result, "INVALID_ARGUMENT");
    assert.match(text, pattern, JSON.stringify(extra));
    // The harness's ids (job-N) are not UUIDs, and only a well-formed job id is echoed.
    assert.equal(result.structuredContent.job_id, undefined);
  }
  assertError(await tool(h, "claude_output", {}), "INVALID_ARGUMENT");
  assertError(await tool(h, "claude_output", { job_id: "" }), "INVALID_ARGUMENT");
});

test("claude_output of an unknown job is JOB_NOT_FOUND, echoing the job_id", async () => {
  const h = handlerHarness();
  const missing = "1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9";
  const result = await tool(h, "claude_output", { job_id: missing, view: "transcript" });
  const text = assertError(result, "JOB_NOT_FOUND");
  assert.match(text, new RegExp(`no job with id "${missing}"`));
  assert.equal(result.structuredContent.job_id, missing);
});

test("claude_output view result of a running job is empty and points to the transcript", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const result = await tool(h, "claude_output", { job_id: jobId });
  assertNotError(result);
  const { next, ...page } = result.structuredContent;
  assert.deepEqual(page, { status: "running", job_id: jobId, view: "result", offset: 0, text: "", total_chars: 0 });
  assert.match(
    next ?? "",
    /call claude_wait with job_id "job-1" .* claude_output with job_id "job-1" and view "transcript"/,
  );
  const text = textOf(result);
  assert.match(text, /still running/);
  assert.match(text, /"transcript"/);
});

test("claude_output view transcript reads what the agent reported, while running and after", async () => {
  const h = handlerHarness({ maxResultChars: 1000 });
  const jobId = await startJob(h, RUN_ARGS);
  const agent = h.launcher.last;
  const lines = ["I will look at the tests.", "Bash · npm test", "→ 3 failing", "Edit · src/app.ts"];
  for (const [index, line] of lines.entries())
    agent.report({ turns: index + 1, lastActivity: "text", lastText: line }, line);
  const whole = lines.map((line) => `${line}\n`).join("");

  const all = await tool(h, "claude_output", { job_id: jobId, view: "transcript" });
  assertNotError(all);
  assert.deepEqual(all.structuredContent, {
    status: "running",
    job_id: jobId,
    view: "transcript",
    offset: 0,
    text: whole,
    total_chars: whole.length,
  });

  const page = (await tool(h, "claude_output", { job_id: jobId, view: "transcript", offset: 5, limit: 30 }))
    .structuredContent;
  assert.equal(page.text, whole.slice(5, 35));
  assert.equal(page.offset, 5);
  assert.equal(page.next_offset, 35);
  assert.equal(page.total_chars, whole.length);

  // More arrives; a reader continues from next_offset.
  agent.report({ turns: 5, lastActivity: "text" }, "All tests pass now.");
  const more = `${whole}All tests pass now.\n`;
  let offset: number | undefined = 0;
  let read = "";
  while (offset !== undefined) {
    const next: Record<string, unknown> = (
      await tool(h, "claude_output", { job_id: jobId, view: "transcript", offset, limit: 7 })
    ).structuredContent;
    read += next.text as string;
    offset = next.next_offset as number | undefined;
  }
  assert.equal(read, more);

  agent.succeed("final answer");
  await jobFinished(h, jobId);
  const after = await tool(h, "claude_output", { job_id: jobId, view: "transcript" });
  assert.equal(after.structuredContent.status, "completed");
  assert.equal(after.structuredContent.text, more);
  assert.ok(!("next_offset" in after.structuredContent));
  assert.ok(!("dropped_chars" in after.structuredContent));
  const past = (await tool(h, "claude_output", { job_id: jobId, view: "transcript", offset: more.length + 50 }))
    .structuredContent;
  assert.equal(past.text, "");
  assert.equal(past.offset, more.length);
  // The result view is separate from the transcript.
  assert.equal((await tool(h, "claude_output", { job_id: jobId })).structuredContent.text, "final answer");
});

test("claude_output view transcript says when its start was dropped", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const agent = h.launcher.last;
  agent.report({}, "a".repeat(600_000));
  agent.report({}, "b".repeat(600_000)); // the FakeAgent's transcript keeps 1_000_000 characters
  const result = await tool(h, "claude_output", { job_id: jobId, view: "transcript", limit: 10 });
  const page = result.structuredContent;
  assert.equal(page.dropped_chars, 600_001);
  assert.equal(page.offset, 600_001);
  assert.equal(page.text, "b".repeat(10));
  assert.equal(page.total_chars, 1_200_002);
  assert.equal(page.next_offset, 600_011);
  assert.ok(textOf(result).startsWith("[The first 600001 characters were dropped"), textOf(result).slice(0, 100));
});

/* ------------------------------------------------------------------ *
 * Agent options through the handler
 * ------------------------------------------------------------------ */

const ALL_OPTIONS = {
  model: "claude-sonnet-4-5",
  permission_mode: "acceptEdits",
  allowed_tools: ["Edit", "Bash(git log:*)", "mcp__server__tool"],
  disallowed_tools: ["WebFetch", "Bash(rm:*)"],
  max_turns: 25,
  max_budget_usd: 1.25,
  append_system_prompt: "Be terse.\nAnswer in English.",
  add_dirs: ["/work/lib", "/work/shared"],
};

const ALL_AGENT_OPTIONS: AgentOptions = {
  model: "claude-sonnet-4-5",
  permissionMode: "acceptEdits",
  allowedTools: ["Edit", "Bash(git log:*)", "mcp__server__tool"],
  disallowedTools: ["WebFetch", "Bash(rm:*)"],
  maxTurns: 25,
  maxBudgetUsd: 1.25,
  appendSystemPrompt: "Be terse.\nAnswer in English.",
  addDirs: ["/work/lib", "/work/shared"],
};

for (const name of ["claude_run", "claude_start"] as const) {
  test(`${name}: every agent option reaches the launcher exactly`, async () => {
    const h = handlerHarness();
    const call = track(callTool(h, name, { ...RUN_ARGS, ...ALL_OPTIONS }));
    await h.launcher.launched(1);
    assert.equal(h.launcher.agents.length, 1);
    assert.deepEqual(h.launcher.last.spec.options, ALL_AGENT_OPTIONS);
    assert.deepEqual(h.checkedDirectories, [CWD, "/work/lib", "/work/shared"]);
    h.launcher.last.succeed();
    assertNotError(toolResultOf(await call.promise));
  });
}

test("each agent option alone reaches the launcher alone", async () => {
  const single: Array<[string, unknown, AgentOptions]> = [
    ["model", "opus", { model: "opus" }],
    ["model", "us.anthropic.claude-opus-4-1-20250805-v1:0", { model: "us.anthropic.claude-opus-4-1-20250805-v1:0" }],
    ["model", "claude-opus-4-8[1m]", { model: "claude-opus-4-8[1m]" }],
    ["permission_mode", "plan", { permissionMode: "plan" }],
    ["allowed_tools", ["Read"], { allowedTools: ["Read"] }],
    ["disallowed_tools", ["Bash(curl:*)"], { disallowedTools: ["Bash(curl:*)"] }],
    ["max_turns", 1, { maxTurns: 1 }],
    ["max_turns", LIMITS.maxTurns, { maxTurns: LIMITS.maxTurns }],
    ["max_budget_usd", 0.01, { maxBudgetUsd: 0.01 }],
    ["max_budget_usd", LIMITS.maxBudgetUsd, { maxBudgetUsd: LIMITS.maxBudgetUsd }],
    ["append_system_prompt", "--not-a-flag", { appendSystemPrompt: "--not-a-flag" }],
    ["add_dirs", ["/work/one"], { addDirs: ["/work/one"] }],
  ];
  for (const [key, value, expected] of single) {
    const h = handlerHarness();
    await startJob(h, { ...RUN_ARGS, [key]: value });
    assert.deepEqual(h.launcher.last.spec.options, expected, `${key}: ${JSON.stringify(value)}`);
  }
});

test("null or absent agent options mean not given", async () => {
  const h = handlerHarness();
  const nulls = Object.fromEntries(Object.keys(ALL_OPTIONS).map((key) => [key, null]));
  await startJob(h, { ...RUN_ARGS, ...nulls });
  assert.deepEqual(h.launcher.last.spec.options, {});
  await startJob(h, RUN_ARGS);
  assert.deepEqual(h.launcher.last.spec.options, {});
});

test("limits of 20 add_dirs and 100 tool rules are accepted", async () => {
  const h = handlerHarness();
  const dirs = Array.from({ length: LIMITS.maxAddDirs }, (_, i) => `/work/d${i}`);
  const rules = Array.from({ length: LIMITS.maxToolRules }, (_, i) => `Bash(tool${i}:*)`);
  await startJob(h, { ...RUN_ARGS, add_dirs: dirs, allowed_tools: rules, disallowed_tools: rules });
  assert.deepEqual(h.launcher.last.spec.options, { addDirs: dirs, allowedTools: rules, disallowedTools: rules });
});

const INVALID_OPTIONS: Array<[string, unknown]> = [
  ["model", "--evil"],
  ["model", ""],
  ["model", 42],
  ["model", "a b"],
  ["model", "x".repeat(201)],
  ["permission_mode", "yolo"],
  ["permission_mode", ""],
  ["permission_mode", 1],
  ["allowed_tools", []],
  ["allowed_tools", "Edit"],
  ["allowed_tools", ["-x"]],
  ["allowed_tools", [" Edit"]],
  ["allowed_tools", ["a\nb"]],
  ["allowed_tools", [""]],
  ["allowed_tools", [7]],
  ["allowed_tools", ["x".repeat(501)]],
  ["allowed_tools", Array.from({ length: 101 }, (_, i) => `Tool${i}`)],
  ["disallowed_tools", []],
  ["disallowed_tools", ["--dangerously-skip-permissions"]],
  ["disallowed_tools", ["a\u0000b"]],
  ["max_turns", 0],
  ["max_turns", 1.5],
  ["max_turns", 10_001],
  ["max_turns", "5"],
  ["max_budget_usd", 0],
  ["max_budget_usd", -1],
  ["max_budget_usd", "1"],
  ["max_budget_usd", 10_001],
  ["max_budget_usd", Number.POSITIVE_INFINITY],
  ["append_system_prompt", ""],
  ["append_system_prompt", "   "],
  ["append_system_prompt", "a\u0000b"],
  ["append_system_prompt", 3],
  ["append_system_prompt", "x".repeat(100_001)],
  ["add_dirs", []],
  ["add_dirs", [""]],
  ["add_dirs", ["/a\u0000b"]],
  ["add_dirs", "/work/lib"],
  ["add_dirs", Array.from({ length: 21 }, (_, i) => `/work/d${i}`)],
];

for (const name of ["claude_run", "claude_start"] as const) {
  test(`${name}: every invalid agent option is INVALID_ARGUMENT naming the option, and launches nothing`, async () => {
    const h = handlerHarness();
    for (const [key, value] of INVALID_OPTIONS) {
      const label = `${key}: ${JSON.stringify(value).slice(0, 40)}`;
      const result = await tool(h, name, { ...RUN_ARGS, [key]: value });
      const text = assertError(result, "INVALID_ARGUMENT");
      assert.ok(text.includes(`"${key}"`), `${label} → ${text}`);
    }
    assert.equal(h.launcher.agents.length, 0);
    assert.deepEqual(h.checkedDirectories, [], "nothing is checked on disk before the arguments are valid");
  });
}

/* ------------------------------------------------------------------ *
 * Policy through the handler
 * ------------------------------------------------------------------ */

/** The default policy with these overrides, and these of Claude Code's offer (its modes, its defaults). */
function withPolicy(overrides: Partial<Policy>, claude: Partial<AgentOffer> = {}): HandlerHarness {
  const agents = DEFAULT_POLICY.agents.map((offer) => ({ ...offer, ...claude }));
  return handlerHarness({ policy: { ...DEFAULT_POLICY, agents, ...overrides } });
}

for (const name of ["claude_run", "claude_start"] as const) {
  test(`${name}: bypassPermissions is POLICY_DENIED by default and launches nothing`, async () => {
    const h = handlerHarness();
    const result = await tool(h, name, { ...RUN_ARGS, permission_mode: "bypassPermissions" });
    const text = assertError(result, "POLICY_DENIED");
    assert.match(text, /CLAUDE_DISPATCH_PERMISSION_MODES/);
    assert.match(text, /permission_mode "bypassPermissions"/);
    assert.equal(h.launcher.agents.length, 0);
    assert.equal(h.jobs.list().length, 0);
  });
}

test("an operator who allows bypassPermissions gets it", async () => {
  const h = withPolicy({}, { allowedModes: ["default", "bypassPermissions"] });
  await startJob(h, { ...RUN_ARGS, permission_mode: "bypassPermissions" });
  assert.deepEqual(h.launcher.last.spec.options, { permissionMode: "bypassPermissions" });
  const text = assertError(await tool(h, "claude_start", { ...RUN_ARGS, permission_mode: "plan" }), "POLICY_DENIED");
  assert.match(text, /allowed: default, bypassPermissions/);
});

test("caps: asking above max_turns or max_budget_usd is POLICY_DENIED; no limit gets the caps", async () => {
  const h = withPolicy({ maxTurns: 10, maxBudgetUsd: 2 });
  for (const name of ["claude_run", "claude_start"] as const) {
    const turns = assertError(await tool(h, name, { ...RUN_ARGS, max_turns: 11 }), "POLICY_DENIED");
    assert.match(turns, /max_turns 11 is above the operator's cap of 10/);
    const budget = assertError(await tool(h, name, { ...RUN_ARGS, max_budget_usd: 3 }), "POLICY_DENIED");
    assert.match(budget, /max_budget_usd 3 is above the operator's cap of 2/);
  }
  assert.equal(h.launcher.agents.length, 0);

  await startJob(h, RUN_ARGS);
  assert.deepEqual(h.launcher.last.spec.options, { maxTurns: 10, maxBudgetUsd: 2 });
  await startJob(h, { ...RUN_ARGS, max_turns: 4, max_budget_usd: 0.5 });
  assert.deepEqual(h.launcher.last.spec.options, { maxTurns: 4, maxBudgetUsd: 0.5 });
  await startJob(h, { ...RUN_ARGS, max_turns: 10, max_budget_usd: 2 });
  assert.deepEqual(h.launcher.last.spec.options, { maxTurns: 10, maxBudgetUsd: 2 });

  const run = callTool(h, "claude_run", RUN_ARGS);
  const agent = await h.launcher.launched(4);
  assert.deepEqual(agent.spec.options, { maxTurns: 10, maxBudgetUsd: 2 });
  agent.succeed();
  await run;
});

test("defaultModel and defaultPermissionMode fill in, but never over the call's own values", async () => {
  const h = withPolicy({}, { defaultModel: "haiku", defaultMode: "plan" });
  await startJob(h, RUN_ARGS);
  assert.deepEqual(h.launcher.last.spec.options, { model: "haiku", permissionMode: "plan" });
  await startJob(h, { ...RUN_ARGS, model: "opus" });
  assert.deepEqual(h.launcher.last.spec.options, { model: "opus", permissionMode: "plan" });
  await startJob(h, { ...RUN_ARGS, permission_mode: "acceptEdits" });
  assert.deepEqual(h.launcher.last.spec.options, { model: "haiku", permissionMode: "acceptEdits" });
  await startJob(h, { ...RUN_ARGS, model: "sonnet", permission_mode: "default", allowed_tools: ["Edit"] });
  assert.deepEqual(h.launcher.last.spec.options, {
    model: "sonnet",
    permissionMode: "default",
    allowedTools: ["Edit"],
  });
});

test("defaultTimeoutMs sets claude_run's default timeout and its description", async () => {
  const h = withPolicy({ defaultTimeoutMs: 5_000 });
  const run = track(callTool(h, "claude_run", RUN_ARGS));
  await h.launcher.launched(1);
  assert.equal(h.jobs.get("job-1")?.timeoutMs, 5_000);
  await h.clock.advance(4_999);
  assert.equal(run.done, false);
  await h.clock.advance(1);
  assert.equal(run.done, true);
  assert.equal(toolResultOf(run.value ?? null).structuredContent.error?.code, "TIMEOUT");

  const own = track(callTool(h, "claude_run", { ...RUN_ARGS, timeout_ms: 9_000 }));
  await h.launcher.launched(2);
  assert.equal(h.jobs.get("job-2")?.timeoutMs, 9_000, "the call's own timeout wins");
  h.launcher.last.succeed();
  await own.promise;

  await startJob(h, RUN_ARGS);
  assert.equal(h.jobs.get("job-3")?.timeoutMs, undefined, "claude_start has no timeout");

  const timeout = propertyOf(await definitionOf(h, "claude_run"), "timeout_ms");
  assert.match(String(timeout.description), /\(default 5000\)/);
  const standard = propertyOf(await definitionOf(handlerHarness(), "claude_run"), "timeout_ms");
  assert.match(String(standard.description), /\(default 120000\)/);
  const defaultRun = handlerHarness();
  const standardRun = callTool(defaultRun, "claude_run", RUN_ARGS);
  await defaultRun.launcher.launched(1);
  assert.equal(defaultRun.jobs.get("job-1")?.timeoutMs, 120_000);
  defaultRun.launcher.last.succeed();
  await standardRun;
});

for (const name of ["claude_run", "claude_start"] as const) {
  test(`${name}: add_dirs and cwd go through the directory check, and a refusal launches nothing`, async () => {
    const h = handlerHarness();
    const missing = assertError(
      await tool(h, name, { ...RUN_ARGS, add_dirs: ["/work/lib", "/missing/dir"] }),
      "INVALID_ARGUMENT",
    );
    assert.ok(missing.includes('"add_dirs[1]"'), missing);
    assert.match(missing, /does not exist: \/missing\/dir/);

    const outside = assertError(await tool(h, name, { ...RUN_ARGS, add_dirs: ["/outside/x"] }), "POLICY_DENIED");
    assert.ok(outside.includes('"add_dirs[0]"'), outside);

    const cwdOutside = assertError(await tool(h, name, { ...RUN_ARGS, cwd: "/outside/project" }), "POLICY_DENIED");
    assert.ok(cwdOutside.includes('"cwd"'), cwdOutside);

    const cwdMissing = assertError(
      await tool(h, name, { ...RUN_ARGS, cwd: "/missing/project", add_dirs: ["/work/lib"] }),
      "INVALID_ARGUMENT",
    );
    assert.ok(cwdMissing.includes('"cwd"'), cwdMissing);

    assert.equal(h.launcher.agents.length, 0);
    assert.equal(h.jobs.list().length, 0);
    assert.deepEqual(h.checkedDirectories, [
      CWD,
      "/work/lib",
      "/missing/dir",
      CWD,
      "/outside/x",
      "/outside/project",
      "/missing/project",
    ]);
  });
}

test("add_dirs reach the launcher as the directory check resolved them", async () => {
  const h = handlerHarness({
    checkDirectory: async (dir) => ({ ok: true, path: `/real${dir}` }),
  });
  await startJob(h, { ...RUN_ARGS, add_dirs: ["/a", "/b"] });
  assert.equal(h.launcher.last.spec.cwd, `/real${CWD}`);
  assert.deepEqual(h.launcher.last.spec.options, { addDirs: ["/real/a", "/real/b"] });
});

test("the policy is checked before any directory", async () => {
  const h = withPolicy({ maxTurns: 1 });
  assertError(await tool(h, "claude_start", { ...RUN_ARGS, cwd: "/missing/x", max_turns: 2 }), "POLICY_DENIED");
  assert.deepEqual(h.checkedDirectories, []);
});

test("tools/list: permission_mode's enum is the policy's modes", async () => {
  const defaults = DEFAULT_POLICY.agents[0]?.allowedModes ?? [];
  for (const modes of [defaults, ["plan"], ["acceptEdits", "bypassPermissions", "default"]] as const) {
    const h = withPolicy({}, { allowedModes: modes });
    for (const name of ["claude_run", "claude_start"]) {
      const property = propertyOf(await definitionOf(h, name), "permission_mode");
      assert.deepEqual(property.enum, [...modes], `${name} with ${modes.join(",")}`);
    }
  }
  const standard = propertyOf(await definitionOf(handlerHarness(), "claude_run"), "permission_mode");
  assert.ok(!(standard.enum as string[]).includes("bypassPermissions"));
});

test("a known mode outside the policy is POLICY_DENIED; an unknown one is INVALID_ARGUMENT", async () => {
  const h = withPolicy({}, { allowedModes: ["plan"] });
  const denied = assertError(
    await tool(h, "claude_start", { ...RUN_ARGS, permission_mode: "acceptEdits" }),
    "POLICY_DENIED",
  );
  assert.match(denied, /allowed: plan/);
  assert.doesNotMatch(denied, /CLAUDE_DISPATCH_PERMISSION_MODES/);
  assertError(await tool(h, "claude_start", { ...RUN_ARGS, permission_mode: "yolo" }), "INVALID_ARGUMENT");
  await startJob(h, { ...RUN_ARGS, permission_mode: "plan" });
  assert.deepEqual(h.launcher.last.spec.options, { permissionMode: "plan" });
});

test("tools/list: claude_output's limit is bounded by maxResultChars", async () => {
  const h = handlerHarness({ maxResultChars: 1234 });
  const definition = await definitionOf(h, "claude_output");
  const limit = propertyOf(definition, "limit");
  assert.equal(limit.maximum, 1234);
  assert.match(String(limit.description), /Default 1234/);
});
