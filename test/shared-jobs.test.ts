/**
 * Two registries on one state directory (PROTOCOL.md §15.6): a job one server
 * owns is served by the other from its files, while the owner lives; killed
 * from the other with the reason it gave; taken over when the owner dies.
 * Record changes arrive through the file system's notifications, or the poll
 * where there are none; nothing here sleeps.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, describe, test } from "node:test";

import type { AgentToAttach } from "../src/agent/types.js";
import { JobRegistry, type IsAlive } from "../src/jobs/registry.js";
import { StateStore } from "../src/store/state-store.js";
import type { JobRecord } from "../src/store/records.js";
import { Transcript } from "../src/core/transcript.js";
import { FakeAgent, FakeClock, FakeLauncher, RecordingLogger, settle, track } from "./helpers.js";
import { homeOnly, tableOf } from "./host-fakes.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-shared-"));
const servers: Server[] = [];
// An observed job's folder is watched until the job ends or its server leaves: each test's servers leave.
afterEach(async () => {
  for (const s of servers.splice(0)) await s.jobs.leave();
});
after(() => rmSync(scratch, { recursive: true, force: true }));

const OWNER_A = { pid: 1001, start_time: "100" };
const OWNER_B = { pid: 1002, start_time: "200" };

interface Server {
  jobs: JobRegistry;
  launcher: FakeLauncher;
  attached: AgentToAttach[];
  attachedAgents: FakeAgent[];
  clock: FakeClock;
  store: StateStore;
  logger: RecordingLogger;
  /** The jobs CLAUDE_DISPATCH_ON_DONE ran for, and with which status. */
  doneRuns: string[];
}

let dirs = 0;
function stateDir(): string {
  dirs += 1;
  return path.join(scratch, `s${dirs}`);
}

interface ServerOptions {
  maxRunning?: number;
  notifications?: boolean;
  /** Slots shared through the state directory (§15.7), maxRunning of them, instead of counted in memory. */
  sharedSlots?: boolean;
}

function server(dir: string, owner: typeof OWNER_A, isAlive: IsAlive, options: ServerOptions = {}): Server {
  const store = new StateStore(dir, { randomName: () => randomUUID() });
  store.open();
  if (options.notifications === false) store.watchRecord = () => undefined;
  const clock = new FakeClock();
  const launcher = new FakeLauncher();
  const logger = new RecordingLogger();
  const attached: AgentToAttach[] = [];
  const attachedAgents: FakeAgent[] = [];
  const doneRuns: string[] = [];
  const jobs = new JobRegistry({
    launch: launcher.launch,
    onDone: {
      run: async (job) => void doneRuns.push(`${job.id} ${job.status}`),
      close: async () => undefined,
      busy: () => false,
      closed: false,
    },
    clock,
    newId: randomUUID,
    logger,
    retentionMs: 7 * 24 * 3600 * 1000,
    maxFinishedJobs: 1000,
    finishedTranscriptChars: 1_000_000,
    maxRunning: options.maxRunning ?? 1000,
    ...homeOnly(tableOf(isAlive), owner),
    ...(options.sharedSlots ? { slots: store.slotPool(options.maxRunning ?? 1000, owner, isAlive) } : {}),
    attach: (agent) => {
      attached.push(agent);
      const run = new FakeAgent({ prompt: "", cwd: "/" });
      attachedAgents.push(run);
      return run;
    },
    admit: async (spec) => spec,
    persistence: {
      store,
      owner,
      replayTranscript: () => new Transcript(1000),
      maxBytes: 1024 ** 3,
      newMarker: () => `marker-${randomUUID()}`,
      isAlive,
    },
  });
  const made = { jobs, launcher, attached, attachedAgents, clock, store, logger, doneRuns };
  servers.push(made);
  return made;
}

/** A's server and its agents live unless the test says otherwise. */
function world(options: ServerOptions = {}): { a: Server; b: Server; alive: Set<number> } {
  const alive = new Set([OWNER_A.pid, OWNER_B.pid, 4242]);
  const isAlive: IsAlive = async (process) => alive.has(process.pid);
  const dir = stateDir();
  return { a: server(dir, OWNER_A, isAlive, options), b: server(dir, OWNER_B, isAlive, options), alive };
}

