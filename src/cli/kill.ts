/**
 * `kill ID` (PROTOCOL.md §17): the kill marker first, then the agent's whole
 * tree if it is certainly alive, then the record: by its server if that may
 * be alive, else here, claiming the job as a restarting server would (§15.3).
 */
import { DispatchError } from "../core/errors.js";
import { finishAbandonedKill } from "../jobs/abandoned.js";
import type { KillReport, ProcessControl } from "../hosts/local/index.js";
import { isFinishedStatus, type JobRecord } from "../store/records.js";
import type { StateStore } from "../store/state-store.js";
import { emit, loadProcessControl, notFound, settle, type Context } from "./context.js";
import { replayOutput } from "./job-output.js";

type FinishedBy = "server" | "cli" | "adopting server";

/** What the kill did: the tree's report (none when nothing was signalled), who finishes the record, and its status. */
interface KillOutcome {
  tree: KillReport | undefined;
  finishedBy: FinishedBy;
  status: JobRecord["status"];
}

export async function killJob(context: Context, id: string): Promise<number> {
  const { store, io } = context;
  const before = store.read(id);
  if (!before) throw notFound(context, id);
  if (isFinishedStatus(before.status)) return alreadyFinished(context, id, before);
  // The marker first: the owning server reads it, so a queued job never starts
  // and a running one that exits is recorded as killed by "cli".
  store.requestKill(id, "cli", io.clock.now());
  // The server may have started (or finished) the job meanwhile.
  const record = store.read(id) ?? before;
  const outcome = await killAndFinish(context, record);
  const { tree, finishedBy, status } = outcome;
  const survivors = tree?.survivors ?? [];
  emit(
    context,
    { id, status, already_finished: false, kill_requested: true, signalled: tree?.signalled ?? 0, survivors, finished_by: finishedBy },
    killText(id, record, outcome),
  );
  return survivors.length > 0 ? 1 : 0;
}

function alreadyFinished(context: Context, id: string, record: JobRecord): number {
  emit(
    context,
    { id, status: record.status, already_finished: true, kill_requested: false, survivors: [] },
    `Job ${id} had already finished (${record.status}); nothing was killed.\n`,
  );
  return 0;
}

async function killAndFinish(context: Context, record: JobRecord): Promise<KillOutcome> {
  const { store, io } = context;
  const control = await loadProcessControl(io);
  let tree: KillReport | undefined;
  let finishedBy: FinishedBy;
  let status = record.status;
  try {
    tree = record.host !== undefined && record.host !== "local" ? await killRemote(context, record) : await killAgent(control, store, record);
    // A server that may be alive (unknown counts) finishes its own record.
    if ((await control.isAlive(record.owner.pid, record.owner.start_time)) !== false) {
      finishedBy = "server";
    } else {
      // Nobody else will finish this record: unless a live server is adopting the job right now.
      const finished = await finishRecord(context, control, record, tree?.survivors ?? []);
      finishedBy = finished ? "cli" : "adopting server";
      if (finished) status = finished.status;
    }
  } finally {
    await settle(control, io.clock);
  }
  return { tree, finishedBy, status };
}

function killText(id: string, record: JobRecord, { tree, finishedBy, status }: KillOutcome): string {
  const survivors = tree?.survivors ?? [];
  const lines: string[] = [];
  if (record.status === "queued") lines.push(`Job ${id} was queued: it will not start.`);
  else if (!tree) lines.push(`Job ${id}'s agent is not running${record.agent ? ` (pid ${record.agent.pid})` : ""}: there was nothing to signal.`);
  else if (survivors.length === 0) lines.push(`Killed job ${id}'s process tree: ${tree.signalled} process${tree.signalled === 1 ? "" : "es"} signalled, none left.`);
  else lines.push(`KILL_FAILED: job ${id}: processes ${survivors.join(", ")} survived SIGKILL.`);
  if (finishedBy === "cli") lines.push(`Its server (pid ${record.owner.pid}) is gone, so the record was finished here: ${status}.`);
  else if (finishedBy === "server" && record.status === "queued") lines.push(`Its server (pid ${record.owner.pid}) records it as killed when the job's turn comes.`);
  else if (finishedBy === "server") lines.push(`Its server (pid ${record.owner.pid}) records it as killed.`);
  else lines.push("A server that is adopting the job records it as killed.");
  return `${lines.join("\n")}\n`;
}

/** Kills a running job's whole tree, if its agent (the same process: pid and start time) is alive. */
async function killAgent(control: ProcessControl, store: StateStore, record: JobRecord): Promise<KillReport | undefined> {
  const agent = record.agent;
  if (record.status !== "running" || !agent) return undefined;
  let pid = agent.pid;
  let startTime = agent.start_time;
  if (pid === undefined) {
    // Recorded just before the spawn, with the marker alone: the agent is the process carrying it (§15.2).
    const found = agent.tree_marker === undefined ? undefined : await control.findMarked(agent.tree_marker);
    if (!found) return undefined;
    ({ pid, startTime } = found);
  } else if ((await control.isAlive(pid, startTime, agent.tree_marker)) !== true) {
    // Signalled only when it is certainly the agent: same start time, or its tree marker.
    return undefined;
  }
  const handle = control.attach({
    pid,
    startTime,
    marker: agent.tree_marker,
    output: store.outputFiles(record.id),
    onStdout: () => undefined,
    stderrTailBytes: 0,
  });
  return handle.killTree();
}

/** A job on another machine is killed there, over ssh (§21); one that cannot be reached is not taken for killed. */
async function killRemote(context: Context, record: JobRecord): Promise<KillReport | undefined> {
  if (record.status !== "running") return undefined;
  const host = (await context.io.sshHosts?.())?.find((candidate) => candidate.name === record.host);
  if (!host) {
    throw new DispatchError("INVALID_ARGUMENT", `job ${record.id} runs on host ${record.host}, which CLAUDE_DISPATCH_HOSTS does not name here; run claude-dispatch kill ${record.id} on that machine`);
  }
  const report = await host.kill(record.id);
  if (report.undetermined) throw new DispatchError("KILL_FAILED", `${report.why ?? `host ${record.host} could not be reached`}; job ${record.id} is still running there`);
  return report;
}

/** The owner is gone: the job is finished here, as a restarting server would finish it (jobs/abandoned.ts). */
async function finishRecord(context: Context, control: ProcessControl, record: JobRecord, survivors: readonly number[]): Promise<JobRecord | undefined> {
  const { store, io } = context;
  return finishAbandonedKill({
    store,
    record,
    claimer: io.identity(),
    isAlive: (holder) => control.isAlive(holder.pid, holder.start_time),
    survivors,
    live: replayOutput(store, record.id, 1).live(),
    now: io.clock.now(),
  });
}
