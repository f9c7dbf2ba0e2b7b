/**
 * The state directory (PROTOCOL.md §15) and the job registry on top of it,
 * with fake agents and a fake clock: records, atomic writes, claims, taking
 * jobs over, retention on disk, and long results kept out of memory.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import type { AgentSpec, AgentToAttach } from "../src/agent/types.js";
import { DispatchError } from "../src/core/errors.js";
import { JobRegistry, type IsAlive } from "../src/jobs/registry.js";
import { ClaudeStream, interpretExit } from "../src/runtimes/claude/index.js";
import { parseStreamingMember } from "../src/runtimes/claude/json-stream.js";
import { LineReader } from "../src/core/lines.js";
import { readIndex } from "../src/store/finished-index.js";
import { StateStore } from "../src/store/state-store.js";
import { isJobId, type JobRecord } from "../src/store/records.js";
import { Transcript } from "../src/core/transcript.js";
import { FakeAgent, FakeClock, FakeLauncher, RecordingLogger, settle } from "./helpers.js";
import { homeOnly, tableOf } from "./host-fakes.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-state-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

let dirs = 0;
function freshStore(): StateStore {
  dirs += 1;
  const store = new StateStore(path.join(scratch, `s${dirs}`), { randomName: () => randomUUID() });
  store.open();
  return store;
}

const OWNER = { pid: 1000, start_time: "500" };
let ids = 0;
function nextId(): string {
  ids += 1;
  return `00000000-0000-4000-8000-${String(ids).padStart(12, "0")}`;
}

interface Harness {
  jobs: JobRegistry;
  /**
   * Takes over the records with this process table: who is alive, servers and agents alike (restore's own, by default).
   */
  restore(records: readonly JobRecord[], isAlive?: IsAlive): Promise<void>;
  launcher: FakeLauncher;
  attached: AgentToAttach[];
  attachedAgents: FakeAgent[];
  clock: FakeClock;
  store: StateStore;
}

function harness(
  store: StateStore,
  options: {
    maxRunning?: number;
    retentionMs?: number;
    maxBytes?: number;
    owner?: typeof OWNER;
    admit?: (spec: AgentSpec) => Promise<AgentSpec>;
    /** Runs inside each launch, as something else might act while the agent is being spawned. */
    onLaunch?: () => void;
    replays?: string[];
    /** What a lookup miss uses to take a job over (restore is given its own in most tests). */
    isAlive?: IsAlive;
    beforeRemove?: (id: string) => (() => void) | void;
  } = {},
): Harness {
  const clock = new FakeClock();
  const launcher = new FakeLauncher();
  const attached: AgentToAttach[] = [];
  const attachedAgents: FakeAgent[] = [];
  let alive = options.isAlive ?? nobodyAlive;
  const owner = options.owner ?? OWNER;
  const jobs = new JobRegistry({
    launch: (spec) => {
      options.onLaunch?.();
      return launcher.launch(spec);
    },
    clock,
    newId: nextId,
    logger: new RecordingLogger(),
    retentionMs: options.retentionMs ?? 7 * 24 * 3600 * 1000,
    maxFinishedJobs: 1000,
    finishedTranscriptChars: 1_000_000,
    maxRunning: options.maxRunning ?? 1000,
    ...homeOnly(
      tableOf((named) => alive(named)),
      owner,
    ),
    attach: (agent) => {
      attached.push(agent);
      const run = new FakeAgent({ prompt: "", cwd: "/" });
      attachedAgents.push(run);
      return run;
    },
    admit: options.admit ?? (async (spec) => spec),
    persistence: {
      store,
      owner,
      replayTranscript: (id) => {
        options.replays?.push(id);
        return new Transcript(1000);
      },
      maxBytes: options.maxBytes ?? 1024 ** 3,
      newMarker: () => "fake-marker",
      isAlive: (named) => alive(named),
      ...(options.beforeRemove ? { beforeRemove: options.beforeRemove } : {}),
    },
  });
  const restore = (records: readonly JobRecord[], isAlive?: IsAlive): Promise<void> => {
    if (isAlive) alive = isAlive;
    return jobs.restore(records);
  };
  return { jobs, restore, launcher, attached, attachedAgents, clock, store };
}

const nobodyAlive: IsAlive = async () => false;

/** What the agent reads as its prompt: the job's prompt.txt when durable (§15.2), never text handed over in memory. */
function promptOf(spec: AgentSpec): string {
  assert.equal(spec.prompt, "", "a durable job's prompt is not held in memory once on disk");
  assert.ok(spec.promptFile, "the agent reads its prompt from prompt.txt");
  return readFileSync(spec.promptFile, "utf8");
}

