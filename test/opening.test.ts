/**
 * The front door (src/server/opening.ts): while the rest of the server loads, it answers a plain `initialize`
 * itself, exactly as the whole handler would, and hands the whole handler every message, the initializes first.
 */
import { test } from "node:test";
import assert from "node:assert/strict";

import { frontDoor, type OpeningFacts } from "../src/server/opening.js";
import type { RequestHandler } from "../src/server/handler.js";
import { handlerHarness } from "./helpers.js";

const FACTS: OpeningFacts = {
  server: { name: "claude-dispatch", version: "0.0.0-test" },
  depth: { current: 0, max: 1 },
};

/** A promise the test resolves when it chooses: the rest of the server, still loading. */
function later(): { promise: Promise<RequestHandler>; resolve(handler: RequestHandler): void } {
  let resolve: (handler: RequestHandler) => void = () => undefined;
  const promise = new Promise<RequestHandler>((done) => (resolve = done));
  return { promise, resolve };
}

/** A handler that records what reaches it before the real one answers. */
function recording(handle: RequestHandler): { handle: RequestHandler; seen: unknown[] } {
  const seen: unknown[] = [];
  return {
    seen,
    handle: (message) => {
      seen.push(message);
      return handle(message);
    },
  };
}

const initialize = (id: number, params: unknown) => ({ jsonrpc: "2.0", id, method: "initialize", params });

test("the front door's initialize answers are the whole handler's, word for word", async () => {
  const cases: unknown[] = [
    { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    { protocolVersion: "2025-11-25", capabilities: { elicitation: {} } },
    { protocolVersion: "1999-01-01" },
    { capabilities: {} },
    { protocolVersion: 20250618 },
  ];
  for (const [index, params] of cases.entries()) {
    const whole = handlerHarness();
    const door = frontDoor(FACTS, new Promise<RequestHandler>(() => undefined));
    const message = initialize(index + 1, params);
    assert.deepEqual(await door(message), await whole.handle(message), JSON.stringify(params));
  }
  const gated: OpeningFacts = { ...FACTS, depth: { current: 1, max: 1 } };
  const whole = handlerHarness({ depth: gated.depth });
  const message = initialize(9, { protocolVersion: "2025-06-18" });
  assert.deepEqual(await frontDoor(gated, new Promise(() => undefined))(message), await whole.handle(message));
});

test("the whole handler gets the initialize first, then everything in the order it came", async () => {
  const rest = later();
  const door = frontDoor(FACTS, rest.promise);
  const first = initialize(1, { protocolVersion: "2025-06-18", capabilities: {} });
  const answered = await door(first);
  assert.equal((answered as { id: unknown }).id, 1);
  const pending = [
    door({ jsonrpc: "2.0", method: "notifications/initialized" }),
    door({ jsonrpc: "2.0", id: 2, method: "ping" }),
    door({ jsonrpc: "2.0", id: 3, method: "tools/list" }),
  ];
  const whole = recording(handlerHarness().handle);
  rest.resolve(whole.handle);
  const [initialized, ping, list] = await Promise.all(pending);
  assert.equal(initialized, null);
  assert.deepEqual(ping, { jsonrpc: "2.0", id: 2, result: {} });
  assert.ok(Array.isArray((list as { result: { tools: unknown[] } }).result.tools));
  assert.deepEqual(
    whole.seen.map((message) => (message as { method: string }).method),
    ["initialize", "notifications/initialized", "ping", "tools/list"],
  );
  // Once ready, messages go straight to the whole handler, initialize too.
  const again = initialize(4, { protocolVersion: "2025-06-18" });
  await door(again);
  assert.equal(whole.seen.at(-1), again);
});

test("an initialize with _meta, or not JSON-RPC 2.0, waits for the whole handler", async () => {
  for (const message of [
    initialize(1, { protocolVersion: "2025-06-18", _meta: { progressToken: 1 } }),
    { jsonrpc: "1.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18" } },
    { jsonrpc: "2.0", id: { nested: true }, method: "initialize", params: { protocolVersion: "2025-06-18" } },
  ]) {
    const rest = later();
    const door = frontDoor(FACTS, rest.promise);
    let settled = false;
    const answer = door(message).then((value) => {
      settled = true;
      return value;
    });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(settled, false, JSON.stringify(message));
    const whole = handlerHarness();
    rest.resolve(whole.handle);
    assert.deepEqual(await answer, await handlerHarness().handle(message));
  }
});

test("a request the front door answered is replayed once, so the whole handler settles the version", async () => {
  const rest = later();
  const door = frontDoor(FACTS, rest.promise);
  await door(initialize(1, { protocolVersion: "2025-06-18", capabilities: { elicitation: {} } }));
  const whole = recording(handlerHarness().handle);
  rest.resolve(whole.handle);
  await door({ jsonrpc: "2.0", id: 2, method: "ping" });
  assert.equal(whole.seen.filter((message) => (message as { method: string }).method === "initialize").length, 1);
});
