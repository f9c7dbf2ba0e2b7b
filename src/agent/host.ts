/**
 * The host seam: where an agent runs (PROTOCOL.md §6). A host starts an
 * agent with its output going to files, follows one an earlier server
 * started, tells whether a recorded process is still that agent, and kills
 * its whole tree. `hosts/local/` runs agents on this machine; a host that
 * reaches another machine (over SSH) implements the same interface.
 */

import type { ErrorCode } from "../core/errors.js";
import type { DirectoryCheck } from "./policy.js";
import type { WorktreeRecord, Worktrees } from "./worktree.js";

/**
 * The approver of one job (§18): a small MCP server, run by the agent, that files
 * each permission request and waits for its answer.
 */
export interface ApproverLaunch {
  command: string;
  args: string[];
  /** How long it waits for an answer before it denies the request. */
  waitMs: number;
  /**
   * The state directory's approval endpoint (§18), while a process of ours serves it: an agent CLI that can reach
   * an MCP server over HTTP asks there, with this token, and no approver process runs beside it.
   */
  endpoint?: EndpointAddress;
}

/** Where a job's agent asks for permission at the approval endpoint (§18): its URL and token. */
export interface EndpointAddress {
  url: string;
  token: string;
}

/** Where an agent's stdout and stderr go, and a long result (§15.4). */
export interface OutputFiles {
  stdoutPath: string;
  stderrPath: string;
  /** Where a result too long to hold in memory is written (§15.4). */
  resultPath?: string;
}

export interface SpawnRequest {
  /** The job the agent runs for: a host that keeps its own records elsewhere names the job by it (§21). */
  jobId?: string;
  /** The job's own worktree, when it runs in one: a host that checks directories itself lets cwd lie in it (§21.3). */
  worktree?: WorktreeRecord;
  command: string;
  args: readonly string[];
  /** The agent's add_dirs, as they are in args: a host that checks directories itself checks these too (§21.3). */
  addDirs?: readonly string[];
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  /**
   * The child's stdin: text written to a pipe that is then closed, or a file the child reads itself. A file is
   * whole before the spawn, so an agent never runs a prompt cut short by a server dying mid-write (§15.2).
   */
  stdin: string | { file: string };
  /** Receives stdout as it arrives; the reader bounds what it keeps. */
  onStdout(chunk: Buffer): void;
  stderrTailBytes: number;
  /**
   * The tree marker's value, made by the caller so it can be recorded before the spawn (§15.2); a fresh one otherwise.
   */
  marker?: string;
  /**
   * Where the agent writes stdout and stderr itself (§15). It then needs no
   * pipe to this server, so it outlives the server, and its output is kept;
   * stdout is followed from the file. Without it, both are pipes.
   */
  output?: OutputFiles;
}

/** An agent started by an earlier server, to be followed and killed as if it were ours (§15.3). */
export interface AttachRequest {
  /** As in SpawnRequest. */
  jobId?: string;
  /** Undefined for an agent known to be gone whose pid was never recorded: only its output is read. */
  pid: number | undefined;
  /** The start time recorded when it was spawned; a process with another start time is not it. */
  startTime: string | undefined;
  /** The tree marker value recorded when it was spawned. */
  marker: string | undefined;
  output: OutputFiles;
  onStdout(chunk: Buffer): void;
  stderrTailBytes: number;
}

export interface ChildExit {
  /** The process never started. Node reports a missing cwd as ENOENT too; `missingCwd` tells them apart. */
  spawnError?: { code: string | undefined; message: string; missingCwd?: true; outputFiles?: true };
  /** An attached agent: it was not our child, so how it exited is unknown; exitCode and signal are null. */
  unobserved?: true;
  /**
   * An attached agent's end (ms since the epoch), as estimated from the process table and its output: the later of
   * the last poll that saw it alive and the last write to its output, no later than when it was found gone (§15.3);
   * for one on another machine, as that machine recorded it (§21.3).
   */
  endedAt?: number;
  /**
   * How the job ended as the host already knows it, when the agent ran elsewhere (§21): used when the
   * output holds no result, since the host saw what the output cannot show (a spawn failure, a kill there).
   */
  failure?: { code: ErrorCode; detail: string };
  exitCode: number | null;
  signal: string | null;
  stderrTail: string;
}

