/**
 * One ssh session (PROTOCOL.md §21.3): ssh is started with argv (never a shell here), the request goes down the
 * channel as one line, and frames come back until the remote end finishes, the connection drops, or we stop it.
 * stdin stays open the whole time: the remote end takes its closing to mean this server has gone.
 */
import { spawn, type ChildProcess } from "node:child_process";

import { LineReader } from "../../core/lines.js";
import type { Logger } from "../../core/log.js";
import { MAX_FRAME_BYTES, parseFrame, type RemoteFrame, type RemoteRequest } from "./protocol.js";

const STDERR_TAIL_CHARS = 4000;

export interface SessionEnd {
  /** ssh's exit: 255 is ssh's own failure (no connection, a refused key), anything else the remote command's. */
  exitCode: number | null;
  signal: string | null;
  /** What ssh and the remote command said on stderr, its end. */
  stderr: string;
  /** The session was started: ssh ran (a missing ssh is a spawn error instead). */
  spawnError?: string;
}

export interface Session {
  readonly ended: Promise<SessionEnd>;
  /** Ends the session from this side: the remote end sees its stdin close. */
  stop(): void;
}

export interface SessionOptions {
  sshBin: string;
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  logger: Logger;
}

/** Starts a session; onFrame hears each frame in order, and returns false to end the session (the answer is in). */
export function openSession(options: SessionOptions, request: RemoteRequest, onFrame: (frame: RemoteFrame) => boolean | void): Session {
  let child: ChildProcess;
  let stderr = "";
  let stopped = false;
  const ended = new Promise<SessionEnd>((resolve) => {
    try {
      child = spawn(options.sshBin, options.argv, { env: options.env, stdio: ["pipe", "pipe", "pipe"], windowsHide: true });
    } catch (error) {
      resolve({ exitCode: null, signal: null, stderr: "", spawnError: (error as Error).message });
      return;
    }
    let spawnError: string | undefined;
    const lines = new LineReader(
      MAX_FRAME_BYTES,
      (line) => {
        if (stopped) return;
        const frame = parseFrame(line);
        if (!frame) {
          options.logger.warn(`ssh ${options.argv.at(-2) ?? ""}: skipped a line that is not a frame: ${line.slice(0, 200)}`);
          return;
        }
        // The answer is in: the remote end exits by itself, and ssh with it.
        if (onFrame(frame) === false) child.stdin?.end();
      },
      () => options.logger.warn("ssh: skipped a frame longer than the limit"),
    );
    child.stdout?.on("data", (chunk: Buffer) => lines.push(chunk));
    child.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL_CHARS)));
    // A broken pipe to ssh shows as its exit; nothing to add here.
    child.stdin?.on("error", () => undefined);
    child.on("error", (error) => (spawnError = error.message));
    child.on("close", (exitCode, signal) => {
      lines.finish();
      resolve({ exitCode, signal, stderr: stderr.trim(), ...(spawnError !== undefined ? { spawnError } : {}) });
    });
    child.stdin?.write(`${JSON.stringify(request)}\n`);
  });
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    child?.stdin?.end();
    // ssh closes the channel once its stdin ends; a connection that hangs is not waited for.
    child?.kill("SIGTERM");
  };
  return { ended, stop };
}

/** The line of ssh's stderr that says what went wrong, for a message. */
export function lastLine(text: string): string {
  const lines = text.split("\n").map((line) => line.trim()).filter(Boolean);
  return lines.at(-1) ?? "";
}
