/** The job registry's own bounds, with fake agents and a fake clock. */
import { memoryPersistence } from "../src/jobs/memory.js";
import assert from "node:assert/strict";
import { test } from "node:test";

import { JobRegistry } from "../src/jobs/registry.js";
import { FakeClock, FakeLauncher, RecordingLogger, settle } from "./helpers.js";
import { homeOnly } from "./host-fakes.js";

function registry(
  overrides: { finishedTranscriptChars?: number; maxFinishedJobs?: number; maxRunning?: number } = {},
): { jobs: JobRegistry; launcher: FakeLauncher; clock: FakeClock } {
  const clock = new FakeClock();
  const launcher = new FakeLauncher();
  let next = 0;
  const jobs = new JobRegistry({
    launch: launcher.launch,
    clock,
    newId: () => `job-${(next += 1)}`,
    logger: new RecordingLogger(),
    retentionMs: 600_000,
    maxFinishedJobs: overrides.maxFinishedJobs ?? 1000,
    finishedTranscriptChars: overrides.finishedTranscriptChars ?? 1_000_000,
    maxRunning: overrides.maxRunning ?? 1000,
    ...homeOnly(),
    persistence: memoryPersistence(),
  });
  return { jobs, launcher, clock };
}

test("finished jobs' transcripts share one budget: the oldest are dropped first, results stay", async () => {
  const { jobs, launcher } = registry({ finishedTranscriptChars: 100 });
  for (let i = 1; i <= 3; i += 1) {
    jobs.start({ prompt: `p${i}`, cwd: "/w" }, "start");
    launcher.last.report({ turns: 1 }, `${String(i).repeat(59)}`); // 60 characters with the newline
    launcher.last.succeed(`result ${i}`);
    await settle();
  }
  const sizes = ["job-1", "job-2", "job-3"].map((id) => jobs.get(id)?.transcript.size);
  assert.deepEqual(sizes, [0, 0, 60], "only the newest transcript fits in 100 characters");
  assert.equal(jobs.get("job-1")?.outcome?.result?.text, "result 1", "results are never dropped for the budget");
  const page = jobs.get("job-1")?.transcript.page(0, 1000);
  assert.deepEqual(
    page && [page.offset, page.text, page.end],
    [60, "", 60],
    "offsets keep their meaning after the drop",
  );
});

test("running jobs' transcripts are not touched by the finished budget", async () => {
  const { jobs, launcher } = registry({ finishedTranscriptChars: 10 });
  jobs.start({ prompt: "long", cwd: "/w" }, "start");
  const running = launcher.last;
  running.report({ turns: 1 }, "x".repeat(50));
  jobs.start({ prompt: "short", cwd: "/w" }, "start");
  launcher.last.succeed();
  await settle();
  assert.equal(jobs.get("job-1")?.transcript.size, 51);
  assert.equal(jobs.get("job-1")?.status, "running");
});

test("the finished-job cap forgets the oldest finished job, never a running one", async () => {
  const { jobs, launcher } = registry({ maxFinishedJobs: 2 });
  jobs.start({ prompt: "runs on", cwd: "/w" }, "start");
  for (let i = 0; i < 3; i += 1) {
    jobs.start({ prompt: `done ${i}`, cwd: "/w" }, "start");
    launcher.last.succeed();
    await settle();
  }
  assert.deepEqual(
    jobs.list().map((job) => [job.id, job.status]),
    [
      ["job-1", "running"],
      ["job-3", "completed"],
      ["job-4", "completed"],
    ],
  );
});