export interface KillReport {
  /** Processes that received at least one signal. */
  signalled: number;
  /** Pids still alive (same start time) after the kill was verified. */
  survivors: number[];
  /**
   * Nothing was signalled because the process table could not be read, and an
   * agent an earlier server started cannot be told from a reused pid without
   * it: the kill neither happened nor failed, and may be tried again.
   */
  undetermined?: true;
  /** Why it is undetermined, for the caller's KILL_FAILED; the process table's when absent. */
  why?: string;
  /** The host kills it as soon as it can (another machine, out of reach now): the kill stands, it is only late. */
  pending?: true;
}

/** Who an agent is, as its record keeps it: a pid alone may be reused. */
export interface AgentIdentity {
  pid: number | undefined;
  /** Its process group: on POSIX the agent leads its own (it is spawned detached). */
  pgid?: number;
  startTime: string | undefined;
  marker: string | undefined;
}

export interface ChildHandle {
  readonly pid: number | undefined;
  /** The tree marker's value, known at spawn (POSIX), so it can be recorded with the pid at once. */
  readonly marker: string | undefined;
  /** Who the agent is, for its record: its start time once the process table showed it, and its tree marker. */
  identity(): Promise<AgentIdentity>;
  /** Resolves once the agent itself exited and its output drained; never rejects. */
  readonly exited: Promise<ChildExit>;
  /** Kills the whole tree: SIGTERM, grace, SIGKILL, verify. Idempotent. */
  killTree(): Promise<KillReport>;
  /** Resolves when the agent exited and any processes it left behind were stopped. */
  readonly settled: Promise<void>;
  /** An attached agent: resolves once what its output file already holds was read, so the job is served caught up. */
  readonly ready?: Promise<void>;
}

/**
 * This machine's process layer (hosts/local/): its agents' starts and follows, and the liveness of the processes
 * its records name (servers, claimants, agents). The command line reads it for the servers it asks after.
 */
export interface ProcessControl {
  start(request: SpawnRequest): ChildHandle;
  /** Follows an agent that an earlier server started; its exit is noticed by liveness polling. */
  attach(request: AttachRequest): ChildHandle;
  /**
   * Whether pid is still the process a record names: same start time, or,
   * without one, carrying the tree marker (Linux). Windows has neither and
   * goes by the pid alone. Undefined when the process table could not be
   * read: callers must neither take the process for gone nor signal it.
   */
  isAlive(pid: number, startTime: string | undefined, marker?: string): Promise<boolean | undefined>;
  /** A live process's start time as the process table shows it; undefined on Windows or when it is gone. */
  startTimeOf(pid: number): Promise<string | undefined>;
  /**
   * The agent carrying this tree marker (the marked process whose parent is
   * not marked), for a record that names no pid (§15.3): null when none does,
   * undefined when it cannot be told (no process table, or no environments to read).
   */
  findMarked(marker: string): Promise<{ pid: number; startTime: string } | null | undefined>;
  /**
   * Whether pid (with this start time, when one is given) is this process, an ancestor, in its group or session,
   * or a descendant: never an agent an earlier server started (§15.3). Undefined when it cannot be told (Windows,
   * or no process table).
   */
  isOwnTree?(pid: number, startTime: string | undefined): Promise<boolean | undefined>;
  /** Resolves when every child has settled. */
  idle(): Promise<void>;
}

/** Starts and follows agents on a host: what a runtime's launcher needs of it (agent/launcher.ts). */
export interface AgentHost {
  start(request: SpawnRequest): ChildHandle;
  /** Follows an agent that an earlier server started; its exit is noticed by liveness polling. */
  attach(request: AttachRequest): ChildHandle;
}

/** Where a recorded agent is now, as a server taking its job over finds it (§15.3). */
export type LocatedAgent =
  | { state: "alive" | "gone"; pid: number | undefined; startTime: string | undefined }
  | { state: "unrecorded" }
  /** The record names a process that is not this job's agent: this server's own tree, or another job's agent. */
  | { state: "not its agent"; pid: number };

