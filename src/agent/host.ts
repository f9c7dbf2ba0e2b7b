/**
 * The host seam: where an agent runs (PROTOCOL.md §6). A host starts an
 * agent with its output going to files, follows one an earlier server
 * started, tells whether a recorded process is still that agent, and kills
 * its whole tree. `hosts/local/` runs agents on this machine; a host that
 * reaches another machine (over SSH) implements the same interface.
 */

import type { ErrorCode } from "../core/errors.js";
import type { WorktreeRecord } from "./worktree.js";

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
  /** The tree marker's value, made by the caller so it can be recorded before the spawn (§15.2); a fresh one otherwise. */
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

/** Where agents run: what the job layer and the launcher need of a host. */
export interface Host {
  /** Named in every record (§15.2): "local". */
  readonly name: string;
  start(request: SpawnRequest): ChildHandle;
  /** Follows an agent that an earlier server started; its exit is noticed by liveness polling. */
  attach(request: AttachRequest): ChildHandle;
}
