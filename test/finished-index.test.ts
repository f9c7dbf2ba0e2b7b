/**
 * Startup reads only what it must (PROTOCOL.md §15.5): the index of finished
 * jobs lets a starting server read the records of unfinished jobs alone;
 * finished ones are counted for retention from the index and read when asked for.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { JobRegistry } from "../src/jobs/registry.js";
import { StateStore } from "../src/store/state-store.js";
import { type JobRecord } from "../src/store/records.js";
import { Transcript } from "../src/core/transcript.js";
import { FakeAgent, FakeClock, FakeLauncher, RecordingLogger } from "./helpers.js";
import { homeOnly } from "./host-fakes.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-index-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

let dirs = 0;
function freshStore(): StateStore {
  dirs += 1;
  const store = new StateStore(path.join(scratch, `s${dirs}`), {
    uid: process.getuid?.(),
    randomName: () => randomUUID(),
  });
  store.open();
  return store;
}

let ids = 0;
function nextId(): string {
  ids += 1;
  return `00000000-0000-4000-9000-${String(ids).padStart(12, "0")}`;
}

const HOUR = 3_600_000;
/** FakeClock's start. */
const NOW = 1_000_000;

function finishedRecord(overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    format: 1,
    runtime: "claude",
    host: "local",
    id: nextId(),
    kind: "start",
    cwd: "/w",
    prompt_preview: "finished earlier",
    options: {},
    status: "completed",
    submitted_at: NOW - 2 * HOUR,
    started_at: NOW - 2 * HOUR,
    finished_at: NOW - HOUR,
    owner: { pid: 77, start_time: "1" },
    generation: 0,
    outcome: { ok: true, result: { sessionId: "8f01635f-202a-449c-ab8a-05f75520788e", numTurns: 2 }, result_chars: 5 },
    ...overrides,
  };
}

/** A finished job as a server leaves it: prompt, result, then its final record (which indexes it). */
function storeFinished(store: StateStore, overrides: Partial<JobRecord> = {}): JobRecord {
  const record = finishedRecord(overrides);
  store.create({ ...record, status: "running" }, "the prompt");
  store.writeResult(record.id, "hello");
  store.write(record);
  return record;
}

