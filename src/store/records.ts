/**
 * What a job's record holds (PROTOCOL.md §15.2), and how one read from disk
 * is checked before it is trusted. Pure data: no file is touched here, so the
 * job registry and the tools can use it without reaching the file system.
 */
import type { AgentOptions } from "../agent/options.js";
import type { AgentResult } from "../agent/types.js";
import type { WorktreeRecord } from "../agent/worktree.js";
import { DispatchError, isDiskFull, type ErrorCode } from "../core/errors.js";
import { isRecord } from "../core/values.js";

/** The state directory is not ours, or cannot be used (§15.1): STATE_ERROR wherever it reaches a caller (§9). */
export class StateError extends DispatchError {
  constructor(detail: string) {
    super("STATE_ERROR", detail);
    this.name = "StateError";
  }
}

/** A failure to write `file` in the state directory as a StateError: a full disk says so, never a bare ENOSPC (§9). */
export function asStateError(error: unknown, file: string): StateError {
  if (error instanceof StateError) return error;
  if (isDiskFull(error)) return new StateError(`the state directory's disk is full (writing ${file}); free some space`);
  return new StateError(`cannot write ${file}: ${error instanceof Error ? error.message : String(error)}`);
}

export const STATE_FORMAT = 1;

export type RecordStatus = "queued" | "running" | "completed" | "failed" | "killed" | "lost";

/** A process, identified so that a reused pid is not taken for it. */
export interface ProcessIdentity {
  pid: number;
  /** From the process table (Linux: /proc/<pid>/stat field 22); absent where unknown. */
  start_time?: string;
}

export interface AgentRecord {
  pid?: number;
  pgid?: number;
  start_time?: string;
  tree_marker?: string;
}

export interface StoredOutcome {
  ok: boolean;
  code?: ErrorCode;
  detail?: string;
  /** The result event, without its text: that is in result.txt. */
  result?: Omit<AgentResult, "text">;
  /** Length of result.txt's text in UTF-16 characters, when there is a result text. */
  result_chars?: number;
  /** The agent's exit code or signal, when it was the recording server's child. */
  exit?: { code: number | null; signal: string | null };
}

/** A permission request and its answer as the record lists them (§18); the tool's input stays in the request file. */
export interface ApprovalSummary {
  id: string;
  tool_name: string;
  preview: string;
  asked_at: number;
  expires_at: number;
  decision?: "allow" | "deny";
  /** Who answered, only when the server writing the record gave the answer itself (§18). */
  by?: "tool" | "elicitation" | "cli" | "timeout" | "server";
  /** Otherwise: who the answer file says answered, which any process running as the user could have written. */
  claimed_by?: "tool" | "elicitation" | "cli" | "timeout" | "server";
  answered_at?: number;
  message?: string;
}

export interface JobRecord {
  format: typeof STATE_FORMAT;
  id: string;
  kind: "run" | "start";
  /**
   * The agent CLI and the host it runs on; a record of an earlier version names neither, and means EARLIER_RECORDS's.
   */
  runtime: string;
  host: string;
  cwd: string;
  prompt_preview: string;
  options: AgentOptions;
  resume_session_id?: string;
  timeout_ms?: number;
  status: RecordStatus;
  /** Milliseconds since the epoch. */
  submitted_at: number;
  started_at?: number;
  finished_at?: number;
  /** The server that owns the job: only it starts, follows and finishes it. */
  owner: ProcessIdentity;
  /** Bumped by each server that adopts the job after its owner died. */
  generation: number;
  /** Written before the spawn with the tree marker alone; the pid, group and start time follow (§15.2). */
  agent?: AgentRecord;
  kill_reason?: string;
  outcome?: StoredOutcome;
  /** The job's own git worktree (§19). */
  worktree?: WorktreeRecord;
  /** Every permission request of the job, oldest first, as its owner last saw them (§18). */
  approvals?: ApprovalSummary[];
  /** Last known progress, for the CLI's table. */
  turns?: number;
  cost_usd?: number;
}

