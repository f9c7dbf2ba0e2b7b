/**
 * Spawning agents and killing their whole process tree (PROTOCOL.md §6).
 * The only file that knows POSIX from Windows; the platform is injected, so
 * both branches are testable anywhere.
 *
 * Why a process-group kill is not enough: Claude Code runs each Bash tool
 * call in a new session (setsid), so `kill(-pgid)` of the agent misses the
 * tool's shell and everything under it, which then keeps running under init.
 * We therefore remember every descendant (by parent pid, and by the process
 * groups and sessions that descendants lead) together with its start time,
 * and signal each one that is still the same process.
 */
import type { ChildProcess, SpawnOptions } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, constants as fsConstants, existsSync, openSync, readFileSync, readSync, readdirSync } from "node:fs";
import { open as openFile, type FileHandle } from "node:fs/promises";
import path from "node:path";

import { sleep, type CancelTimer, type Clock } from "../../core/clock.js";
import { NO_FOLLOW, openForAppending, openForReading } from "../../store/files.js";
import type { Logger } from "../../core/log.js";

export interface ProcessInfo {
  pid: number;
  ppid: number;
  pgid: number | undefined;
  sid: number | undefined;
  /** Opaque, compared for equality only: guards against pid reuse. */
  startTime: string;
  zombie: boolean;
}

