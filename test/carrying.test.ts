/**
 * Carrying the work (PROTOCOL.md §15.8), in process: presence files on a real folder, the job layer stubbed, time
 * on a fake clock. Who starts a carrier as a server leaves, a departure carried by those who stay, one carrier
 * slot, and the carrier that finds work left as it was leaving.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import type { JobRegistry } from "../src/jobs/registry.js";
import { CarrierSlot, PresenceFiles, settingsOf } from "../src/store/presence.js";
import type { JobRecord, ProcessIdentity } from "../src/store/records.js";
import { CARRIER_IDLE_MS, Carrying } from "../src/wiring/carrying.js";
import { FakeClock, RecordingLogger, settle } from "./helpers.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-carrying-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;

/** The job layer as Carrying uses it: orphans are records whose owner the predicate does not name. */
class StubJobs {
  idle = true;
  records: JobRecord[] = [];
  carried: string[] = [];
  findOrphans(isCarried: (owner: ProcessIdentity) => boolean): JobRecord[] {
    return this.records.filter((record) => !isCarried(record.owner) && !this.carried.includes(record.id));
  }
  async carryOrphans(isCarried: (owner: ProcessIdentity) => boolean): Promise<number> {
    const orphans = this.findOrphans(isCarried);
    this.carried.push(...orphans.map((record) => record.id));
    if (orphans.length > 0) this.idle = false;
    return orphans.length;
  }
  isIdle(): boolean {
    return this.idle;
  }
}

function recordOwnedBy(id: string, owner: ProcessIdentity): JobRecord {
  return {
    format: 1,
    runtime: "claude",
    host: "local",
    id,
    kind: "start",
    cwd: "/w",
    prompt_preview: "",
    status: "queued",
    submitted_at: 1,
    owner,
    generation: 0,
  } as JobRecord;
}

function setup(self: ProcessIdentity, alive: Set<number>, clock = new FakeClock()) {
  counter += 1;
  const root = path.join(scratch, `s${counter}`);
  const presence = new PresenceFiles(root, () => crypto.randomUUID());
  const jobs = new StubJobs();
  const carrying = new Carrying({
    presence,
    jobs: jobs as unknown as JobRegistry,
    self,
    settings: { CLAUDE_DISPATCH_MAX_JOBS: "2" },
    isAlive: async (named) => alive.has(named.pid),
    clock,
    logger: new RecordingLogger(),
  });
  return { root, presence, jobs, carrying, clock };
}

describe("carrying the work (§15.8)", () => {
  test("a presence records its CLAUDE_DISPATCH_* settings only, and leaving removes it", async () => {
    assert.deepEqual(settingsOf({ CLAUDE_DISPATCH_MAX_JOBS: "2", ANTHROPIC_API_KEY: "secret", PATH: "/bin" }), {
      CLAUDE_DISPATCH_MAX_JOBS: "2",
    });
    const { presence, carrying } = setup({ pid: 10, start_time: "1" }, new Set([10]));
    carrying.join("server");
    await settle();
    assert.deepEqual(
      presence.list().map(({ presence: entry }) => [entry.pid, entry.role, entry.settings]),
      [[10, "server", { CLAUDE_DISPATCH_MAX_JOBS: "2" }]],
    );
    carrying.leave();
    assert.deepEqual(presence.list(), []);
  });

  test("a leaving server starts a carrier only when it is alone and work is left", async () => {
    const alive = new Set([10, 11]);
    const { presence, jobs, carrying } = setup({ pid: 10 }, alive);
    carrying.join("server");
    jobs.idle = false;
    presence.add({ pid: 11, role: "server", since: 1, settings: {} });
    carrying.leave();
    assert.equal(await carrying.needsCarrier(), false, "another server lives: it carries the work");
    alive.delete(11);
    assert.equal(await carrying.needsCarrier(), true, "alone, with a job running here");
    jobs.idle = true;
    assert.equal(await carrying.needsCarrier(), false, "alone, nothing left");
    jobs.records = [recordOwnedBy("00000000-0000-4000-8000-000000000001", { pid: 99 })];
    assert.equal(await carrying.needsCarrier(), true, "alone, and an orphan in the directory");
  });

  test("a server that leaves, or dies, is carried by one that stays", async () => {
    const alive = new Set([10, 11, 12]);
    const { presence, jobs, carrying, clock } = setup({ pid: 10 }, alive);
    const leaver = presence.add({ pid: 11, role: "server", since: 1, settings: {} });
    presence.add({ pid: 12, role: "server", since: 1, settings: {} });
    jobs.records = [
      recordOwnedBy("00000000-0000-4000-8000-000000000011", { pid: 11 }),
      recordOwnedBy("00000000-0000-4000-8000-000000000012", { pid: 12 }),
    ];
    carrying.join("server");
    await clock.advance(1000);
    assert.deepEqual(jobs.carried, [], "both owners are present and alive");
    // 11 leaves (still alive, on its way out): its job is carried; 12's is not.
    leaver();
    await clock.advance(1000);
    assert.deepEqual(jobs.carried, ["00000000-0000-4000-8000-000000000011"]);
    // 12 dies without leaving: found at the next poll, carried, and its presence cleared.
    alive.delete(12);
    await clock.advance(1000);
    assert.deepEqual(jobs.carried, ["00000000-0000-4000-8000-000000000011", "00000000-0000-4000-8000-000000000012"]);
    assert.deepEqual(
      presence.list().map(({ presence: entry }) => entry.pid),
      [10],
    );
    carrying.leave();
    assert.equal(clock.pendingTimers, 0, "no poll left behind");
  });

  test(
    "one carrier slot: a second carrier does not get it while the first lives, and gets it " + "once it died",
    async () => {
      const root = path.join(scratch, "slot");
      const alive = new Set([20, 21]);
      const isAlive = async (named: ProcessIdentity) => alive.has(named.pid);
      const first = new CarrierSlot(root, { pid: 20 });
      const second = new CarrierSlot(root, { pid: 21 });
      assert.equal(await first.take(isAlive), true);
      assert.equal(await second.take(isAlive), false);
      alive.delete(20);
      assert.equal(await second.take(isAlive), true);
    },
  );

  test(
    "an idle carrier exits; one that finds work left as it was leaving goes on, and exits " + "once idle again",
    async () => {
      const alive = new Set([30]);
      const { root, presence, jobs, carrying, clock } = setup({ pid: 30 }, alive);
      const slot = new CarrierSlot(root, { pid: 30 });
      assert.equal(await slot.take(async (named) => alive.has(named.pid)), true);
      carrying.join("carrier");
      let exited = false;
      const carried = carrying.carry(slot).then(() => (exited = true));
      // A server, alive but on its way out (no presence), left a job just as the carrier was going.
      await clock.advance(CARRIER_IDLE_MS - 500);
      jobs.records = [recordOwnedBy("00000000-0000-4000-8000-000000000031", { pid: 31 })];
      alive.add(31);
      await clock.advance(1000);
      assert.equal(exited, false, "it went on");
      assert.deepEqual(jobs.carried, ["00000000-0000-4000-8000-000000000031"]);
      assert.deepEqual(
        presence.list().map(({ presence: entry }) => [entry.pid, entry.role]),
        [[30, "carrier"]],
        "present again",
      );
      jobs.idle = true;
      await clock.advance(CARRIER_IDLE_MS + 500);
      await carried;
      assert.deepEqual(presence.list(), []);
      assert.equal(await new CarrierSlot(root, { pid: 32 }).take(async () => true), true, "the slot was given back");
    },
  );
});
