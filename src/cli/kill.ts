/**
 * `kill ID` (PROTOCOL.md §17): the kill marker first, then the agent's whole
 * tree if it is certainly alive, then the record: by its server if that may
 * be alive, else here, claiming the job as a restarting server would (§15.3).
 */
import { DispatchError } from "../core/errors.js";
import { finishAbandonedKill } from "../jobs/abandoned.js";
import { isSameProcess, type KillReport, type NamedProcess, type ProcessControl } from "../agent/host.js";
import { isFinishedStatus, type JobRecord } from "../store/records.js";
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
    {
      id,
      status,
      already_finished: false,
      kill_requested: true,
      signalled: tree?.signalled ?? 0,
      survivors,
      finished_by: finishedBy,
    },
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
  const { io } = context;
  const control = await loadProcessControl(io);
  let tree: KillReport | undefined;
  let finishedBy: FinishedBy;
  let status = record.status;
  try {
    tree = await killAgent(context, record, control);
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
  else if (!tree)
    lines.push(
      `Job ${id}'s agent is not running${record.agent ? ` (pid ${record.agent.pid})` : ""}: there was ` +
        `nothing to signal.`,
    );
  else if (survivors.length === 0)
    lines.push(
      `Killed job ${id}'s process tree: ${tree.signalled} process${tree.signalled === 1 ? "" : "es"} ` +
        `signalled, none left.`,
    );
  else lines.push(`KILL_FAILED: job ${id}: processes ${survivors.join(", ")} survived SIGKILL.`);
  if (finishedBy === "cli")
    lines.push(`Its server (pid ${record.owner.pid}) is gone, so the record was finished here: ${status}.`);
  else if (finishedBy === "server" && record.status === "queued")
    lines.push(`Its server (pid ${record.owner.pid}) records it as killed when the job's turn comes.`);
  else if (finishedBy === "server") lines.push(`Its server (pid ${record.owner.pid}) records it as killed.`);
  else lines.push("A server that is adopting the job records it as killed.");
  return `${lines.join("\n")}\n`;
}

/**
 * Kills a running job's whole tree where it runs, by the same checks a server's takeover makes (§15.3): here, only
 * a process that is certainly its agent, never this command's own tree or another job's agent; on another
 * machine, there (§21). A host that cannot tell, or cannot be reached, is not taken for a kill that happened.
 */
async function killAgent(
  context: Context,
  record: JobRecord,
  control: ProcessControl,
): Promise<KillReport | undefined> {
  const { store, io } = context;
  if (record.status !== "running") return undefined;
  const host = (await io.hosts?.(async () => control))?.get(record.host);
  if (!host) {
    throw new DispatchError(
      "INVALID_ARGUMENT",
      `job ${record.id} runs on host ${record.host}, which CLAUDE_DISPATCH_HOSTS does not name here; run ` +
        `claude-dispatch kill ${record.id} on that machine`,
    );
  }
  const others = store
    .loadAll()
    .records.filter((other) => other.id !== record.id && other.status === "running" && other.agent);
  const othersAgent = (named: NamedProcess): boolean => others.some(({ agent }) => isSameProcess(agent, named));
  const report = await host.killRecorded(
    { jobId: record.id, agent: record.agent },
    store.outputFiles(record.id),
    othersAgent,
  );
  if (report?.undetermined)
    throw new DispatchError(
      "KILL_FAILED",
      `${report.why ?? `host ${record.host} could not tell whether it runs`}; job ${record.id} may still be running`,
    );
  return report;
}

/** The owner is gone: the job is finished here, as a restarting server would finish it (jobs/abandoned.ts). */
async function finishRecord(
  context: Context,
  control: ProcessControl,
  record: JobRecord,
  survivors: readonly number[],
): Promise<JobRecord | undefined> {
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
