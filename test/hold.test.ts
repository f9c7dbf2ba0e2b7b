/**
 * hold (src/server/progress.ts): what claude_wait waits on (§5.3). It ends when the job finishes, asks
 * for permission, the hold runs out, or the request is cancelled, and leaves no timer or listener behind.
 */
import assert from "node:assert/strict";
import test from "node:test";

import type { Job } from "../src/jobs/types.js";
import { hold } from "../src/server/progress.js";
import { FakeClock, settle } from "./helpers.js";

/** The part of a job hold reads, with its listeners counted. */
class HeldJob {
  status: Job["status"] = "running";
  pending: unknown[] = [];
  readonly done = new Set<() => void>();
  readonly approvals = new Set<() => void>();

  pendingApprovals(): unknown[] {
    return this.pending;
  }

  whenDone(listener: () => void): () => void {
    this.done.add(listener);
    return () => this.done.delete(listener);
  }

  onApprovals(listener: () => void): () => void {
    this.approvals.add(listener);
    return () => this.approvals.delete(listener);
  }

  finish(): void {
    this.status = "completed";
    for (const listener of [...this.done]) listener();
  }

  ask(): void {
    this.pending = [{ request_id: "1" }];
    for (const listener of [...this.approvals]) listener();
  }

  get listeners(): number {
    return this.done.size + this.approvals.size;
  }
}

/** Starts a hold of holdMs; `ended` says whether it has returned yet. */
function startHold(clock: FakeClock, job: HeldJob, holdMs: number, signal = new AbortController().signal) {
  let ended = false;
  const held = hold(clock, job as unknown as Job, holdMs, signal).then(() => {
    ended = true;
  });
  return { held, ended: () => ended };
}

test("hold ends when the job finishes, and leaves no timer or listener", async () => {
  const clock = new FakeClock();
  const job = new HeldJob();
  const { held, ended } = startHold(clock, job, 60_000);
  await clock.pending(1);
  await settle();
  assert.equal(ended(), false);
  job.finish();
  await held;
  assert.equal(clock.pendingTimers, 0);
  assert.equal(job.listeners, 0);
});

test("hold ends when the job asks for permission", async () => {
  const clock = new FakeClock();
  const job = new HeldJob();
  const { held } = startHold(clock, job, 60_000);
  await clock.pending(1);
  job.ask();
  await held;
  assert.equal(clock.pendingTimers, 0);
  assert.equal(job.listeners, 0);
});

test("hold ends when its time runs out, not before", async () => {
  const clock = new FakeClock();
  const job = new HeldJob();
  const { held, ended } = startHold(clock, job, 5_000);
  await clock.pending(1);
  await clock.advance(4_999);
  assert.equal(ended(), false);
  await clock.advance(1);
  await held;
  assert.equal(job.listeners, 0);
});

test("hold ends when its request is cancelled, and at once when it already was", async () => {
  const clock = new FakeClock();
  const job = new HeldJob();
  const cancel = new AbortController();
  const { held } = startHold(clock, job, 60_000, cancel.signal);
  await clock.pending(1);
  cancel.abort();
  await held;
  assert.equal(clock.pendingTimers, 0);
  assert.equal(job.listeners, 0);

  // Cancelled before the hold began: nothing is set up, nothing waits a minute.
  await hold(clock, job as unknown as Job, 60_000, cancel.signal);
  assert.equal(clock.pendingTimers, 0);
  assert.equal(job.listeners, 0);
});

test("hold returns at once for a finished job, a job already asking, and hold_ms 0", async () => {
  const clock = new FakeClock();
  const asking = new HeldJob();
  asking.pending = [{ request_id: "1" }];
  const finished = new HeldJob();
  finished.status = "completed";
  const signal = new AbortController().signal;
  await hold(clock, asking as unknown as Job, 60_000, signal);
  await hold(clock, finished as unknown as Job, 60_000, signal);
  await hold(clock, new HeldJob() as unknown as Job, 0, signal);
  assert.equal(clock.pendingTimers, 0);
});
