/**
 * Output collection, shared by both platforms: stdout and stderr through pipes, or written by the agent
 * itself to files that are followed as they grow (§6, §15.4).
 */
import type { ChildProcess } from "node:child_process";
import { closeSync, fstatSync, readSync } from "node:fs";

import type { CancelTimer } from "../../core/clock.js";
import { PollPace } from "../../core/pace.js";
import { openForAppending, openForReading } from "../../store/files.js";
import { ListenerSet } from "../../store/listeners.js";
import { StateError } from "../../store/records.js";
import { describeSpawnError } from "./failed-start.js";
import type { ChildExit, OutputFiles, ProcessControlOptions, SpawnRequest } from "./types.js";

export interface Collected {
  exited: Promise<ChildExit>;
  /** Set once the agent process itself has exited (or never started). */
  hasExited(): boolean;
}

/**
 * Wires stdin/stdout/stderr and exit detection. A job completes when the agent
 * exits, even if a grandchild still holds stdout: we drain briefly, then stop.
 */
export function collect(
  child: ChildProcess,
  request: SpawnRequest,
  options: ProcessControlOptions,
  onExit: () => void,
): Collected {
  // Taken off once the agent has exited: the child and its pipes outlive their use (store/listeners.ts).
  const listeners = new ListenerSet();
  if (request.output) return collectFromFiles(child, request, request.output, options, onExit, listeners);
  let exitedFlag = false;
  listeners.on(child.stdout, "data", (chunk: Buffer) => request.onStdout(chunk));
  const stderrTail = keepStderrTail(child, request.stderrTailBytes, listeners);
  // Without these, an EPIPE or reset on a pipe is an unhandled 'error' that takes the server down.
  for (const stream of [child.stdin, child.stdout, child.stderr]) {
    listeners.on(stream, "error", (error: Error) => options.logger.debug(`agent pipe: ${error.message}`));
  }
  const exited = watchPipedExit(child, request, options, stderrTail, listeners, () => {
    exitedFlag = true;
    onExit();
  });
  if (child.stdin && typeof request.stdin === "string") child.stdin.end(request.stdin);
  return { exited, hasExited: () => exitedFlag };
}

/** Keeps the last `bytes` of the agent's stderr; the returned function decodes them. */
function keepStderrTail(child: ChildProcess, bytes: number, listeners: ListenerSet): () => string {
  let tail = Buffer.alloc(0);
  listeners.on(child.stderr, "data", (chunk: Buffer) => {
    const joined = Buffer.concat([tail, chunk]);
    tail = joined.length > bytes ? joined.subarray(joined.length - bytes) : joined;
  });
  return () => decodeTail(tail);
}

/** The exit of a piped agent: at 'close', or a drain after 'exit' when a grandchild keeps the pipes open. */
function watchPipedExit(
  child: ChildProcess,
  request: SpawnRequest,
  options: ProcessControlOptions,
  stderrTail: () => string,
  listeners: ListenerSet,
  markExited: () => void,
): Promise<ChildExit> {
  const drainMs = options.exitDrainMs ?? 250;
  let exitInfo: { code: number | null; signal: string | null } | undefined;
  return new Promise<ChildExit>((resolve) => {
    let cancelDrain: CancelTimer | undefined;
    let finished = false;
    const finish = (exit: Omit<ChildExit, "stderrTail">): void => {
      if (finished) return;
      finished = true;
      cancelDrain?.();
      // A grandchild may still hold the pipes; stop reading so nothing waits on it.
      child.stdout?.destroy();
      child.stderr?.destroy();
      const tail = stderrTail();
      listeners.release();
      resolve({ ...exit, stderrTail: tail });
    };

    // `on`, not `once`: a second 'error' with no listener would be thrown.
    listeners.on(child, "error", (error: NodeJS.ErrnoException) => {
      if (exitInfo) return;
      // 'error' without a pid means the process never started (ENOENT, EACCES, bad cwd).
      if (child.pid === undefined) {
        markExited();
        finish({ spawnError: describeSpawnError(error, request.cwd), exitCode: null, signal: null });
      } else {
        options.logger.warn(`agent ${child.pid}: ${error.message}`);
      }
    });
    listeners.once(child, "exit", (code: number | null, signal: NodeJS.Signals | null) => {
      exitInfo = { code, signal };
      markExited();
      cancelDrain = options.clock.setTimer(() => finish({ exitCode: code, signal }), drainMs);
    });
    listeners.once(child, "close", () => {
      if (exitInfo) finish({ exitCode: exitInfo.code, signal: exitInfo.signal });
    });
  });
}

