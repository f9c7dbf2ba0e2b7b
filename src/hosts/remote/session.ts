/**
 * One session with `claude-dispatch remote` (PROTOCOL.md §21.3): the transport's program (ssh, a container engine,
 * kubectl) is started with argv (never a shell here), the request goes down the channel as one line, and frames come
 * back until the far end finishes, the channel drops, or we stop it. stdin stays open the whole time: the far end
 * takes its closing to mean this server has gone.
 */
import { spawn, type ChildProcess } from "node:child_process";

import type { CancelTimer, Clock } from "../../core/clock.js";
import { LineReader } from "../../core/lines.js";
import type { Logger } from "../../core/log.js";
import { ignoreError, ListenerSet } from "../../store/listeners.js";
import { MAX_FRAME_BYTES, parseFrame, type RemoteFrame, type RemoteRequest } from "./protocol.js";
import type { Transport } from "./transport.js";

const STDERR_TAIL_CHARS = 4000;

export interface SessionEnd {
  /** The transport's exit: its own failure (ssh's 255) or the far end's exit status. */
  exitCode: number | null;
  signal: string | null;
  /** What the transport and the far end said on stderr, its end. */
  stderr: string;
  /** The transport's program could not be started (a missing ssh). */
  spawnError?: string;
  /** The transport was killed here: the host said nothing for this long (§21.2). */
  silentMs?: number;
}

export interface Session {
  readonly ended: Promise<SessionEnd>;
  /** Ends the session from this side: the remote end sees its stdin close. */
  stop(): void;
}

export interface SessionOptions {
  /** The transport's name in messages: "ssh". */
  label: string;
  program: string;
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  logger: Logger;
  clock: Clock;
  /** Killed if no frame came within this (§21.2): a host can accept a connection, or log in, and say nothing. */
  firstFrameMs: number;
  /** Killed if the session has not ended within this: for a request answered once, not a follow. */
  wholeMs?: number;
}

/** A session stopped from this side that does not end on SIGTERM gets SIGKILL after this. */
const STOP_GRACE_MS = 2000;

/** Starts a session; onFrame hears each frame in order, and returns false to end the session (the answer is in). */
export function openSession(
  options: SessionOptions,
  request: RemoteRequest,
  onFrame: (frame: RemoteFrame) => boolean | void,
): Session {
  let child: ChildProcess | undefined;
  let stderr = "";
  let stopped = false;
  let silentMs: number | undefined;
  const timers: CancelTimer[] = [];
  const running = (): ChildProcess | undefined =>
    child && child.exitCode === null && child.signalCode === null ? child : undefined;
  // Killed, not asked: a hung ssh may not act on SIGTERM, and its close event is what reaps it.
  const silenced = (ms: number) => (): void => {
    const live = running();
    if (!live) return;
    silentMs = ms;
    live.kill("SIGKILL");
  };
  const ended = new Promise<SessionEnd>((resolve) => {
    let ssh: ChildProcess;
    try {
      ssh = child = spawn(options.program, options.argv, {
        env: options.env,
        stdio: ["pipe", "pipe", "pipe"],
        windowsHide: true,
      });
    } catch (error) {
      resolve({ exitCode: null, signal: null, stderr: "", spawnError: (error as Error).message });
      return;
    }
    const firstFrame = options.clock.setTimer(silenced(options.firstFrameMs), options.firstFrameMs);
    timers.push(firstFrame);
    if (options.wholeMs !== undefined) timers.push(options.clock.setTimer(silenced(options.wholeMs), options.wholeMs));
    let spawnError: string | undefined;
    const lines = new LineReader(
      MAX_FRAME_BYTES,
      (line) => {
        if (stopped) return;
        const frame = parseFrame(line);
        if (!frame) {
          options.logger.warn(`${options.label}: skipped a line that is not a frame: ${line.slice(0, 200)}`);
          return;
        }
        firstFrame();
        // The answer is in: the remote end exits by itself, and ssh with it.
        if (onFrame(frame) === false) ssh.stdin?.end();
      },
      () => options.logger.warn(`${options.label}: skipped a frame longer than the limit`),
    );
    const listeners = new ListenerSet();
    listeners.on(ssh.stdout, "data", (chunk: Buffer) => lines.push(chunk));
    listeners.on(ssh.stderr, "data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL_CHARS);
    });
    // A broken pipe to ssh shows as its exit; nothing to add here.
    listeners.on(ssh.stdin, "error", ignoreError);
    listeners.on(ssh, "error", (error: Error) => (spawnError = error.message));
    listeners.on(ssh, "close", (exitCode: number | null, signal: NodeJS.Signals | null) => {
      for (const cancel of timers.splice(0)) cancel();
      lines.finish();
      // The exited transport outlives its use: nothing of this session may stay on it (store/listeners.ts).
      listeners.release();
      const why = {
        ...(spawnError !== undefined ? { spawnError } : {}),
        ...(silentMs !== undefined ? { silentMs } : {}),
      };
      resolve({ exitCode, signal, stderr: stderr.trim(), ...why });
    });
    ssh.stdin?.write(`${JSON.stringify(request)}\n`);
  });
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    child?.stdin?.end();
    // ssh closes the channel once its stdin ends; a connection that hangs is not waited for, nor an ssh that stays.
    const live = running();
    if (!live) return;
    live.kill("SIGTERM");
    timers.push(options.clock.setTimer(() => void running()?.kill("SIGKILL"), STOP_GRACE_MS));
  };
  return { ended, stop };
}

/** Why a session ended, in a phrase: the transport's own failure, a silence, or the far end's exit. */
export function describeEnd(closed: SessionEnd, transport: Pick<Transport, "label" | "failure">): string {
  const { label } = transport;
  if (closed.spawnError !== undefined) return `${label} could not be run: ${closed.spawnError}`;
  if (closed.silentMs !== undefined)
    return `no answer within ${closed.silentMs / 1000} s (CLAUDE_DISPATCH_SSH_TIMEOUT_MS)`;
  const said = lastLine(closed.stderr);
  const how =
    transport.failure(closed.exitCode, closed.stderr) ??
    (closed.signal ? `${label} ended by ${closed.signal}` : `the remote command exited ${closed.exitCode}`);
  return said ? `${how}: ${said.slice(0, 300)}` : how;
}

/** The line of the transport's stderr that says what went wrong, for a message. */
export function lastLine(text: string): string {
  const lines = text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
  return lines.at(-1) ?? "";
}
