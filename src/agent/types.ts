/**
 * The runtime-neutral description of an agent (PROTOCOL.md §5, §8): what a
 * job asks for, what the agent has done so far, how it ended, and the handle
 * the job registry holds. No agent CLI's vocabulary appears here.
 */
import type { ErrorCode } from "../core/errors.js";
import type { Transcript } from "../core/transcript.js";
import type { AgentIdentity, ApproverLaunch, OutputFiles } from "./host.js";

export type { ApproverLaunch };
import type { AgentOptions } from "./options.js";
import type { WorktreeRecord } from "./worktree.js";

export interface AgentSpec {
  /** The runtime that runs it (§7); the job layer names the server's own when a call names none. */
  agent?: string;
  /** The host it runs on (§21); the job layer names the server's own when a call names none. */
  host?: string;
  /** The job's id, set at the spawn: a remote host names the job by it (§21). */
  jobId?: string;
  prompt: string;
  cwd: string;
  /** A validated UUID (§5): nothing else may reach argv. */
  resumeSessionId?: string;
  options?: AgentOptions;
  /** Files for the agent's stdout and stderr (§15); pipes when absent. */
  output?: OutputFiles;
  /** The tree marker to give the agent, made and recorded before the spawn (§15.2). */
  marker?: string;
  /** The prompt as a file already on disk (§15.2): then it is the agent's stdin, and `prompt` is not read. */
  promptFile?: string;
  /** Where the agent asks for permission (§18); without it, what would prompt is refused, as the CLI does headless. */
  approver?: ApproverLaunch;
  /** The job's own worktree (§19), when it runs in one; cwd is then inside it. Runtimes do not read it. */
  worktree?: WorktreeRecord;
}

export interface PermissionDenial {
  tool_name: string;
  tool_input?: unknown;
}

/** What we keep of an agent's final result. */
export interface AgentResult {
  sessionId?: string;
  text?: string;
  /** The text was written to the job's result file (§15.4) instead: its length. */
  textChars?: number;
  costUsd?: number;
  numTurns?: number;
  durationMs?: number;
  permissionDenials?: PermissionDenial[];
  apiErrorStatus?: number;
}

/** How the agent process ended, when it was this server's child (§15.2). */
export interface ExitStatus {
  code: number | null;
  signal: string | null;
}

/**
 * How the agent ended. `endedAt` (ms since the epoch), when the agent was not our child: when it ended, as
 * estimated from the process table and its output (§15.3).
 */
export type AgentOutcome =
  | { ok: true; result: AgentResult; exit?: ExitStatus; endedAt?: number }
  | { ok: false; code: ErrorCode; detail: string; result?: AgentResult; exit?: ExitStatus; endedAt?: number };

/** What a running job has done so far, from the agent's events (§5.3, §5.8). */
export interface LiveSummary {
  sessionId?: string;
  model?: string;
  /** Model turns so far. */
  turns: number;
  /** The latest tool call, rendered as "Bash · npm test". */
  lastTool?: string;
  /** The latest assistant text, clipped. */
  lastText?: string;
  /** Which of the two came last. */
  lastActivity?: "tool" | "text";
  /** Known only from the result. */
  costUsd?: number;
  /** Events read so far: grows with every line the agent prints. */
  events: number;
}

/** What the job registry needs from an agent: its outcome, its progress, and a way to stop it. */
export interface AgentRun {
  readonly pid: number | undefined;
  /** The tree marker's value when known at spawn: recorded with the pid at once (§15.2). */
  readonly marker: string | undefined;
  /** Who the agent is, for its record (§15.2). */
  identity(): Promise<AgentIdentity>;
  readonly outcome: Promise<AgentOutcome>;
  /** Resolves once the output already written was read (an adopted agent's), so the job is served caught up. */
  readonly ready: Promise<void>;
  kill(): Promise<{ survivors: number[]; undetermined?: true; why?: string; pending?: true }>;
  live(): LiveSummary;
  onActivity(listener: () => void): () => void;
  readonly transcript: Transcript;
}

/** A spec as the job layer hands it on: it names its agent and its host, as its record does (§15.2). */
export type NamedSpec = AgentSpec & { agent: string; host: string };

export type AgentLauncher = (spec: NamedSpec) => AgentRun;

/** An agent an earlier server started, as its record describes it (§15.3). */
export interface AgentToAttach {
  /** The runtime that reads its output, as its record names it. */
  runtime: string;
  /** The host it runs on, and its job there (§21), as its record names them. */
  host: string;
  jobId: string;
  /** Undefined for an agent known to be gone whose pid was never recorded. */
  pid: number | undefined;
  startTime: string | undefined;
  marker: string | undefined;
  output: OutputFiles;
}

export type AgentAttacher = (agent: AgentToAttach) => AgentRun;

/** A conversation the agent CLI keeps for a directory, as its own store lists it (§20). */
export interface AgentSession {
  session_id: string;
  started_at: number;
  last_active_at: number;
  first_prompt_preview: string;
  /** Prompts given in it (not model turns); a lower bound unless turns_exact. */
  turns: number;
  turns_exact: boolean;
}
