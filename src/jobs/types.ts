/**
 * What the job layer is made of (PROTOCOL.md §8, §15): a job as callers see
 * it, what the registry needs of the store it keeps jobs in, and its options.
 */
import type { Host, OutputFiles } from "../agent/host.js";
import type { WorktreeRecord } from "../agent/worktree.js";
import type { AgentAttacher, AgentLauncher, AgentOutcome, AgentSpec, LiveSummary } from "../agent/types.js";
import type { Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import type { Transcript } from "../core/transcript.js";
import type { Approval, ApprovalAnswer, ApprovalLookup, ApprovalRequest } from "../store/approvals.js";
import type { ApprovalSummary } from "../store/records.js";
import { isFinishedStatus, type JobRecord, type ProcessIdentity, type RecordStatus } from "../store/records.js";

/** A job's status is its record's (§8, §15.2). */
export type JobStatus = RecordStatus;
export type JobKind = "run" | "start";
export type KillReason = "claude_kill" | "cancelled" | "timeout" | "shutdown" | "cli";

/** The conversation to continue: the result's session, else the latest the agent printed. */
export function sessionIdOf(job: Pick<Job, "outcome" | "live">): string | undefined {
  return job.outcome?.result?.sessionId ?? job.live().sessionId;
}

/** What callers are shown (§8, §18): a running job with a permission request waiting is input_required. */
export type ShownStatus = JobStatus | "input_required";

export function shownStatus(job: Pick<Job, "status" | "pendingApprovals">): ShownStatus {
  return job.status === "running" && job.pendingApprovals().length > 0 ? "input_required" : job.status;
}

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
  /** Owned by another server on the state directory that lives (§15.6). */
  readonly elsewhere: boolean;
  /** 1 for the next job to run; undefined unless queued. */
  queuePosition(): number | undefined;
  /** What the agent has done so far (§5.3). */
  live(): LiveSummary;
  /** Calls listener once when the job finishes (at once if it has); returns the unsubscribe. */
  whenDone(listener: () => void): () => void;
  /** Calls listener whenever the job starts or its agent reports something; returns the unsubscribe. */
  onActivity(listener: () => void): () => void;
  readonly transcript: Transcript;
  /** Its permission requests, oldest first, without their inputs (§18). */
  readonly approvals: readonly ApprovalSummary[];
  /** The requests waiting for an answer while the job runs. */
  pendingApprovals(): ApprovalSummary[];
  /** The requests with their whole inputs, read from the job's folder. */
  approvalDetails(): Approval[];
  /** Calls listener when a permission request comes or is answered; returns the unsubscribe. */
  onApprovals(listener: () => void): () => void;
  /** Its own git worktree (§19), when it runs in one. */
  readonly worktree: WorktreeRecord | undefined;
  /** The coding agent that runs it (§7): "claude", "codex", "gemini". */
  readonly agentName: string;
  /** Where it runs (§21): this machine's host, or one of CLAUDE_DISPATCH_HOSTS. */
  readonly hostName: string;
}

export interface KillResult {
  /** False when the job had already finished: nothing was signalled. */
  killed: boolean;
  survivors: number[];
}