/**
 * The agent writes its output to files: the exit is the end, and what the
 * file holds by then is the whole output. A grandchild still writing later
 * changes nothing, so there is no drain to wait for.
 */
function collectFromFiles(
  child: ChildProcess,
  request: SpawnRequest,
  output: OutputFiles,
  options: ProcessControlOptions,
  onExit: () => void,
  listeners: ListenerSet,
): Collected {
  let exitedFlag = false;
  const follower = new FileFollower(output.stdoutPath, request.onStdout, options);
  listeners.on(child.stdin, "error", (error: Error) => options.logger.debug(`agent pipe: ${error.message}`));
  const exited = new Promise<ChildExit>((resolve) => {
    let finishing = false;
    const finish = (exit: Omit<ChildExit, "stderrTail">): void => {
      if (finishing) return;
      finishing = true;
      exitedFlag = true;
      listeners.release();
      onExit();
      void follower
        .finish()
        .then(() => readTail(output.stderrPath, request.stderrTailBytes))
        .then((stderrTail) => resolve({ ...exit, ...follower.failure(), stderrTail }));
    };
    listeners.on(child, "error", (error: NodeJS.ErrnoException) => {
      if (child.pid === undefined)
        finish({ spawnError: describeSpawnError(error, request.cwd), exitCode: null, signal: null });
      else if (!exitedFlag) options.logger.warn(`agent ${child.pid}: ${error.message}`);
    });
    listeners.once(child, "exit", (code: number | null, signal: NodeJS.Signals | null) =>
      finish({ exitCode: code, signal }),
    );
  });
  follower.start();
  if (typeof request.stdin === "string") child.stdin?.end(request.stdin);
  return { exited, hasExited: () => exitedFlag };
}

const FOLLOW_CHUNK_BYTES = 64 * 1024;
/**
 * At most this much of one file is read per tick; more waits for the next
 * turn, so one busy agent cannot hold up the rest.
 */
const FOLLOW_SLICE_BYTES = 1024 * 1024;

/**
 * One timer for every file followed under the same options (one process control): each tick reads every
 * file once, so a hundred running agents cost one timer, not a hundred. Reads are synchronous: a read of a
 * file that has not grown returns at once, and an unchanged file costs one read call, not a trip through
 * the thread pool. Ticks come every followMs while files grow, slower while none does (PollPace).
 */
class FollowPool {
  private readonly followers = new Set<FileFollower>();
  private cancelTimer: CancelTimer | undefined;
  private continuing = false;
  private readonly pace: PollPace;

  constructor(private readonly options: ProcessControlOptions) {
    this.pace = new PollPace(options.followMs ?? 100);
  }

  add(follower: FileFollower): void {
    this.followers.add(follower);
    // A new agent prints its first lines at once: back to the fast pace.
    if (this.pace.found()) {
      this.cancelTimer?.();
      this.cancelTimer = undefined;
    }
    this.schedule();
  }

  delete(follower: FileFollower): void {
    this.followers.delete(follower);
    if (this.followers.size === 0) {
      this.cancelTimer?.();
      this.cancelTimer = undefined;
    }
  }

  private schedule(): void {
    if (this.cancelTimer || this.continuing || this.followers.size === 0) return;
    this.cancelTimer = this.options.clock.setTimer(() => {
      this.cancelTimer = undefined;
      this.tick();
    }, this.pace.ms);
  }

  private tick(): void {
    let more = false;
    let grew = false;
    for (const follower of [...this.followers]) {
      const read = follower.poll();
      if (read === "more") more = true;
      if (read !== "none") grew = true;
    }
    if (grew) this.pace.found();
    else this.pace.foundNothing();
    if (!more) return this.schedule();
    // A file with more than a slice to read goes on after this turn, not a whole interval later.
    this.continuing = true;
    this.options.defer(() => {
      this.continuing = false;
      if (this.followers.size > 0) this.tick();
    });
  }
}

const pools = new WeakMap<ProcessControlOptions, FollowPool>();
const scratch = Buffer.allocUnsafe(FOLLOW_CHUNK_BYTES);

function poolFor(options: ProcessControlOptions): FollowPool {
  let pool = pools.get(options);
  if (!pool) pools.set(options, (pool = new FollowPool(options)));
  return pool;
}

