/**
 * Taking over the jobs of servers that are gone (PROTOCOL.md §15.3): which
 * records to claim, where a running job's agent is now, and what each kind
 * of record becomes here (queued again, followed, finished from its output,
 * or lost). The registry owns the jobs; this decides what to do with each.
 */
import type { NamedSpec } from "../agent/types.js";
import { DispatchError, describeThrown, toDispatchError } from "../core/errors.js";
import { isFinishedStatus, type AgentRecord, type JobRecord } from "../store/records.js";
import type { JobEntry } from "./entry.js";
import { entryFromRecord, specFromRecord } from "./job-record.js";
import { isSameProcess, type LocatedAgent } from "../agent/host.js";
import type { FinishedJobs } from "./finished.js";
import type { JobLife } from "./life.js";
import type { JobQueue } from "./queue.js";
import { isUnfinished, outsideKillReason, type JobHost, type JobRegistryOptions, type KillReason } from "./types.js";

/** What a takeover needs of the registry it adds jobs to. */
export interface TakeoverTarget {
  readonly options: Pick<
    JobRegistryOptions,
    "persistence" | "hosts" | "agents" | "admit" | "attach" | "ready" | "clock" | "logger"
  >;
  readonly life: Pick<JobLife, "save" | "follow" | "finish" | "armTimeout" | "kill">;
  /** The registry's jobs, by id: a job taken over is served here. */
  readonly jobs: Map<string, JobEntry>;
  /**
   * A queued job taken over goes back in the queue (push), untouched until the takeover ends; a running one holds
   * a slot (hold): the one its dead server held for it, else any free one.
   */
  readonly queue: Pick<JobQueue, "position" | "push" | "hold" | "release">;
  /** Finished jobs, from the index or restored from their records. */
  readonly finished: Pick<FinishedJobs, "isUnread" | "restore">;
}

export class Takeover {
  constructor(private readonly target: TakeoverTarget) {}

  /** Whether the registry knows the job already (in memory, or from the index). */
  private knows(id: string): boolean {
    return this.target.jobs.has(id) || this.target.finished.isUnread(id);
  }

  /** The agents of every other unfinished job it knows, this server's and those it serves from their files. */
  private agentsOfOthers(id: string): AgentRecord[] {
    return [...this.target.jobs.values()].flatMap((job) =>
      job.id !== id && isUnfinished(job) && job.agent ? [job.agent] : [],
    );
  }

  async takeOver(records: readonly JobRecord[]): Promise<void> {
    const { logger } = this.target.options;
    // A job taken over is followed by its runtime's reader.
    if (records.some((record) => !isFinishedStatus(record.status))) await this.target.options.ready?.();
    // Finished jobs first, in finish order, so that jobs ending during the
    // takeover come after them (reaping reads that order).
    const finished = records.filter((record) => !this.knows(record.id) && isFinishedStatus(record.status));
    finished.sort((a, b) => (a.finished_at ?? 0) - (b.finished_at ?? 0));
    for (const record of finished) this.target.finished.restore(record);
    for (const loaded of records) {
      if (this.knows(loaded.id) || isFinishedStatus(loaded.status)) continue;
      if (!runsHere(this.target.options, loaded)) {
        logger.warn(
          `job ${loaded.id} runs on ${loaded.runtime} at ${loaded.host}, which this server does not have; ` +
            `left as it is`,
        );
        continue;
      }
      try {
        const record = await this.claim(loaded);
        if (record) await this.adopt(record);
      } catch (error) {
        // One unreadable folder must not stop the server: the job is left where it is.
        logger.error(`cannot take over job ${loaded.id}: ${(error as Error).message}`);
      }
    }
  }

  /** A queued job of a live server whose start this server claimed (§15.7): queued here, as after a restart. */
  async takeQueued(record: JobRecord): Promise<void> {
    await this.target.options.ready?.();
    await this.adoptQueued(record);
  }