describe("StateStore", () => {
  test("a record is replaced atomically and no temporary file is left behind", () => {
    const store = freshStore();
    const record: JobRecord = {
      format: 1,
      runtime: "claude",
      host: "local",
      id: nextId(),
      kind: "start",
      cwd: "/w",
      prompt_preview: "hi",
      options: {},
      status: "queued",
      submitted_at: 1,
      owner: OWNER,
      generation: 0,
    };
    store.create(record, "hi there");
    store.write({ ...record, status: "running" });
    assert.equal(store.read(record.id)?.status, "running");
    assert.equal(store.readPrompt(record.id), "hi there");
    assert.deepEqual(readdirSync(store.jobDir(record.id)).sort(), ["prompt.txt", "record.json"]);
    if (process.platform !== "win32") {
      assert.equal(statSync(store.root).mode & 0o777, 0o700, "the state directory is private");
      assert.equal(statSync(store.file(record.id, "record.json")).mode & 0o777, 0o600);
    }
  });

  test("a torn temporary file, a garbage record and a record naming another job are ignored", () => {
    const store = freshStore();
    const good = nextId();
    store.create(
      {
        format: 1,
        runtime: "claude",
        host: "local",
        id: good,
        kind: "run",
        cwd: "/w",
        prompt_preview: "",
        options: {},
        status: "completed",
        submitted_at: 1,
        owner: OWNER,
        generation: 0,
      },
      "",
    );
    writeFileSync(`${store.file(good, "record.json")}.x1y2.tmp`, '{"format":1,"id":"');
    const garbage = nextId();
    mkdirSync(store.jobDir(garbage));
    writeFileSync(store.file(garbage, "record.json"), "{not json");
    const impostor = nextId();
    mkdirSync(store.jobDir(impostor));
    writeFileSync(store.file(impostor, "record.json"), JSON.stringify({ ...store.read(good), id: good }));
    mkdirSync(path.join(store.jobsDir, "not-a-job"));
    const { records, skipped } = store.loadAll();
    assert.deepEqual(
      records.map((record) => record.id),
      [good],
    );
    assert.deepEqual(skipped.map((entry) => entry.id).sort(), [garbage, impostor].sort());
  });

  test("only a UUID names a job folder", () => {
    const store = freshStore();
    assert.ok(isJobId("0f0f0f0f-1111-4222-8333-444455556666"));
    for (const bad of ["../etc", "0F0F0F0F-1111-4222-8333-444455556666/..", "", "a".repeat(36)]) {
      assert.equal(isJobId(bad), false, bad);
      assert.throws(() => store.jobDir(bad));
    }
  });

  test("a claim slot is taken exactly once, whole; a later slot only past holders that are gone", async () => {
    const store = freshStore();
    const id = nextId();
    mkdirSync(store.jobDir(id));
    assert.equal(store.claim(id, 1, 0, { pid: 11 }), true);
    assert.equal(store.claim(id, 1, 0, { pid: 12 }), false, "the second claimant loses");
    assert.deepEqual(store.claimHolder(id, 1, 0), { pid: 11 });
    assert.deepEqual(readdirSync(store.jobDir(id)), ["claim.1"], "no temporary file is left");
    const alive = new Set([11]);
    assert.equal(
      await store.claimJob(id, 1, { pid: 13 }, async (holder) => alive.has(holder.pid)),
      false,
      "its holder is alive",
    );
    assert.equal(
      await store.claimJob(id, 1, { pid: 13 }, async () => undefined),
      false,
      "a holder that cannot be told alive or gone keeps it",
    );
    const torn = nextId();
    mkdirSync(store.jobDir(torn));
    writeFileSync(path.join(store.jobDir(torn), "claim.1"), "");
    assert.equal(
      await store.claimJob(torn, 1, { pid: 14 }, async () => false),
      false,
      "an empty claim (no hard links, a crash mid-write) is respected, not taken over",
    );
    alive.clear();
    const both = await Promise.all(
      [4, 5].map((pid) =>
        store.claimJob(id, 1, { pid }, async (holder) => alive.has(holder.pid) || holder.pid === 4 || holder.pid === 5),
      ),
    );
    assert.deepEqual(both.sort(), [false, true], "of two claimants past a dead holder, one gets the job");
    assert.ok([4, 5].includes(store.claimHolder(id, 1, 1)?.pid ?? 0));
  });

  test("the head of a result is read without reading the whole file, multi-byte text included", () => {
    const store = freshStore();
    const id = nextId();
    mkdirSync(store.jobDir(id));
    const text = `${"é😀".repeat(1000)}end`;
    store.writeResult(id, text);
    assert.equal(store.readResultHead(id, 7), text.slice(0, 7));
    assert.equal(store.readResultHead(id, 10_000_000), text, "a cap beyond the file reads it whole");
  });
});

