/**
 * The worktree lock (store/worktree-lock.ts, PROTOCOL.md §19.1): of takers at once exactly one goes on, a taker
 * never goes on past a holder, and one still checking at a lower slot is waited for, within a bound.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import type { ProcessIdentity } from "../src/store/records.js";
import { lockWorktree, type HeldWorktreeLock } from "../src/store/worktree-lock.js";
import { FakeClock, settle } from "./helpers.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-worktree-lock-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const GONE = { pid: 999, start_time: "9" };
let names = 0;
const randomName = (): string => `r${(names += 1)}`;

function jobDir(): string {
  return mkdtempSync(path.join(scratch, "job-"));
}

const lockFiles = (dir: string): string[] => readdirSync(dir).filter((name) => name.startsWith("worktree.lock."));

/**
 * Liveness as the test decides it: every identity alive but GONE, whose answer waits for `answer()`. A dead holder's
 * slot 0 makes every taker wait there after it took its own slot and listed the others: all take their slots first.
 */
function gatedLiveness(): { isAlive: (who: ProcessIdentity) => Promise<boolean>; answer: () => void } {
  let answer = (): void => undefined;
  const gone = new Promise<boolean>((resolve) => (answer = () => resolve(false)));
  return { isAlive: async (who) => (who.pid === GONE.pid ? gone : true), answer };
}

/** Starts takers at once behind a dead holder's slot 0; how each ended, once all have. */
async function takersAtOnce(dir: string, count: number, clock: FakeClock): Promise<Array<HeldWorktreeLock | Error>> {
  writeFileSync(path.join(dir, "worktree.lock.0"), JSON.stringify(GONE));
  const { isAlive, answer } = gatedLiveness();
  const takers = Array.from({ length: count }, (_, k) =>
    lockWorktree(dir, "job", { pid: 100 + k, start_time: String(k) }, isAlive, randomName, clock).catch(
      (error: Error) => error,
    ),
  );
  await settle();
  assert.equal(lockFiles(dir).length, count + 1, "every taker took a slot before any decided");
  answer();
  let ended: Array<HeldWorktreeLock | Error> | undefined;
  void Promise.all(takers).then((all) => (ended = all));
  for (let i = 0; i < 200 && ended === undefined; i += 1) await clock.advance(20);
  assert.ok(ended, "every taker decided");
  return ended;
}

for (const count of [2, 5]) {
  test(`of ${count} takers at once, exactly one goes on; the others are told another one is under way`, async () => {
    const dir = jobDir();
    const ended = await takersAtOnce(dir, count, new FakeClock());
    const held = ended.filter((end): end is HeldWorktreeLock => !(end instanceof Error));
    const refused = ended.filter((end): end is Error => end instanceof Error);
    assert.equal(held.length, 1, ended.map(String).join("; "));
    for (const error of refused) assert.match(error.message, /another merge or discard .* is under way/);
    // The dead holder's slot is cleared, the refused gave theirs back: the winner's alone is left, until it releases.
    assert.equal(lockFiles(dir).length, 1);
    held[0]?.release();
    assert.deepEqual(lockFiles(dir), []);
  });
}

test("a taker never goes on past a holder, even one at a higher slot", async () => {
  const dir = jobDir();
  // Slot 0 was given back after this holder took slot 1: the newcomer gets slot 0.
  writeFileSync(path.join(dir, "worktree.lock.1"), JSON.stringify({ pid: 555, start_time: "5" }));
  await assert.rejects(
    lockWorktree(dir, "job", { pid: 100, start_time: "0" }, async () => true, randomName, new FakeClock()),
    /another merge or discard .* is under way \(process 555\)/,
  );
  assert.deepEqual(lockFiles(dir), ["worktree.lock.1"]);
});

test("a taker still checking at a lower slot is waited for: the newcomer goes on once it has given up", async () => {
  const dir = jobDir();
  const checker = path.join(dir, "worktree.lock.0");
  writeFileSync(checker, JSON.stringify({ pid: 555, start_time: "5", checking: true }));
  const clock = new FakeClock();
  const taker: { held?: HeldWorktreeLock } = {};
  void lockWorktree(dir, "job", { pid: 100, start_time: "0" }, async () => true, randomName, clock).then(
    (lock) => (taker.held = lock),
  );
  await clock.advance(200);
  const held = (): HeldWorktreeLock | undefined => taker.held;
  assert.equal(held(), undefined, "it waits while the lower taker checks");
  rmSync(checker);
  await clock.advance(20);
  const lock = held();
  assert.ok(lock, "it goes on once the lower taker gave up");
  assert.deepEqual(lockFiles(dir), ["worktree.lock.1"]);
  lock.release();
});

test("a lower taker that never decides is waited for 2 s, then the newcomer gives up", async () => {
  const dir = jobDir();
  writeFileSync(path.join(dir, "worktree.lock.0"), JSON.stringify({ pid: 555, start_time: "5", checking: true }));
  const clock = new FakeClock();
  const taker: { ended?: unknown } = {};
  void lockWorktree(dir, "job", { pid: 100, start_time: "0" }, async () => true, randomName, clock).then(
    (lock) => (taker.ended = lock),
    (error: unknown) => (taker.ended = error),
  );
  await clock.advance(1900);
  const endedNow = (): unknown => taker.ended;
  assert.equal(endedNow(), undefined);
  await clock.advance(200);
  const ended = endedNow();
  assert.ok(ended instanceof Error && /is under way \(process 555\)/.test(ended.message), String(ended));
  assert.deepEqual(lockFiles(dir), ["worktree.lock.0"]);
});

test("a checker found dead is cleared and does not hold anyone up", async () => {
  const dir = jobDir();
  writeFileSync(path.join(dir, "worktree.lock.0"), JSON.stringify({ ...GONE, checking: true }));
  const held = await lockWorktree(
    dir,
    "job",
    { pid: 100, start_time: "0" },
    async (who) => who.pid !== GONE.pid,
    randomName,
    new FakeClock(),
  );
  assert.deepEqual(lockFiles(dir), ["worktree.lock.1"]);
  assert.ok(!existsSync(path.join(dir, "worktree.lock.0")));
  held.release();
});