describe("a job another live server owns", { timeout: 20_000 }, () => {
  test(
    "is served here: running, marked, its agent followed from its files, and its result when the " + "owner records it",
    async () => {
      const { a, b } = world();
      const started = a.jobs.start({ prompt: "shared", cwd: "/w" }, "start");
      await settle();
      const seen = await b.jobs.recover(started.id);
      assert.ok(seen, "JOB_NOT_FOUND no more while its owner lives");
      assert.equal(seen.status, "running");
      assert.equal(seen.elsewhere, true);
      assert.equal(b.attached.length, 1, "its agent is followed from its output file");
      assert.equal(b.attached[0]?.marker, a.store.read(started.id)?.agent?.tree_marker);
      assert.equal(b.jobs.running().length, 0, "not counted among this server's own: its shutdown leaves it alone");
      a.launcher.last.succeed("the answer");
      await seen.done;
      assert.equal(seen.status, "completed");
      assert.equal(seen.resultText(), "the answer");
      assert.equal(seen.elsewhere, false);
      assert.equal(a.jobs.get(started.id)?.status, "completed");
      assert.deepEqual(a.doneRuns, [`${started.id} completed`], "the owner runs CLAUDE_DISPATCH_ON_DONE, once");
      assert.deepEqual(b.doneRuns, [], "a server that only watched the job does not");
    },
  );

  test("is listed after discovery, with every other job of the directory", async () => {
    const { a, b } = world();
    const first = a.jobs.start({ prompt: "one", cwd: "/w" }, "start");
    const second = a.jobs.start({ prompt: "two", cwd: "/w" }, "start");
    await settle();
    a.launcher.agents[0]?.succeed("done");
    await first.done;
    const own = b.jobs.start({ prompt: "mine", cwd: "/w" }, "start");
    await b.jobs.discover();
    const listed = new Map(b.jobs.list().map((job) => [job.id, job]));
    assert.deepEqual([...listed.keys()].sort(), [first.id, second.id, own.id].sort());
    assert.equal(listed.get(first.id)?.status, "completed");
    assert.equal(listed.get(second.id)?.elsewhere, true);
    assert.equal(listed.get(own.id)?.elsewhere, false);
  });

  for (const reason of ["claude_kill", "cancelled"] as const) {
    test(
      `killed from here (${reason}): the kill is asked for in its folder, its tree is killed from here, and its ` +
        `owner records ${reason}`,
      async () => {
        const { a, b } = world();
        const started = a.jobs.start({ prompt: "kill me", cwd: "/w" }, "start");
        await settle();
        const seen = await b.jobs.recover(started.id);
        assert.ok(seen);
        // Killing the tree from here ends the owner's child, as a real kill would.
        const attachedRun = b.attachedAgents[0];
        assert.ok(attachedRun);
        attachedRun.kill = async () => {
          attachedRun.killCalls += 1;
          a.launcher.last.finish({ ok: false, code: "AGENT_EXITED", detail: "killed by SIGTERM" });
          return { survivors: [] };
        };
        const result = await b.jobs.kill(started.id, reason);
        assert.deepEqual(result, { killed: true, survivors: [] });
        assert.equal(attachedRun.killCalls, 1);
        assert.equal(seen.status, "killed");
        const owned = a.jobs.get(started.id);
        assert.equal(owned?.status, "killed");
        assert.equal(owned?.killReason, reason);
        assert.equal(a.store.read(started.id)?.kill_reason, reason);
      },
    );
  }

  test(
    "killed from here while its owner never records it: the answer comes after a bounded " + "wait, not never",
    async () => {
      const { a, b } = world();
      const started = a.jobs.start({ prompt: "owner wedged", cwd: "/w" }, "start");
      await settle();
      const seen = await b.jobs.recover(started.id);
      assert.ok(seen);
      const killing = track(b.jobs.kill(started.id, "claude_kill"));
      await b.clock.advance(9_999);
      assert.equal(killing.done, false, "the owner may still record it");
      await b.clock.advance(1);
      assert.deepEqual(await killing.promise, { killed: true, survivors: [] });
      assert.equal(seen.status, "running", "nothing is made up: the record still says running");
      a.launcher.last.succeed();
      await seen.done;
    },
  );

  test(
    "queued by its owner and killed from here: its owner removes it at its next poll, " + "never starting it",
    async () => {
      const { a, b } = world({ maxRunning: 1, sharedSlots: true });
      a.jobs.start({ prompt: "holds the slot", cwd: "/w" }, "start");
      const queued = a.jobs.start({ prompt: "never runs", cwd: "/w" }, "start");
      await settle();
      assert.equal(queued.status, "queued");
      assert.equal((await b.jobs.recover(queued.id))?.status, "queued");
      assert.deepEqual(await b.jobs.kill(queued.id, "claude_kill"), { killed: true, survivors: [] });
      await a.clock.advance(1000);
      await queued.done;
      assert.equal(queued.status, "killed");
      assert.equal(queued.killReason, "claude_kill");
      assert.equal(a.launcher.agents.length, 1, "never started");
      a.launcher.last.succeed();
      await settle();
    },
  );

  test(
    "one queue across servers: the oldest queued job starts first, on the server that freed the " + "slot, and once",
    async () => {
      const { a, b } = world({ maxRunning: 1, sharedSlots: true });
      const blocker = a.jobs.start({ prompt: "holds the slot", cwd: "/w" }, "start");
      await settle();
      const older = b.jobs.start({ prompt: "queued first, on B", cwd: "/w" }, "start");
      await a.clock.advance(10);
      const newer = a.jobs.start({ prompt: "queued later, on A", cwd: "/w" }, "start");
      assert.deepEqual([older.status, newer.status], ["queued", "queued"]);
      // A's queue poll finds B's queued job.
      await a.clock.advance(1000);
      a.launcher.agents[0]?.succeed();
      await blocker.done;
      await settle();
      assert.equal(a.launcher.agents.length, 2);
      assert.equal(
        readFileSync(a.launcher.last.spec.promptFile ?? "", "utf8"),
        "queued first, on B",
        "B's older job, not A's own",
      );
      assert.equal(newer.status, "queued");
      assert.equal(a.store.read(older.id)?.owner.pid, OWNER_A.pid);
      // B's poll sees its queued job taken: served from its files, and it ends when A's agent does.
      await b.clock.advance(1000);
      assert.equal(older.elsewhere, true);
      a.launcher.last.succeed("done on A");
      await older.done;
      assert.equal(older.resultText(), "done on A");
      assert.equal(b.launcher.agents.length, 0, "never started twice");
    },
  );

  test("queued by its owner, then started by it: followed once its record says running", async () => {
    const { a, b } = world({ maxRunning: 1 });
    const blocker = a.jobs.start({ prompt: "first", cwd: "/w" }, "start");
    const queued = a.jobs.start({ prompt: "second", cwd: "/w" }, "start");
    await settle();
    const seen = await b.jobs.recover(queued.id);
    assert.equal(seen?.status, "queued");
    assert.equal(b.attached.length, 0);
    a.launcher.agents[0]?.succeed();
    await blocker.done;
    await new Promise<void>((resolve) => {
      const stop = seen?.onActivity(() => {
        if (seen.status === "running") {
          stop?.();
          resolve();
        }
      });
    });
    assert.equal(b.attached.length, 1);
  });

  test(
    "running but its pid not on record yet: followed once the pid is written, not taken " + "for gone before",
    async () => {
      const { a, b } = world();
      const id = randomUUID();
      const record = {
        format: 1,
        runtime: "claude",
        host: "local",
        id,
        kind: "start",
        cwd: "/w",
        prompt_preview: "p",
        options: {},
        status: "running",
        submitted_at: 1,
        started_at: 1,
        owner: OWNER_A,
        generation: 0,
        agent: { tree_marker: "marker-x" },
      } as const;
      a.store.create(record, "p");
      const seen = await b.jobs.recover(id);
      assert.equal(seen?.status, "running");
      assert.equal(b.attached.length, 0, "nothing to follow by yet");
      const attached = new Promise<void>((resolve) => {
        const stop = seen?.onActivity(() => {
          stop?.();
          resolve();
        });
      });
      a.store.write({ ...record, agent: { tree_marker: "marker-x", pid: 4242, start_time: "9" } });
      await attached;
      assert.deepEqual(
        b.attached.map((agent) => [agent.pid, agent.startTime, agent.marker]),
        [[4242, "9", "marker-x"]],
      );
    },
  );

  test("without notifications, the poll sees the record change", async () => {
    const { a, b } = world({ notifications: false });
    const started = a.jobs.start({ prompt: "polled", cwd: "/w" }, "start");
    await settle();
    const seen = await b.jobs.recover(started.id);
    assert.ok(seen);
    a.launcher.last.succeed("polled result");
    await settle();
    assert.equal(seen.status, "running", "nothing tells this server until its poll");
    b.clock.advance(200);
    await seen.done;
    assert.equal(seen.resultText(), "polled result");
  });

  test("whose owner dies: taken over at the next poll, and whoever waited on it sees its end", async () => {
    const { a, b, alive } = world();
    const started = a.jobs.start({ prompt: "orphaned", cwd: "/w" }, "start");
    await settle();
    const seen = await b.jobs.recover(started.id);
    assert.ok(seen);
    alive.delete(OWNER_A.pid);
    b.clock.advance(2000);
    await settle();
    const owned = b.jobs.get(started.id);
    assert.ok(owned && owned !== seen, "a new entry, owned here");
    assert.equal(owned.elsewhere, false);
    assert.equal(b.store.read(started.id)?.owner.pid, OWNER_B.pid);
    // The takeover follows the agent; when it ends, the entry first handed out ends too.
    b.attachedAgents.at(-1)?.succeed("finished under B");
    await seen.done;
    assert.equal(seen.status, "completed");
    assert.equal(seen.resultText(), "finished under B");
    assert.deepEqual([a.doneRuns, b.doneRuns], [[], [`${started.id} completed`]], "run by the server that finished it");
  });

  test("a server's own shutdown runs no CLAUDE_DISPATCH_ON_DONE for the jobs it kills", async () => {
    const { a } = world();
    a.jobs.start({ prompt: "cut short", cwd: "/w" }, "start");
    await settle();
    await a.jobs.shutdown();
    assert.deepEqual(a.doneRuns, []);
  });
});

