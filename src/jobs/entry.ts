/**
 * One job in memory (PROTOCOL.md §8): its state, its agent once it runs, and
 * the listeners waiting on it. The registry drives it; callers see it as a Job.
 */
import type { AgentOutcome, AgentRun, LiveSummary, NamedSpec } from "../agent/types.js";
import type { WorktreeRecord } from "../agent/worktree.js";
import type { CancelTimer } from "../core/clock.js";
import { forReading, forReadingOnOneLine } from "../core/text.js";
import { Transcript } from "../core/transcript.js";
import type { Approval } from "../store/approvals.js";
import type { AgentRecord, ApprovalSummary } from "../store/records.js";
import type { Job, JobKind, JobStatus, JobStore, KillReason, Slot } from "./types.js";

const PREVIEW_CHARS = 80;
/** Longer result texts are read from the job's result file when asked for, not held in memory. */
export const RESULT_CHARS_IN_MEMORY = 4096;
const NO_TRANSCRIPT = new Transcript(0);

/** Enough of a prompt's start for its preview, however long the prompt: listings never touch the rest. */
const PREVIEW_SOURCE_CHARS = 4096;

/**
 * The prompt's start on one line, cleaned for reading (§10) and clipped, computed once per job; the same again
 * for a preview read back from a record. A copy of its own: V8 keeps a slice's whole parent alive, and the
 * parent may be a prompt of megabytes.
 */
export function previewOf(prompt: string): string {
  const flat = forReadingOnOneLine(prompt.slice(0, PREVIEW_SOURCE_CHARS));
  const clipped = flat.length > PREVIEW_CHARS ? `${flat.slice(0, PREVIEW_CHARS)}…` : flat;
  return JSON.parse(JSON.stringify(clipped)) as string;
}

export class JobEntry implements Job {
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
  /** Owned by another server that lives: served here from its files (§15.6). */
  elsewhere = false;
  /** The agent slot it holds while it runs here (§8). */
  slot: Slot | undefined;
  agent: AgentRecord | undefined;
  killing: Promise<{ survivors: number[]; undetermined?: true; why?: string; pending?: true }> | undefined;
  cancelTimeout: CancelTimer | undefined;
  /** Its permission requests, oldest first (§18), and where their whole inputs are read. */
  approvals: readonly ApprovalSummary[] = [];
  /** The ones without an answer, oldest first: a report reads them without scanning every request. */
  unanswered: readonly ApprovalSummary[] = [];
  approvalFiles: Pick<JobStore, "approvals"> | undefined;
  /** Stops following its requests; called when it finishes. */
  stopApprovals: (() => void) | undefined;
  readonly done: Promise<void>;
  private resolveDone!: () => void;
  // The listeners' collections are made when first needed and dropped when empty: a server keeps up to a thousand
  // finished jobs, most of which nobody listens to again (BENCHMARKS.md (q)).
  private doneListeners: Set<() => void> | undefined;
  /** Each listener, with its subscription to the agent once there is one. */
  private listeners: Map<() => void, (() => void) | undefined> | undefined;
  /** Listeners to permission requests only: a wait needs them, not every event of the agent. */
  private approvalListeners: Set<() => void> | undefined;

  readonly promptPreview: string;

  constructor(
    readonly id: string,
    readonly kind: JobKind,
    public spec: NamedSpec,
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

  /**
   * From memory, cleaned where it was made; from result.txt, cleaned as it is
   * read (§10), as anything may have written it.
   */
  resultText(): string | undefined {
    const inMemory = this.outcome?.result?.text;
    if (inMemory !== undefined) return inMemory;
    const inFile = this.resultFile?.readResult(this.id);
    return inFile === undefined ? undefined : forReading(inFile);
  }

  markDone(): void {
    this.stopApprovals?.();
    this.stopApprovals = undefined;
    this.resolveDone();
    const listeners = this.doneListeners;
    this.doneListeners = undefined;
    for (const listener of listeners ?? []) listener();
  }

  whenDone(listener: () => void): () => void {
    if (this.finishedAt !== undefined) {
      listener();
      return () => undefined;
    }
    return this.listenIn("doneListeners", listener);
  }

  resultHead(maxChars: number): { text: string; chars: number } | undefined {
    const inMemory = this.outcome?.result?.text;
    if (inMemory !== undefined) return { text: inMemory.slice(0, maxChars), chars: inMemory.length };
    const chars = this.outcome?.result?.textChars;
    if (chars === undefined || !this.resultFile) return undefined;
    const text = this.resultFile.readResultHead(this.id, maxChars);
    return text === undefined ? undefined : { text: forReading(text), chars };
  }

  get cwd(): string {
    return this.spec.cwd;
  }
  get resumeSessionId(): string | undefined {
    return this.spec.resumeSessionId;
  }
  get worktree(): WorktreeRecord | undefined {
    return this.spec.worktree;
  }
  get agentName(): string {
    return this.spec.agent;
  }
  get hostName(): string {
    return this.spec.host;
  }
  get launched(): boolean {
    return this.run !== undefined || this.agent !== undefined;
  }
  /**
   * A finished job whose output is on disk lets its agent's run go (reader, process tree, transcript): what memory
   * held is in the files, and the transcript is rebuilt from them when asked for, as for a job finished before this
   * process started (§15.5).
   */
  letGoOfRun(replay: () => Transcript): void {
    this.run = undefined;
    this.replayed = undefined;
    this.replayTranscript = replay;
    for (const unsubscribe of this.listeners?.values() ?? []) unsubscribe?.();
    this.listeners?.clear();
    this.listeners = undefined;
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
    const listeners = (this.listeners ??= new Map());
    listeners.set(listener, this.run?.onActivity(listener));
    return () => {
      listeners.get(listener)?.();
      listeners.delete(listener);
      if (listeners.size === 0 && this.listeners === listeners) this.listeners = undefined;
    };
  }
  /** The requests with their whole inputs, read from their files (§18). */
  approvalDetails(): Approval[] {
    try {
      return this.approvalFiles?.approvals(this.id) ?? [];
    } catch {
      return [];
    }
  }
  /** The requests waiting for an answer while the job runs. */
  pendingApprovals(): ApprovalSummary[] {
    return this.status === "running" ? [...this.unanswered] : [];
  }
  /** A permission request came or was answered: activity for progress, and news for whoever waits on one. */
  announce(): void {
    for (const listener of [...(this.listeners?.keys() ?? [])]) listener();
    for (const listener of [...(this.approvalListeners ?? [])]) listener();
  }
  onApprovals(listener: () => void): () => void {
    return this.listenIn("approvalListeners", listener);
  }
  /** Adds to a set of listeners made on demand; the function returned removes it, and the set once empty. */
  private listenIn(set: "doneListeners" | "approvalListeners", listener: () => void): () => void {
    const listeners = (this[set] ??= new Set());
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this[set] === listeners) this[set] = undefined;
    };
  }
  /** The agent started: listeners that came while queued now follow it, and hear of the start. */
  attach(run: AgentRun): void {
    this.run = run;
    const listeners = this.listeners;
    if (!listeners) return;
    for (const listener of listeners.keys()) listeners.set(listener, run.onActivity(listener));
    for (const listener of [...listeners.keys()]) listener();
  }
}