describe("the job registry with a state directory", () => {
  test("every change is on disk before the call returns; a long result leaves memory for result.txt", async () => {
    const store = freshStore();
    const { jobs, launcher } = harness(store, { maxRunning: 1 });
    const first = jobs.start({ prompt: "first\nline two", cwd: "/w", options: { model: "sonnet" } }, "start");
    const second = jobs.start({ prompt: "second", cwd: "/w" }, "run", 60_000);
    assert.equal(store.read(first.id)?.status, "running");
    assert.equal(store.read(second.id)?.status, "queued");
    assert.equal(store.read(second.id)?.timeout_ms, 60_000);
    assert.equal(store.readPrompt(first.id), "first\nline two");
    await settle();
    assert.deepEqual(store.read(first.id)?.agent, { pid: 4242, start_time: "fake-start", tree_marker: "fake-marker" });

    const long = "r".repeat(10_000);
    launcher.last.succeed(long);
    await settle();
    const record = store.read(first.id);
    assert.equal(record?.status, "completed");
    assert.equal(record?.outcome?.result_chars, 10_000);
    assert.equal(record?.turns, 3);
    assert.equal(store.readResult(first.id), long);
    assert.equal(jobs.get(first.id)?.outcome?.result?.text, undefined, "not held in memory");
    assert.equal(jobs.get(first.id)?.resultText(), long);
    assert.deepEqual(jobs.get(first.id)?.resultHead(5), { text: "rrrrr", chars: 10_000 });
    assert.equal(store.read(second.id)?.status, "running", "the queued job started and says so");
  });

  test("a new registry takes over a dead server's jobs: finished, queued in order, running by attaching", async () => {
    const store = freshStore();
    const old = harness(store, { maxRunning: 1, owner: { pid: 77, start_time: "1" } });
    const done = old.jobs.start({ prompt: "done", cwd: "/w" }, "start");
    old.launcher.last.succeed("the old answer");
    await settle();
    const running = old.jobs.start({ prompt: "running", cwd: "/w" }, "start");
    const queuedA = old.jobs.start({ prompt: "queued a", cwd: "/w" }, "start");
    const queuedB = old.jobs.start(
      { prompt: "queued b", cwd: "/w", resumeSessionId: "8f01635f-202a-449c-ab8a-05f75520788e" },
      "start",
    );
    await settle();
    // The old server dies here: nothing more happens to its registry.

    const fresh = harness(store, { maxRunning: 1 });
    await fresh.restore(store.loadAll().records, nobodyAlive);
    assert.equal(fresh.jobs.get(done.id)?.status, "completed");
    assert.equal(fresh.jobs.get(done.id)?.resultText(), "the old answer");
    assert.deepEqual(
      fresh.attached.map((agent) => [agent.pid, agent.startTime, agent.marker]),
      [[4242, "fake-start", "fake-marker"]],
    );
    assert.equal(fresh.attached[0]?.output.stdoutPath, store.file(running.id, "stdout.jsonl"));
    assert.equal(fresh.jobs.get(running.id)?.status, "running");
    assert.equal(fresh.launcher.agents.length, 0, "the limit holds: the adopted agent fills the one slot");
    assert.equal(fresh.jobs.get(queuedB.id)?.queuePosition(), 2);
    assert.equal(store.read(running.id)?.generation, 1);
    assert.deepEqual(store.read(running.id)?.owner, OWNER);

    fresh.attachedAgents[0]?.succeed("followed to the end");
    await settle();
    assert.equal(fresh.jobs.get(running.id)?.status, "completed");
    assert.equal(promptOf(fresh.launcher.last.spec), "queued a", "FIFO across the restart, with the whole prompt");
    fresh.launcher.last.succeed();
    await settle();
    assert.equal(fresh.launcher.last.spec.resumeSessionId, "8f01635f-202a-449c-ab8a-05f75520788e");
    assert.equal(fresh.jobs.get(queuedA.id)?.status, "completed");
  });

  test("jobs of a live server are left to it, and two registries never both take a job", async () => {
    const store = freshStore();
    const old = harness(store, { owner: { pid: 77, start_time: "1" } });
    const job = old.jobs.start({ prompt: "mine", cwd: "/w" }, "start");
    await settle();
    const polite = harness(store);
    await polite.restore(store.loadAll().records, async (owner) => owner.pid === 77);
    assert.equal(polite.jobs.get(job.id), undefined, "its owner is alive");

    const records = store.loadAll().records;
    const a = harness(store, { owner: { pid: 5, start_time: "5" } });
    const b = harness(store, { owner: { pid: 6, start_time: "6" } });
    const onlyTheyLive: IsAlive = async (owner) => owner.pid === 5 || owner.pid === 6;
    await Promise.all([a.restore(records, onlyTheyLive), b.restore(records, onlyTheyLive)]);
    assert.equal(a.attached.length + b.attached.length, 1, "exactly one of them follows the agent");
    const late = harness(store, { owner: { pid: 8, start_time: "8" } });
    await late.restore(records, async () => false);
    assert.equal(late.attached.length, 0, "its winner rewrote the record: a takeover from the old read is refused");

    const other = freshStore();
    const gone = harness(other, { owner: { pid: 77, start_time: "1" } });
    const orphan = gone.jobs.start({ prompt: "claimed by a server that then died", cwd: "/w" }, "start");
    await settle();
    assert.ok(
      other.claim(orphan.id, 1, 0, { pid: 99, start_time: "9" }),
      "a claimer that died before rewriting the record",
    );
    const next = harness(other, { owner: { pid: 8, start_time: "8" } });
    await next.restore(other.loadAll().records, async () => false);
    assert.equal(next.attached.length, 1, "its stale claim is passed: the next slot is taken");
    assert.deepEqual(other.claimHolder(orphan.id, 1, 1), { pid: 8, start_time: "8" });
    const again = harness(other, { owner: { pid: 9, start_time: "9" } });
    await again.restore(other.loadAll().records, async () => false);
    assert.deepEqual(
      readdirSync(other.jobDir(orphan.id)).filter((name) => name.startsWith("claim.")),
      ["claim.2"],
      "older claims are removed at each takeover",
    );
  });

  test(
    "a result.txt that could not be written leaves no length behind: after a restart there is no result, not " +
      "an empty one",
    async () => {
      class NoResults extends StateStore {
        override writeResult(): void {
          throw Object.assign(new Error("ENOSPC"), { code: "ENOSPC" });
        }
      }
      const store = new NoResults(path.join(scratch, `noresult-${nextId()}`), { randomName: () => randomUUID() });
      store.open();
      const { jobs, launcher } = harness(store);
      const job = jobs.start({ prompt: "p", cwd: "/w" }, "start");
      launcher.last.succeed("x".repeat(10_000));
      await settle();
      assert.equal(jobs.get(job.id)?.resultText(), "x".repeat(10_000), "kept in memory while this server lives");
      assert.equal(store.read(job.id)?.outcome?.result_chars, undefined);
      const fresh = harness(store);
      await fresh.restore(store.loadAll().records, nobodyAlive);
      assert.equal(fresh.jobs.get(job.id)?.resultText(), undefined);
    },
  );

  test("a queued job whose prompt file is gone is not started with an empty prompt", async () => {
    const store = freshStore();
    const old = harness(store, { maxRunning: 1, owner: { pid: 77, start_time: "1" } });
    old.jobs.start({ prompt: "blocker", cwd: "/w" }, "start");
    const queued = old.jobs.start({ prompt: "precious", cwd: "/w" }, "start");
    rmSync(store.file(queued.id, "prompt.txt"));
    const fresh = harness(store, { maxRunning: 1 });
    await fresh.restore(store.loadAll().records, nobodyAlive);
    const outcome = fresh.jobs.get(queued.id)?.outcome;
    assert.equal(fresh.jobs.get(queued.id)?.status, "failed");
    assert.equal(outcome?.ok === false ? outcome.code : "ok", "STATE_ERROR");
    assert.equal(fresh.launcher.agents.length, 0);
  });

  test("a queued job taken over is checked against today's policy; one it breaks is refused, not started", async () => {
    const store = freshStore();
    const old = harness(store, { maxRunning: 1, owner: { pid: 77, start_time: "1" } });
    old.jobs.start({ prompt: "blocker", cwd: "/w" }, "start");
    const risky = old.jobs.start(
      { prompt: "risky", cwd: "/w", options: { permissionMode: "bypassPermissions" } },
      "start",
    );
    const fine = old.jobs.start({ prompt: "fine", cwd: "/w" }, "start");
    const fresh = harness(store, {
      maxRunning: 2,
      admit: async (spec) => {
        if (spec.options?.permissionMode === "bypassPermissions")
          throw new DispatchError("POLICY_DENIED", "bypassPermissions is not allowed here");
        return { ...spec, cwd: "/real/w" };
      },
    });
    await fresh.restore(store.loadAll().records, nobodyAlive);
    const outcome = fresh.jobs.get(risky.id)?.outcome;
    assert.equal(outcome?.ok === false ? outcome.code : "ok", "POLICY_DENIED");
    assert.match(outcome?.ok === false ? outcome.detail : "", /not started after the restart/);
    assert.deepEqual(
      fresh.launcher.agents.map((agent) => [promptOf(agent.spec), agent.spec.cwd]),
      [["fine", "/real/w"]],
      "the admitted job runs where the check resolved it",
    );
    assert.equal(fresh.jobs.get(fine.id)?.status, "running");
  });

  test("a queued job's timeout counts from submission across the restart", async () => {
    const store = freshStore();
    const old = harness(store, { maxRunning: 1, owner: { pid: 77, start_time: "1" } });
    old.jobs.start({ prompt: "blocker", cwd: "/w" }, "start");
    const run = old.jobs.start({ prompt: "waits", cwd: "/w" }, "run", 5_000);
    const fresh = harness(store, { maxRunning: 1 });
    await fresh.clock.advance(6_000);
    await fresh.restore(store.loadAll().records, nobodyAlive);
    await fresh.clock.advance(0);
    const outcome = fresh.jobs.get(run.id)?.outcome;
    assert.equal(fresh.jobs.get(run.id)?.status, "failed");
    assert.equal(outcome?.ok === false ? outcome.code : "ok", "TIMEOUT");
    assert.equal(fresh.launcher.agents.length, 0, "it is not started only to be killed");
  });

  test(
    "a run whose agent finished while no server ran is completed from its output, even " + "past its timeout",
    async () => {
      const store = freshStore();
      const old = harness(store, { owner: { pid: 77, start_time: "1" } });
      const run = old.jobs.start({ prompt: "quick", cwd: "/w" }, "run", 5_000);
      await settle();
      const fresh = harness(store);
      await fresh.clock.advance(3_600_000);
      await fresh.restore(store.loadAll().records, nobodyAlive);
      await fresh.clock.advance(0);
      fresh.attachedAgents[0]?.succeed("answered in time");
      await settle();
      assert.equal(fresh.jobs.get(run.id)?.status, "completed");
      assert.equal(fresh.jobs.get(run.id)?.resultText(), "answered in time");
    },
  );

  test("a kill under way when the server stopped is on disk, and the next server carries it out", async () => {
    const store = freshStore();
    const old = harness(store, { owner: { pid: 77, start_time: "1" } });
    const job = old.jobs.start({ prompt: "stubborn", cwd: "/w" }, "start");
    await settle();
    old.launcher.last.exitsOnKill = false;
    void old.jobs.kill(job.id, "claude_kill");
    await settle();
    assert.equal(store.read(job.id)?.kill_reason, "claude_kill", "recorded before any signal");
    const fresh = harness(store);
    await fresh.restore(store.loadAll().records, async (named) => named.pid === 4242);
    await settle();
    assert.equal(fresh.attachedAgents[0]?.killCalls, 1, "the adopted agent is killed at once");
    assert.equal(fresh.jobs.get(job.id)?.status, "killed");
    assert.equal(store.read(job.id)?.status, "killed");
  });

  test(
    "50 concurrent starts with a limit of 3: the limit holds, on disk too, and jobs start in " + "submission order",
    async () => {
      const store = freshStore();
      const { jobs, launcher } = harness(store, { maxRunning: 3 });
      const started = Array.from({ length: 50 }, (_, i) => jobs.start({ prompt: `job ${i}`, cwd: "/w" }, "start"));
      const statuses = (): string[] => started.map((job) => store.read(job.id)?.status ?? "missing");
      assert.deepEqual(
        [statuses().filter((s) => s === "running").length, statuses().filter((s) => s === "queued").length],
        [3, 47],
      );
      const killed = started[10] as (typeof started)[number];
      await jobs.kill(killed.id, "claude_kill");
      assert.equal(store.read(killed.id)?.status, "killed");
      const finished = new Set<FakeAgent>();
      while (launcher.agents.some((agent) => !finished.has(agent))) {
        const running = launcher.agents.filter((agent) => !finished.has(agent));
        assert.ok(running.length <= 3, "never more than the limit");
        for (const agent of running) {
          finished.add(agent);
          agent.succeed();
        }
        await settle();
      }
      assert.deepEqual(
        launcher.agents.map((agent) => promptOf(agent.spec)),
        started.filter((job) => job !== killed).map((job) => `job ${started.indexOf(job)}`),
        "FIFO, and the killed job never started",
      );
      assert.equal(statuses().filter((s) => s === "completed").length, 49);
    },
  );

  test("a kill asked for from the command line drops a queued job when its turn comes", async () => {
    const store = freshStore();
    const { jobs, launcher } = harness(store, { maxRunning: 1 });
    jobs.start({ prompt: "blocker", cwd: "/w" }, "start");
    const queued = jobs.start({ prompt: "unwanted", cwd: "/w" }, "start");
    store.requestKill(queued.id, "cli", 0);
    launcher.last.succeed();
    await settle();
    assert.equal(jobs.get(queued.id)?.status, "killed");
    assert.equal(jobs.get(queued.id)?.killReason, "cli");
    assert.equal(launcher.agents.length, 1, "it never started");
    assert.equal(store.read(queued.id)?.kill_reason, "cli");
  });

  test(
    "with retention 0 the waiting call still reads a long result; the job is forgotten at " + "the next lookup",
    async () => {
      const store = freshStore();
      const { jobs, launcher } = harness(store, { retentionMs: 0 });
      const job = jobs.start({ prompt: "long answer", cwd: "/w" }, "run");
      const long = "z".repeat(50_000);
      launcher.last.succeed(long);
      await job.done;
      assert.equal(job.resultText(), long, "the waiter reads it from result.txt");
      assert.equal(jobs.get(job.id), undefined);
      assert.ok(!existsSync(store.jobDir(job.id)));
    },
  );

  test("finished jobs past retention, or beyond the disk cap, are deleted from disk, oldest first", async () => {
    const store = freshStore();
    const { jobs, launcher, clock } = harness(store, { retentionMs: 60_000, maxBytes: 3000 });
    const made: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      made.push(jobs.start({ prompt: `job ${i}`, cwd: "/w" }, "start").id);
      launcher.last.succeed("x".repeat(900));
      await settle();
    }
    assert.ok(
      existsSync(store.jobDir(made[2] as string)),
      "the job that just finished is kept until its waiters have read it",
    );
    jobs.list();
    assert.ok(!existsSync(store.jobDir(made[0] as string)), "the oldest went to stay under the cap");
    assert.ok(existsSync(store.jobDir(made[2] as string)));
    await clock.advance(60_000);
    jobs.list();
    assert.deepEqual(readdirSync(store.jobsDir), [], "retention deleted the rest");

    const later = harness(store, { retentionMs: 60_000, owner: { pid: 77, start_time: "1" } });
    const stale = later.jobs.start({ prompt: "old", cwd: "/w" }, "start");
    later.launcher.last.succeed();
    await settle();
    const unrecorded = later.jobs.start({ prompt: "its pid never reached the record", cwd: "/w" }, "start");
    await settle();
    const record = store.read(unrecorded.id) as JobRecord;
    delete record.agent;
    store.write(record);
    const restarted = harness(store, { retentionMs: 60_000 });
    await restarted.clock.advance(120_000);
    await restarted.restore(store.loadAll().records, nobodyAlive);
    assert.equal(restarted.jobs.get(unrecorded.id)?.status, "lost", "it ends during the takeover");
    assert.equal(restarted.jobs.get(stale.id), undefined);
    assert.ok(
      !existsSync(store.jobDir(stale.id)),
      "a restart prunes what expired while no server ran, even behind a job that ended during the takeover",
    );
  });
});