export type SpawnFunction = (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess;
export type Signal = "SIGTERM" | "SIGKILL";

export interface PosixPlatform {
  kind: "posix";
  spawn: SpawnFunction;
  listProcesses(): Promise<ProcessInfo[]>;
  /** process.kill: a negative pid addresses a process group. May throw (ESRCH, EPERM). */
  signal(pid: number, signal: Signal): void;
  /** The server's own pid: its group and session are never signalled. */
  selfPid: number;
  /** A process's environment as NUL-separated text, where the system exposes it (Linux /proc). */
  readEnvironment?(pid: number): string | undefined;
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

export interface SpawnRequest {
  command: string;
  args: readonly string[];
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

export interface OutputFiles {
  stdoutPath: string;
  stderrPath: string;
  /** Where a result too long to hold in memory is written (§15.4). */
  resultPath?: string;
}

/** An agent started by an earlier server, to be followed and killed as if it were ours (§15.3). */
export interface AttachRequest {
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

export interface ProcessControlOptions {
  platform: Platform;
  clock: Clock;
  logger: Logger;
  /** Time between SIGTERM and SIGKILL. */
  killGraceMs: number;
  /** How often running trees are re-walked so orphaned tool children stay known. */
  treeRefreshMs?: number;
  /** How long to keep reading after the agent exited, when a grandchild holds stdout open. */
  exitDrainMs?: number;
  /** Poll interval while waiting for a tree to die. */
  killPollMs?: number;
  /** How often an output file is read for new lines. */
  followMs?: number;
  /** First and longest interval between liveness checks of an attached agent. */
  livenessMs?: { first: number; max: number };
}

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
  /** Resolves when every child has settled. */
  idle(): Promise<void>;
}

export function createProcessControl(options: ProcessControlOptions): ProcessControl {
  const { platform } = options;
  const pending = new Set<Promise<void>>();
  const tracker = platform.kind === "posix" ? new TreeTracker(platform, options) : undefined;

  function start(request: SpawnRequest): ChildHandle {
    const handle =
      platform.kind === "posix" && tracker
        ? startPosix(platform, tracker, request, options)
        : startWindows(platform as WindowsPlatform, request, options);
    const settled = handle.settled.finally(() => pending.delete(settled));
    pending.add(settled);
    return handle;
  }

  function attach(request: AttachRequest): ChildHandle {
    const pid = request.pid;
    const handle =
      pid === undefined
        ? outputOnly(request, options)
        : platform.kind === "posix" && tracker
          ? attachPosix(tracker, { ...request, pid }, options)
          : attachWindows(platform as WindowsPlatform, { ...request, pid }, options);
    const settled = handle.settled.finally(() => pending.delete(settled));
    pending.add(settled);
    return handle;
  }

  async function isAlive(pid: number, startTime: string | undefined, marker?: string): Promise<boolean | undefined> {
    if (platform.kind === "windows") return platform.isRunning(pid);
    // A fresh read: these answers decide takeovers, and a table read before a process died would keep it alive.
    return tracker?.identify(pid, startTime, marker === undefined ? undefined : `${TREE_MARKER_VARIABLE}=${marker}`, true);
  }

  async function idle(): Promise<void> {
    while (pending.size > 0) await Promise.allSettled([...pending]);
  }

  async function startTimeOf(pid: number): Promise<string | undefined> {
    return platform.kind === "posix" ? tracker?.startTimeOfPid(pid) : undefined;
  }

  async function findMarked(marker: string): Promise<{ pid: number; startTime: string } | null | undefined> {
    if (platform.kind === "windows") return undefined;
    return tracker?.findMarked(`${TREE_MARKER_VARIABLE}=${marker}`);
  }

  return { start, attach, isAlive, startTimeOf, findMarked, idle };
}

/* ------------------------------------------------------------------ *
 * Output collection, shared by both platforms
 * ------------------------------------------------------------------ */

interface Collected {
  exited: Promise<ChildExit>;
  /** Set once the agent process itself has exited (or never started). */
  hasExited(): boolean;
}

/**
 * Wires stdin/stdout/stderr and exit detection. A job completes when the agent
 * exits, even if a grandchild still holds stdout: we drain briefly, then stop.
 */
function collect(child: ChildProcess, request: SpawnRequest, options: ProcessControlOptions, onExit: () => void): Collected {
  if (request.output) return collectFromFiles(child, request, request.output, options, onExit);
  const drainMs = options.exitDrainMs ?? 250;
  let stderrTail = Buffer.alloc(0);
  let exitInfo: { code: number | null; signal: string | null } | undefined;
  let exitedFlag = false;

  child.stdout?.on("data", (chunk: Buffer) => request.onStdout(chunk));
  child.stderr?.on("data", (chunk: Buffer) => {
    const joined = Buffer.concat([stderrTail, chunk]);
    stderrTail = joined.length > request.stderrTailBytes ? joined.subarray(joined.length - request.stderrTailBytes) : joined;
  });
  // Without these, an EPIPE or reset on a pipe is an unhandled 'error' that takes the server down.
  for (const stream of [child.stdin, child.stdout, child.stderr]) {
    stream?.on("error", (error: Error) => options.logger.debug(`agent pipe: ${error.message}`));
  }

  const exited = new Promise<ChildExit>((resolve) => {
    let cancelDrain: CancelTimer | undefined;
    let finished = false;
    const finish = (exit: ChildExit): void => {
      if (finished) return;
      finished = true;
      cancelDrain?.();
      // A grandchild may still hold the pipes; stop reading so nothing waits on it.
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve(exit);
    };
    const output = (): Pick<ChildExit, "stderrTail"> => ({ stderrTail: decodeTail(stderrTail) });

    // `on`, not `once`: a second 'error' with no listener would be thrown.
    child.on("error", (error: NodeJS.ErrnoException) => {
      if (exitInfo) return;
      // 'error' without a pid means the process never started (ENOENT, EACCES, bad cwd).
      if (child.pid === undefined) {
        exitedFlag = true;
        onExit();
        finish({ spawnError: describeSpawnError(error, request.cwd), exitCode: null, signal: null, ...output() });
      } else {
        options.logger.warn(`agent ${child.pid}: ${error.message}`);
      }
    });
    child.once("exit", (code, signal) => {
      exitInfo = { code, signal };
      exitedFlag = true;
      onExit();
      cancelDrain = options.clock.setTimer(() => finish({ exitCode: code, signal, ...output() }), drainMs);
    });
    child.once("close", () => {
      if (exitInfo) finish({ exitCode: exitInfo.code, signal: exitInfo.signal, ...output() });
    });
  });

  if (child.stdin && typeof request.stdin === "string") child.stdin.end(request.stdin);

  return { exited, hasExited: () => exitedFlag };
}

/**
 * The agent writes its output to files: the exit is the end, and what the
 * file holds by then is the whole output. A grandchild still writing later
 * changes nothing, so there is no drain to wait for.
 */
function collectFromFiles(child: ChildProcess, request: SpawnRequest, output: OutputFiles, options: ProcessControlOptions, onExit: () => void): Collected {
  let exitedFlag = false;
  const follower = new FileFollower(output.stdoutPath, request.onStdout, options);
  child.stdin?.on("error", (error: Error) => options.logger.debug(`agent pipe: ${error.message}`));
  const exited = new Promise<ChildExit>((resolve) => {
    let finishing = false;
    const finish = (exit: Omit<ChildExit, "stderrTail">): void => {
      if (finishing) return;
      finishing = true;
      exitedFlag = true;
      onExit();
      void follower
        .finish()
        .then(() => readTail(output.stderrPath, request.stderrTailBytes))
        .then((stderrTail) => resolve({ ...exit, stderrTail }));
    };
    child.on("error", (error: NodeJS.ErrnoException) => {
      if (child.pid === undefined) finish({ spawnError: describeSpawnError(error, request.cwd), exitCode: null, signal: null });
      else if (!exitedFlag) options.logger.warn(`agent ${child.pid}: ${error.message}`);
    });
    child.once("exit", (code, signal) => finish({ exitCode: code, signal }));
  });
  follower.start();
  if (typeof request.stdin === "string") child.stdin?.end(request.stdin);
  return { exited, hasExited: () => exitedFlag };
}

const FOLLOW_CHUNK_BYTES = 64 * 1024;

/** Reads a file as it grows, from the start, handing each new chunk on. */
class FileFollower {
  private offset = 0;
  private handle: FileHandle | undefined;
  private cancelTimer: CancelTimer | undefined;
  private reading: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly file: string,
    private readonly onChunk: (chunk: Buffer) => void,
    private readonly options: ProcessControlOptions,
  ) {}

  start(): void {
    if (this.stopped || this.cancelTimer) return;
    this.cancelTimer = this.options.clock.setTimer(() => {
      this.cancelTimer = undefined;
      this.reading = this.readAvailable().finally(() => {
        this.reading = undefined;
        this.start();
      });
    }, this.options.followMs ?? 100);
  }

  /** Reads what the file holds now, then follows it; resolves once that first read is done. */
  catchUp(): Promise<void> {
    const first = this.readAvailable().finally(() => {
      this.reading = undefined;
      this.start();
    });
    this.reading = first;
    return first;
  }

  /** Reads to the end of the file once more, then closes it. */
  async finish(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    await this.reading;
    await this.readAvailable();
    await this.handle?.close().catch(() => undefined);
    this.handle = undefined;
  }

  private async readAvailable(): Promise<void> {
    try {
      this.handle ??= await openFile(this.file, fsConstants.O_RDONLY | NO_FOLLOW);
      for (;;) {
        const buffer = Buffer.allocUnsafe(FOLLOW_CHUNK_BYTES);
        const { bytesRead } = await this.handle.read(buffer, 0, FOLLOW_CHUNK_BYTES, this.offset);
        if (bytesRead === 0) return;
        this.offset += bytesRead;
        // A short read is copied, so a partial line kept by the reader does not pin the whole buffer.
        this.onChunk(bytesRead === FOLLOW_CHUNK_BYTES ? buffer : Buffer.from(buffer.subarray(0, bytesRead)));
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") this.options.logger.warn(`reading ${this.file}: ${(error as Error).message}`);
    }
  }
}

/** The end of some UTF-8 output: a character cut in two at the start is left out rather than shown as U+FFFD. */
function decodeTail(bytes: Buffer): string {
  let start = 0;
  // Continuation bytes (10xxxxxx) cannot start a character; at most three follow a lead byte.
  while (start < Math.min(3, bytes.length) && ((bytes[start] as number) & 0xc0) === 0x80) start += 1;
  return bytes.toString("utf8", start);
}

/** The last `bytes` of a file as text; empty when there is none. */
async function readTail(file: string, bytes: number): Promise<string> {
  let handle: FileHandle | undefined;
  try {
    handle = await openFile(file, fsConstants.O_RDONLY | NO_FOLLOW);
    const { size } = await handle.stat();
    const length = Math.min(size, bytes);
    const buffer = Buffer.alloc(length);
    await handle.read(buffer, 0, length, size - length);
    return decodeTail(buffer);
  } catch {
    return "";
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

type StdioFds = { stdin: number | undefined; stdout: number | undefined; stderr: number | undefined };

/**
 * The agent's ends of its prompt and output files, none of them through a symbolic link; the server closes its
 * copies once the agent has them. Throws with the file that could not be opened.
 */
function openStdio(request: Pick<SpawnRequest, "stdin" | "output">): StdioFds {
  const fds: StdioFds = { stdin: undefined, stdout: undefined, stderr: undefined };
  try {
    if (typeof request.stdin !== "string") fds.stdin = openForReading(request.stdin.file);
    if (request.output) {
      fds.stdout = openForAppending(request.output.stdoutPath);
      fds.stderr = openForAppending(request.output.stderrPath);
    }
    return fds;
  } catch (error) {
    closeStdio(fds);
    throw error;
  }
}

function closeStdio(fds: StdioFds | undefined): void {
  for (const fd of [fds?.stdin, fds?.stdout, fds?.stderr]) if (fd !== undefined) closeSync(fd);
}

/** The spawn's stdio: our files where we have them, pipes elsewhere. */
function stdioOf(fds: StdioFds): ["pipe" | number, "pipe" | number, "pipe" | number] {
  return [fds.stdin ?? "pipe", fds.stdout ?? "pipe", fds.stderr ?? "pipe"];
}

function describeSpawnError(error: NodeJS.ErrnoException, cwd: string): NonNullable<ChildExit["spawnError"]> {
  if (error.code === "ENOENT" && !existsSync(cwd)) {
    return { code: error.code, message: `the working directory ${cwd} does not exist (any more)`, missingCwd: true };
  }
  return { code: error.code, message: error.message };
}

/** The job's prompt or output files could not be opened (the state directory is gone, or full): nothing was started. */
function outputFailure(error: unknown): ChildHandle {
  const { code } = error as NodeJS.ErrnoException;
  return failedStart({ code, message: `cannot open the job's files: ${(error as Error).message}`, outputFiles: true });
}

function spawnFailure(error: unknown, cwd: string): ChildHandle {
  return failedStart(describeSpawnError(error instanceof Error ? (error as NodeJS.ErrnoException) : new Error(String(error)), cwd));
}

function failedStart(spawnError: NonNullable<ChildExit["spawnError"]>): ChildHandle {
  const exit: ChildExit = {
    spawnError,
    exitCode: null,
    signal: null,
    stderrTail: "",
  };
  return {
    pid: undefined,
    marker: undefined,
    identity: async () => ({ pid: undefined, startTime: undefined, marker: undefined }),
    exited: Promise.resolve(exit),
    killTree: async () => ({ signalled: 0, survivors: [] }),
    settled: Promise.resolve(),
  };
}

/* ------------------------------------------------------------------ *
 * POSIX
 * ------------------------------------------------------------------ */

function startPosix(
  platform: PosixPlatform,
  tracker: TreeTracker,
  request: SpawnRequest,
  options: ProcessControlOptions,
): ChildHandle {
  let child: ChildProcess;
  // Every descendant inherits this variable unless it scrubs its environment,
  // which finds the ones that escaped the tree before a snapshot saw them.
  const markerValue = request.marker ?? randomUUID();
  const marker = `${TREE_MARKER_VARIABLE}=${markerValue}`;
  let fds: StdioFds;
  try {
    fds = openStdio(request);
  } catch (error) {
    return outputFailure(error);
  }
  try {
    // detached: the agent leads a new session and process group, so a group
    // signal never reaches this server.
    child = platform.spawn(request.command, request.args, {
      cwd: request.cwd,
      env: { ...request.env, [TREE_MARKER_VARIABLE]: markerValue } as NodeJS.ProcessEnv,
      stdio: stdioOf(fds),
      detached: true,
      windowsHide: true,
    });
  } catch (error) {
    return spawnFailure(error, request.cwd);
  } finally {
    closeStdio(fds);
  }

  const pid = child.pid;
  const tree = pid === undefined ? undefined : tracker.track(pid, marker);
  let killing: Promise<KillReport> | undefined;
  const killTree = (): Promise<KillReport> => {
    if (!tree) return Promise.resolve({ signalled: 0, survivors: [] });
    killing ??= tracker.kill(tree);
    return killing;
  };

  const collected = collect(child, request, options, () => tree?.markRootExited());

  // After the agent exits, anything it left behind (a tool child in its own
  // session, a process holding stdout) is an orphan nobody can reach: stop it.
  const settled = collected.exited.then(async () => {
    if (!tree) return;
    // Let the job's outcome be answered first: this cleanup reads the process table.
    await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      if (killing) {
        await killing;
      } else if (await tracker.hasLiveMembers(tree)) {
        options.logger.info(`agent ${tree.rootPid} exited leaving processes behind; stopping them`);
        await killTree();
      }
    } finally {
      tracker.untrack(tree);
    }
  });

  const identity = async (): Promise<AgentIdentity> => ({
    pid,
    ...(pid === undefined ? {} : { pgid: pid }),
    startTime: tree ? await tracker.startTimeOf(tree) : undefined,
    marker: markerValue,
  });
  return { pid, marker: markerValue, identity, exited: collected.exited, killTree, settled };
}

/**
 * Follows an agent an earlier server started: its output from the file, its
 * exit by polling the process table (it is not our child, so no exit event
 * comes), and its tree for kills, marker included.
 */
function attachPosix(tracker: TreeTracker, request: AttachRequest & { pid: number }, options: ProcessControlOptions): ChildHandle {
  // Without a recorded marker, one that no process carries.
  const marker = `${TREE_MARKER_VARIABLE}=${request.marker ?? `none-${randomUUID()}`}`;
  // Without a recorded start time the pid itself is never taken into the tree (no start time
  // matches this one): only processes carrying the marker are, so a reused pid is never signalled.
  const tree = tracker.track(request.pid, marker, request.startTime ?? UNKNOWN_START_TIME);
  tree.attached = true;
  let killing: Promise<KillReport> | undefined;
  let killed: () => void = () => undefined;
  const killedSignal = new Promise<void>((resolve) => (killed = resolve));
  const killTree = (): Promise<KillReport> => {
    killing ??= tracker.kill(tree).then((report) => {
      // Undetermined: nothing was signalled, so a later kill tries again.
      if (report.undetermined) killing = undefined;
      else killed();
      return report;
    });
    return killing;
  };
  const follower = new FileFollower(request.output.stdoutPath, request.onStdout, options);
  const ready = follower.catchUp();
  const exited = followUntilGone(request, options, follower, () => tracker.identify(request.pid, request.startTime, marker), killedSignal).then((exit) => {
    tree.markRootExited();
    return exit;
  });
  const settled = exited.then(async () => {
    try {
      if (killing) await killing;
      else if (await tracker.hasLiveMembers(tree)) await killTree();
    } finally {
      tracker.untrack(tree);
    }
  });
  return {
    pid: request.pid,
    marker: request.marker,
    identity: async () => ({ pid: request.pid, startTime: request.startTime, marker: request.marker }),
    exited,
    killTree,
    settled,
    ready,
  };
}

/** An agent that is gone and whose pid nobody knows: its output is all there is, and there is nothing to kill. */
function outputOnly(request: AttachRequest, options: ProcessControlOptions): ChildHandle {
  const follower = new FileFollower(request.output.stdoutPath, request.onStdout, options);
  const ready = follower.catchUp();
  const exited = followUntilGone(request, options, follower, async () => false, new Promise<void>(() => undefined));
  return {
    pid: undefined,
    marker: request.marker,
    identity: async () => ({ pid: undefined, startTime: undefined, marker: request.marker }),
    exited,
    killTree: async () => ({ signalled: 0, survivors: [] }),
    settled: exited.then(() => undefined),
    ready,
  };
}

/** Polls liveness with a backoff (and at once after a kill), then reads the rest of the output. */
async function followUntilGone(
  request: AttachRequest,
  options: ProcessControlOptions,
  follower: FileFollower,
  isAlive: () => Promise<boolean | undefined>,
  killed: Promise<void>,
): Promise<ChildExit> {
  const { first, max } = options.livenessMs ?? { first: 500, max: 2000 };
  let wait = first;
  // The kill cuts one wait short, once: an agent that survives it is then polled at the usual pace, not in a busy loop.
  let kill: Promise<void> | undefined = killed.then(() => (kill = undefined));
  // Unknown (the process table could not be read) counts as alive: a healthy agent is never taken for gone.
  while ((await isAlive()) !== false) {
    let cancel: CancelTimer = () => undefined;
    const timer = new Promise<void>((resolve) => (cancel = options.clock.setTimer(resolve, wait)));
    await (kill ? Promise.race([timer, kill]) : timer);
    cancel();
    wait = Math.min(max, Math.round(wait * 1.5));
  }
  await follower.finish();
  return { unobserved: true, exitCode: null, signal: null, stderrTail: await readTail(request.output.stderrPath, request.stderrTailBytes) };
}

const SHARED_SNAPSHOT_MS = 25;
/** Stands for a start time nobody recorded; equal to no real one. */
const UNKNOWN_START_TIME = "unknown";

/** Set in each agent's environment; its value is unique per agent. */
export const TREE_MARKER_VARIABLE = "CLAUDE_DISPATCH_TREE";

class TrackedTree {
  rootStartTime: string | undefined;
  rootExited = false;
  /** Followed after a restart, not spawned here: its pid is only as good as the process table says. */
  attached = false;
  /** Every descendant seen alive, by pid, with the start time it had then. */
  readonly members = new Map<number, ProcessInfo>();

  constructor(
    readonly rootPid: number,
    /** "NAME=value" as it appears in /proc/<pid>/environ. */
    readonly marker: string,
  ) {}

  markRootExited(): void {
    this.rootExited = true;
  }
}

interface ProcessTable {
  byPid: Map<number, ProcessInfo>;
  byParent: Map<number, ProcessInfo[]>;
  byGroupOrSession: Map<number, ProcessInfo[]>;
  /** The server's own group and session: never followed, never signalled. */
  protectedIds: Set<number>;
}

function indexProcesses(list: readonly ProcessInfo[], selfPid: number): ProcessTable {
  const byPid = new Map<number, ProcessInfo>();
  const byParent = new Map<number, ProcessInfo[]>();
  const byGroupOrSession = new Map<number, ProcessInfo[]>();
  const push = (map: Map<number, ProcessInfo[]>, key: number, info: ProcessInfo): void => {
    const bucket = map.get(key);
    if (bucket) bucket.push(info);
    else map.set(key, [info]);
  };
  for (const info of list) {
    byPid.set(info.pid, info);
    push(byParent, info.ppid, info);
    if (info.pgid !== undefined) push(byGroupOrSession, info.pgid, info);
    if (info.sid !== undefined && info.sid !== info.pgid) push(byGroupOrSession, info.sid, info);
  }
  const protectedIds = new Set<number>([0, 1, selfPid]);
  const self = byPid.get(selfPid);
  if (self?.pgid !== undefined) protectedIds.add(self.pgid);
  if (self?.sid !== undefined) protectedIds.add(self.sid);
  return { byPid, byParent, byGroupOrSession, protectedIds };
}

function isSameLiveProcess(table: ProcessTable, remembered: ProcessInfo): boolean {
  const current = table.byPid.get(remembered.pid);
  return current !== undefined && !current.zombie && current.startTime === remembered.startTime;
}

/**
 * Remembers the descendants of every running agent. One shared timer walks
 * the process table for all trees at once, so cost does not grow per job.
 */
class TreeTracker {
  private readonly trees = new Set<TrackedTree>();
  private shared: { at: number; table: Promise<ProcessTable | undefined> } | undefined;
  private cancelRefresh: CancelTimer | undefined;
  private refreshing = false;

  constructor(
    private readonly platform: PosixPlatform,
    private readonly options: ProcessControlOptions,
  ) {}

  track(rootPid: number, marker: string, rootStartTime?: string): TrackedTree {
    const tree = new TrackedTree(rootPid, marker);
    // Known for an attached agent: a process with this pid but another start time is not it.
    tree.rootStartTime = rootStartTime;
    this.trees.add(tree);
    void this.recentSnapshot(SHARED_SNAPSHOT_MS).catch(() => undefined);
    this.scheduleRefresh();
    return tree;
  }

  untrack(tree: TrackedTree): void {
    this.trees.delete(tree);
    if (this.trees.size === 0) {
      this.cancelRefresh?.();
      this.cancelRefresh = undefined;
    }
  }

  /**
   * The agent's start time. A shared snapshot may have been read just before
   * the spawn, so when it does not show the agent a fresh one is read.
   */
  async startTimeOf(tree: TrackedTree): Promise<string | undefined> {
    if (tree.rootStartTime === undefined) await this.recentSnapshot(SHARED_SNAPSHOT_MS);
    if (tree.rootStartTime === undefined && !tree.rootExited) await this.freshSnapshot();
    return tree.rootStartTime;
  }

  async findMarked(entry: string): Promise<{ pid: number; startTime: string } | null | undefined> {
    const read = this.platform.readEnvironment;
    const table = await this.freshSnapshot();
    if (!read || !table) return undefined;
    const marked = [...table.byPid.values()].filter((info) => !info.zombie && !table.protectedIds.has(info.pid) && hasVariable(read(info.pid) ?? "", entry));
    const pids = new Set(marked.map((info) => info.pid));
    const root = marked.find((info) => !pids.has(info.ppid));
    return root ? { pid: root.pid, startTime: root.startTime } : null;
  }

  async startTimeOfPid(pid: number): Promise<string | undefined> {
    return (await this.freshSnapshot())?.byPid.get(pid)?.startTime;
  }

  /**
   * Whether pid is still the process a record names. With a start time, it
   * must match. Without one, a pid alone may name any process by now: only
   * the tree marker in its environment (Linux) can vouch for it, and where
   * there is none to read, it is not taken for ours.
   */
  async identify(pid: number, startTime: string | undefined, marker?: string, fresh = false): Promise<boolean | undefined> {
    const table = await (fresh ? this.freshSnapshot() : this.recentSnapshot(SHARED_SNAPSHOT_MS));
    // No process table this time: neither alive nor gone.
    if (!table) return undefined;
    const info = table.byPid.get(pid);
    if (info === undefined || info.zombie) return false;
    if (startTime !== undefined) {
      if (info.startTime !== startTime) return false;
      // A start time can be copied from any process into a record: where environments can be read (Linux),
      // only a process carrying the agent's tree marker is the agent (§15.3).
      const read = this.platform.readEnvironment;
      return marker === undefined || !read ? true : hasVariable(read(pid) ?? "", marker);
    }
    // A pid alone (an owner recorded where no start time could be read): it exists, but whose it is cannot be told.
    if (marker === undefined) return undefined;
    const environment = this.platform.readEnvironment?.(pid);
    return environment !== undefined && hasVariable(environment, marker);
  }

  private freshSnapshot(): Promise<ProcessTable | undefined> {
    this.shared = { at: this.options.clock.now(), table: this.snapshot() };
    return this.shared.table;
  }

  async hasLiveMembers(tree: TrackedTree): Promise<boolean> {
    // Exits seen in one turn of the event loop share one table read after them all.
    const table = await this.recentSnapshot(0);
    if (!table) return false;
    this.adoptMarked(tree, table);
    return this.liveMembers(tree, table).length > 0;
  }

  /** SIGTERM everything, re-walk during the grace period, SIGKILL what is left, verify. */
  async kill(tree: TrackedTree): Promise<KillReport> {
    const { clock, killGraceMs } = this.options;
    const pollMs = this.options.killPollMs ?? 100;
    const signalled = new Set<number>();

    let table = await this.snapshot();
    // An agent an earlier server started cannot be told from a process that reused its pid without the table:
    // read it again through the grace period, and signal nothing if it never comes.
    for (const deadline = clock.now() + killGraceMs; !table && tree.attached && clock.now() < deadline; ) {
      await sleep(clock, pollMs);
      table = await this.snapshot();
    }
    if (!table && tree.attached) return { signalled: 0, survivors: [tree.rootPid], undetermined: true };
    // This server's own pid, group or session is never signalled: a kill of a tree rooted there cannot succeed, and says so at once.
    if (table?.protectedIds.has(tree.rootPid) && !tree.rootExited && table.byPid.has(tree.rootPid)) {
      this.options.logger.error(`kill of agent ${tree.rootPid}: that is this server's own process, group or session; nothing was signalled`);
      return { signalled: 0, survivors: [tree.rootPid] };
    }
    if (!table) {
      // No process table: the group signal is the best we can do, and only the agent can be checked.
      this.trySignal(-tree.rootPid, "SIGTERM");
      await sleep(clock, killGraceMs);
      this.trySignal(-tree.rootPid, "SIGKILL");
      await sleep(clock, pollMs);
      return { signalled: 1, survivors: tree.rootExited ? [] : [tree.rootPid] };
    }
    this.adoptMarked(tree, table);
    this.signalTree(tree, table, "SIGTERM", signalled);

    const deadline = clock.now() + killGraceMs;
    while (clock.now() < deadline) {
      await sleep(clock, Math.min(pollMs, Math.max(0, deadline - clock.now())));
      table = (await this.snapshot()) ?? table;
      if (this.liveMembers(tree, table).length === 0) break;
      // Newly seen children get their SIGTERM too.
      this.signalTree(tree, table, "SIGTERM", signalled, true);
    }

    let survivors = this.liveMembers(tree, table);
    for (let attempt = 0; survivors.length > 0 && attempt < 10; attempt += 1) {
      this.signalTree(tree, table, "SIGKILL", signalled);
      await sleep(clock, pollMs);
      table = (await this.snapshot()) ?? table;
      survivors = this.liveMembers(tree, table);
    }
    const pids = survivors.map((info) => info.pid);
    if (pids.length > 0) this.options.logger.error(`kill of agent ${tree.rootPid}: still alive: ${pids.join(", ")}`);
    return { signalled: signalled.size, survivors: pids };
  }

  /**
   * Adopts processes that carry this agent's marker but were never seen in its
   * tree: a tool child whose shell exited within one refresh, or a double fork.
   * Only processes started no earlier than the agent are read.
   */
  private adoptMarked(tree: TrackedTree, table: ProcessTable): void {
    const read = this.platform.readEnvironment;
    if (!read) return;
    // Members of other agents' trees carry their own markers: no need to read them.
    const tracked = new Set<number>();
    for (const other of this.trees) for (const pid of other.members.keys()) tracked.add(pid);
    let adopted = false;
    for (const info of table.byPid.values()) {
      if (info.zombie || table.protectedIds.has(info.pid) || tree.members.has(info.pid) || tracked.has(info.pid)) continue;
      if (tree.rootStartTime !== undefined && startedBefore(info.startTime, tree.rootStartTime)) continue;
      const environment = read(info.pid);
      if (environment !== undefined && hasVariable(environment, tree.marker)) {
        tree.members.set(info.pid, info);
        adopted = true;
      }
    }
    // Their own children, groups and sessions come along.
    if (adopted) this.absorb(tree, table);
  }

  private liveMembers(tree: TrackedTree, table: ProcessTable): ProcessInfo[] {
    return [...tree.members.values()].filter((info) => isSameLiveProcess(table, info));
  }

  private signalTree(
    tree: TrackedTree,
    table: ProcessTable,
    signal: Signal,
    signalled: Set<number>,
    onlyNew = false,
  ): void {
    const groups = new Set<number>();
    for (const info of this.liveMembers(tree, table)) {
      if (onlyNew && signalled.has(info.pid)) continue;
      if (this.trySignal(info.pid, signal)) signalled.add(info.pid);
      if (info.pgid !== undefined && !table.protectedIds.has(info.pgid)) groups.add(info.pgid);
    }
    // A group id is only used while a verified member of it is alive, so it cannot be a reused pid.
    for (const group of groups) this.trySignal(-group, signal);
  }

  private trySignal(pid: number, signal: Signal): boolean {
    try {
      this.platform.signal(pid, signal);
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ESRCH") this.options.logger.warn(`${signal} ${pid}: ${code ?? String(error)}`);
      return false;
    }
  }

  /** Reads the process table once and grows every tracked tree from it. */
  /**
   * A snapshot at most maxAgeMs old: a burst of agents starting or exiting
   * together shares one read of the table instead of one each. The kill
   * sequence always takes fresh ones.
   */
  private recentSnapshot(maxAgeMs: number): Promise<ProcessTable | undefined> {
    const now = this.options.clock.now();
    if (!this.shared || now - this.shared.at > maxAgeMs) this.shared = { at: now, table: this.snapshot() };
    return this.shared.table;
  }

  private async snapshot(): Promise<ProcessTable | undefined> {
    let list: ProcessInfo[];
    try {
      list = await this.platform.listProcesses();
    } catch (error) {
      this.options.logger.warn(`cannot read the process table: ${(error as Error).message}`);
      return undefined;
    }
    const table = indexProcesses(list, this.platform.selfPid);
    for (const tree of this.trees) this.absorb(tree, table);
    return table;
  }

  private absorb(tree: TrackedTree, table: ProcessTable): void {
    const queue: ProcessInfo[] = [];
    const remember = (info: ProcessInfo): void => {
      if (info.zombie || table.protectedIds.has(info.pid)) return;
      const known = tree.members.get(info.pid);
      if (known && known.startTime === info.startTime) return;
      tree.members.set(info.pid, info);
      queue.push(info);
    };

    // An agent an earlier server started is only as trustworthy as its record: where environments can be read,
    // the processes the tree is entered by (the agent, the members of its group and session) must carry its marker.
    const read = this.platform.readEnvironment;
    const vouched = (info: ProcessInfo): boolean => !tree.attached || !read || tree.members.has(info.pid) || hasVariable(read(info.pid) ?? "", tree.marker);
    const root = table.byPid.get(tree.rootPid);
    if (root && !tree.rootExited && (tree.rootStartTime ?? root.startTime) === root.startTime && vouched(root)) {
      tree.rootStartTime = root.startTime;
      remember(root);
    }
    for (const [pid, info] of tree.members) {
      if (isSameLiveProcess(table, info)) queue.push(info);
      else tree.members.delete(pid);
    }

    const followedIds = new Set<number>();
    // The agent leads its own session and group (detached), so whatever is still in
    // them is ours even after the agent exited, unless its pid now names another process.
    const rootNow = table.byPid.get(tree.rootPid);
    const rootPidIsOurs = rootNow === undefined || (tree.rootStartTime !== undefined && rootNow.startTime === tree.rootStartTime);
    if (rootPidIsOurs && !table.protectedIds.has(tree.rootPid)) {
      followedIds.add(tree.rootPid);
      const rootVouched = tree.members.has(tree.rootPid);
      for (const member of table.byGroupOrSession.get(tree.rootPid) ?? []) if (rootVouched || vouched(member)) remember(member);
    }
    while (queue.length > 0) {
      const info = queue.pop() as ProcessInfo;
      for (const child of table.byParent.get(info.pid) ?? []) remember(child);
      for (const id of [info.pgid, info.sid]) {
        if (id === undefined || table.protectedIds.has(id) || followedIds.has(id)) continue;
        followedIds.add(id);
        for (const member of table.byGroupOrSession.get(id) ?? []) remember(member);
      }
    }
  }

  private scheduleRefresh(): void {
    if (this.cancelRefresh) return;
    const every = this.options.treeRefreshMs ?? 1000;
    const tick = (): void => {
      this.cancelRefresh = undefined;
      if (this.trees.size === 0) return;
      if (!this.refreshing) {
        this.refreshing = true;
        void this.snapshot()
          .catch(() => undefined)
          .finally(() => {
            this.refreshing = false;
          });
      }
      this.scheduleRefresh();
    };
    this.cancelRefresh = this.options.clock.setTimer(tick, every);
  }
}

/** Linux start times are clock ticks since boot; other formats cannot be ordered, so never exclude on them. */
function startedBefore(a: string, b: string): boolean {
  return /^\d+$/.test(a) && /^\d+$/.test(b) && Number(a) < Number(b);
}

function hasVariable(environment: string, entry: string): boolean {
  return environment.startsWith(`${entry}\0`) || environment.includes(`\0${entry}\0`) || environment === entry || environment.endsWith(`\0${entry}`);
}

/** Linux: a process's environment, or undefined when it is gone or not ours to read. */
export function readLinuxEnvironment(pid: number, procRoot = "/proc"): string | undefined {
  try {
    return readFileSync(`${procRoot}/${pid}/environ`, "latin1");
  } catch {
    return undefined;
  }
}

/** Parses /proc/<pid>/stat. The command name may hold spaces and parentheses, so split after the last ')'. */
export function parseProcStat(text: string): ProcessInfo | undefined {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) return undefined;
  const pid = Number(text.slice(0, open).trim());
  const fields = text.slice(close + 2).split(" ");
  // fields[0] is field 3 of proc(5): state, ppid, pgrp, session, …, starttime is field 22.
  const state = fields[0];
  const ppid = Number(fields[1]);
  const pgid = Number(fields[2]);
  const sid = Number(fields[3]);
  const startTime = fields[19];
  if (!Number.isInteger(pid) || !Number.isInteger(ppid) || state === undefined || startTime === undefined) return undefined;
  return {
    pid,
    ppid,
    pgid: Number.isInteger(pgid) ? pgid : undefined,
    sid: Number.isInteger(sid) ? sid : undefined,
    startTime,
    zombie: state === "Z" || state === "X",
  };
}

/**
 * Linux: one read of /proc/<pid>/stat per process. Synchronous on purpose:
 * with a reused buffer a scan costs ~10 µs a process, about six times less
 * CPU than the fs.promises equivalent, and it runs once a second at most.
 */
export async function listLinuxProcesses(procRoot = "/proc"): Promise<ProcessInfo[]> {
  const found: ProcessInfo[] = [];
  const buffer = Buffer.allocUnsafe(4096);
  for (const name of readdirSync(procRoot)) {
    if (!/^\d+$/.test(name)) continue;
    let fd: number | undefined;
    try {
      fd = openSync(`${procRoot}/${name}/stat`, "r");
      const length = readSync(fd, buffer, 0, buffer.length, 0);
      const info = parseProcStat(buffer.toString("latin1", 0, length));
      if (info) found.push(info);
    } catch {
      // The process exited between readdir and read.
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
  return found;
}

/** The argv for ps on macOS and the BSDs, where there is no /proc. */
export const PS_ARGS = ["-A", "-o", "pid=", "-o", "ppid=", "-o", "pgid=", "-o", "stat=", "-o", "lstart="] as const;

/** Parses `ps -A -o pid= -o ppid= -o pgid= -o stat= -o lstart=`; lstart is the rest of the line. */
export function parsePsOutput(text: string): ProcessInfo[] {
  const found: ProcessInfo[] = [];
  for (const line of text.split("\n")) {
    const match = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(.+?)\s*$/.exec(line);
    if (!match) continue;
    const [, pid, ppid, pgid, stat, lstart] = match;
    found.push({
      pid: Number(pid),
      ppid: Number(ppid),
      pgid: Number(pgid),
      sid: undefined,
      startTime: lstart ?? "",
      zombie: (stat ?? "").startsWith("Z"),
    });
  }
  return found;
}

/* ------------------------------------------------------------------ *
 * Windows
 * ------------------------------------------------------------------ */

export interface Invocation {
  command: string;
  args: string[];
  /** Only for the cmd.exe fallback, whose single argument we quote ourselves. */
  verbatim: boolean;
}

/** Arguments that may pass through cmd.exe unquoted: our constant flags and validated UUIDs. */
const CMD_SAFE_ARGUMENT = /^[A-Za-z0-9._:=/-]+$/;

/**
 * Resolves `claude` the way Windows would, without ever giving user data to a
 * shell. npm installs a `.cmd` shim; we read the target it wraps and run that
 * directly (an .exe, or a script under our own node). Only if the shim is not
 * one we recognise do we go through cmd.exe, and then only with arguments
 * that need no quoting.
 */
export function resolveWindowsInvocation(bin: string, args: readonly string[], platform: WindowsPlatform): Invocation {
  const win = path.win32;
  const found = findOnWindowsPath(bin, platform);
  if (!found) {
    const error = new Error(`spawn ${bin} ENOENT`) as NodeJS.ErrnoException;
    error.code = "ENOENT";
    throw error;
  }
  const extension = win.extname(found).toLowerCase();
  if (extension !== ".cmd" && extension !== ".bat") return { command: found, args: [...args], verbatim: false };

  const target = parseNpmShimTarget(platform.readTextFile(found) ?? "", win.dirname(found));
  if (target && platform.fileExists(target)) {
    const targetExtension = win.extname(target).toLowerCase();
    if (targetExtension === ".exe") return { command: target, args: [...args], verbatim: false };
    if ([".js", ".cjs", ".mjs"].includes(targetExtension)) {
      return { command: platform.nodePath, args: [target, ...args], verbatim: false };
    }
  }

  for (const arg of args) {
    if (!CMD_SAFE_ARGUMENT.test(arg)) throw new Error(`refusing to pass argument ${JSON.stringify(arg)} through cmd.exe`);
  }
  const systemRoot = platform.env.SystemRoot ?? platform.env.SYSTEMROOT ?? "C:\\Windows";
  return {
    command: win.join(systemRoot, "System32", "cmd.exe"),
    args: ["/d", "/s", "/c", `""${found}" ${args.join(" ")}"`],
    verbatim: true,
  };
}

function findOnWindowsPath(bin: string, platform: WindowsPlatform): string | undefined {
  const win = path.win32;
  const extensions = win.extname(bin)
    ? [""]
    : (platform.env.PATHEXT ?? ".COM;.EXE;.BAT;.CMD").split(";").filter(Boolean);
  const directories = bin.includes("\\") || bin.includes("/") ? [""] : (platform.env.PATH ?? platform.env.Path ?? "").split(";").filter(Boolean);
  for (const directory of directories) {
    for (const extension of extensions) {
      const candidate = directory ? win.join(directory, bin + extension) : bin + extension;
      if (platform.fileExists(candidate)) return candidate;
    }
  }
  return undefined;
}

/** Finds the program an npm cmd-shim runs: the quoted `%dp0%\…` path right before `%*`. */
export function parseNpmShimTarget(shim: string, shimDirectory: string): string | undefined {
  const match = /"%(?:~dp0|dp0%)\\([^"]+)"\s*%\*/.exec(shim);
  if (!match?.[1]) return undefined;
  return path.win32.join(shimDirectory, match[1]);
}

function startWindows(platform: WindowsPlatform, request: SpawnRequest, options: ProcessControlOptions): ChildHandle {
  let child: ChildProcess;
  let fds: StdioFds | undefined;
  try {
    const invocation = resolveWindowsInvocation(request.command, request.args, platform);
    try {
      fds = openStdio(request);
    } catch (error) {
      return outputFailure(error);
    }
    child = platform.spawn(invocation.command, invocation.args, {
      cwd: request.cwd,
      env: request.env as NodeJS.ProcessEnv,
      stdio: stdioOf(fds),
      windowsHide: true,
      windowsVerbatimArguments: invocation.verbatim,
    });
  } catch (error) {
    return spawnFailure(error, request.cwd);
  } finally {
    closeStdio(fds);
  }

  const pid = child.pid;
  let killing: Promise<KillReport> | undefined;
  let collected: Collected | undefined;
  const killTree = (): Promise<KillReport> => {
    killing ??= killWindowsTree(platform, pid, () => collected?.hasExited() ?? true, options);
    return killing;
  };
  collected = collect(child, request, options, () => undefined);
  const settled = collected.exited.then(async () => {
    if (killing) await killing;
  });
  return { pid, marker: undefined, identity: async () => ({ pid, startTime: undefined, marker: undefined }), exited: collected.exited, killTree, settled };
}

function attachWindows(platform: WindowsPlatform, request: AttachRequest & { pid: number }, options: ProcessControlOptions): ChildHandle {
  let killing: Promise<KillReport> | undefined;
  let gone = false;
  let killed: () => void = () => undefined;
  const killedSignal = new Promise<void>((resolve) => (killed = resolve));
  const killTree = (): Promise<KillReport> => {
    killing ??= killWindowsTree(platform, request.pid, () => gone, options).finally(killed);
    return killing;
  };
  const follower = new FileFollower(request.output.stdoutPath, request.onStdout, options);
  const ready = follower.catchUp();
  const exited = followUntilGone(request, options, follower, async () => platform.isRunning(request.pid), killedSignal).then((exit) => {
    gone = true;
    return exit;
  });
  const settled = exited.then(async () => {
    if (killing) await killing;
  });
  return { pid: request.pid, marker: undefined, identity: async () => ({ pid: request.pid, startTime: undefined, marker: undefined }), exited, killTree, settled, ready };
}

/** taskkill /T walks the tree by parent pid; /F because console agents ignore a polite close. */
async function killWindowsTree(
  platform: WindowsPlatform,
  pid: number | undefined,
  hasExited: () => boolean,
  options: ProcessControlOptions,
): Promise<KillReport> {
  if (pid === undefined) return { signalled: 0, survivors: [] };
  const systemRoot = platform.env.SystemRoot ?? platform.env.SYSTEMROOT ?? "C:\\Windows";
  const taskkill = path.win32.join(systemRoot, "System32", "taskkill.exe");
  let exitCode: number | null = null;
  try {
    ({ exitCode } = await platform.runFile(taskkill, ["/pid", String(pid), "/T", "/F"]));
  } catch (error) {
    options.logger.warn(`taskkill failed: ${(error as Error).message}`);
  }
  // 128: no such process, which is what we wanted.
  if (exitCode === 0 || exitCode === 128) return { signalled: 1, survivors: [] };
  await sleep(options.clock, options.killPollMs ?? 100);
  return { signalled: 1, survivors: hasExited() ? [] : [pid] };
}
