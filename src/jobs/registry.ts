/**
 * The job registry and its state machine (PROTOCOL.md §8). Both tools that
 * run an agent create a job here: claude_start returns its id at once,
 * claude_run waits for it. At most maxRunning agents run at once; the rest
 * wait their turn in FIFO order. Time and ids are injected.
 *
 *   queued ──a slot frees──▶ running ──agent exits──▶ completed | failed
 *   queued | running ──kill (claude_kill, cancel, shutdown)──▶ killed
 *   queued | running ──timeout──▶ failed (TIMEOUT)
 *   running (attached after a restart) ──agent gone, no result──▶ lost
 *
 * With a store (§15) every change is written to the job's record before the
 * method returns, and a new registry can pick up where a dead server left off.
 */
import type { AgentOutcome, AgentRun, AgentSpec } from "../agent/types.js";
import { DispatchError, describeThrown, quoted, toDispatchError } from "../core/errors.js";
import { isFinishedStatus, isJobId, type IndexedJob, type JobRecord } from "../store/records.js";
import { Approvals } from "./approvals.js";
import type { JobLife } from "./life.js";
import { JobEntry } from "./entry.js";
import { FinishedJobs } from "./finished.js";
import { finalState, recordOf, storeResult } from "./job-record.js";
import { killOwnJob, type KillTarget } from "./kill.js";
import { spawnAgent, type SpawnTarget } from "./spawn.js";
import { memorySlots } from "./memory.js";
import { JobQueue } from "./queue.js";
import { Observer } from "./observed.js";
import { RecordWrites } from "./record-writes.js";
import { SharedQueue } from "./shared-queue.js";
import { runsHere, Takeover } from "./takeover.js";
import {
  type Job,
  type JobKind,
  type JobRegistryOptions,
  type KillReason,
  type KillResult,
  type Persistence,
  isUnfinished,
  outsideKillReason,
} from "./types.js";

export * from "./types.js";

export class JobRegistry {
  private readonly jobs = new Map<string, JobEntry>();
  private readonly finished: FinishedJobs;
  private readonly queue: JobQueue;
  private closing = false;
  private restoring = false;
  /** Agent identities being written to their records: shutdown with keep waits for them. */
  private readonly recording = new Set<Promise<void>>();
  /** Lookups taking a job over from the state directory, by id (§15.3). */
  private readonly recovering = new Map<string, Promise<Job | undefined>>();

  private readonly takeover: Takeover;
  private readonly records: RecordWrites;
  private readonly spawning: SpawnTarget;
  private readonly killing: KillTarget;
  private readonly observer: Observer;
  private readonly shared: SharedQueue;
  /** Permission requests of running jobs (§18): answering them, and hearing of new ones. */
  readonly approvals: Approvals;

  /** The steps of a job's life, as the collaborators below take them. */
  private readonly life: JobLife = {
    save: (job) => this.save(job),
    launch: (job) => this.launch(job),
    follow: (job, run) => this.follow(job, run),
    finish: (job, outcome) => this.finish(job, outcome),
    armTimeout: (job, timeoutMs) => this.armTimeout(job, timeoutMs),
    kill: (id, reason) => this.kill(id, reason),
    find: async (id) => this.jobs.get(id) ?? ((await this.recover(id)) as JobEntry | undefined),
    takeOver: async (record) => {
      this.jobs.delete(record.id);
      await this.restore([record]);
      return this.jobs.get(record.id);
    },
    // During a takeover every running agent is counted first; restore starts the queue at its end.
    busy: () => this.restoring || this.closing,
    discover: () => this.discover(),
  };

