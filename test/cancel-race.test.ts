/**
 * A cancellation sent right behind its request (PROTOCOL.md §4): it arrives while the request still waits for
 * what jobs need to load, and must not be lost. The fuzzer found it: the job ran, and its call was answered.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { cancel, handlerHarness, settle } from "./helpers.js";
import { callTool } from "./support/tool-calls.js";

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}

test("a claude_run cancelled before the runtimes loaded gets no response and starts no agent", async () => {
  const loading = deferred();
  const h = handlerHarness({ ready: () => loading.promise });
  const answered = callTool(h, "claude_run", { prompt: "hi", cwd: "/w" }, { id: 41 });
  await settle();
  assert.equal(await cancel(h, 41), null);
  loading.resolve();
  assert.equal(await answered, null, "a cancelled request gets no response");
  assert.equal(h.launcher.agents.length, 0, "and no agent was started for nobody");
});

test(
  "a request not cancelled is answered once the runtimes loaded, and a later cancel of its id " + "finds nothing",
  async () => {
    const loading = deferred();
    const h = handlerHarness({ ready: () => loading.promise });
    const answered = callTool(h, "claude_start", { prompt: "hi", cwd: "/w" }, { id: 42 });
    await settle();
    loading.resolve();
    const response = await answered;
    assert.ok(response && "result" in response, JSON.stringify(response));
    assert.equal(h.launcher.agents.length, 1);
    assert.equal(await cancel(h, 42), null);
    assert.equal(h.launcher.agents[0]?.killCalls, 0, "a cancel after the answer kills nothing");
  },
);
