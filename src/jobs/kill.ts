/**
 * Killing a job this server runs (PROTOCOL.md §8, §15.3, §21.3): a queued one leaves the queue unstarted; a running
 * one's whole tree is killed, its reason on disk before any signal, and the kill waits for its end.
 */
import { DispatchError } from "../core/errors.js";
import type { JobEntry } from "./entry.js";
import type { JobLife } from "./life.js";
import { killFailed } from "./outcomes.js";
import type { JobQueue } from "./queue.js";
import type { KillReason, KillResult } from "./types.js";

/** What a kill needs of the registry whose job it kills. */
export interface KillTarget {
  readonly life: Pick<JobLife, "save" | "finish">;
  readonly queue: Pick<JobQueue, "remove" | "release">;
}

/** The first reason recorded wins; KILL_FAILED when nothing could be signalled. */
export async function killOwnJob(target: KillTarget, job: JobEntry, reason: KillReason): Promise<KillResult> {
  const id = job.id;
  if (job.status === "queued") {
    target.queue.remove(job);
    job.killReason = reason;
    target.life.finish(job, { ok: false, code: "KILLED", detail: "removed from the queue before it started" });
    return { killed: true, survivors: [] };
  }
  if (job.status !== "running" || !job.run) return { killed: false, survivors: [] };
  const reasonSetHere = job.killReason === undefined;
  if (reasonSetHere) {
    job.killReason = reason;
    // On disk before any signal: a server that stops mid-kill leaves the kill to the next one (§15.3).
    target.life.save(job);
  }
  job.killing ??= job.run.kill();
  const report = await job.killing;
  if (report.undetermined) {
    // Nothing was signalled (an adopted agent, and no process table to tell it
    // by): the job runs on, and a later kill tries again.
    // A host that kills it once it can be reached keeps the reason, so the job ends as killed, just late (§21.3).
    job.killing = undefined;
    if (reasonSetHere && job.status === "running" && !report.pending) {
      job.killReason = undefined;
      target.life.save(job);
    }
    const why = report.why ?? "the process table could not be read";
    if (reason === "timeout" && report.pending && job.status === "running") {
      // claude_run keeps its bound (§5.1): the job ends now, as with
      // survivors, and the host still gets the kill (§21.3).
      target.queue.release(job);
      const detail =
        `${why}, so the agent was not signalled; the kill stands, and is sent as soon as the host ` + `can be reached`;
      target.life.finish(job, { ok: false, code: "KILL_FAILED", detail });
    }
    const then = report.pending
      ? "it is still running, and is killed as soon as the host can be reached"
      : "it is still running; try again";
    throw new DispatchError("KILL_FAILED", `${why}, so job ${id}'s agent was not signalled; ${then}`);
  }
  const { survivors } = report;
  if (survivors.length === 0) {
    await job.done;
  } else if (job.status === "running") {
    // The agent itself may never exit: end the job now, so nothing waits on it forever.
    target.queue.release(job);
    target.life.finish(job, killFailed(survivors));
  }
  return { killed: true, survivors };
}
