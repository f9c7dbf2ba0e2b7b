/**
 * The process layer's vocabulary: what the platform offers (injected, so both branches are testable
 * anywhere), and the options and surface of the process control (PROTOCOL.md §6, §15).
 */
import type { ChildProcess, SpawnOptions } from "node:child_process";

import type {
  AgentIdentity,
  AttachRequest,
  ChildExit,
  ChildHandle,
  KillReport,
  OutputFiles,
  ProcessControl,
  SpawnRequest,
} from "../../agent/host.js";
import type { Clock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";

// What a spawn or an attach asks for and what a child handle answers are the agent seam's (src/agent/host.ts).
export type {
  AgentIdentity,
  AttachRequest,
  ChildExit,
  ChildHandle,
  KillReport,
  OutputFiles,
  ProcessControl,
  SpawnRequest,
};

export interface ProcessInfo {
  pid: number;
  ppid: number;
  pgid: number | undefined;
  sid: number | undefined;
  /** Opaque, compared for equality only: guards against pid reuse. */
  startTime: string;
  zombie: boolean;
}

/** What one read of the process table must show as it is now (PosixPlatform.listProcesses). */
export interface ProcessListRequest {
  /** Pids read now, whatever an earlier read found. */
  readonly fresh?: ReadonlySet<number>;
  /** Every process read now. */
  readonly full?: boolean;
}

export type SpawnFunction = (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess;
export type Signal = "SIGTERM" | "SIGKILL";

export interface PosixPlatform {
  kind: "posix";
  spawn: SpawnFunction;
  /**
   * The process table. A process not asked for fresh may show as an earlier read found it (Linux: LinuxProcessLister):
   * the same process, its state, parent, group or session perhaps out of date.
   */
  listProcesses(request?: ProcessListRequest): Promise<ProcessInfo[]>;
  /** process.kill: a negative pid addresses a process group. May throw (ESRCH, EPERM). */
  signal(pid: number, signal: Signal): void;
  /** The server's own pid: its group and session are never signalled. */
  selfPid: number;
  /** A process's environment as NUL-separated text, where the system exposes it (Linux /proc). */
  readEnvironment?(pid: number): string | undefined;
  /**
   * One process as the process table shows it, read on its own (Linux: /proc/<pid>/stat), where that is
   * cheap: an agent's start time is known right after its spawn, without reading the whole table.
   */
  readProcess?(pid: number): ProcessInfo | undefined;
}

export interface WindowsPlatform {
  kind: "windows";
  spawn: SpawnFunction;
  runFile(file: string, args: readonly string[]): Promise<{ exitCode: number | null }>;
  env: Readonly<Record<string, string | undefined>>;
  fileExists(file: string): boolean;
  readTextFile(file: string): string | undefined;
  /** The node binary running this server, used for npm shims that wrap a script. */
  nodePath: string;
  /** Whether a process with this pid exists. Windows offers no start time to tell a reused pid apart. */
  isRunning(pid: number): boolean;
}

export type Platform = PosixPlatform | WindowsPlatform;

export interface ProcessControlOptions {
  platform: Platform;
  clock: Clock;
  logger: Logger;
  /** A fresh tree marker value: for a spawn whose caller made none, and for an attached agent recorded without one. */
  newMarker(): string;
  /**
   * Runs fn once the current turn of the event loop is done (setImmediate):
   * an outcome is answered before a cleanup starts.
   */
  defer(fn: () => void): void;
  /** Time between SIGTERM and SIGKILL. */
  killGraceMs: number;
  /** How often running trees are re-walked so orphaned tool children stay known. */
  treeRefreshMs?: number;
  /** How long to keep reading after the agent exited, when a grandchild holds stdout open. */
  exitDrainMs?: number;
  /**
   * How long the cleanup after an agent's exit (and, where the start time is read at the spawn, the first
   * walk of a new agent's tree) waits, so that a burst shares one read of the process table, taken after the
   * last of them; default 50 ms. The job's outcome does not wait for it.
   */
  exitSweepMs?: number;
  /** Poll interval while waiting for a tree to die. */
  killPollMs?: number;
  /** How often an output file is read for new lines. */
  followMs?: number;
  /** First and longest interval between liveness checks of an attached agent. */
  livenessMs?: { first: number; max: number };
}
