/**
 * Runs the built server (dist/main.js) as a host would: a child process
 * spoken to in raw JSON lines on stdin/stdout.
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const SERVER_MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
export const FAKE_CLAUDE = fileURLToPath(new URL("./fixtures/fake-claude.mjs", import.meta.url));

/**
 * The only variables of the test runner's environment that reach what the
 * tests spawn (servers, the CLI, agents): PATH, so `node` (the fake agent's
 * `#!/usr/bin/env node`) and system tools such as `ps` resolve, and on Windows
 * SystemRoot, without which Node's child processes there cannot start. Nothing
 * else: not HOME, XDG_STATE_HOME, TMPDIR (the children fall back to the
 * system's /tmp), NODE_OPTIONS or any CLAUDE_DISPATCH_* (a suite run inside an
 * agent that claude-dispatch dispatched has CLAUDE_DISPATCH_DEPTH set, and
 * would otherwise test a server that offers no tools).
 */
export const MINIMAL_ENV_KEYS: readonly string[] = process.platform === "win32" ? ["PATH", "SystemRoot"] : ["PATH"];

/**
 * The minimal base (MINIMAL_ENV_KEYS, taken from `from`, the runner's
 * environment unless given; PATH falls back to /usr/bin:/bin), then `env`.
 * Every test that spawns a process builds its environment here, never from
 * `...process.env`.
 */
export function minimalEnvironment(
  env: Readonly<Record<string, string>> = {},
  from: Readonly<Record<string, string | undefined>> = process.env,
): Record<string, string> {
  const base: Record<string, string> = {};
  for (const key of MINIMAL_ENV_KEYS) {
    const value = from[key];
    if (value !== undefined) base[key] = value;
  }
  if (base.PATH === undefined && process.platform !== "win32") base.PATH = "/usr/bin:/bin";
  return { ...base, ...env };
}

export interface RpcResponse {
  jsonrpc: "2.0";
  id: string | number | null;
  result?: any;
  error?: { code: number; message: string };
}

export class ServerProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** Every stdout line, exactly as received. */
  readonly lines: string[] = [];
  stderr = "";
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /** The server's state directory: the one given in env, else a fresh one removed by dispose(). */
  readonly stateDir: string;
  private readonly ownsStateDir: boolean;
  private buffer = "";
  private nextId = 1;
  private readonly waiting = new Map<string, (response: RpcResponse) => void>();

  /**
   * `env` is laid over `baseEnv` (minimalEnvironment() unless given; never the
   * runner's whole environment), after defaults that point the server at the fake agent, at a state
   * directory of its own, and that kill agents at shutdown, so a test leaves
   * nothing running (tests of CLAUDE_DISPATCH_ON_EXIT=keep say so).
   */
  constructor(env: Record<string, string> = {}, baseEnv: Readonly<Record<string, string>> = minimalEnvironment()) {
    this.ownsStateDir = env.CLAUDE_DISPATCH_STATE_DIR === undefined;
    this.stateDir = env.CLAUDE_DISPATCH_STATE_DIR ?? mkdtempSync(path.join(tmpdir(), "cd-state-"));
    this.child = spawn(process.execPath, [SERVER_MAIN], {
      env: {
        ...baseEnv,
        CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE,
        CLAUDE_DISPATCH_KILL_GRACE_MS: "500",
        CLAUDE_DISPATCH_LOG_LEVEL: "debug",
        CLAUDE_DISPATCH_STATE_DIR: this.stateDir,
        CLAUDE_DISPATCH_ON_EXIT: "kill",
        ...env,
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk: string) => this.onData(chunk));
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (chunk: string) => (this.stderr += chunk));
    this.exited = new Promise((resolve) => this.child.once("exit", (code, signal) => resolve({ code, signal })));
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    let newline = this.buffer.indexOf("\n");
    while (newline >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      newline = this.buffer.indexOf("\n");
      this.lines.push(line);
      const message = JSON.parse(line) as RpcResponse;
      const key = JSON.stringify(message.id);
      const resolve = this.waiting.get(key);
      if (resolve) {
        this.waiting.delete(key);
        resolve(message);
      }
    }
  }

  /** Resolves with the response that carries this id. */
  responseTo(id: string | number | null): Promise<RpcResponse> {
    const key = JSON.stringify(id);
    const already = this.lines
      .map((line) => JSON.parse(line) as RpcResponse)
      .find((message) => JSON.stringify(message.id) === key);
    if (already) return Promise.resolve(already);
    return new Promise((resolve) => this.waiting.set(key, resolve));
  }

  sendRaw(line: string): void {
    this.child.stdin.write(`${line}\n`);
  }

  send(message: Record<string, unknown>): void {
    this.sendRaw(JSON.stringify({ jsonrpc: "2.0", ...message }));
  }

  request(method: string, params?: Record<string, unknown>, id: string | number = this.nextId++): Promise<RpcResponse> {
    const response = this.responseTo(id);
    this.send({ id, method, ...(params ? { params } : {}) });
    return response;
  }

  async initialize(version = "2025-06-18"): Promise<RpcResponse> {
    const response = await this.request("initialize", {
      protocolVersion: version,
      capabilities: {},
      clientInfo: { name: "test-host", version: "1" },
    });
    this.send({ method: "notifications/initialized" });
    // initialize is answered while the rest of the server loads; any other request waits until it has taken the
    // state directory over and is present in it, so a ping's answer says the server is wholly up.
    await this.request("ping", {});
    return response;
  }

  callTool(name: string, args: Record<string, unknown>, id?: string | number): Promise<RpcResponse> {
    return this.request("tools/call", { name, arguments: args }, id);
  }

  /** claude_wait, holding 30 s a call, until the job is neither queued nor running: its report then. */
  async waitForJob(jobId: string): Promise<Record<string, any>> {
    const wait = async (): Promise<Record<string, any>> =>
      (await this.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 })).result.structuredContent;
    let waited = await wait();
    while (waited.status === "running" || waited.status === "queued") waited = await wait();
    return waited;
  }

  endInput(): void {
    this.child.stdin.end();
  }

  /**
   * Ends it as a host does (stdin closed: CLAUDE_DISPATCH_ON_EXIT applies), waits at most 10 s, then disposes of it.
   */
  async shutdown(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.endInput();
      // The backstop is cleared once the server has exited: left pending, it would keep the test's process alive 10 s.
      let backstop: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([this.exited, new Promise((resolve) => (backstop = setTimeout(resolve, 10_000)))]);
      clearTimeout(backstop);
    }
    this.dispose();
  }

  /** Always safe to call: kills the server if a test left it running. */
  dispose(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
    if (this.ownsStateDir) rmSync(this.stateDir, { recursive: true, force: true });
  }
}

/** A program run to its end with minimalEnvironment(env), within `timeoutMs`: its exit code and output. */
export function runProgram(
  file: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { env: minimalEnvironment(env), timeout: timeoutMs }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr });
    });
  });
}
