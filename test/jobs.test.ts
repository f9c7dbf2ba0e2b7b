/** The job registry's own bounds, with fake agents and a fake clock. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { JobRegistry } from "../src/jobs.js";
import { FakeClock, FakeLauncher, RecordingLogger, settle } from "./helpers.js";

function registry(overrides: { finishedTranscriptChars?: number; maxFinishedJobs?: number } = {}): { jobs: JobRegistry; launcher: FakeLauncher; clock: FakeClock } {
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
  assert.deepEqual(page && [page.offset, page.text, page.end], [60, "", 60], "offsets keep their meaning after the drop");
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