describe("reading long lines back from the output file", () => {
  /** A source that hands out at most `step` bytes per read, so every boundary is crossed. */
  const reader = (bytes: Buffer, step: number) => (offset: number, length: number) =>
    bytes.subarray(offset, offset + Math.min(length, step));

  test("the streamed member equals what JSON.parse gives, whatever the chunk boundaries", () => {
    const text = 'a "quoted" \\ back\nslash \u00e9 \ud83d\ude00 \u2028 tab\t end';
    const event = {
      type: "result",
      nested: { result: "not this one", list: [1, "}", { a: "\\" }] },
      result: text,
      after: [true, null, 1.5],
    };
    const bytes = Buffer.from(JSON.stringify(event));
    for (const step of [1, 2, 3, 5, 7, 64]) {
      const pieces: string[] = [];
      const parsed = parseStreamingMember(reader(bytes, step), 0, bytes.length, "result", (piece) =>
        pieces.push(piece),
      );
      assert.equal(pieces.join(""), text, `step ${step}`);
      assert.equal(parsed?.chars, text.length);
      assert.deepEqual(parsed?.rest, { ...event, result: "" });
      for (const piece of pieces)
        assert.ok(Buffer.from(piece).toString() === piece, "each piece is valid UTF-16 on its own");
    }
  });

  test("no such member, or not one JSON object: said so", () => {
    const plain = Buffer.from('{"type":"result","is_error":true}');
    assert.deepEqual(
      parseStreamingMember(reader(plain, 4), 0, plain.length, "result", () => undefined),
      { rest: { type: "result", is_error: true }, chars: undefined },
    );
    for (const bad of ['{"result":"unterminated', "[1,2]", '{"a":1}}', "nope"]) {
      const bytes = Buffer.from(bad);
      assert.equal(
        parseStreamingMember(reader(bytes, 3), 0, bytes.length, "result", () => undefined),
        undefined,
        bad,
      );
    }
  });

  test("a long result whose text cannot be written (full disk) is a STATE_ERROR, never half a result", () => {
    const line = Buffer.from(
      `${JSON.stringify({ type: "result", is_error: false, result: "r".repeat(400_000), session_id: "s" })}\n`,
    );
    const stream = new ClaudeStream({
      maxLineBytes: 1 << 24,
      transcriptChars: 1000,
      onOverflow: () => assert.fail("not oversized"),
      source: {
        read: (offset, length) => line.subarray(offset, offset + length),
        createResult: () => ({
          write: () => {
            throw Object.assign(new Error("ENOSPC"), { code: "ENOSPC" });
          },
          close: () => undefined,
        }),
      },
    });
    stream.push(line);
    stream.end();
    const outcome = interpretExit({ exitCode: 0, signal: null, stderrTail: "" }, stream, "claude");
    assert.equal(outcome.ok ? "ok" : outcome.code, "STATE_ERROR");
  });

  test("turns are counted per assistant message id, however many there are, with bounded memory", () => {
    const stream = new ClaudeStream({ maxLineBytes: 1 << 20, transcriptChars: 1000, onOverflow: () => undefined });
    for (let i = 0; i < 3000; i += 1) {
      for (const block of ["a", "b"]) {
        stream.push(
          Buffer.from(
            `${JSON.stringify({ type: "assistant", message: { id: `msg_${i}`, content: [{ type: "text", text: block }] } })}\n`,
          ),
        );
      }
    }
    assert.equal(stream.live().turns, 3000);
  });

  test("the line reader reports a long line's place instead of holding it", () => {
    const lines: string[] = [];
    const deferred: Array<[string, number, number]> = [];
    const input = Buffer.from(`short\n${"L".repeat(50)}\nafter\n`);
    const splitter = new LineReader(
      1000,
      (line) => lines.push(line),
      () => assert.fail("not oversized"),
      {
        overBytes: 20,
        headBytes: 4,
        onDeferredLine: (head, offset, length) => deferred.push([head.toString(), offset, length]),
      },
    );
    for (let i = 0; i < input.length; i += 7) splitter.push(input.subarray(i, i + 7));
    splitter.finish();
    assert.deepEqual(lines, ["short", "after"]);
    assert.deepEqual(deferred, [["LLLL", 6, 50]]);
  });
});