/** A process as a record names it (§15.2): its pid, start time and tree marker, as far as each is known. */
export interface NamedProcess {
  pid?: number | undefined;
  start_time?: string | undefined;
  tree_marker?: string | undefined;
}

/** The same process: the same tree marker, or the same pid with the same start time (or one not known). */
export function isSameProcess(known: NamedProcess | undefined, named: NamedProcess): boolean {
  if (!known) return false;
  if (named.tree_marker !== undefined && known.tree_marker === named.tree_marker) return true;
  const { start_time: started } = named;
  const sameStart = started === undefined || known.start_time === undefined || started === known.start_time;
  return named.pid !== undefined && known.pid === named.pid && sameStart;
}

/** A recorded agent, as a host is asked about it. */
export interface RecordedAgent {
  jobId: string;
  /** Who its record says it is; undefined when the record names no process yet. */
  agent: NamedProcess | undefined;
}

/** What `doctor` learns of a host (§21.5). */
export type HostCheck =
  | { ok: true; version: string; stateDir: string; programs: Record<string, string | null>; ms: number }
  | { ok: false; problem: string };

/**
 * A host: all of "where" (§6, §21). Every record names its host; the job layer, the tools and the command line
 * ask the host a record names and never look at which one it is.
 */
export interface Host {
  /** Named in every record (§15.2) and by a call's `host`. */
  readonly name: string;
  /**
   * Whether what its agents write (their sessions, their worktrees' files) is on this machine's disk, where this
   * process reads it (§19, §20); a host on another machine answers for them over its own connection.
   */
  readonly sharesFiles: boolean;
  /**
   * An agent CLI's program there, when set for it; undefined: that machine's own setting, else the CLI's name (§21.3).
   */
  programOf(agent: string): string | undefined;
  /** What its agents' environment starts from: this process's own here; nothing of ours elsewhere (§7.2, §21.3). */
  readonly agentEnvironment: Readonly<Record<string, string | undefined>>;
  /** Starts and follows one agent CLI's processes there: a host may run another program for each (§21.3). */
  forAgent(agent: string): AgentHost;
  /**
   * Where a recorded agent is now. `othersAgent` tells whether a process is another job's agent, which is never
   * taken for this one's (§15.3).
   */
  locate(recorded: RecordedAgent, othersAgent: (agent: NamedProcess) => boolean): Promise<LocatedAgent>;
  /** Whether an agent of this record can be followed now; one recorded before its pid is, a moment later (§15.2). */
  canFollow(recorded: RecordedAgent): boolean;
  /**
   * Kills a recorded agent that no handle of ours follows (`claude-dispatch kill`, §17), with the same checks as a
   * takeover: undefined when it is certainly not running. Pending and undetermined say so, as KillReport does.
   */
  killRecorded(
    recorded: RecordedAgent,
    output: OutputFiles | undefined,
    othersAgent?: (agent: NamedProcess) => boolean,
  ): Promise<KillReport | undefined>;
  /** A directory checked against its roots, links resolved where they live (§4, §21.3). */
  checkDirectory(dir: string): Promise<DirectoryCheck>;
  /** A repository's folder and a path under it, joined as that host's paths join (§19). */
  joinPath(repo: string, subdir: string): string;
  /** Its worktrees, made and worked on where its agents run (§19, §21.3). */
  readonly worktrees: Worktrees;
  /**
   * The approver its agents run for a job whose requests are forwarded (§18, §21.3); undefined: they are not, and
   * what would prompt is refused (a sandbox, §21.1).
   */
  approver(jobId: string, waitMs: number): ApproverLaunch | undefined;
  /** What doctor says of it (§17, §21.5). */
  check(): Promise<HostCheck>;
  /** This process is leaving: followers stop (agents run on), connections close, the process layer settles. */
  close(): Promise<void>;
}

/** The hosts this process knows, by name: this machine's and those of CLAUDE_DISPATCH_HOSTS (§21). */
export interface Hosts {
  /** Where a job whose call names no host runs. */
  readonly home: Host;
  get(name: string): Host | undefined;
  all(): readonly Host[];
}
