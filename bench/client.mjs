/** A host for the bench: the built server spoken to in raw JSON lines. */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { ROOT, SERVER_MAIN, FAKE_CLAUDE, SERVER_NODE_ARGS, now, withTimeout, baseEnv, track } from "./shared.mjs";

const HEAD_BYTES = 64;
/** Responses are JSON.stringify of {jsonrpc, id, ...}: the id is found in the first bytes. */
const ID_AT_HEAD = /^\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*")[,}]/;
const ID_AT_TAIL = /"id":(-?\d+)\}$/;

export class Server {
  /** env is laid over the defaults: the fake agent, default log level. */
  /** args: after main, as for the approver mode (k). */
  constructor(env = {}, main = SERVER_MAIN, args = []) {
    this.spawnedAt = now();
    this.child = track(
      spawn(process.execPath, [...SERVER_NODE_ARGS, main, ...args], {
        cwd: ROOT,
        env: baseEnv({ CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE, CLAUDE_DISPATCH_LOG_LEVEL: "info", ...env }),
        stdio: ["pipe", "pipe", "pipe"],
      }),
    );
    this.pid = this.child.pid;
    this.nextId = 1;
    /** id (as JSON text) -> { resolve, reject, raw } */
    this.pending = new Map();
    this.stderrTail = "";
    this.notifications = 0;
    this.strayLines = [];
    this.resetLine();

    this.child.stdout.on("data", (chunk) => this.onChunk(chunk, now()));
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (text) => {
      this.stderrTail = (this.stderrTail + text).slice(-8192);
    });
    this.child.stdin.on("error", () => undefined); // EPIPE if the server died; reported through `exited`
    this.exited = new Promise((resolve) => {
      this.child.once("exit", (code, signal) => {
        this.exitInfo = { code, signal };
        const error = new Error(`server exited (code ${code}, signal ${signal}); stderr tail:\n${this.stderrTail}`);
        for (const waiter of this.pending.values()) waiter.reject(error);
        this.pending.clear();
        resolve({ code, signal });
      });
    });
  }

  resetLine() {
    this.parts = [];
    this.lineBytes = 0;
    this.classified = false;
    this.skipping = false;
    this.lineKey = undefined;
  }

  /** Splits stdout on newlines without copying lines that a raw waiter only counts. */
  onChunk(chunk, at) {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      if (end > start) this.append(chunk.subarray(start, end));
      if (newline === -1) return;
      this.endLine(at);
      start = newline + 1;
    }
  }

  append(part) {
    this.lineBytes += part.length;
    if (this.skipping) return;
    this.parts.push(part);
    if (!this.classified && this.lineBytes >= HEAD_BYTES) this.classify();
  }

  classify() {
    this.classified = true;
    const head = Buffer.concat(this.parts, Math.min(this.lineBytes, HEAD_BYTES)).toString("latin1");
    this.lineKey = ID_AT_HEAD.exec(head)?.[1];
    if (this.lineKey !== undefined && this.pending.get(this.lineKey)?.raw) {
      this.skipping = true;
      this.parts = [];
    }
  }

  endLine(at) {
    if (!this.classified) this.classify();
    // A server that does not put the id first (the earlier server's SDK writes it last): found in the tail.
    if (this.lineKey === undefined && this.parts.length > 0) {
      const last = this.parts[this.parts.length - 1];
      const key = ID_AT_TAIL.exec(last.subarray(Math.max(0, last.length - HEAD_BYTES)).toString("latin1"))?.[1];
      if (key !== undefined && this.pending.get(key)?.raw) this.lineKey = key;
    }
    const { lineKey: key, lineBytes: bytes, parts } = this;
    this.resetLine();
    if (bytes === 0) return;
    const waiter = key === undefined ? undefined : this.pending.get(key);
    if (waiter) this.pending.delete(key);
    if (waiter?.raw) return waiter.resolve({ at, bytes });
    const text = (parts.length === 1 ? parts[0] : Buffer.concat(parts)).toString("utf8");
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      this.strayLines.push(text.slice(0, 200));
      return;
    }
    // A server that does not put the id first (the reference server's SDK writes it last).
    const late = waiter
      ? undefined
      : message.id === undefined
        ? undefined
        : this.pending.get(JSON.stringify(message.id));
    if (late) this.pending.delete(JSON.stringify(message.id));
    if (waiter ?? late) (waiter ?? late).resolve({ at, bytes, message });
    else if (typeof message.method === "string") this.notifications += 1;
    else this.strayLines.push(text.slice(0, 200));
  }

  expect(id, raw) {
    const key = JSON.stringify(id);
    return new Promise((resolve, reject) => this.pending.set(key, { resolve, reject, raw }));
  }

  /** Sends one request; resolves with { at, sentAt, bytes, message } (no message when raw). */
  request(method, params, { raw = false, timeoutMs = 120_000 } = {}) {
    if (this.exitInfo) return Promise.reject(new Error(`server already exited; stderr tail:\n${this.stderrTail}`));
    const id = this.nextId++;
    const response = this.expect(id, raw);
    const sentAt = now();
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) })}\n`);
    return withTimeout(response, timeoutMs, `${method} #${id}`).then((r) => {
      if (r.message?.error) throw new Error(`${method} #${id} failed: ${JSON.stringify(r.message.error)}`);
      return { ...r, sentAt };
    });
  }

  notify(method, params) {
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method, ...(params ? { params } : {}) })}\n`);
  }

  async initialize() {
    const response = await this.request("initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "claude-dispatch-bench", version: "1" },
    });
    this.notify("notifications/initialized");
    return response;
  }

  /** A tools/call; resolves with { at, sentAt, structured, result }. */
  async callTool(name, args, timeoutMs = 120_000) {
    const response = await this.request("tools/call", { name, arguments: args }, { timeoutMs });
    const result = response.message.result;
    return { ...response, result, structured: result?.structuredContent };
  }

  /** Writes a buffer in slices, waiting for 'drain' whenever the pipe pushes back. */
  async writeAll(buffer) {
    const SLICE = 64 * 1024;
    for (let offset = 0; offset < buffer.length; offset += SLICE) {
      if (!this.child.stdin.write(buffer.subarray(offset, offset + SLICE))) await once(this.child.stdin, "drain");
    }
  }

  /** Closes stdin (the server's normal shutdown) and waits; SIGKILL after timeoutMs. */
  async close(timeoutMs = 20_000) {
    if (!this.exitInfo) this.child.stdin.end();
    try {
      return await withTimeout(this.exited, timeoutMs, "server shutdown");
    } catch {
      this.child.kill("SIGKILL");
      await this.exited;
      return { code: null, signal: "SIGKILL", forced: true };
    }
  }
}