describe("the takeover, against what a second review found", () => {
  test("a CLI kill that lands while a queued job is being spawned is not lost: the job is killed", async () => {
    const store = freshStore();
    let target: string | undefined;
    const { jobs, launcher } = harness(store, {
      maxRunning: 1,
      onLaunch: () => target && store.requestKill(target, "cli", 0),
    });
    jobs.start({ prompt: "blocker", cwd: "/w" }, "start");
    const queued = jobs.start({ prompt: "unwanted", cwd: "/w" }, "start");
    target = queued.id;
    launcher.last.succeed();
    await settle();
    assert.equal(launcher.agents.at(-1)?.killCalls, 1, "the marker written during the spawn is seen right after it");
    assert.equal(jobs.get(queued.id)?.status, "killed");
    assert.equal(jobs.get(queued.id)?.killReason, "cli");
  });

  test("a finish after a restart does not rebuild every restored transcript to measure it", async () => {
    const store = freshStore();
    const old = harness(store);
    for (let i = 0; i < 5; i += 1) {
      old.jobs.start({ prompt: `p${i}`, cwd: "/w" }, "start");
      old.launcher.last.succeed();
      await settle();
    }
    const replays: string[] = [];
    const fresh = harness(store, { replays });
    await fresh.restore(store.loadAll().records, nobodyAlive);
    fresh.jobs.start({ prompt: "new", cwd: "/w" }, "start");
    fresh.launcher.last.succeed();
    await settle();
    assert.deepEqual(replays, []);
  });

  test("a record whose agent pid could address a group, everything or init is not trusted", () => {
    const store = freshStore();
    for (const agent of [null, { pid: 0 }, { pid: -1 }, { pid: 1 }, { pid: "42" }, { pid: 42, pgid: 0 }]) {
      const id = nextId();
      mkdirSync(store.jobDir(id));
      const record = {
        format: 1,
        runtime: "claude",
        host: "local",
        id,
        kind: "start",
        cwd: "/w",
        prompt_preview: "",
        options: {},
        status: "running",
        submitted_at: 1,
        owner: OWNER,
        generation: 0,
        agent,
      };
      writeFileSync(store.file(id, "record.json"), JSON.stringify(record));
    }
    const { records, skipped } = store.loadAll();
    assert.equal(records.length, 0);
    assert.equal(skipped.length, 6);
  });

  test("a state directory removed while the server runs is made again for the next job", () => {
    const store = freshStore();
    const { jobs } = harness(store);
    rmSync(store.root, { recursive: true, force: true });
    const job = jobs.start({ prompt: "after the removal", cwd: "/w" }, "start");
    assert.equal(store.read(job.id)?.status, "running");
  });

  test("a job another server took over after the directory was read is left to it", async () => {
    const store = freshStore();
    const old = harness(store, { maxRunning: 1, owner: { pid: 77, start_time: "1" } });
    old.jobs.start({ prompt: "blocker", cwd: "/w" }, "start");
    const queued = old.jobs.start({ prompt: "only once", cwd: "/w" }, "start");
    await settle();
    const stale = store.loadAll().records;
    const first = harness(store, { maxRunning: 2, owner: { pid: 5, start_time: "5" } });
    await first.restore(store.loadAll().records, async (named) => named.pid === 5);
    assert.equal(first.jobs.get(queued.id)?.status, "running");
    // Server 5 dies; a server that read the directory before 5 took over still holds the old records.
    const late = harness(store, { maxRunning: 2, owner: { pid: 6, start_time: "6" } });
    await late.restore(stale, async (named) => named.pid === 6);
    assert.equal(late.jobs.get(queued.id), undefined, "its generation moved on: not taken over from a stale read");
    assert.equal(late.launcher.agents.length, 0, "the queued job does not run twice");
  });

  test("a queued job older than a running one does not push the takeover past the limit", async () => {
    const store = freshStore();
    const x = harness(store, { maxRunning: 1, owner: { pid: 70, start_time: "1" } });
    x.jobs.start({ prompt: "x running", cwd: "/w" }, "start");
    const queuedX = x.jobs.start({ prompt: "x queued", cwd: "/w" }, "start");
    await x.clock.advance(10);
    const y = harness(store, { maxRunning: 1, owner: { pid: 71, start_time: "1" } });
    await y.clock.advance(20);
    const runningY = y.jobs.start({ prompt: "y running", cwd: "/w" }, "start");
    await settle();
    // Two running jobs are two agents (the fakes all report one identity): a
    // record naming another job's agent is not adopted.
    store.write({
      ...(store.read(runningY.id) as JobRecord),
      agent: { pid: 4243, start_time: "y-start", tree_marker: "y-marker" },
    });
    const fresh = harness(store, { maxRunning: 2 });
    await fresh.restore(store.loadAll().records, async (named) => named.pid === 4242 || named.pid === 4243);
    assert.equal(fresh.attached.length, 2, "both running agents are followed");
    assert.equal(fresh.jobs.get(runningY.id)?.status, "running");
    assert.equal(fresh.jobs.get(queuedX.id)?.status, "queued", "no slot is left for it");
    assert.equal(fresh.launcher.agents.length, 0);
  });

  test("a server that is a container's init (pid 1) owns records like any other", () => {
    const store = freshStore();
    const id = nextId();
    store.create(
      {
        format: 1,
        runtime: "claude",
        host: "local",
        id,
        kind: "start",
        cwd: "/w",
        prompt_preview: "",
        options: {},
        status: "queued",
        submitted_at: 1,
        owner: { pid: 1 },
        generation: 0,
      },
      "p",
    );
    assert.deepEqual(
      store.loadAll().records.map((record) => record.id),
      [id],
    );
  });

  test("a takeover never runs more agents than the limit, even when a job ends during it", async () => {
    const store = freshStore();
    const old = harness(store, { maxRunning: 3, owner: { pid: 77, start_time: "1" } });
    const a = old.jobs.start({ prompt: "a", cwd: "/w" }, "start");
    const b = old.jobs.start({ prompt: "b", cwd: "/w" }, "start");
    const c = old.jobs.start({ prompt: "c", cwd: "/w" }, "start");
    await settle();
    // a was still queued, b lost its pid, c runs on: in submission order a, b, c.
    const recordA = store.read(a.id) as JobRecord;
    delete recordA.agent;
    delete recordA.started_at;
    store.write({ ...recordA, status: "queued" });
    const recordB = store.read(b.id) as JobRecord;
    delete recordB.agent;
    store.write(recordB);
    const fresh = harness(store, { maxRunning: 1 });
    await fresh.restore(store.loadAll().records, async (named) => named.pid === 4242);
    await settle();
    assert.equal(fresh.jobs.get(b.id)?.status, "lost");
    assert.equal(fresh.jobs.get(c.id)?.status, "running");
    assert.equal(fresh.jobs.get(a.id)?.status, "queued", "b's slot went to c, counted first, not to a");
    assert.equal(fresh.launcher.agents.length, 0);
  });

  test(
    "a kill that cannot tell the adopted agent (no process table) signals nothing, fails, and leaves " +
      "the job running",
    async () => {
      const store = freshStore();
      const old = harness(store, { owner: { pid: 77, start_time: "1" } });
      const job = old.jobs.start({ prompt: "p", cwd: "/w" }, "start");
      await settle();
      const fresh = harness(store);
      await fresh.restore(store.loadAll().records, async (named) => named.pid === 4242);
      const agent = fresh.attachedAgents[0] as FakeAgent;
      agent.kill = async () => ({ survivors: [4242], undetermined: true as const });
      await assert.rejects(fresh.jobs.kill(job.id, "claude_kill"), /KILL_FAILED|not signalled/);
      assert.equal(fresh.jobs.get(job.id)?.status, "running");
      assert.equal(fresh.jobs.get(job.id)?.killReason, undefined, "no kill happened, so none is recorded");
      assert.equal(store.read(job.id)?.kill_reason, undefined);
      agent.succeed("it finished after all");
      await settle();
      assert.equal(fresh.jobs.get(job.id)?.status, "completed");
    },
  );

  test(
    "when the record cannot say running before the spawn, the agent is not spawned: STATE_ERROR, never a job that " +
      "could run twice",
    async () => {
      class FullDisk extends StateStore {
        full = false;
        override write(record: JobRecord): number | undefined {
          if (this.full) throw Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" });
          return super.write(record);
        }
      }
      const store = new FullDisk(path.join(scratch, `full-${nextId()}`), { randomName: () => randomUUID() });
      store.open();
      const { jobs, launcher } = harness(store, { maxRunning: 1 });
      jobs.start({ prompt: "blocker", cwd: "/w" }, "start");
      const queued = jobs.start({ prompt: "waits", cwd: "/w" }, "start");
      store.full = true;
      launcher.last.succeed();
      await settle();
      const outcome = jobs.get(queued.id)?.outcome;
      assert.equal(outcome?.ok === false ? outcome.code : "ok", "STATE_ERROR");
      assert.equal(launcher.agents.length, 1, "the queued job's agent was never spawned");
      assert.equal(store.read(queued.id)?.status, "queued", "on disk it is still queued, and nothing runs for it");
    },
  );

  test("a finished job's folder is measured once: the index line and the disk cap share the figure", async () => {
    class CountingStore extends StateStore {
      readonly measured: string[] = [];
      override size(id: string): number {
        this.measured.push(id);
        return super.size(id);
      }
    }
    const store = new CountingStore(path.join(scratch, `count-${nextId()}`), { randomName: () => randomUUID() });
    store.open();
    const { jobs, launcher } = harness(store);
    const job = jobs.start({ prompt: "measure me", cwd: "/w" }, "start");
    launcher.last.succeed("done");
    await settle();
    assert.equal(jobs.get(job.id)?.status, "completed");
    assert.deepEqual(store.measured, [job.id]);
    const indexed = readIndex(store.root).get(job.id);
    assert.ok(indexed && indexed.bytes > 0, "the index has the folder's size");
  });
});