describe("orphans: the work of a server that went (§15.8)", { timeout: 20_000 }, () => {
  test(
    "a job whose owner is gone is an orphan another server carries; one of a host it has " + "not got is not",
    async () => {
      const { a, b, alive } = world();
      const local = a.jobs.start({ prompt: "here", cwd: "/w" }, "start");
      const elsewhere = a.jobs.start({ prompt: "there", cwd: "/w" }, "start");
      await settle();
      a.store.write({ ...(a.store.read(elsewhere.id) as JobRecord), host: "box" });
      alive.delete(OWNER_A.pid);
      const isCarried = (owner: { pid: number }) => owner.pid === OWNER_B.pid;
      assert.equal(b.jobs.isIdle(), true);
      assert.deepEqual(
        b.jobs.findOrphans(isCarried).map((record) => record.id),
        [local.id],
        "the job on host box waits for a server that has box",
      );
      assert.equal(await b.jobs.carryOrphans(isCarried), 1);
      assert.equal(b.jobs.get(local.id)?.status, "running");
      assert.equal(b.store.read(local.id)?.owner.pid, OWNER_B.pid, "taken over");
      assert.deepEqual(b.jobs.findOrphans(isCarried), [], "carried now");
      assert.equal(b.jobs.isIdle(), false, "a job runs here");
    },
  );
});