function indexLines(store: StateStore): Record<string, unknown>[] {
  const file = path.join(store.root, "finished.jsonl");
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

function registry(
  store: StateStore,
  options: { retentionMs?: number; maxBytes?: number } = {},
): { jobs: JobRegistry; clock: FakeClock } {
  const clock = new FakeClock();
  const jobs = new JobRegistry({
    launch: new FakeLauncher().launch,
    clock,
    newId: nextId,
    logger: new RecordingLogger(),
    retentionMs: options.retentionMs ?? 7 * 24 * HOUR,
    maxFinishedJobs: 1000,
    finishedTranscriptChars: 1_000_000,
    maxRunning: 10,
    ...homeOnly({}, { pid: 88, start_time: "2" }),
    attach: () => new FakeAgent({ prompt: "", cwd: "/" }),
    admit: async (spec) => spec,
    persistence: {
      store,
      owner: { pid: 88, start_time: "2" },
      replayTranscript: () => new Transcript(1000),
      maxBytes: options.maxBytes ?? 1024 ** 3,
      newMarker: () => "marker",
      isAlive: async () => false,
    },
  });
  return { jobs, clock };
}

async function startRegistry(
  store: StateStore,
  options: { retentionMs?: number; maxBytes?: number } = {},
): Promise<{ jobs: JobRegistry; clock: FakeClock }> {
  const made = registry(store, options);
  const { records, finished } = store.loadForStartup();
  made.jobs.rememberFinished(finished);
  await made.jobs.restore(records);
  return made;
}

describe("the index of finished jobs", () => {
  test("a finished job's final record indexes it, with its finish time and its folder's size", () => {
    const store = freshStore();
    const record = storeFinished(store);
    const [entry] = indexLines(store);
    assert.deepEqual(Object.keys(entry ?? {}), ["id", "finished_at", "bytes"]);
    assert.equal(entry?.id, record.id);
    assert.equal(entry?.finished_at, record.finished_at);
    assert.equal(entry?.bytes, store.size(record.id));
  });

  test("startup reads the records of unfinished jobs only; indexed ones are not opened", () => {
    const store = freshStore();
    const finished = storeFinished(store);
    const running = finishedRecord({ status: "running", finished_at: undefined, outcome: undefined });
    store.create(running, "still going");
    // Were it read, this record would be reported as invalid: it is not read at all.
    writeFileSync(store.file(finished.id, "record.json"), "not json");
    const loaded = store.loadForStartup();
    assert.deepEqual(
      loaded.records.map((loadedRecord) => loadedRecord.id),
      [running.id],
    );
    assert.deepEqual(
      loaded.finished.map((entry) => entry.id),
      [finished.id],
    );
    assert.deepEqual(loaded.skipped, []);
  });

  test("a finished job missing from the index (an older state directory, a lost line) is read once and indexed", () => {
    const store = freshStore();
    const record = storeFinished(store);
    rmSync(path.join(store.root, "finished.jsonl"));
    writeFileSync(path.join(store.root, "finished.jsonl"), '{"id":"torn", "fin\n');
    const first = store.loadForStartup();
    assert.deepEqual(
      first.records.map((loaded) => loaded.id),
      [record.id],
      "read from its record this time",
    );
    const second = store.loadForStartup();
    assert.deepEqual(second.records, []);
    assert.deepEqual(
      second.finished.map((entry) => entry.id),
      [record.id],
      "indexed since",
    );
  });

  test("lines of removed jobs are dropped once they outnumber the live ones", () => {
    const store = freshStore();
    const kept = storeFinished(store);
    for (let i = 0; i < 80; i += 1) store.remove(storeFinished(store).id);
    assert.equal(indexLines(store).length, 81);
    assert.deepEqual(
      store.loadForStartup().finished.map((entry) => entry.id),
      [kept.id],
    );
    assert.deepEqual(
      indexLines(store).map((entry) => entry.id),
      [kept.id],
      "rewritten with the live entry alone",
    );
  });
});

describe("a registry started from the index", () => {
  test("an indexed job is read when asked for: claude_wait, claude_output and claude_list find it", async () => {
    const store = freshStore();
    const record = storeFinished(store);
    const { jobs } = await startRegistry(store);
    assert.equal(jobs.get(record.id), undefined, "not in memory before it is asked for");
    const job = await jobs.recover(record.id);
    assert.equal(job?.status, "completed");
    assert.equal(job?.resultText(), "hello");
    assert.equal(job?.promptPreview, "finished earlier");
    assert.equal(jobs.get(record.id), job, "kept once read");
    assert.deepEqual(
      jobs.list().map((listed) => listed.id),
      [record.id],
    );
  });

  test("claude_list reads indexed jobs without keeping them", async () => {
    const store = freshStore();
    const records = [storeFinished(store), storeFinished(store, { finished_at: NOW - HOUR + 1 })];
    const { jobs } = await startRegistry(store);
    assert.deepEqual(
      jobs.list().map((job) => job.id),
      records.map((record) => record.id),
      "oldest first",
    );
    assert.equal(jobs.get(records[0]?.id as string), undefined, "still only on disk");
  });

  test("retention removes an indexed job past it without reading its record", async () => {
    const store = freshStore();
    const old = storeFinished(store, { finished_at: NOW - 10 * HOUR });
    const recent = storeFinished(store);
    writeFileSync(store.file(old.id, "record.json"), "not json");
    const { jobs } = await startRegistry(store, { retentionMs: 5 * HOUR });
    jobs.list();
    assert.equal(existsSync(store.jobDir(old.id)), false, "the expired job's folder is gone");
    assert.equal(existsSync(store.jobDir(recent.id)), true);
  });

  test("the disk cap counts indexed jobs by the size the index gives them", async () => {
    const store = freshStore();
    const older = storeFinished(store, { finished_at: NOW - 3 * HOUR });
    const newer = storeFinished(store);
    const bytes = store.size(newer.id);
    const { jobs } = await startRegistry(store, { maxBytes: bytes + 1 });
    jobs.list();
    assert.equal(existsSync(store.jobDir(older.id)), false, "the oldest goes first");
    assert.equal(existsSync(store.jobDir(newer.id)), true);
  });

  test("an indexed job whose folder was removed meanwhile is simply not found", async () => {
    const store = freshStore();
    const record = storeFinished(store);
    const { jobs } = await startRegistry(store);
    store.remove(record.id);
    assert.equal(await jobs.recover(record.id), undefined);
    assert.deepEqual(jobs.list(), []);
  });
});