/** What the registry needs of the state directory (§15). */
export interface JobStore {
  create(record: JobRecord, prompt: string): void;
  /** Replaces the record; for a finished one, returns the bytes its folder uses (as the index was told). */
  write(record: JobRecord): number | undefined;
  /**
   * Where the agent writes its output (§15.4); undefined for a store in
   * memory: the agent's output then comes through pipes.
   */
  outputFiles(id: string): OutputFiles | undefined;
  writeResult(id: string, text: string): void;
  readResult(id: string): string | undefined;
  readResultHead(id: string, maxChars: number): string | undefined;
  /** Whether the job's prompt.txt is there (a regular file, not a link). */
  hasPrompt(id: string): boolean;
  /**
   * Where the job's prompt is: the agent reads it as its stdin (§15.2).
   * Undefined for a store in memory, which keeps no prompt.
   */
  promptFile(id: string): string | undefined;
  /** Who asked for the job's kill from outside its server (§17, §15.6), or undefined. */
  killRequested(id: string): string | undefined;
  requestKill(id: string, by: string, at: number): void;
  /** Calls onChange when the job's record is replaced; undefined where that cannot be noticed (then poll). */
  watchRecord(id: string, onChange: () => void): (() => void) | undefined;
  /** The ids of every job folder in the store. */
  jobIds(): string[];
  /** Bytes the job's folder uses. */
  size(id: string): number;
  remove(id: string): void;
  claimJob(
    id: string,
    generation: number,
    claimer: ProcessIdentity,
    isAlive: (holder: ProcessIdentity) => Promise<boolean | undefined>,
  ): Promise<boolean>;
  /** Claims the start of a queued job (claim `generation`, first slot): false when another server has it (§15.7). */
  claimStart(id: string, generation: number, claimer: ProcessIdentity): boolean;
  /** Removes the claim files of earlier restarts, which no one reads again. */
  dropClaimsBefore(id: string, generation: number): void;
  read(id: string): JobRecord | undefined;
  /** Throws STATE_ERROR naming the job's record.json when a FIFO, socket, device or folder is in its place (§15.1). */
  refuseSpecialRecord?(id: string): void;
  /** The job's permission requests, with their answers (§18). */
  approvals(id: string): Approval[];
  /** One request and its answer; with `known`, only its answer is read (store/approval-follower.ts). */
  lookUpApproval(id: string, requestId: string, known?: ApprovalRequest): ApprovalLookup;
  /**
   * Answers a request unless it has an answer: the one that stands, and whether
   * it is this one; undefined for no such request.
   */
  answerApproval(
    id: string,
    requestId: string,
    answer: ApprovalAnswer,
  ): { answer: ApprovalAnswer; won: boolean } | undefined;
  /** As watchRecord, for the job's approval files. */
  watchApprovals(id: string, onChange: () => void): (() => void) | undefined;
  /**
   * Marks a request told of (CLAUDE_DISPATCH_ON_INPUT, §18): true only for the one caller, of every process, that
   * made the mark. Absent in a store in memory, which no other process shares.
   */
  markTold?(id: string, requestId: string): boolean;
  /** Files a request, as the approver does (for tests and the store in memory). */
  fileApproval?(id: string, request: Omit<ApprovalRequest, "id" | "nonce">): ApprovalRequest;
}

/** One of the agent slots CLAUDE_DISPATCH_MAX_JOBS allows (§8, §15.7). */
export interface Slot {
  readonly index: number;
  readonly generation: number;
}

/** The agent slots: one server's in memory, or shared by every server on the state directory (store/slots.ts). */
export interface SlotPool {
  /** Whether other servers take slots too: then a queue waits for their news, and polls. */
  readonly shared: boolean;
  /** A slot for the job if one is certainly free. */
  take(jobId: string): Slot | undefined;
  /** As take, also taking slots whose holder is gone and whose job does not run. */
  reclaim(jobId: string): Promise<Slot | undefined>;
  /** A job taken over from a dead server: the slot it held, now this server's. */
  inherit(jobId: string): Slot | undefined;
  give(slot: Slot): void;
  /** Calls listener when a slot may have come free elsewhere; returns the unsubscribe. */
  onChange(listener: () => void): () => void;
}

/** Where jobs are kept (§15): their records, output and results, and retention. */
export interface Persistence {
  store: JobStore;
  /** This server, as it appears in the records it owns. */
  owner: ProcessIdentity;
  /** Rebuilds the transcript of a job finished before this server started, from its output file. */
  replayTranscript(id: string, runtime: string): Transcript;
  /** Disk used by finished jobs; the oldest are removed beyond it. */
  maxBytes: number;
  /** A fresh tree marker value for an agent about to be spawned. */
  newMarker(): string;
  /**
   * Whether a process of this machine (a server, a claimant) is still the one named: undefined when it cannot be told.
   */
  isAlive: IsAlive;
  /**
   * Retention is about to remove the job's folder: its worktree, if any, is looked after (§19). Throws to keep
   * the job for a later round; may return what to undo once the removal was tried.
   */
  beforeRemove?(id: string): (() => void) | void;
}

