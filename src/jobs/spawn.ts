/**
 * Spawning a job's agent, and putting on record who it is (PROTOCOL.md §15.2,
 * §15.3): the pid, start time and tree marker let a later server recognise
 * the agent. The registry decides when a job runs; this starts it.
 */
import type { AgentRun } from "../agent/types.js";
import type { CancelTimer } from "../core/clock.js";
import type { JobEntry } from "./entry.js";
import type { JobLife } from "./life.js";
import { outsideKillReason, type JobRegistryOptions } from "./types.js";

/** What spawning needs of the registry whose job it starts. */
export interface SpawnTarget {
  readonly options: Pick<JobRegistryOptions, "persistence" | "hosts" | "approvals" | "launch" | "clock" | "logger">;
  /** Identity reads and writes under way: a server leaving its jobs to the next one waits for them. */
  readonly recording: Set<Promise<void>>;
  readonly life: Pick<JobLife, "save" | "follow" | "kill">;
}

/** Spawns the agent of a job whose "running" record is on disk, and follows it. */
export function spawnAgent(target: SpawnTarget, job: JobEntry): void {
  const { logger, persistence } = target.options;
  const { store } = persistence;
  const output = store.outputFiles(job.id);
  const promptFile = store.promptFile(job.id);
  const marker = job.agent?.tree_marker;
  const waitMs = target.options.approvals?.waitMs;
  // Each agent asks this same program, in its approver mode where it runs,
  // whenever it would have prompted (§18, §21.3).
  const approver = waitMs === undefined ? undefined : target.options.hosts.get(job.hostName)?.approver(job.id, waitMs);
  const run = target.options.launch({
    ...job.spec,
    jobId: job.id,
    ...(marker ? { marker } : {}),
    ...(output ? { output } : {}),
    ...(promptFile ? { promptFile } : {}),
    ...(approver ? { approver } : {}),
  });
  job.forgetPrompt();
  // The pid follows the spawn (§15.2), in one write with the rest of the identity when that is known at once.
  if (run.pid !== undefined) job.agent = { ...job.agent, pid: run.pid };
  // The pid is known at once but for the first job, whose process layer is still loading: said when known.
  logger.info(`job ${job.id} started (${job.kind}${run.pid === undefined ? "" : `, pid ${run.pid}`}) in ${job.cwd}`);
  recordIdentity(target, job, run);
  target.life.follow(job, run);
  // The command line writes its marker, then reads the record; here the record was written,
  // then the marker is read: one of the two sees the other.
  const killedBy = store.killRequested(job.id);
  if (killedBy) {
    target.life
      .kill(job.id, outsideKillReason(killedBy))
      .catch((error: unknown) => logger.error(`kill of job ${job.id}: ${String(error)}`));
  }
}

/**
 * A host that knows the identity at the spawn answers within this turn, and the record is written once
 * with all of it; one that has to read the process table first gets the pid written alone as soon as
 * this turn is over.
 */
function recordIdentity(target: SpawnTarget, job: JobEntry, run: AgentRun): void {
  let cancelPidWrite: CancelTimer | undefined;
  if (run.pid !== undefined) {
    cancelPidWrite = target.options.clock.setTimer(() => {
      cancelPidWrite = undefined;
      if (job.status === "running") target.life.save(job);
    }, 0);
  }
  const recorded = run
    .identity()
    .then(({ pid, pgid, startTime, marker }) => {
      cancelPidWrite?.();
      cancelPidWrite = undefined;
      if (job.status !== "running") return;
      if (pid === undefined) {
        if (run.pid !== undefined) target.life.save(job);
        return;
      }
      job.agent = { ...job.agent, pid };
      if (pgid !== undefined) job.agent.pgid = pgid;
      if (startTime !== undefined) job.agent.start_time = startTime;
      if (marker !== undefined) job.agent.tree_marker = marker;
      target.life.save(job);
    })
    .catch((error: unknown) =>
      target.options.logger.warn(`job ${job.id}: cannot record the agent's identity: ${String(error)}`),
    );
  target.recording.add(recorded);
  void recorded.finally(() => target.recording.delete(recorded));
}