  /** The record, read again once the job is ours; undefined when its owner may live, or someone else got it. */
  private async claim(loaded: JobRecord): Promise<JobRecord | undefined> {
    const { store, owner, isAlive } = this.target.options.persistence;
    // An owner that may be alive (unknown counts: the process table could not be read) keeps its job.
    if ((await isAlive(loaded.owner)) !== false) return undefined;
    if (!(await store.claimJob(loaded.id, loaded.generation + 1, owner, isAlive))) return undefined;
    // Read again now that it is ours: another server may have taken it over,
    // or finished it, since the directory was read.
    const record = store.read(loaded.id);
    if (!record || record.generation !== loaded.generation || isFinishedStatus(record.status)) return undefined;
    store.dropClaimsBefore(record.id, record.generation + 1);
    return record;
  }

  private async adopt(record: JobRecord): Promise<void> {
    if (record.status === "queued") {
      await this.adoptQueued(record);
      return;
    }
    // This server's own tree, or another job's agent, is never adopted (§15.3).
    const others = this.agentsOfOthers(record.id);
    const host = this.target.options.hosts.get(record.host) as JobHost;
    const located = await host.locate({ jobId: record.id, agent: record.agent }, (named) =>
      others.some((known) => isSameProcess(known, named)),
    );
    if (located.state === "unrecorded") this.adoptUnrecorded(record);
    else if (located.state === "not its agent") this.adoptNotItsAgent(record, located.pid);
    else await this.adoptRunning(record, located);
  }

  private entryOf(record: JobRecord, spec: NamedSpec): JobEntry {
    const job = entryFromRecord(record, spec, (entry) => this.target.queue.position(entry));
    job.generation = record.generation + 1;
    job.agent = record.agent;
    job.killReason = record.kill_reason as KillReason | undefined;
    return job;
  }

  /**
   * The caller's budget counts from submission, across restarts; capped at the whole
   * budget, so a wall clock set back cannot lengthen it.
   */
  private remainingOf(record: JobRecord): number | undefined {
    if (record.timeout_ms === undefined) return undefined;
    const elapsed = this.target.options.clock.now() - record.submitted_at;
    return Math.min(record.timeout_ms, Math.max(0, record.timeout_ms - elapsed));
  }

  /** A queued job queues here, after today's policy is checked (§15.3), unless its prompt or its time is gone. */
  private async adoptQueued(record: JobRecord): Promise<void> {
    const { persistence, logger } = this.target.options;
    const spec = specOf(record, persistence.store.hasPrompt(record.id));
    const job = this.entryOf(record, spec ?? specFromRecord(record));
    let refusal: DispatchError | undefined;
    if (spec) {
      try {
        Object.assign(spec, await this.target.options.admit(spec));
      } catch (error) {
        refusal = toDispatchError(error);
        if (!(error instanceof DispatchError)) logger.error(`job ${record.id}: admitting it: ${describeThrown(error)}`);
      }
    }
    const remaining = this.remainingOf(record);
    this.target.jobs.set(job.id, job);
    if (!spec) {
      // Starting it with no prompt would spend money on nothing.
      this.target.life.finish(job, {
        ok: false,
        code: "STATE_ERROR",
        detail: "its prompt.txt is missing from the state directory; it was not started",
      });
    } else if (refusal) {
      this.target.life.finish(job, {
        ok: false,
        code: refusal.code,
        detail: `not started after the restart: ${refusal.message}`,
      });
    } else if (remaining === 0) {
      // Its time ran out while no server ran: it is not started only to be killed.
      job.killReason = "timeout";
      this.target.life.finish(job, { ok: false, code: "TIMEOUT", detail: "" });
    } else {
      this.target.life.save(job);
      logger.info(`job ${job.id} adopted: queued`);
      this.target.life.armTimeout(job, remaining);
      // Only queued here: restore starts the queue once every running job is counted.
      this.target.queue.push(job);
    }
  }

