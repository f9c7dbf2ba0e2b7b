/**
 * The agent slots every server on a state directory shares (store/slots.ts,
 * PROTOCOL.md §15.7): at most `count` held at once whoever asks, given back
 * for the next, reclaimed from a holder that is gone unless its job still
 * runs, and inherited with that job.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import { SlotFiles } from "../src/store/slots.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-slots-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const SERVER_A = { pid: 101, start_time: "1" };
const SERVER_B = { pid: 202, start_time: "2" };

function pair(count: number, running: Set<string> = new Set()): { a: SlotFiles; b: SlotFiles; dir: string } {
  const dir = mkdtempSync(path.join(scratch, "slots-"));
  const make = (holder: typeof SERVER_A) => new SlotFiles({ dir, count, holder, jobRunning: (id) => running.has(id) });
  return { a: make(SERVER_A), b: make(SERVER_B), dir };
}

const alive = (pids: number[]) => async (holder: { pid: number }) => pids.includes(holder.pid);

test("at most count are held across servers; one given back is the next taker's", () => {
  const { a, b, dir } = pair(2);
  const first = a.take("job-1");
  const second = b.take("job-2");
  assert.ok(first && second);
  assert.notEqual(first.index, second.index);
  assert.equal(a.take("job-3"), undefined);
  assert.equal(b.take("job-3"), undefined);
  a.give(first);
  const third = b.take("job-3");
  assert.equal(third?.index, first.index);
  assert.equal(third?.generation, first.generation + 1);
  assert.equal(a.take("job-4"), undefined);
  // Only the latest holder of each slot is left on disk.
  assert.deepEqual(
    readdirSync(dir)
      .filter((name) => !name.endsWith(".tmp"))
      .sort(),
    [`${first.index}.1`, `${second.index}.0`].sort(),
  );
});

test("a slot given back is its holder file renamed, and one a later holder took is given back as nothing", () => {
  const { a, b, dir } = pair(1);
  const held = a.take("job-1");
  assert.ok(held);
  a.give(held);
  // No file made, none deleted: the generation stays named, so the next holder is the one after it.
  assert.deepEqual(readdirSync(dir), [`${held.index}.${held.generation}.free`]);
  const next = b.take("job-2");
  assert.deepEqual(next, { index: held.index, generation: held.generation + 1 });
  assert.deepEqual(readdirSync(dir), [`${held.index}.${held.generation + 1}`]);
  // Given back again by a server that lost it meanwhile: the later holder keeps it.
  a.give(held);
  assert.deepEqual(readdirSync(dir), [`${held.index}.${held.generation + 1}`]);
  assert.equal(a.take("job-3"), undefined);
});

test("a claim planned before its generation was held and given back holds nothing", () => {
  const { a, b, dir } = pair(1);
  const held = a.take("job-1");
  assert.ok(held);
  a.give(held);
  // b listed before a's claim, so it tries the same generation; its exclusive create succeeds, as a's holder file
  // was renamed away. Reached directly: within one process a take lists and claims with nothing in between.
  const late = (b as unknown as { claim(index: number, generation: number, job: string): unknown }).claim(
    held.index,
    held.generation,
    "job-2",
  );
  assert.equal(late, undefined);
  assert.deepEqual(readdirSync(dir), [`${held.index}.${held.generation}.free`]);
  // So the slot is still free for exactly one taker.
  assert.ok(a.take("job-3"));
  assert.equal(b.take("job-4"), undefined);
});

test("a slot given back the earlier way, a .free file beside the holder's, is free", () => {
  const { a, dir } = pair(1);
  writeFileSync(path.join(dir, "0.4"), JSON.stringify({ ...SERVER_B, job: "job-old" }));
  writeFileSync(path.join(dir, "0.4.free"), "");
  assert.deepEqual(a.take("job-1"), { index: 0, generation: 5 });
  assert.deepEqual(readdirSync(dir), ["0.5"]);
});

test("reclaim takes the slot of a holder that is gone, unless its job still runs", async () => {
  const running = new Set(["job-running"]);
  const { a, b } = pair(2, running);
  assert.ok(a.take("job-running"));
  assert.ok(a.take("job-done"));
  assert.equal(
    await b.reclaim("job-3", alive([SERVER_A.pid, SERVER_B.pid])),
    undefined,
    "a holder that lives keeps its slots",
  );
  const reclaimed = await b.reclaim("job-3", alive([SERVER_B.pid]));
  assert.ok(reclaimed, "the slot of a finished job whose server died comes back");
  assert.equal(
    await b.reclaim("job-4", alive([SERVER_B.pid])),
    undefined,
    "a job still running keeps its slot for whoever takes it over",
  );
  assert.equal(
    await b.reclaim("job-4", async () => undefined),
    undefined,
    "a holder that cannot be told keeps its slot",
  );
});

test("reclaim claims past a generation given back above a dead holder's", async () => {
  const { b, dir } = pair(1);
  // A holder that died before clearing the generation below its own, then gave its own back.
  writeFileSync(path.join(dir, "0.3"), JSON.stringify({ ...SERVER_A, job: "job-old" }));
  writeFileSync(path.join(dir, "0.4.free"), JSON.stringify({ ...SERVER_A, job: "job-later" }));
  assert.equal(b.take("job-1"), undefined, "the dead holder's file still reads as held");
  assert.deepEqual(await b.reclaim("job-1", alive([SERVER_B.pid])), { index: 0, generation: 5 });
  assert.deepEqual(readdirSync(dir), ["0.5"]);
});

test("a job taken over inherits the slot its dead server held for it", () => {
  const { a, b } = pair(1, new Set(["job-1"]));
  const held = a.take("job-1");
  assert.ok(held);
  assert.equal(b.inherit("job-other"), undefined);
  const inherited = b.inherit("job-1");
  assert.deepEqual(inherited, { index: held.index, generation: held.generation + 1 });
  assert.equal(a.take("job-2"), undefined, "still one slot, held by the new owner");
  assert.deepEqual(b.inherit("job-1"), inherited, "asked again, the same slot");
});

test("notifications: a slot given back is news to a server waiting on the folder", async () => {
  const { a, b } = pair(1);
  const held = a.take("job-1");
  assert.ok(held);
  const news = new Promise<void>((resolve) => {
    const stop = b.onChange(() => {
      stop();
      resolve();
    });
  });
  a.give(held);
  await news;
  assert.ok(b.take("job-2"));
});