  constructor(private readonly options: JobRegistryOptions) {
    const { persistence, clock, logger } = options;
    const { jobs, life } = this;
    this.records = new RecordWrites(options, (job) => jobs.get(job.id) === job && !job.elsewhere);
    this.finished = new FinishedJobs(jobs, {
      persistence,
      clock,
      logger,
      retentionMs: options.retentionMs,
      maxFinishedJobs: options.maxFinishedJobs,
      maxBytes: persistence.maxBytes,
      transcriptChars: options.finishedTranscriptChars,
    });
    const slots = options.slots ?? memorySlots(options.maxRunning);
    this.queue = new JobQueue({ slots, clock, logger, life, elsewhere: () => this.shared });
    const { queue, finished } = this;
    this.takeover = new Takeover({ options, life, jobs, queue, finished });
    this.approvals = new Approvals({ options, life });
    this.observer = new Observer(jobs, { options, life, finished, approvals: this.approvals });
    this.shared = new SharedQueue({ options, life, jobs, queue, observer: this.observer, takeover: this.takeover });
    this.spawning = { options, life, recording: this.recording };
    this.killing = { life, queue };
  }

  /**
   * Starts an agent, or queues it (§8); its record is on disk on return. Throws
   * SHUTTING_DOWN, or STATE_ERROR when the record cannot be written.
   */
  start(spec: AgentSpec, kind: JobKind, timeoutMs?: number, id = this.options.newId()): Job {
    if (this.closing) throw new DispatchError("SHUTTING_DOWN", "the server is shutting down and starts no new jobs");
    this.finished.reap();
    const { clock, agents, hosts } = this.options;
    // Every record names its agent and host (§15.2): a call naming neither gets this server's own.
    const named = {
      ...spec,
      agent: spec.agent ?? agents.home,
      host: spec.host ?? hosts.home.name,
    };
    const job = new JobEntry(id, kind, named, clock.now(), timeoutMs, (entry) => this.queue.position(entry));
    const { store } = this.options.persistence;
    // A job with a free slot starts now: its first record already says "running" with its tree marker, so one
    // flushed write serves both its submission and its start (§15.2).
    const startsNow = this.queue.slotForNewcomer(job);
    if (startsNow) this.markRunning(job);
    try {
      store.create(recordOf(job, this.options.persistence), spec.prompt);
    } catch (error) {
      if (job.slot) this.queue.release(job);
      throw new DispatchError("STATE_ERROR", `cannot write the job's record: ${(error as Error).message}`);
    }
    // On disk now (a store in memory keeps no prompt: then the job does, until its agent has it).
    if (store.promptFile(job.id) !== undefined) job.forgetPrompt();
    this.jobs.set(job.id, job);
    this.armTimeout(job, timeoutMs);
    if (startsNow) {
      spawnAgent(this.spawning, job);
    } else {
      this.queue.push(job);
      this.options.logger.info(`job ${job.id} queued (${job.kind}, position ${this.queue.length}) for ${job.cwd}`);
    }
    return job;
  }

  /** "running", with the tree marker its agent will carry: what the record says before the spawn (§15.2). */
  private markRunning(job: JobEntry): void {
    job.status = "running";
    job.startedAt = this.options.clock.now();
    job.agent = { tree_marker: this.options.persistence.newMarker() };
  }

  /** An id for a job about to start, for what must be named after it first (its worktree, §19). */
  readonly newJobId = (): string => this.options.newId();

  /** Records that a finished job's worktree was merged or discarded (§19). */
  setWorktreeState(id: string, state: "merged" | "discarded"): void {
    const job = this.jobs.get(id);
    if (job?.spec.worktree)
      this.save(Object.assign(job, { spec: { ...job.spec, worktree: { ...job.spec.worktree, state } } }));
  }

  get(id: string): Job | undefined {
    this.finished.reap();
    return this.jobs.get(id);
  }