test("past maxRunning, jobs queue in FIFO order and start as slots free", async () => {
  const { jobs, launcher, clock } = registry({ maxRunning: 2 });
  const ids = Array.from({ length: 5 }, (_, i) => jobs.start({ prompt: `job ${i}`, cwd: "/w" }, "start").id);
  assert.equal(launcher.agents.length, 2, "only two agents started");
  assert.deepEqual(
    ids.map((id) => [jobs.get(id)?.status, jobs.get(id)?.queuePosition()]),
    [
      ["running", undefined],
      ["running", undefined],
      ["queued", 1],
      ["queued", 2],
      ["queued", 3],
    ],
  );
  await clock.advance(5000);
  launcher.agents[1]?.succeed();
  await settle();
  assert.equal(launcher.agents.length, 3);
  assert.equal(launcher.agents[2]?.spec.prompt, "job 2", "the oldest queued job starts first");
  assert.equal(jobs.get(ids[2] as string)?.status, "running");
  assert.equal(jobs.get(ids[2] as string)?.startedAt, clock.now(), "elapsed time counts from the real start");
  assert.deepEqual([jobs.get(ids[3] as string)?.queuePosition(), jobs.get(ids[4] as string)?.queuePosition()], [1, 2]);
});

test("killing a queued job removes it without starting it; the others move up", async () => {
  const { jobs, launcher } = registry({ maxRunning: 1 });
  const first = jobs.start({ prompt: "first", cwd: "/w" }, "start");
  const second = jobs.start({ prompt: "second", cwd: "/w" }, "start");
  const third = jobs.start({ prompt: "third", cwd: "/w" }, "start");
  const result = await jobs.kill(second.id, "claude_kill");
  assert.deepEqual(result, { killed: true, survivors: [] });
  assert.equal(second.status, "killed");
  assert.equal(second.launched, false);
  assert.equal(third.queuePosition(), 1);
  launcher.agents[0]?.succeed();
  await settle();
  assert.deepEqual(
    launcher.agents.map((agent) => agent.spec.prompt),
    ["first", "third"],
    "the killed job never started",
  );
  assert.equal(first.status, "completed");
});

test("a queued claude_run can time out before it starts: TIMEOUT, and it never launches", async () => {
  const { jobs, launcher, clock } = registry({ maxRunning: 1 });
  jobs.start({ prompt: "hog", cwd: "/w" }, "start");
  const run = jobs.start({ prompt: "quick question", cwd: "/w" }, "run", 5000);
  await clock.advance(5000);
  assert.equal(run.status, "failed");
  assert.equal(run.outcome?.ok, false);
  assert.match(run.outcome && !run.outcome.ok ? run.outcome.detail : "", /still queued and never started/);
  launcher.agents[0]?.succeed();
  await settle();
  assert.equal(launcher.agents.length, 1);
});

test("the limit holds under 50 concurrent starts, and every job ends up run exactly once", async () => {
  const { jobs, launcher } = registry({ maxRunning: 3 });
  const started = Array.from({ length: 50 }, (_, i) => jobs.start({ prompt: `p${i}`, cwd: "/w" }, "start"));
  let peak = 0;
  while (started.some((job) => job.status !== "completed")) {
    const running = started.filter((job) => job.status === "running").length;
    peak = Math.max(peak, running);
    assert.ok(running <= 3, `${running} running at once`);
    for (const agent of launcher.agents.slice()) agent.succeed();
    await settle();
  }
  assert.equal(peak, 3);
  assert.deepEqual(
    launcher.agents.map((agent) => agent.spec.prompt),
    started.map((_, i) => `p${i}`),
    "FIFO, each once",
  );
});

test("shutdown drops the queue without starting anything and kills what runs", async () => {
  const { jobs, launcher } = registry({ maxRunning: 1 });
  const running = jobs.start({ prompt: "a", cwd: "/w" }, "start");
  const queued = jobs.start({ prompt: "b", cwd: "/w" }, "start");
  await jobs.shutdown();
  assert.equal(running.status, "killed");
  assert.equal(queued.status, "killed");
  assert.equal(launcher.agents.length, 1);
  assert.throws(() => jobs.start({ prompt: "c", cwd: "/w" }, "start"), /SHUTTING_DOWN|shutting down/);
});