/** The agents whose jobs a registry runs and follows (§7, §15.3), and the one a call naming none gets. */
export interface JobAgents {
  readonly home: string;
  readonly known: readonly string[];
}

/**
 * Whether a process is still the one a record names: same start time, or else
 * carrying the tree marker. Undefined when it cannot be told (no process table).
 */
export type IsAlive = (process: ProcessIdentity & { tree_marker?: string }) => Promise<boolean | undefined>;

/** What the job layer asks of the host a job runs on (agent/host.ts): where its agent is, and its approver. */
export type JobHost = Pick<Host, "name" | "locate" | "canFollow" | "approver">;

export interface JobHosts {
  readonly home: JobHost;
  get(name: string): JobHost | undefined;
}

/**
 * An operator's command run for one subject at a time (jobs/operator-commands.ts): argv, no shell, bounded (§8, §18).
 */
export interface OperatorCommand<Subject> {
  /** Resolves once it has exited or was killed; after close, starts nothing. */
  run(subject: Subject): Promise<void>;
  /** Whether one is running: a process about to exit waits for them. */
  busy(): boolean;
  /** Kills those running, tree and all (shutdown). */
  close(): Promise<void>;
  readonly closed: boolean;
}

/** A permission request the operator is told of (CLAUDE_DISPATCH_ON_INPUT, §18). */
export interface InputRequest {
  job: Pick<Job, "id" | "cwd">;
  request: ApprovalSummary;
}

export interface JobRegistryOptions {
  launch: AgentLauncher;
  /** The operator's command for each job this server finishes (§8); stopped at shutdown. */
  onDone?: OperatorCommand<Job>;
  /** The operator's command for each new permission request of a job this process owns (§18, jobs/approvals.ts). */
  onInput?: OperatorCommand<InputRequest>;
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
  /** Follows an agent an earlier server started (§15.3). */
  attach: AgentAttacher;
  /**
   * Resolves once agents can be started and followed: the runtimes load after startup (BENCHMARKS.md (a)).
   * Awaited before a takeover; a job started by a call was waited for by the handler (HandlerDeps.ready).
   */
  ready?(): Promise<void>;
  /** The agents it runs and follows. */
  agents: JobAgents;
  /** The hosts whose jobs it runs, follows and takes over (§15.3, §21); a record names one of them. */
  hosts: JobHosts;
  /**
   * Checks a queued job taken over after a restart against today's policy and
   * directories, as a new call would be (§15.3); throws DispatchError to refuse it.
   */
  admit(spec: AgentSpec): Promise<AgentSpec>;
  /** The agent slots, shared by every server on the state directory; without them, maxRunning counted in memory. */
  slots?: SlotPool;
  /**
   * Permission requests are forwarded (CLAUDE_DISPATCH_APPROVALS=forward, §18): running jobs' folders are watched
   * for them, and agents get an approver that waits waitMs for an answer (none: requests are only watched).
   */
  approvals?: { waitMs?: number };
  /** Where jobs are kept (§15): the state directory, or a store in memory (jobs/memory.ts). */
  persistence: Persistence;
}

/**
 * The reason recorded for a kill asked for outside the owning server: another
 * server's claude_kill or tasks/cancel, or the command line.
 */
export function outsideKillReason(by: string): KillReason {
  return by === "claude_kill" || by === "cancelled" ? by : "cli";
}

/** How a killed job's outcome says who killed it. */
export const KILL_REASON_TEXT: Readonly<Record<KillReason, string>> = {
  claude_kill: "by claude_kill",
  cancelled: "because its request was cancelled",
  shutdown: "because the server shut down",
  timeout: "at its timeout",
  cli: "from the command line (claude-dispatch kill)",
};
