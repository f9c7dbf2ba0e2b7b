/**
 * A kill from the command line of a job whose server is gone (PROTOCOL.md
 * §15.3, §17): the job is claimed as a restarting server would, and finished
 * with the record a server would write, by the rules the registry uses.
 */
import type { LiveSummary } from "../agent/types.js";
import { isFinishedStatus, type JobRecord, type ProcessIdentity, type StoredOutcome } from "../store/records.js";
import { killFailed } from "./outcomes.js";
import { KILL_REASON_TEXT, type IsAlive, type JobStore } from "./types.js";

export interface AbandonedKill {
  store: Pick<JobStore, "claimJob" | "read" | "write">;
  record: JobRecord;
  /** Who finishes it: named in the claim file. */
  claimer: ProcessIdentity;
  isAlive: IsAlive;
  /** Processes that survived the kill, if any. */
  survivors: readonly number[];
  /** What the agent printed, read back from its output. */
  live: LiveSummary;
  now: number;
}

/**
 * Claims the job and writes its final record: killed, by "cli". A claim held by
 * a live process is a server adopting the job right now; that server reads the
 * kill marker and finishes it. Returns the record written (or the one already
 * final), or undefined when another process finishes it.
 */
export async function finishAbandonedKill(kill: AbandonedKill): Promise<JobRecord | undefined> {
  const { store, record } = kill;
  const generation = record.generation + 1;
  if (!(await store.claimJob(record.id, generation, kill.claimer, kill.isAlive))) return undefined;
  const current = store.read(record.id) ?? record;
  if (isFinishedStatus(current.status)) return current;
  const outcome: StoredOutcome =
    kill.survivors.length > 0
      ? killFailed(kill.survivors)
      : { ok: false, code: "KILLED", detail: `killed ${KILL_REASON_TEXT.cli}` };
  const final: JobRecord = {
    ...current,
    status: "killed",
    kill_reason: "cli",
    finished_at: kill.now,
    generation,
    outcome,
  };
  if (kill.live.turns > 0) final.turns = kill.live.turns;
  if (kill.live.costUsd !== undefined) final.cost_usd = kill.live.costUsd;
  store.write(final);
  return final;
}
