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
import type { AgentAttacher, AgentLauncher, AgentOptions, AgentOutcome, AgentRun, AgentSpec, LiveSummary } from "../runtimes/claude/claude.js";
import type { CancelTimer, Clock } from "../core/clock.js";
import { DispatchError, quoted, toDispatchError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import type { OutputFiles } from "../hosts/local/process.js";
import { isFinishedStatus, isJobId, type AgentRecord, type IndexedJob, type JobRecord, type ProcessIdentity, type RecordStatus, type StoredOutcome } from "../store/state-store.js";
import { Transcript } from "../core/transcript.js";

/** A job's status is its record's (§8, §15.2). */
export type JobStatus = RecordStatus;
export type JobKind = "run" | "start";
export type KillReason = "claude_kill" | "cancelled" | "timeout" | "shutdown" | "cli";

/** Queued or running: the job has not finished yet. */
export function isUnfinished(job: Pick<Job, "status">): boolean {
  return !isFinishedStatus(job.status);
}

export interface Job {
  readonly id: string;
  readonly kind: JobKind;
  readonly cwd: string;
  readonly resumeSessionId: string | undefined;
  /** When the job was submitted, then when its agent started. */
  readonly startedAt: number;
  /** When the job was submitted; unlike startedAt, it never moves, across restarts too. */
  readonly submittedAt: number;
  readonly status: JobStatus;
  readonly finishedAt: number | undefined;
  /**
   * Set when the job finishes. For a killed job it is KILLED (KILL_FAILED when processes survived),
   * with the result the agent printed, if any.
   * A long result text is not kept here: resultText() reads it.
   */
  readonly outcome: AgentOutcome | undefined;
  /** The whole result text, from memory or from the job's result file. */
  resultText(): string | undefined;
  /** The result text's first maxChars characters and its whole length, reading no more of its file than needed. */
  resultHead(maxChars: number): { text: string; chars: number } | undefined;
  /** Set before the kill is sent, so the exit that follows is read as a kill, not a crash. */
  readonly killReason: KillReason | undefined;
  /** Resolves when the job is finished; never rejects. */
  readonly done: Promise<void>;
  readonly timeoutMs: number | undefined;
  /** The prompt's first line, clipped, for listings. */
  readonly promptPreview: string;
  /** False while queued, and for a job killed before its turn came. */
  readonly launched: boolean;
  /** 1 for the next job to run; undefined unless queued. */
  queuePosition(): number | undefined;
  /** What the agent has done so far (§5.3). */
  live(): LiveSummary;
  /** Calls listener once when the job finishes (at once if it has); returns the unsubscribe. */
  whenDone(listener: () => void): () => void;
  /** Calls listener whenever the job starts or its agent reports something; returns the unsubscribe. */
  onActivity(listener: () => void): () => void;
  readonly transcript: Transcript;
}

export interface KillResult {
  /** False when the job had already finished: nothing was signalled. */
  killed: boolean;
  survivors: number[];
}

/** What the registry needs of the state directory (§15). */
export interface JobStore {
  create(record: JobRecord, prompt: string): void;
  write(record: JobRecord): void;
  outputFiles(id: string): OutputFiles;
  writeResult(id: string, text: string): void;
  readResult(id: string): string | undefined;
  readResultHead(id: string, maxChars: number): string | undefined;
  /** Whether the job's prompt.txt is there (a regular file, not a link). */
  hasPrompt(id: string): boolean;
  /** Where the job's prompt is: the agent reads it as its stdin (§15.2). */
  promptFile(id: string): string;
  killRequested(id: string): boolean;
  /** Bytes the job's folder uses. */
  size(id: string): number;
  remove(id: string): void;
  claimJob(id: string, generation: number, claimer: ProcessIdentity, isAlive: (holder: ProcessIdentity) => Promise<boolean | undefined>): Promise<boolean>;
  /** Removes the claim files of earlier restarts, which no one reads again. */
  dropClaimsBefore(id: string, generation: number): void;
  read(id: string): JobRecord | undefined;
}

export interface Persistence {
  store: JobStore;
  /** This server, as it appears in the records it owns. */
  owner: ProcessIdentity;
  attach: AgentAttacher;
  /** Rebuilds the transcript of a job finished before this server started, from its output file. */
  replayTranscript(id: string): Transcript;
  /** Disk used by finished jobs; the oldest are removed beyond it. */
  maxBytes: number;
  /** A fresh tree marker value for an agent about to be spawned. */
  newMarker(): string;
  /** For taking over a job on a lookup miss (§15.3): the same checks restore uses. */
  isAlive: IsAlive;
  findMarked?: FindMarked;
  /**
   * Checks a queued job taken over after a restart against today's policy and
   * directories, as a new call would be (§15.3); throws DispatchError to refuse it.
   */
  admit(spec: AgentSpec): Promise<AgentSpec>;
}

/**
 * Whether a process is still the one a record names: same start time, or else
 * carrying the tree marker. Undefined when it cannot be told (no process table).
 */
export type IsAlive = (process: ProcessIdentity & { tree_marker?: string }) => Promise<boolean | undefined>;

/** The live process carrying a tree marker (null: none; undefined: cannot be told). */
export type FindMarked = (marker: string) => Promise<{ pid: number; startTime: string } | null | undefined>;

type LocatedAgent =
  | { state: "alive" | "gone"; pid: number | undefined; startTime: string | undefined }
  | { state: "unrecorded" };

export interface JobRegistryOptions {
  launch: AgentLauncher;
  clock: Clock;
  newId(): string;
  logger: Logger;
  /** How long a finished job stays reachable. Running and queued jobs are never reaped. */
  retentionMs: number;
  /** At most this many finished jobs are kept; the oldest go first. */
  maxFinishedJobs: number;
  /** Transcript characters kept across all finished jobs; the oldest finished transcripts are dropped first. */
  finishedTranscriptChars: number;
  /** Agents running at once (§8); later jobs queue. */
  maxRunning: number;
  /** Durable jobs (§15); without it jobs live in memory only. */
  persistence?: Persistence;
}

/** How a killed job's outcome says who killed it. */
export const KILL_REASON_TEXT: Readonly<Record<KillReason, string>> = {
  claude_kill: "by claude_kill",
  cancelled: "because its request was cancelled",
  shutdown: "because the server shut down",
  timeout: "at its timeout",
  cli: "from the command line (claude-dispatch kill)",
};

const PREVIEW_CHARS = 80;
/** Longer result texts are read from the job's result file when asked for, not held in memory. */
const RESULT_CHARS_IN_MEMORY = 4096;
const NO_TRANSCRIPT = new Transcript(0);

/** Enough of a prompt's start for its preview, however long the prompt: listings never touch the rest. */
const PREVIEW_SOURCE_CHARS = 4096;

/**
 * The prompt's start on one line, clipped, computed once per job. A copy of its own: V8 keeps a slice's
 * whole parent alive, and the parent may be a prompt of megabytes.
 */
function previewOf(prompt: string): string {
  const flat = prompt.slice(0, PREVIEW_SOURCE_CHARS).replace(/\s+/g, " ").trim();
  const clipped = flat.length > PREVIEW_CHARS ? `${flat.slice(0, PREVIEW_CHARS)}…` : flat;
  return JSON.parse(JSON.stringify(clipped)) as string;
}

class JobEntry implements Job {
  status: JobStatus = "queued";
  finishedAt: number | undefined;
  outcome: AgentOutcome | undefined;
  killReason: KillReason | undefined;
  run: AgentRun | undefined;
  /** Set once the result text is in the job's result.txt (§15.4): where to read it when it is not in memory. */
  resultFile: Pick<JobStore, "readResult" | "readResultHead"> | undefined;
  /** For a job finished before this server started: its transcript, rebuilt on first use. */
  replayTranscript: (() => Transcript) | undefined;
  private replayed: Transcript | undefined;
  submittedAt: number;
  generation = 0;
  agent: AgentRecord | undefined;
  killing: Promise<{ survivors: number[]; undetermined?: true }> | undefined;
  cancelTimeout: CancelTimer | undefined;
  readonly done: Promise<void>;
  private resolveDone!: () => void;
  private readonly doneListeners = new Set<() => void>();
  /** Each listener, with its subscription to the agent once there is one. */
  private readonly listeners = new Map<() => void, (() => void) | undefined>();

  readonly promptPreview: string;

  constructor(
    readonly id: string,
    readonly kind: JobKind,
    public spec: AgentSpec,
    public startedAt: number,
    readonly timeoutMs: number | undefined,
    private readonly positionOf: (job: JobEntry) => number | undefined,
    promptPreview = previewOf(spec.prompt),
  ) {
    this.submittedAt = startedAt;
    this.promptPreview = promptPreview;
    this.done = new Promise<void>((resolve) => (this.resolveDone = resolve));
  }

  /** The prompt is on disk, or with the agent: memory keeps only its preview (a queued job starts from prompt.txt). */
  forgetPrompt(): void {
    if (this.spec.prompt !== "") this.spec = { ...this.spec, prompt: "" };
  }

  resultText(): string | undefined {
    return this.outcome?.result?.text ?? this.resultFile?.readResult(this.id);
  }

  markDone(): void {
    this.resolveDone();
    for (const listener of [...this.doneListeners]) listener();
    this.doneListeners.clear();
  }

  whenDone(listener: () => void): () => void {
    if (this.finishedAt !== undefined) {
      listener();
      return () => undefined;
    }
    this.doneListeners.add(listener);
    return () => this.doneListeners.delete(listener);
  }

  resultHead(maxChars: number): { text: string; chars: number } | undefined {
    const inMemory = this.outcome?.result?.text;
    if (inMemory !== undefined) return { text: inMemory.slice(0, maxChars), chars: inMemory.length };
    const chars = this.outcome?.result?.textChars;
    if (chars === undefined || !this.resultFile) return undefined;
    const text = this.resultFile.readResultHead(this.id, maxChars);
    return text === undefined ? undefined : { text, chars };
  }

  get cwd(): string {
    return this.spec.cwd;
  }
  get resumeSessionId(): string | undefined {
    return this.spec.resumeSessionId;
  }
  get launched(): boolean {
    return this.run !== undefined || this.agent !== undefined;
  }
  /** The transcript if it is in memory; never rebuilds one from the output file. */
  heldTranscript(): Transcript | undefined {
    return this.run?.transcript ?? this.replayed;
  }
  get transcript(): Transcript {
    if (this.run) return this.run.transcript;
    if (this.replayTranscript) this.replayed ??= this.replayTranscript();
    return this.replayed ?? NO_TRANSCRIPT;
  }
  queuePosition(): number | undefined {
    return this.status === "queued" ? this.positionOf(this) : undefined;
  }
  live(): LiveSummary {
    return this.run?.live() ?? { turns: 0, events: 0 };
  }
  onActivity(listener: () => void): () => void {
    this.listeners.set(listener, this.run?.onActivity(listener));
    return () => {
      this.listeners.get(listener)?.();
      this.listeners.delete(listener);
    };
  }
  /** The agent started: listeners that came while queued now follow it, and hear of the start. */
  attach(run: AgentRun): void {
    this.run = run;
    for (const listener of this.listeners.keys()) this.listeners.set(listener, run.onActivity(listener));
    for (const listener of [...this.listeners.keys()]) listener();
  }
}

export class JobRegistry {
  private readonly jobs = new Map<string, JobEntry>();
  /** Finished job ids in finish order: reaping looks only at the head, never scans every job. */
  private readonly finishedOrder: string[] = [];
  /** Disk used by each finished job's folder, when jobs are durable. */
  private readonly finishedBytes = new Map<string, number>();
  private totalFinishedBytes = 0;
  private readonly queue: JobEntry[] = [];
  private runningCount = 0;
  private closing = false;
  private restoring = false;
  /** Agent identities being written to their records: shutdown with keep waits for them. */
  private readonly recording = new Set<Promise<void>>();
  /** Finished jobs known from the index but not read yet, with their finish times (§15.5). */
  private readonly unread = new Map<string, number>();
  /** Lookups taking a job over from the state directory, by id (§15.3). */
  private readonly recovering = new Map<string, Promise<Job | undefined>>();

  constructor(private readonly options: JobRegistryOptions) {}

  /**
   * Starts an agent, or queues it when maxRunning agents already run. With a
   * store, the job's record is on disk before this returns. Throws
   * SHUTTING_DOWN once shutdown began, STATE_ERROR when the record cannot be written.
   */
  start(spec: AgentSpec, kind: JobKind, timeoutMs?: number): Job {
    if (this.closing) throw new DispatchError("SHUTTING_DOWN", "the server is shutting down and starts no new jobs");
    this.reap();
    const { clock } = this.options;
    const job = new JobEntry(this.options.newId(), kind, spec, clock.now(), timeoutMs, (entry) => this.queue.indexOf(entry) + 1);
    const persistence = this.options.persistence;
    if (persistence) {
      try {
        persistence.store.create(this.recordOf(job), spec.prompt);
      } catch (error) {
        throw new DispatchError("STATE_ERROR", `cannot write the job's record: ${(error as Error).message}`);
      }
      job.forgetPrompt();
    }
    this.jobs.set(job.id, job);
    this.armTimeout(job, timeoutMs);
    this.enqueue(job);
    return job;
  }

  get(id: string): Job | undefined {
    this.reap();
    return this.jobs.get(id);
  }

  /**
   * A job this server does not know, from the state directory: finished ones
   * become reachable, and an unfinished one whose server has died since this
   * one started is taken over now, as at startup (§15.3). Undefined when
   * there is no such job, or its server is still alive.
   */
  async recover(id: string): Promise<Job | undefined> {
    const persistence = this.options.persistence;
    if (persistence && this.unread.has(id)) {
      // Read once asked for, then kept like a job that finished here.
      const job = this.readUnread(id);
      if (job) {
        this.unread.delete(id);
        this.jobs.set(id, job);
      }
      return job;
    }
    if (!persistence || this.jobs.has(id) || this.closing || !isJobId(id)) return this.jobs.get(id);
    // One takeover per id: a second lookup while the first is reading the agent's output waits for it.
    let recovering = this.recovering.get(id);
    if (!recovering) {
      recovering = this.recoverFromStore(id, persistence).finally(() => this.recovering.delete(id));
      this.recovering.set(id, recovering);
    }
    return recovering;
  }

  private async recoverFromStore(id: string, persistence: Persistence): Promise<Job | undefined> {
    const record = persistence.store.read(id);
    if (!record) return undefined;
    await this.restore([record]);
    return this.jobs.get(id);
  }

  /** Jobs still running, for shutdown and diagnostics. */
  running(): Job[] {
    return [...this.jobs.values()].filter((job) => job.status === "running");
  }

  /** Every job still known, oldest first. Indexed jobs are read for the list, and not kept in memory for it. */
  list(): Job[] {
    this.reap();
    const unread = [...this.unread.keys()].flatMap((id) => this.readUnread(id) ?? []);
    return [...unread, ...this.jobs.values()];
  }

  /**
   * Kills a job's whole process tree and waits for it to finish; a queued job
   * is removed without starting. The reason is recorded before the kill is
   * sent, and the first reason wins.
   */
  async kill(id: string, reason: KillReason): Promise<KillResult> {
    const job = this.jobs.get(id);
    if (!job) throw new DispatchError("JOB_NOT_FOUND", `no job with id ${quoted(id)}`);
    if (job.status === "queued") {
      this.queue.splice(this.queue.indexOf(job), 1);
      job.killReason = reason;
      this.finish(job, { ok: false, code: "KILLED", detail: "removed from the queue before it started" });
      return { killed: true, survivors: [] };
    }
    if (job.status !== "running" || !job.run) return { killed: false, survivors: [] };
    const reasonSetHere = job.killReason === undefined;
    if (reasonSetHere) {
      job.killReason = reason;
      // On disk before any signal: a server that stops mid-kill leaves the kill to the next one (§15.3).
      this.save(job);
    }
    job.killing ??= job.run.kill();
    const report = await job.killing;
    if (report.undetermined) {
      // Nothing was signalled (an adopted agent, and no process table to tell it by): the job runs on, and a later kill tries again.
      job.killing = undefined;
      if (reasonSetHere && job.status === "running") {
        job.killReason = undefined;
        this.save(job);
      }
      throw new DispatchError("KILL_FAILED", `the process table could not be read, so job ${id}'s agent was not signalled; it is still running; try again`);
    }
    const { survivors } = report;
    if (survivors.length === 0) {
      await job.done;
    } else if (job.status === "running") {
      // The agent itself may never exit: end the job now, so nothing waits on it forever.
      this.release();
      this.finish(job, { ok: false, code: "KILL_FAILED", detail: `processes ${survivors.join(", ")} survived SIGKILL` });
    }
    return { killed: true, survivors };
  }

  /** Refuses new jobs, drops the queue, kills every running job, and waits until all have finished. */
  async shutdown(): Promise<void> {
    this.closing = true;
    // A job being taken over is served (and killable) once its output is read.
    await Promise.allSettled([...this.recovering.values()]);
    for (const job of [...this.queue]) await this.kill(job.id, "shutdown");
    const running = this.running();
    if (running.length > 0) this.options.logger.info(`shutdown: killing ${running.length} running job(s)`);
    await Promise.all(running.map((job) => this.kill(job.id, "shutdown").catch(() => undefined)));
  }

  /**
   * Stops starting jobs and leaves the rest as they are (§3, CLAUDE_DISPATCH_ON_EXIT=keep):
   * running agents keep running and queued jobs stay queued, on disk, for the next server.
   */
  async leave(): Promise<void> {
    this.closing = true;
    const running = this.running().length;
    if (running + this.queue.length > 0) {
      this.options.logger.info(`leaving ${running} running and ${this.queue.length} queued job(s) to the next server`);
    }
    // An agent whose identity is not on disk yet could be neither followed nor killed by the next server.
    await Promise.allSettled([...this.recording]);
  }

  /**
   * Takes over the jobs of servers that are gone (§15.3), given every record
   * in the state directory, oldest first: finished jobs become reachable
   * again, queued ones queue here, and running ones are followed (or finished
   * from their output, when their agent is gone too). Jobs of a server still
   * alive are left to it.
   */
  async restore(records: readonly JobRecord[], isAlive?: IsAlive, findMarked?: FindMarked): Promise<void> {
    const persistence = this.options.persistence;
    if (!persistence) return;
    isAlive ??= persistence.isAlive;
    findMarked ??= persistence.findMarked;
    this.restoring = true;
    try {
      await this.takeOver(records, isAlive, persistence, findMarked);
    } finally {
      this.restoring = false;
    }
    this.reap();
    this.launchNext();
  }

  private async takeOver(records: readonly JobRecord[], isAlive: IsAlive, persistence: Persistence, findMarked: FindMarked | undefined): Promise<void> {
    const { logger } = this.options;
    // Finished jobs first, in finish order, so that jobs ending during the takeover come after them (reaping reads that order).
    const finished = records.filter((record) => !this.jobs.has(record.id) && !this.unread.has(record.id) && isFinishedStatus(record.status));
    finished.sort((a, b) => (a.finished_at ?? 0) - (b.finished_at ?? 0));
    for (const record of finished) this.restoreFinished(record);
    // Indexed jobs and ones whose index line was missing come together in one finish order.
    if (finished.length > 0 && this.unread.size > 0) this.finishedOrder.sort((a, b) => (this.finishedAtOf(a) ?? 0) - (this.finishedAtOf(b) ?? 0));
    for (const loaded of records) {
      if (this.jobs.has(loaded.id) || isFinishedStatus(loaded.status)) continue;
      try {
        // An owner that may be alive (unknown counts: the process table could not be read) keeps its job.
        if ((await isAlive(loaded.owner)) !== false) continue;
        if (!(await persistence.store.claimJob(loaded.id, loaded.generation + 1, persistence.owner, isAlive))) continue;
        // Read again now that it is ours: another server may have taken it over, or finished it, since the directory was read.
        const record = persistence.store.read(loaded.id);
        if (!record || record.generation !== loaded.generation || isFinishedStatus(record.status)) continue;
        persistence.store.dropClaimsBefore(record.id, record.generation + 1);
        const spec = this.specOf(record);
        let refusal: DispatchError | undefined;
        if (record.status === "queued" && spec) {
          try {
            Object.assign(spec, await persistence.admit(spec));
          } catch (error) {
            refusal = toDispatchError(error);
          }
        }
        const agent = record.status === "running" ? await this.locate(record.agent, isAlive, findMarked) : undefined;
        await this.adopt(record, { spec, refusal, agent });
      } catch (error) {
        // One unreadable folder must not stop the server: the job is left where it is.
        logger.error(`cannot take over job ${loaded.id}: ${(error as Error).message}`);
      }
    }
  }

  /** What the job asked for; its prompt stays in prompt.txt, the agent's stdin. Undefined when prompt.txt is gone. */
  private specOf(record: JobRecord): AgentSpec | undefined {
    if (!(this.options.persistence as Persistence).store.hasPrompt(record.id)) return undefined;
    return { prompt: "", cwd: record.cwd, options: record.options, ...(record.resume_session_id ? { resumeSessionId: record.resume_session_id } : {}) };
  }

  /**
   * Where a running job's agent is now. A recorded pid is checked (unknown
   * counts as alive: it is followed, and its liveness polled until it can be
   * told). A record written just before the spawn has only the tree marker:
   * the agent is looked for by it.
   */
  private async locate(agent: AgentRecord | undefined, isAlive: IsAlive, findMarked: FindMarked | undefined): Promise<LocatedAgent> {
    if (!agent) return { state: "unrecorded" };
    // This server is never its own agent: a record naming its pid is wrong about the pid, so the marker alone is trusted.
    if (agent.pid !== undefined && agent.pid !== (this.options.persistence as Persistence).owner.pid) {
      const alive = (await isAlive({ pid: agent.pid, ...(agent.start_time ? { start_time: agent.start_time } : {}), ...(agent.tree_marker ? { tree_marker: agent.tree_marker } : {}) })) !== false;
      return { state: alive ? "alive" : "gone", pid: agent.pid, startTime: agent.start_time };
    }
    const found = agent.tree_marker === undefined || !findMarked ? undefined : await findMarked(agent.tree_marker);
    if (found === undefined) return { state: "unrecorded" };
    if (found === null) return { state: "gone", pid: undefined, startTime: undefined };
    return { state: "alive", pid: found.pid, startTime: found.startTime };
  }

  private async adopt(record: JobRecord, found: { spec: AgentSpec | undefined; refusal: DispatchError | undefined; agent: LocatedAgent | undefined }): Promise<void> {
    const persistence = this.options.persistence as Persistence;
    const { clock, logger } = this.options;
    const spec = found.spec ?? { prompt: "", cwd: record.cwd, options: record.options };
    const job = new JobEntry(record.id, record.kind, spec, record.started_at ?? record.submitted_at, record.timeout_ms, (entry) => this.queue.indexOf(entry) + 1, record.prompt_preview);
    job.submittedAt = record.submitted_at;
    job.generation = record.generation + 1;
    job.agent = record.agent;
    job.killReason = record.kill_reason as KillReason | undefined;
    // The caller's budget counts from submission, across restarts.
    // Capped at the whole budget: a wall clock set back must not lengthen it.
    const remaining = record.timeout_ms === undefined ? undefined : Math.min(record.timeout_ms, Math.max(0, record.timeout_ms - (clock.now() - record.submitted_at)));
    if (record.status === "queued") {
      this.jobs.set(job.id, job);
      if (!found.spec) {
        // Starting it with no prompt would spend money on nothing.
        this.finish(job, { ok: false, code: "STATE_ERROR", detail: "its prompt.txt is missing from the state directory; it was not started" });
      } else if (found.refusal) {
        this.finish(job, { ok: false, code: found.refusal.code, detail: `not started after the restart: ${found.refusal.message}` });
      } else if (remaining === 0) {
        // Its time ran out while no server ran: it is not started only to be killed.
        job.killReason = "timeout";
        this.finish(job, { ok: false, code: "TIMEOUT", detail: "" });
      } else {
        this.save(job);
        logger.info(`job ${job.id} adopted: queued`);
        this.armTimeout(job, remaining);
        // Only queued here: restore starts the queue once every running job is counted.
        this.queue.push(job);
      }
      return;
    }
    const located = found.agent ?? { state: "unrecorded" };
    job.status = "running";
    this.runningCount += 1;
    if (job.killReason === undefined && persistence.store.killRequested(job.id)) job.killReason = "cli";
    if (located.state === "alive" && job.agent) {
      job.agent = { ...job.agent, pid: located.pid };
      if (located.startTime !== undefined) job.agent.start_time = located.startTime;
    }
    this.save(job);
    if (located.state === "unrecorded") {
      // Nothing says which process it is: it can be neither followed nor killed from here.
      this.jobs.set(job.id, job);
      this.release();
      const detail = job.agent?.tree_marker
        ? "the server stopped before it recorded the agent's pid, and this system cannot find the agent by its tree marker"
        : "the server stopped before it recorded the agent's pid";
      this.finish(job, { ok: false, code: "AGENT_LOST", detail });
      return;
    }
    logger.info(`job ${job.id} adopted: ${located.state === "alive" ? `following agent ${located.pid}` : "its agent is gone; reading its output"}`);
    const run = persistence.attach({ pid: located.pid, startTime: located.startTime, marker: job.agent?.tree_marker, output: persistence.store.outputFiles(job.id) });
    // Served only once what the agent printed while no server ran has been read: its transcript and turns are there at the first call.
    await run.ready;
    this.jobs.set(job.id, job);
    this.follow(job, run);
    // An agent already gone is finished from its output, result and all: no timeout applies to it.
    if (located.state !== "alive") return;
    // A kill under way when the last server stopped is carried out now.
    if (job.killReason !== undefined) {
      this.kill(job.id, job.killReason).catch((error: unknown) => logger.error(`kill of adopted job ${job.id}: ${String(error)}`));
      return;
    }
    this.armTimeout(job, remaining);
  }

  /** A finished job from its record: reachable again, and counted for retention unless it already is (an indexed one). */
  private restoreFinished(record: JobRecord): JobEntry {
    const job = this.finishedFromRecord(record);
    this.jobs.set(job.id, job);
    this.finishedOrder.push(job.id);
    this.countBytes(job.id);
    return job;
  }

  private finishedFromRecord(record: JobRecord): JobEntry {
    const persistence = this.options.persistence as Persistence;
    const spec: AgentSpec = { prompt: "", cwd: record.cwd, options: record.options };
    if (record.resume_session_id) spec.resumeSessionId = record.resume_session_id;
    const job = new JobEntry(record.id, record.kind, spec, record.started_at ?? record.submitted_at, record.timeout_ms, () => undefined, record.prompt_preview);
    job.submittedAt = record.submitted_at;
    job.status = record.status;
    // A finish time in the future (the clock was set back since) counts as now, so retention is not stretched by the jump.
    job.finishedAt = Math.min(record.finished_at ?? record.submitted_at, this.options.clock.now());
    job.killReason = record.kill_reason as KillReason | undefined;
    job.agent = record.agent;
    job.generation = record.generation;
    job.outcome = outcomeFrom(record.outcome);
    if (record.outcome?.result_chars !== undefined) job.resultFile = persistence.store;
    job.replayTranscript = () => persistence.replayTranscript(job.id);
    job.markDone();
    return job;
  }

  /**
   * Finished jobs from the state directory's index (§15.5): counted for
   * retention and the disk cap at once, their records read only when one is
   * asked for. Call before restore.
   */
  rememberFinished(entries: readonly IndexedJob[]): void {
    const now = this.options.clock.now();
    const fresh = entries.filter((entry) => !this.jobs.has(entry.id) && !this.unread.has(entry.id));
    for (const entry of [...fresh].sort((a, b) => a.finished_at - b.finished_at)) {
      // A finish time in the future (the clock was set back since) counts as now, as for a record.
      this.unread.set(entry.id, Math.min(entry.finished_at, now));
      this.finishedOrder.push(entry.id);
      this.finishedBytes.set(entry.id, entry.bytes);
      this.totalFinishedBytes += entry.bytes;
    }
  }

  /** An indexed job's record, read now; undefined (and forgotten) when it cannot be. */
  private readUnread(id: string): JobEntry | undefined {
    const record = (this.options.persistence as Persistence).store.read(id);
    if (record && isFinishedStatus(record.status)) return this.finishedFromRecord(record);
    this.forgetFinished(id);
    return undefined;
  }

  /** Drops a finished job from memory: from the finish order, the disk count and the index stubs. */
  private forgetFinished(id: string): void {
    const at = this.finishedOrder.indexOf(id);
    if (at >= 0) this.finishedOrder.splice(at, 1);
    this.totalFinishedBytes -= this.finishedBytes.get(id) ?? 0;
    this.finishedBytes.delete(id);
    this.unread.delete(id);
    this.jobs.delete(id);
  }

  private finishedAtOf(id: string): number | undefined {
    return this.jobs.get(id)?.finishedAt ?? this.unread.get(id);
  }

  private armTimeout(job: JobEntry, timeoutMs: number | undefined): void {
    if (timeoutMs === undefined) return;
    job.cancelTimeout = this.options.clock.setTimer(() => {
      this.kill(job.id, "timeout").catch((error: unknown) => this.options.logger.error(`timeout kill of job ${job.id}: ${String(error)}`));
    }, timeoutMs);
  }

  private enqueue(job: JobEntry): void {
    // A slot just freed belongs to the oldest queued job, not to this newcomer.
    if (this.runningCount < this.options.maxRunning && this.queue.length === 0 && !this.closing) {
      this.launch(job);
    } else {
      this.queue.push(job);
      this.options.logger.info(`job ${job.id} queued (${job.kind}, position ${this.queue.length}) for ${job.cwd}`);
    }
  }

  private launch(job: JobEntry): void {
    const { clock, logger } = this.options;
    const persistence = this.options.persistence;
    // A kill asked for from the command line while the job was queued.
    if (persistence?.store.killRequested(job.id)) {
      job.killReason = "cli";
      this.finish(job, { ok: false, code: "KILLED", detail: "removed from the queue before it started" });
      return;
    }
    this.runningCount += 1;
    job.status = "running";
    job.startedAt = clock.now();
    let spec = job.spec;
    if (persistence) {
      // "running", with the agent's tree marker, is on disk before the spawn: a server that dies right after it
      // leaves an agent the next one can find by its marker, never a "queued" record it would start a second time (§15.2).
      const marker = persistence.newMarker();
      job.agent = { tree_marker: marker };
      try {
        persistence.store.write(this.recordOf(job));
      } catch (error) {
        job.agent = undefined;
        this.release();
        this.finish(job, { ok: false, code: "STATE_ERROR", detail: `its record could not be written, so it was not started: ${(error as Error).message}` });
        return;
      }
      spec = { ...job.spec, output: persistence.store.outputFiles(job.id), marker, promptFile: persistence.store.promptFile(job.id) };
    }
    const run = this.options.launch(spec);
    job.forgetPrompt();
    if (run.pid !== undefined) {
      job.agent = { ...job.agent, pid: run.pid };
      this.save(job);
    }
    logger.info(`job ${job.id} started (${job.kind}, pid ${run.pid ?? "none"}) in ${job.cwd}`);
    if (persistence) {
      // The pid, start time and tree marker let a later server recognise this agent (§15.3).
      const recorded = run
        .identity()
        .then(({ pid, pgid, startTime, marker }) => {
          if (job.status !== "running" || pid === undefined) return;
          job.agent = { ...job.agent, pid };
          if (pgid !== undefined) job.agent.pgid = pgid;
          if (startTime !== undefined) job.agent.start_time = startTime;
          if (marker !== undefined) job.agent.tree_marker = marker;
          this.save(job);
        })
        .catch((error: unknown) => logger.warn(`job ${job.id}: cannot record the agent's identity: ${String(error)}`));
      this.recording.add(recorded);
      void recorded.finally(() => this.recording.delete(recorded));
    }
    this.follow(job, run);
    // The command line writes its marker, then reads the record; here the record was written, then the marker is read: one of the two sees the other.
    if (persistence?.store.killRequested(job.id)) {
      this.kill(job.id, "cli").catch((error: unknown) => logger.error(`kill of job ${job.id}: ${String(error)}`));
    }
  }

  /** Waits for the agent's outcome and finishes the job with it. */
  private follow(job: JobEntry, run: AgentRun): void {
    job.attach(run);
    run.outcome
      .catch((error: unknown): AgentOutcome => ({ ok: false, code: "INTERNAL_ERROR", detail: String(error) }))
      .then((outcome) => {
        // A job ended by a failed kill already finished; its late exit changes nothing.
        if (job.status !== "running") return;
        this.release();
        this.finish(job, outcome);
      })
      .catch((error: unknown) => this.options.logger.error(`job ${job.id}: ${String(error)}`));
  }

  /** Frees a running slot and gives it to the next queued job, once the finished one is settled. */
  private release(): void {
    this.runningCount -= 1;
    queueMicrotask(() => this.launchNext());
  }

  private launchNext(): void {
    // During a takeover every running agent is counted first; restore starts the queue at its end.
    if (this.restoring) return;
    while (this.runningCount < this.options.maxRunning && this.queue.length > 0 && !this.closing) {
      this.launch(this.queue.shift() as JobEntry);
    }
  }

  private finish(job: JobEntry, outcome: AgentOutcome): void {
    const { clock, logger } = this.options;
    const persistence = this.options.persistence;
    job.cancelTimeout?.();
    job.cancelTimeout = undefined;
    job.finishedAt = clock.now();
    if (!job.killReason && persistence?.store.killRequested(job.id)) job.killReason = "cli";
    if (job.killReason === "timeout") {
      job.status = "failed";
      const seconds = Math.round((job.timeoutMs ?? 0) / 1000);
      const where = job.launched ? "the agent's process tree was killed" : "it was still queued and never started";
      job.outcome = {
        ok: false,
        code: "TIMEOUT",
        detail: `no result within ${seconds}s; ${where}`,
        ...(outcome.ok || outcome.result ? { result: outcome.result } : {}),
      };
    } else if (job.killReason && !outcome.ok && outcome.code === "KILL_FAILED") {
      // Processes survived SIGKILL: the record keeps which.
      job.status = "killed";
      job.outcome = outcome;
    } else if (job.killReason) {
      // Killed is killed, however the agent's end looked from here (an adopted agent's is unobserved: AGENT_LOST).
      job.status = "killed";
      job.outcome = {
        ok: false,
        code: "KILLED",
        detail: !outcome.ok && outcome.code === "KILLED" ? outcome.detail : `killed ${KILL_REASON_TEXT[job.killReason]}`,
        ...(outcome.result ? { result: outcome.result } : {}),
        ...(outcome.exit ? { exit: outcome.exit } : {}),
      };
    } else {
      job.status = outcome.ok ? "completed" : outcome.code === "AGENT_LOST" ? "lost" : "failed";
      job.outcome = outcome;
    }
    if (persistence) this.storeResult(job, persistence);
    this.save(job);
    // Older jobs are forgotten now; this one only at a later lookup, so whoever waits on it still reads its result.
    this.reap();
    this.finishedOrder.push(job.id);
    this.countBytes(job.id);
    logger.info(`job ${job.id} ${job.status}${outcome.ok ? "" : ` (${outcome.code})`}`);
    job.markDone();
    this.boundTranscripts();
  }

  /** A long result text goes to the job's result file (if the agent's reader did not put it there already) and leaves memory. */
  private storeResult(job: JobEntry, persistence: Persistence): void {
    const result = job.outcome?.result;
    if (!job.outcome || !result) return;
    if (result.text === undefined) {
      // Streamed there by the agent's reader.
      if (result.textChars !== undefined) job.resultFile = persistence.store;
      return;
    }
    const text = result.text;
    try {
      persistence.store.writeResult(job.id, text);
    } catch (error) {
      this.options.logger.error(`job ${job.id}: cannot write its result file; keeping it in memory: ${(error as Error).message}`);
      return;
    }
    job.resultFile = persistence.store;
    if (text.length > RESULT_CHARS_IN_MEMORY) {
      const { text: _inFile, ...rest } = result;
      job.outcome = { ...job.outcome, result: { ...rest, textChars: text.length } };
    }
  }

  /** Writes the job's record; a failure is logged, the job goes on in memory. */
  private save(job: JobEntry): void {
    const persistence = this.options.persistence;
    if (!persistence) return;
    try {
      persistence.store.write(this.recordOf(job));
    } catch (error) {
      this.options.logger.error(`job ${job.id}: cannot write its record: ${(error as Error).message}`);
    }
  }

  private recordOf(job: JobEntry): JobRecord {
    const persistence = this.options.persistence as Persistence;
    const live = job.live();
    const turns = job.outcome?.result?.numTurns ?? live.turns;
    const cost = job.outcome?.result?.costUsd ?? live.costUsd;
    const record: JobRecord = {
      format: 1,
      id: job.id,
      kind: job.kind,
      cwd: job.cwd,
      prompt_preview: job.promptPreview,
      options: job.spec.options ?? ({} as AgentOptions),
      status: job.status,
      submitted_at: job.submittedAt,
      owner: persistence.owner,
      generation: job.generation,
    };
    if (job.resumeSessionId !== undefined) record.resume_session_id = job.resumeSessionId;
    if (job.timeoutMs !== undefined) record.timeout_ms = job.timeoutMs;
    if (job.status !== "queued" && job.launched) record.started_at = job.startedAt;
    if (job.finishedAt !== undefined) record.finished_at = job.finishedAt;
    if (job.agent) record.agent = { ...job.agent };
    if (job.killReason) record.kill_reason = job.killReason;
    if (job.outcome) record.outcome = storedOutcome(job.outcome, job.resultFile !== undefined);
    if (turns > 0) record.turns = turns;
    if (cost !== undefined) record.cost_usd = cost;
    return record;
  }

  private countBytes(id: string): void {
    const persistence = this.options.persistence;
    if (!persistence) return;
    const bytes = persistence.store.size(id);
    this.finishedBytes.set(id, bytes);
    this.totalFinishedBytes += bytes;
  }

  /** Finished jobs keep their results, but their transcripts share one budget, oldest dropped first. */
  private boundTranscripts(): void {
    let total = 0;
    for (let i = this.finishedOrder.length - 1; i >= 0; i -= 1) {
      // Only transcripts in memory count: one not rebuilt from its file yet costs nothing, and is not rebuilt to be measured.
      const transcript = this.jobs.get(this.finishedOrder[i] as string)?.heldTranscript();
      if (!transcript) continue;
      total += transcript.size;
      if (total > this.options.finishedTranscriptChars) {
        total -= transcript.size;
        transcript.release();
      }
    }
  }

  /** Drops finished jobs past retention, and the oldest beyond the count and disk caps; from disk too. */
  private reap(): void {
    const { retentionMs, maxFinishedJobs } = this.options;
    const persistence = this.options.persistence;
    const maxBytes = persistence?.maxBytes ?? Number.POSITIVE_INFINITY;
    const now = this.options.clock.now();
    while (this.finishedOrder.length > 0) {
      const oldestId = this.finishedOrder[0] as string;
      const finishedAt = this.finishedAtOf(oldestId);
      const expired = finishedAt === undefined || now - finishedAt >= retentionMs;
      if (!expired && this.finishedOrder.length <= maxFinishedJobs && this.totalFinishedBytes <= maxBytes) break;
      this.forgetFinished(oldestId);
      if (persistence) {
        try {
          persistence.store.remove(oldestId);
        } catch (error) {
          this.options.logger.warn(`cannot remove job ${oldestId} from the state directory: ${(error as Error).message}`);
        }
      }
    }
  }
}

function storedOutcome(outcome: AgentOutcome, textOnDisk: boolean): StoredOutcome {
  const stored: StoredOutcome = { ok: outcome.ok };
  if (!outcome.ok) {
    stored.code = outcome.code;
    stored.detail = outcome.detail;
  }
  if (outcome.exit) stored.exit = outcome.exit;
  if (outcome.result) {
    const { text, textChars, ...rest } = outcome.result;
    stored.result = rest;
    // Only a length whose text is on disk: a result.txt that could not be written must not read back as an empty result.
    const chars = textOnDisk ? (textChars ?? text?.length) : undefined;
    if (chars !== undefined) stored.result_chars = chars;
  }
  return stored;
}

function outcomeFrom(stored: StoredOutcome | undefined): AgentOutcome {
  if (!stored) return { ok: false, code: "AGENT_LOST", detail: "the record holds no outcome" };
  const result = stored.result && stored.result_chars !== undefined ? { ...stored.result, textChars: stored.result_chars } : stored.result;
  if (stored.ok) return { ok: true, result: result ?? {} };
  return { ok: false, code: stored.code ?? "INTERNAL_ERROR", detail: stored.detail ?? "", ...(result ? { result } : {}) };
}
