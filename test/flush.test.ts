/**
 * The first record's flush (PROTOCOL.md §15.2): the agent is spawned once the
 * record is written, the caller is answered once it is flushed, and a flush
 * that fails kills the job and fails the call.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import type { JsonRpcResponse } from "../src/server/jsonrpc.js";
import { MemoryStore } from "../src/store/memory-store.js";
import type { JobRecord } from "../src/store/records.js";
import { StateStore } from "../src/store/state-store.js";
import { handlerHarness, settle, track, type HandlerHarness } from "./helpers.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-flush-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Flushes each record when the test says so, or fails it. */
class HeldFlushStore extends MemoryStore {
  readonly held: Array<{ id: string; flush(): void; fail(error: Error): void }> = [];

  override create(record: JobRecord, prompt: string): Promise<void> {
    void super.create(record, prompt);
    return new Promise((resolve, reject) => this.held.push({ id: record.id, flush: resolve, fail: reject }));
  }
}

let nextRequestId = 0;
function start(h: HandlerHarness, name = "claude_start"): Promise<JsonRpcResponse | null> {
  return h.handle({ jsonrpc: "2.0", id: (nextRequestId += 1), method: "tools/call", params: { name, arguments: { prompt: "hi", cwd: "/w" } } });
}

function structuredOf(response: JsonRpcResponse | null | undefined): { isError?: boolean; structuredContent: Record<string, unknown>; text: string } {
  assert.ok(response && "result" in response, `expected a result, got ${JSON.stringify(response)}`);
  const result = response.result as { isError?: boolean; structuredContent: Record<string, unknown>; content: Array<{ text: string }> };
  return { isError: result.isError, structuredContent: result.structuredContent, text: result.content[0]?.text ?? "" };
}

test("the agent starts once the record is written; claude_start answers once it is flushed", async () => {
  const store = new HeldFlushStore();
  const h = handlerHarness({}, { store });
  const answer = track(start(h));
  await settle();
  assert.equal(h.launcher.agents.length, 1, "the spawn does not wait for the flush");
  assert.equal(answer.done, false, "no answer before the record is on disk for good");
  store.held[0]?.flush();
  const { isError, structuredContent } = structuredOf(await answer.promise);
  assert.equal(isError, undefined);
  assert.equal(structuredContent.job_id, store.held[0]?.id);
  assert.equal(structuredContent.status, "running");
});

test("a flush that fails: the agent is killed and claude_start fails with STATE_ERROR", async () => {
  const store = new HeldFlushStore();
  const h = handlerHarness({}, { store });
  const answer = track(start(h));
  await settle();
  store.held[0]?.fail(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
  const { isError, text } = structuredOf(await answer.promise);
  assert.equal(isError, true);
  assert.match(text, /^STATE_ERROR: cannot flush the job's record to disk: EIO: i\/o error, fsync; the job was killed/);
  await settle();
  assert.equal(h.launcher.last.killCalls, 1);
  const job = h.jobs.get(store.held[0]?.id ?? "");
  assert.equal(job?.status, "killed");
  assert.ok(h.logger.lines.some((line) => line.includes("cannot flush the job's record") && line.includes("killing it")));
});

test("a queued job whose flush fails is never started, and claude_run fails with STATE_ERROR", async () => {
  const store = new HeldFlushStore();
  const h = handlerHarness({}, { store, maxRunning: 1 });
  const first = track(start(h));
  await settle();
  store.held[0]?.flush();
  await first.promise;
  const queued = track(start(h, "claude_run"));
  await settle();
  assert.equal(h.jobs.get(store.held[1]?.id ?? "")?.status, "queued");
  store.held[1]?.fail(new Error("EIO: i/o error, fsync"));
  const { isError, text } = structuredOf(await queued.promise);
  assert.equal(isError, true);
  assert.match(text, /^STATE_ERROR: /);
  h.launcher.last.succeed();
  await settle();
  assert.equal(h.launcher.agents.length, 1, "the queued job's agent was never spawned");
  assert.equal(h.jobs.get(store.held[1]?.id ?? "")?.status, "killed");
});

test("the state directory's create: written at once, flushed when its promise resolves; a queued job's prompt too", async () => {
  const store = new StateStore(path.join(scratch, "state"), { randomName: () => `r${(nextRequestId += 1)}` });
  store.open();
  const record = (id: string, overrides: Partial<JobRecord>): JobRecord => ({
    format: 1, id, kind: "start", cwd: "/w", prompt_preview: "p", options: {}, status: "queued", submitted_at: 1, owner: { pid: 2 }, generation: 0, ...overrides,
  });
  const running = record("11111111-2222-4333-8444-555555555555", { status: "running", started_at: 1, agent: { tree_marker: "m" } });
  const queued = record("11111111-2222-4333-8444-666666666666", {});
  const flushes = [store.create(running, "run me"), store.create(queued, "queue me")];
  // Readable before the flushes settle: the agent is spawned from them meanwhile.
  assert.equal(store.read(running.id)?.status, "running");
  assert.equal(readFileSync(store.promptFile(queued.id) ?? "", "utf8"), "queue me");
  await Promise.all(flushes);
  assert.equal(store.read(queued.id)?.status, "queued");
  for (const id of [running.id, queued.id]) {
    assert.deepEqual(readdirSync(path.join(store.root, "jobs", id)).sort(), ["prompt.txt", "record.json"], "no temporary file is left");
  }
  // A second create of the same job is refused before anything is replaced.
  assert.throws(() => store.create(queued, "again"), /EEXIST/);
});