  /** A running job whose record names no process: it can be neither followed nor killed from here. */
  private adoptUnrecorded(record: JobRecord): void {
    const detail = record.agent?.tree_marker
      ? "the server stopped before it recorded the agent's pid, and this system cannot find the agent by " +
        "its tree marker"
      : "the server stopped before it recorded the agent's pid";
    this.finishLost(this.runningEntry(record), detail);
  }

  /**
   * A record naming this server, an ancestor, its group or session, a descendant, or another job's agent was
   * tampered with (or is older than a reused pid): nothing it names is followed or signalled, and the job is lost
   * at once, whatever kill it asks for (§15.3).
   */
  private adoptNotItsAgent(record: JobRecord, pid: number): void {
    const job = this.runningEntry(record);
    job.killReason = undefined;
    const named = `its record names process ${pid}, which is this server's or another job's, not this job's agent`;
    this.target.options.logger.warn(`job ${job.id}: ${named}; it is not followed`);
    this.finishLost(job, `${named}; nothing was followed or signalled`);
  }

  private finishLost(job: JobEntry, detail: string): void {
    this.target.life.save(job);
    this.target.jobs.set(job.id, job);
    this.target.queue.release(job);
    this.target.life.finish(job, { ok: false, code: "AGENT_LOST", detail });
  }

  /** A running job whose agent is alive (followed) or gone (finished from its output file). */
  private async adoptRunning(
    record: JobRecord,
    located: Extract<LocatedAgent, { state: "alive" | "gone" }>,
  ): Promise<void> {
    const { persistence, logger } = this.target.options;
    const job = this.runningEntry(record);
    if (located.state === "alive" && job.agent) {
      job.agent = { ...job.agent, pid: located.pid };
      if (located.startTime !== undefined) job.agent.start_time = located.startTime;
    }
    this.target.life.save(job);
    logger.info(
      `job ${job.id} adopted: ` +
        `${located.state === "alive" ? `following agent ${located.pid}` : "its agent is gone; reading its output"}`,
    );
    const output = persistence.store.outputFiles(job.id);
    // Only a store on disk has jobs to take over: one in memory ends with its server.
    if (!output) throw new Error(`job ${job.id}: the store has no output files to follow`);
    const run = this.target.options.attach({
      pid: located.pid,
      startTime: located.startTime,
      marker: job.agent?.tree_marker,
      output,
      jobId: job.id,
      runtime: job.agentName,
      host: job.hostName,
    });
    // Served only once what the agent printed while no server ran has been read: its
    // transcript and turns are there at the first call.
    await run.ready;
    this.target.jobs.set(job.id, job);
    this.target.life.follow(job, run);
    // An agent already gone is finished from its output, result and all: no timeout applies to it.
    if (located.state !== "alive") return;
    // A kill under way when the last server stopped is carried out now.
    if (job.killReason !== undefined) {
      this.target.life
        .kill(job.id, job.killReason)
        .catch((error: unknown) => logger.error(`kill of adopted job ${job.id}: ${String(error)}`));
      return;
    }
    this.target.life.armTimeout(job, this.remainingOf(record));
  }

  private runningEntry(record: JobRecord): JobEntry {
    const job = this.entryOf(record, specFromRecord(record));
    job.status = "running";
    this.target.queue.hold(job);
    const killedBy =
      job.killReason === undefined ? this.target.options.persistence.store.killRequested(job.id) : undefined;
    if (killedBy) job.killReason = outsideKillReason(killedBy);
    return job;
  }
}

/**
 * A job of another runtime or host (a later version's, or one not configured here) is left to a process that has them.
 */
export function runsHere(options: Pick<JobRegistryOptions, "agents" | "hosts">, record: JobRecord): boolean {
  return options.agents.known.includes(record.runtime) && options.hosts.get(record.host) !== undefined;
}

/** What the job asked for; its prompt stays in prompt.txt, the agent's stdin. Undefined when prompt.txt is gone. */
function specOf(record: JobRecord, hasPrompt: boolean): NamedSpec | undefined {
  return hasPrompt ? specFromRecord(record) : undefined;
}
