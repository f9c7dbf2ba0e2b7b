/**
 * Records name their runtime and host (PROTOCOL.md §15.2): every new record
 * says "claude" and "local"; records of earlier versions, which name neither,
 * still load and are taken over; a job of a runtime this server does not have
 * is left alone.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import { JobRegistry } from "../src/jobs/registry.js";
import { StateStore } from "../src/store/state-store.js";
import { type JobRecord } from "../src/store/records.js";
import { Transcript } from "../src/core/transcript.js";
import { FakeAgent, FakeClock, FakeLauncher, RecordingLogger, settle } from "./helpers.js";
import { homeOnly } from "./host-fakes.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-names-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

function registry(store: StateStore): { jobs: JobRegistry; launcher: FakeLauncher; logger: RecordingLogger } {
  const launcher = new FakeLauncher();
  const logger = new RecordingLogger();
  const jobs = new JobRegistry({
    launch: launcher.launch,
    clock: new FakeClock(),
    newId: () => randomUUID(),
    logger,
    retentionMs: 3_600_000,
    maxFinishedJobs: 100,
    finishedTranscriptChars: 100_000,
    maxRunning: 10,
    ...homeOnly({}, { pid: 4321, start_time: "9" }),
    agents: { home: "claude", known: ["claude"] },
    attach: () => new FakeAgent({ prompt: "", cwd: "/" }),
    admit: async (spec) => spec,
    persistence: {
      // Only Claude Code is run here: another runtime's job is left to a process that has it (§15.3).
      store,
      owner: { pid: 4321, start_time: "9" },
      replayTranscript: () => new Transcript(100),
      maxBytes: 1024 ** 3,
      newMarker: () => "marker",
      isAlive: async () => false,
    },
  });
  return { jobs, launcher, logger };
}

function freshStore(name: string): StateStore {
  const store = new StateStore(path.join(scratch, name), { randomName: () => randomUUID() });
  store.open();
  return store;
}

/** A record as an earlier version wrote it: naming neither runtime nor host unless the test says. */
function queuedRecord(overrides: Partial<JobRecord> = {}): JobRecord {
  const old = {
    format: 1,
    id: randomUUID(),
    kind: "start",
    cwd: "/w",
    prompt_preview: "p",
    options: {},
    status: "queued",
    submitted_at: 1,
    owner: { pid: 999_999 },
    generation: 0,
  };
  return { ...old, ...overrides } as JobRecord;
}

test("a new job's record names its runtime and host", () => {
  const store = freshStore("new");
  const { jobs } = registry(store);
  const job = jobs.start({ prompt: "hello", cwd: "/w" }, "start");
  const record = store.read(job.id);
  assert.equal(record?.runtime, "claude");
  assert.equal(record?.host, "local");
});

test(
  "a record of an earlier version, naming neither, loads and is taken over as Claude Code on " + "this machine",
  async () => {
    const store = freshStore("old");
    const old = queuedRecord();
    store.create(old, "from an earlier version");
    const onDisk = JSON.parse(readFileSync(path.join(store.jobDir(old.id), "record.json"), "utf8")) as Record<
      string,
      unknown
    >;
    assert.equal(onDisk.runtime, undefined, "written as an earlier version writes it");
    assert.equal(store.read(old.id)?.runtime, "claude", "read as Claude Code");
    assert.equal(store.read(old.id)?.host, "local", "on this machine");
    const { jobs, launcher } = registry(store);
    await jobs.restore(store.loadAll().records);
    await settle();
    assert.equal(jobs.get(old.id)?.status, "running", "adopted and started");
    assert.equal(launcher.agents.length, 1);
    assert.equal(store.read(old.id)?.runtime, "claude", "and named from then on");
  },
);

test("a job of a runtime this server does not have is left alone, with a warning", async () => {
  const store = freshStore("other");
  const other = queuedRecord({ runtime: "codex" });
  store.create(other, "for another runtime");
  const { jobs, launcher, logger } = registry(store);
  await jobs.restore(store.loadAll().records);
  await settle();
  assert.equal(jobs.get(other.id), undefined);
  assert.equal(launcher.agents.length, 0);
  assert.deepEqual(store.read(other.id), { ...other, host: "local" }, "its record is untouched");
  assert.ok(
    logger.lines.some((line) => /runs on codex at local, which this server does not have/.test(line)),
    logger.lines.join("\n"),
  );
});

test("a record whose runtime or host is not a string is invalid", () => {
  const store = freshStore("invalid");
  const bad = queuedRecord();
  store.create({ ...bad, runtime: 7 as unknown as string }, "p");
  assert.equal(store.read(bad.id), undefined);
});