describe("retention and what is about to be removed (§19.1)", () => {
  test("a job whose removal is refused stays on disk; a hold taken for a removal that fails is undone", async () => {
    const store = freshStore();
    // The folder cannot be removed: as a busy mount or a permission would refuse it.
    const stuck = Object.assign(Object.create(store) as StateStore, {
      remove: (): void => {
        throw new Error("EBUSY: resource busy");
      },
    });
    const undone: string[] = [];
    let refuse = true;
    const { jobs, launcher, clock } = harness(stuck, {
      retentionMs: 60_000,
      beforeRemove: (id) => {
        if (refuse) throw new Error("a merge or discard of its worktree is under way");
        return () => undone.push(id);
      },
    });
    const first = jobs.start({ prompt: "held", cwd: "/w" }, "start").id;
    launcher.last.succeed();
    await settle();
    await clock.advance(60_000);
    jobs.list();
    assert.ok(existsSync(store.jobDir(first)), "a refused removal leaves the job's folder");
    assert.deepEqual(undone, []);
    refuse = false;
    const second = jobs.start({ prompt: "not removable", cwd: "/w" }, "start").id;
    launcher.last.succeed();
    await settle();
    await clock.advance(60_000);
    jobs.list();
    assert.ok(existsSync(store.jobDir(second)));
    assert.deepEqual(undone, [second], "the hold taken for the removal is undone when the removal fails");
  });
});