/** Reads a file as it grows, from the start, handing each new chunk on. */
export class FileFollower {
  private offset = 0;
  private fd: number | undefined;
  private stopped = false;
  /** Why the file cannot be followed: something other than a regular file stands there (§15.1). */
  private refused: string | undefined;
  private readonly pool: FollowPool;

  constructor(
    private readonly file: string,
    private readonly onChunk: (chunk: Buffer) => void,
    private readonly options: ProcessControlOptions,
  ) {
    this.pool = poolFor(options);
  }

  start(): void {
    if (!this.stopped) this.pool.add(this);
  }

  /**
   * Reads what the file holds now (just after this turn's code, as a read would), then
   * follows it; resolves once that first read is done.
   */
  catchUp(): Promise<void> {
    return Promise.resolve().then(() => {
      if (this.stopped) return;
      while (this.readSlice()) {
        // The whole of what is there, before the caller goes on.
      }
      this.start();
    });
  }

  /** Reads to the end of the file once more, then closes it. */
  async finish(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.pool.delete(this);
    while (this.readSlice()) {
      // To the end.
    }
    if (this.fd !== undefined) {
      try {
        closeSync(this.fd);
      } catch {
        // Closed is closed.
      }
      this.fd = undefined;
    }
  }

  /** One tick of the pool: reads up to a slice; "more" when there may be more to read at once. */
  poll(): "none" | "some" | "more" {
    if (this.stopped) return "none";
    const offset = this.offset;
    if (this.readSlice()) return "more";
    return this.offset > offset ? "some" : "none";
  }

  /** How the agent's end reads when its output could not be followed: STATE_ERROR naming the file (§15.1). */
  failure(): { failure: { code: "STATE_ERROR"; detail: string } } | Record<string, never> {
    if (this.refused === undefined) return {};
    return { failure: { code: "STATE_ERROR", detail: `its output cannot be read: ${this.refused}` } };
  }

  /** Reads up to FOLLOW_SLICE_BYTES; true when it stopped at that limit rather than at the end of the file. */
  private readSlice(): boolean {
    try {
      this.fd ??= openForReading(this.file);
      for (let sliced = 0; sliced < FOLLOW_SLICE_BYTES;) {
        // Into one scratch buffer (reads are synchronous, so it is never shared): a
        // file that has not grown costs no allocation.
        const bytesRead = readSync(this.fd, scratch, 0, FOLLOW_CHUNK_BYTES, this.offset);
        if (bytesRead === 0) return false;
        this.offset += bytesRead;
        sliced += bytesRead;
        // A copy of just what was read: the reader may keep a partial line, and it must pin nothing more.
        this.onChunk(Buffer.from(scratch.subarray(0, bytesRead)));
      }
      return true;
    } catch (error) {
      if (error instanceof StateError) {
        // Never a file an agent wrote: nothing more is read from it, and the job ends saying why.
        this.refused = error.message;
        this.stopped = true;
        this.pool.delete(this);
      }
      if ((error as NodeJS.ErrnoException).code !== "ENOENT")
        this.options.logger.warn(`reading ${this.file}: ${(error as Error).message}`);
      return false;
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

/**
 * The last `bytes` of a file as text; empty when there is none. Read synchronously: one small read at the agent's end.
 */
export async function readTail(file: string, bytes: number): Promise<string> {
  let fd: number | undefined;
  try {
    fd = openForReading(file);
    const { size } = fstatSync(fd);
    const length = Math.min(size, bytes);
    const buffer = Buffer.alloc(length);
    const read = length === 0 ? 0 : readSync(fd, buffer, 0, length, size - length);
    return decodeTail(read === length ? buffer : buffer.subarray(0, read));
  } catch {
    return "";
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

export type StdioFds = { stdin: number | undefined; stdout: number | undefined; stderr: number | undefined };

/**
 * The agent's ends of its prompt and output files, none of them through a symbolic link; the server closes its
 * copies once the agent has them. Throws with the file that could not be opened.
 */
export function openStdio(request: Pick<SpawnRequest, "stdin" | "output">): StdioFds {
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

export function closeStdio(fds: StdioFds | undefined): void {
  for (const fd of [fds?.stdin, fds?.stdout, fds?.stderr]) if (fd !== undefined) closeSync(fd);
}

/** The spawn's stdio: our files where we have them, pipes elsewhere. */
export function stdioOf(fds: StdioFds): ["pipe" | number, "pipe" | number, "pipe" | number] {
  return [fds.stdin ?? "pipe", fds.stdout ?? "pipe", fds.stderr ?? "pipe"];
}