const JOB_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A permission request's id (§18): a small positive integer, as a string; it becomes part of a file name. */
export function isRequestId(value: string): boolean {
  return /^[1-9][0-9]{0,8}$/.test(value);
}

/** Job ids become folder names: only a UUID may. */
export function isJobId(value: string): boolean {
  return JOB_ID.test(value);
}

/** A finished job as the index of finished jobs keeps it: enough for retention, without reading its record (§15.5). */
export interface IndexedJob {
  id: string;
  finished_at: number;
  /** What its folder used on disk when it finished. */
  bytes: number;
}

export function isFinishedStatus(status: RecordStatus): boolean {
  return status !== "queued" && status !== "running";
}

/**
 * Which finished jobs to delete: those finished longer than retentionMs ago,
 * then the oldest until the rest fit in maxBytes. Unfinished jobs are never chosen.
 */
export function choosePrunable(
  jobs: readonly { id: string; status: RecordStatus; finished_at?: number; bytes: number }[],
  now: number,
  retentionMs: number,
  maxBytes: number,
): string[] {
  const chosen = new Set<string>();
  let total = jobs.reduce((sum, job) => sum + job.bytes, 0);
  const finished = jobs
    .filter((job) => isFinishedStatus(job.status))
    .sort((a, b) => (a.finished_at ?? 0) - (b.finished_at ?? 0));
  for (const job of finished) {
    const expired = now - (job.finished_at ?? 0) >= retentionMs;
    if (!expired && total <= maxBytes) break;
    chosen.add(job.id);
    total -= job.bytes;
  }
  return [...chosen];
}

export function bySubmission(a: JobRecord, b: JobRecord): number {
  return a.submitted_at - b.submitted_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

const STATUSES: readonly string[] = ["queued", "running", "completed", "failed", "killed", "lost"];

/** A pid we may ever signal: never 0, -1 or 1, which would address a group, everything, or init. */
function isProcessId(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 1;
}

function isAgent(value: unknown): boolean {
  return (
    isRecord(value) &&
    // A pid, or, before the spawn, the marker alone.
    (isProcessId(value.pid) || (value.pid === undefined && typeof value.tree_marker === "string")) &&
    (value.start_time === undefined || typeof value.start_time === "string") &&
    (value.tree_marker === undefined || typeof value.tree_marker === "string") &&
    (value.pgid === undefined || isProcessId(value.pgid))
  );
}

export function parseIdentity(text: string | undefined): ProcessIdentity | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    // An owner or claimant is never signalled, only asked after: pid 1 is fine (a server that is a container's init).
    if (isRecord(value) && Number.isSafeInteger(value.pid) && (value.pid as number) >= 1) {
      return {
        pid: value.pid as number,
        ...(typeof value.start_time === "string" ? { start_time: value.start_time } : {}),
      };
    }
  } catch {
    // Torn or foreign: not an identity.
  }
  return undefined;
}
/** What a record of an earlier version, which names no runtime or host, means (§15.2): the one place that knows. */
const EARLIER_RECORDS = { runtime: "claude", host: "local" } as const;

/** A record is trusted only when its shape is right and it names its own folder. */
export function parseRecord(text: string, id: string): JobRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isRecord(value)) return undefined;
  const ok =
    value.format === STATE_FORMAT &&
    value.id === id &&
    (value.kind === "run" || value.kind === "start") &&
    (value.runtime === undefined || typeof value.runtime === "string") &&
    (value.host === undefined || typeof value.host === "string") &&
    typeof value.cwd === "string" &&
    typeof value.prompt_preview === "string" &&
    isRecord(value.options) &&
    typeof value.status === "string" &&
    STATUSES.includes(value.status) &&
    Number.isFinite(value.submitted_at) &&
    Number.isSafeInteger(value.generation) &&
    parseIdentity(JSON.stringify(value.owner)) !== undefined &&
    (value.agent === undefined || isAgent(value.agent));
  return ok ? ({ ...EARLIER_RECORDS, ...(value as unknown as JobRecord) } as JobRecord) : undefined;
}