  /**
   * A job this server does not know, from the state directory: a finished
   * one becomes reachable, an unfinished one whose
   * server has died is taken over now (§15.3), one whose server lives is
   * served from its files (§15.6); undefined if none.
   */
  async recover(id: string): Promise<Job | undefined> {
    const persistence = this.options.persistence;
    if (this.finished.isUnread(id)) return this.finished.takeUnread(id);
    if (this.jobs.has(id) || this.closing || !isJobId(id)) return this.jobs.get(id);
    // One takeover per id: a second lookup while the first is reading the agent's output waits for it.
    let recovering = this.recovering.get(id);
    if (!recovering) {
      recovering = this.recoverFromStore(id, persistence).finally(() => this.recovering.delete(id));
      this.recovering.set(id, recovering);
    }
    return recovering;
  }

  /** Taken over if its owner is gone; served from its files if its owner lives (§15.6). */
  private async recoverFromStore(id: string, persistence: Persistence): Promise<Job | undefined> {
    const record = persistence.store.read(id);
    if (!record) {
      // Something other than a regular file in place of its record: STATE_ERROR naming it, not "no such job" (§15.1).
      persistence.store.refuseSpecialRecord?.(id);
      return undefined;
    }
    await this.restore([record]);
    if (this.jobs.has(id) || this.closing) return this.jobs.get(id);
    // Its owner may live, or another server took it over first: read again, as the takeover may have changed it.
    const now = persistence.store.read(id);
    if (!now || isFinishedStatus(now.status)) return now ? this.finished.restore(now) : undefined;
    // Its agent is followed by its runtime's reader.
    await this.options.ready?.();
    return this.observer.observe(now);
  }

  /** The job ids, here or in the state directory, that start with `prefix`: a unique one names its job (§5.3). */
  idsStartingWith(prefix: string): string[] {
    const start = prefix.toLowerCase();
    const ids = new Set([...this.jobs.keys(), ...this.options.persistence.store.jobIds()]);
    return [...ids].filter((id) => id.startsWith(start));
  }

  /** Every job folder of the state directory this server does not know yet, looked up (§15.6): for listings. */
  async discover(): Promise<void> {
    await this.lookUp(this.unknownIds());
  }

  /** The job folders of the state directory this server knows neither in memory nor from the index. */
  private unknownIds(): string[] {
    return this.options.persistence.store.jobIds().filter((id) => !this.jobs.has(id) && !this.finished.isUnread(id));
  }

  /**
   * Looks these jobs up (recover); a folder that cannot be read is left
   * out, and a call naming its job told why (§15.1).
   */
  private async lookUp(ids: readonly string[]): Promise<void> {
    const warn = (id: string) => (error: unknown) => this.options.logger.warn(`job ${id}: ${(error as Error).message}`);
    await Promise.all(ids.map((id) => this.recover(id).catch(warn(id))));
  }

  /**
   * The unfinished jobs of the state directory this server does not know, and could run, whose owner `isCarried`
   * does not name (§15.8): a server that went, or one that died. Read from their records; nothing is taken over.
   */
  findOrphans(isCarried: (owner: JobRecord["owner"]) => boolean): JobRecord[] {
    const { persistence } = this.options;
    return this.unknownIds().flatMap((id) => {
      if (this.recovering.has(id)) return [];
      const record = persistence.store.read(id);
      if (!record || isFinishedStatus(record.status) || isCarried(record.owner)) return [];
      // One of a runtime or host this process has not got waits for a server that has (§15.3): not an orphan of ours.
      return runsHere(this.options, record) ? [record] : [];
    });
  }

  /** Carries the orphans findOrphans finds: each taken over (its owner is gone) or watched until its owner goes. */
  async carryOrphans(isCarried: (owner: JobRecord["owner"]) => boolean): Promise<number> {
    const orphans = this.findOrphans(isCarried);
    await this.lookUp(orphans.map(({ id }) => id));
    return orphans.length;
  }

  /** Nothing to carry: no job running, queued, watched or being taken over here, and no operator command running. */
  isIdle(): boolean {
    if (this.recovering.size > 0 || this.queue.length > 0 || this.observer.size > 0) return false;
    if (this.options.onDone?.busy() || this.options.onInput?.busy()) return false;
    return ![...this.jobs.values()].some((job) => isUnfinished(job));
  }

  /** Jobs running under this server, for shutdown and diagnostics (another server's are its own). */
  running(): Job[] {
    return [...this.jobs.values()].filter((job) => job.status === "running" && !job.elsewhere);
  }

  /** Every job still known, oldest first. Indexed jobs are read for the list, and not kept in memory for it. */
  list(): Job[] {
    this.finished.reap();
    const unread = this.finished.unreadIds().flatMap((id) => this.finished.readUnread(id) ?? []);
    return [...unread, ...this.jobs.values()];
  }

  /**
   * Kills a job's whole tree and waits for its end (a queued job is removed
   * unstarted); the reason is recorded first, and the first wins.
   */
  async kill(id: string, reason: KillReason): Promise<KillResult> {
    const job = this.jobs.get(id);
    if (!job) throw new DispatchError("JOB_NOT_FOUND", `no job with id ${quoted(id)}`);
    if (this.observer.has(id)) return this.observer.kill(id, reason);
    return killOwnJob(this.killing, job, reason);
  }

  /** Refuses new jobs, drops the queue, kills every running job, and waits until all have finished. */
  async shutdown(): Promise<void> {
    this.closing = true;
    this.queue.close();
    this.observer.close();
    await this.options.onDone?.close();
    await this.options.onInput?.close();
    // A job being taken over is served (and killable) once its output is read.
    await Promise.allSettled([...this.recovering.values()]);
    for (const job of [...this.queue.jobs()]) await this.kill(job.id, "shutdown");
    const running = this.running();
    if (running.length > 0) this.options.logger.info(`shutdown: killing ${running.length} running job(s)`);
    await Promise.all(running.map((job) => this.kill(job.id, "shutdown").catch(() => undefined)));
  }

  /**
   * Stops starting jobs and leaves running agents and queued jobs, on disk, to the
   * next server (§3, CLAUDE_DISPATCH_ON_EXIT=keep).
   */
  async leave(): Promise<void> {
    this.closing = true;
    this.queue.close();
    this.observer.close();
    await this.options.onDone?.close();
    await this.options.onInput?.close();
    const running = this.running().length;
    if (running + this.queue.length > 0) {
      this.options.logger.info(
        `leaving ${running} running and ${this.queue.length} queued job(s) to another server or the carrier`,
      );
    }
    // An agent whose identity is not on disk yet could be neither followed nor killed by the next server.
    await Promise.allSettled([...this.recording]);
  }

  /**
   * Takes over the jobs of servers that are gone (§15.3), given records oldest first: finished ones become
   * reachable, queued ones queue here, running ones are followed (or finished
   * from their output). A live server's are left to it.
   */
  async restore(records: readonly JobRecord[]): Promise<void> {
    this.restoring = true;
    try {
      const before = this.jobs.size;
      await this.takeover.takeOver(records);
      // Indexed jobs and ones read from their records come together in one finish order.
      if (this.jobs.size > before) this.finished.sort();
    } finally {
      this.restoring = false;
    }
    this.finished.reap();
    this.queue.launchNext();
  }

  /**
   * Finished jobs from the index (§15.5): counted for retention and the disk cap
   * now, read when asked for. Call before restore.
   */
  rememberFinished(entries: readonly IndexedJob[]): void {
    this.finished.remember(entries);
  }

  private armTimeout(job: JobEntry, timeoutMs: number | undefined): void {
    if (timeoutMs === undefined) return;
    job.cancelTimeout = this.options.clock.setTimer(() => {
      this.kill(job.id, "timeout").catch((error: unknown) =>
        this.options.logger.error(`timeout kill of job ${job.id}: ${String(error)}`),
      );
    }, timeoutMs);
  }

  /** A queued job's turn: "running" on disk, then the spawn. */
  private launch(job: JobEntry): void {
    const { store } = this.options.persistence;
    // A kill asked for from outside (the command line, another server) while the job was queued.
    const killedBy = store.killRequested(job.id);
    if (killedBy) {
      job.killReason = outsideKillReason(killedBy);
      this.queue.release(job);
      this.finish(job, { ok: false, code: "KILLED", detail: "removed from the queue before it started" });
      return;
    }
    // Started once, by whichever server claims it (§15.7).
    if (!this.shared.claimStart(job)) return;
    if (this.recordLaunch(job)) spawnAgent(this.spawning, job);
  }

  /**
   * "running", with the tree marker, is on disk before the spawn: a server
   * dying right after leaves an agent the next finds
   * by its marker, never a "queued" record it would start twice (§15.2).
   * False (the job failed) when it cannot be written.
   */
  private recordLaunch(job: JobEntry): boolean {
    this.markRunning(job);
    try {
      this.options.persistence.store.write(recordOf(job, this.options.persistence));
    } catch (error) {
      job.agent = undefined;
      this.queue.release(job);
      this.finish(job, {
        ok: false,
        code: "STATE_ERROR",
        detail: `its record could not be written, so it was not started: ${(error as Error).message}`,
      });
      return false;
    }
    return true;
  }

  /** Waits for the agent's outcome and finishes the job with it. */
  private follow(job: JobEntry, run: AgentRun): void {
    job.attach(run);
    this.approvals.watch(job);
    run.outcome
      .catch((error: unknown): AgentOutcome => {
        // Classified where it happened (a state file refused: STATE_ERROR), else a bug: its text to the log only (§9).
        if (!(error instanceof DispatchError)) this.options.logger.error(`job ${job.id}: ${describeThrown(error)}`);
        const { code, message } = toDispatchError(error);
        return { ok: false, code, detail: message };
      })
      .then((outcome) => {
        // A job ended by a failed kill already finished; its late exit changes nothing.
        if (job.status !== "running") return;
        this.queue.release(job);
        this.finish(job, outcome);
      })
      .catch((error: unknown) => this.options.logger.error(`job ${job.id}: ${String(error)}`));
  }

  private finish(job: JobEntry, outcome: AgentOutcome): void {
    const { clock, logger } = this.options;
    const persistence = this.options.persistence;
    job.cancelTimeout?.();
    job.cancelTimeout = undefined;
    const now = clock.now();
    job.finishedAt =
      outcome.endedAt === undefined ? now : Math.min(now, Math.max(job.startedAt ?? job.submittedAt, outcome.endedAt));
    const killedBy = job.killReason ? undefined : persistence.store.killRequested(job.id);
    if (killedBy) job.killReason = outsideKillReason(killedBy);
    const final = finalState(job, outcome);
    job.status = final.status;
    job.outcome = final.outcome;
    storeResult(job, persistence.store, this.options.logger);
    const bytes = this.save(job);
    // Older jobs are forgotten now; this one only at a later lookup, so whoever waits on it still reads its result.
    this.finished.reap();
    this.finished.add(job.id, bytes);
    // The code the tools report (KILLED, TIMEOUT), not the agent's own end (AGENT_EXITED by a signal).
    logger.info(`job ${job.id} ${job.status}${final.outcome.ok ? "" : ` (${final.outcome.code})`}`);
    job.markDone();
    // Only the server that finishes a job runs it (once per job); none for jobs its own shutdown ends.
    if (!this.closing)
      void this.options.onDone
        ?.run(job)
        .catch((error: unknown) => logger.error(`CLAUDE_DISPATCH_ON_DONE for job ${job.id}: ${String(error)}`));
    // Nothing kept in memory that is on disk: with its output in files, the run goes (BENCHMARKS.md (q)).
    if (persistence.store.outputFiles(job.id))
      job.letGoOfRun(() => persistence.replayTranscript(job.id, job.agentName));
    this.finished.boundTranscripts();
  }

  /** Writes the job's record (a failure is logged, the job goes on, §15.2); a finished job's folder size if written. */
  private save(job: JobEntry): number | undefined {
    return this.records.save(job);
  }
}
