/**
 * One server process (Session): writes blocks and waits until each is answered. What it reads back is
 * checked in frames.mjs, how it writes in writes.mjs. Part of the fuzzer: bench/fuzz-lib.mjs re-exports
 * its public names.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { preview } from "./checks.mjs";
import { DEFAULT_LINE_LIMIT, FAKE_CLAUDE } from "./constants.mjs";
import { checkFrame, StdoutFrames } from "./frames.mjs";
import { keyedResult } from "./oracle.mjs";
import { Rng } from "./random.mjs";
import { describeExpectation } from "./report.mjs";
import { readHighWater, serverEnvironment, settlesWithin } from "./server.mjs";
import { writeChunked } from "./writes.mjs";

function emptyStats(phase) {
  return {
    phase,
    lines: 0,
    sentinels: 0,
    bytes: 0,
    blocks: 0,
    requests: 0,
    responses: 0,
    notifications: 0,
    codes: {},
    toolCodes: {},
    kinds: {},
    writes: 0,
    splitCharacters: 0,
    peakRssBytes: undefined,
    wallMs: 0,
    exitCode: undefined,
  };
}

/** The server's environment: the fake agent, a state directory of its own, agents killed as it exits. */
function fuzzEnvironment({ baseEnv, stateDir, logLevel, maxLineBytes }) {
  return serverEnvironment(baseEnv, {
    CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE,
    CLAUDE_DISPATCH_STATE_DIR: stateDir,
    CLAUDE_DISPATCH_ON_EXIT: "kill",
    CLAUDE_DISPATCH_KILL_GRACE_MS: "500",
    CLAUDE_DISPATCH_LOG_LEVEL: logLevel,
    CLAUDE_DISPATCH_DEPTH: "0",
    CLAUDE_DISPATCH_MAX_DEPTH: "1",
    ...(maxLineBytes === DEFAULT_LINE_LIMIT ? {} : { CLAUDE_DISPATCH_MAX_LINE_BYTES: String(maxLineBytes) }),
  });
}

/** What a block expects before it is sent: its requests by id, its id-null errors by bucket. */
function blockState(block) {
  return {
    block: block.block,
    items: block.items,
    keyed: new Map(),
    nulls: new Map(),
    nullLeft: 0,
    requiredLeft: 0,
    sentinelDone: !block.items.some((item) => item.sentinel),
    oversizeSeen: 0,
    barrier: undefined,
  };
}

/** One server process: writes blocks, reads and checks every frame. */
class Session {
  constructor(options) {
    const { server, phase, seed, errorCodes, report, blockTimeoutMs, exitTimeoutMs, maxLineBytes } = options;
    this.phase = phase;
    this.maxLineBytes = maxLineBytes;
    this.seed = seed;
    this.errorCodes = errorCodes;
    this.report = report;
    this.blockTimeoutMs = blockTimeoutMs;
    this.exitTimeoutMs = exitTimeoutMs;
    this.stats = emptyStats(phase);
    this.frames = new StdoutFrames();
    this.decoder = new TextDecoder("utf-8", { fatal: true });
    this.current = undefined;
    this.lingering = new Map();
    this.answered = [new Set(), new Set()];
    this.tokens = new Map();
    this.stderrTail = "";
    this.errorLogs = [];
    this.aborted = false;
    // A state directory of its own, removed when the server is gone; agents die with the server.
    this.stateDir = mkdtempSync(path.join(tmpdir(), "claude-dispatch-fuzz-state-"));
    const env = fuzzEnvironment({ ...options, stateDir: this.stateDir });
    this.child = spawn(process.execPath, [server], { env, stdio: ["pipe", "pipe", "pipe"] });
    this.pid = this.child.pid;
    this.child.stdout.on("data", (chunk) => this.frames.push(chunk, (frame) => checkFrame(this, frame)));
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (chunk) => this.onStderr(chunk));
    this.child.stdin.on("error", () => undefined);
    this.inputEnded = false;
    this.exit = undefined;
    this.closed = new Promise((resolve) => {
      this.child.once("error", (error) => {
        this.exit = { code: null, signal: null, error };
        resolve();
      });
      this.child.once("close", (code, signal) => {
        this.exit = { code, signal };
        rmSync(this.stateDir, { recursive: true, force: true });
        resolve();
        this.wake();
      });
    });
    this.child.once("exit", (code, signal) => {
      if (!this.inputEnded) {
        const stderr = preview(this.stderrTail.slice(-1500), 1500);
        const how = `code ${code}, signal ${signal}`;
        this.violation("-", "-", `the server exited before stdin was closed (${how}); stderr: ${stderr}`);
      }
      this.exitedEarly = !this.inputEnded;
      this.wake();
    });
  }

  violation(block, line, message, item) {
    this.report.violationCount += 1;
    if (this.report.violations.length < this.report.maxViolations) {
      this.report.violations.push({
        seed: this.seed,
        phase: this.phase,
        block,
        line,
        kind: item ? item.kind : undefined,
        message,
        sent: item ? preview(item.line.toString("utf8"), 240) : undefined,
      });
    }
  }

  onStderr(chunk) {
    this.stderrTail = (this.stderrTail + chunk).slice(-16384);
    if (chunk.includes(" error: ") && this.errorLogs.length < 20) {
      for (const line of chunk.split("\n")) {
        if (!line.startsWith("claude-dispatch error:") || this.errorLogs.length >= 20) continue;
        this.errorLogs.push(line.slice(0, 500));
      }
    }
  }

  /** The block in flight, for a violation no line can be named for. */
  where() {
    return this.current ? this.current.block : "-";
  }

  wake() {
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = undefined;
      resolve();
    }
  }

  checkDone() {
    const block = this.current;
    if (!block) return;
    if (block.barrier !== undefined && block.oversizeSeen >= block.barrier) this.wake();
    if (block.sentinelDone && block.requiredLeft === 0 && block.nullLeft === 0) this.wake();
  }

  /** Waits until predicate() holds, the server exits, or ms pass. */
  async waitUntil(predicate, ms) {
    const deadline = Date.now() + ms;
    while (!predicate()) {
      if (this.exit || this.exitedEarly) return predicate();
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 1000));
        this.waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return true;
  }

  async write(buffer) {
    if (this.exit || this.exitedEarly) return;
    this.stats.bytes += buffer.length;
    if (!this.child.stdin.write(buffer)) {
      await new Promise((resolve) => {
        const done = () => {
          this.child.stdin.off("drain", done);
          clearInterval(timer);
          resolve();
        };
        const timer = setInterval(() => {
          if (this.exit || this.exitedEarly) done();
        }, 200);
        this.child.stdin.on("drain", done);
      });
    }
  }

  async runBlock(block, { endInput = false } = {}) {
    const state = this.expect(block);
    this.current = state;
    this.answered.unshift(new Set());
    this.answered.length = 2;
    await this.send(block, state, endInput);
    this.countSent(block);
    if (endInput) {
      this.inputEnded = true;
      this.child.stdin.end();
    }
    await this.settle(block, state, endInput);
  }

  /** Registers what each line of the block must get; progress tokens count only for a request that runs a job. */
  expect(block) {
    const state = blockState(block);
    for (const [index, item] of block.items.entries()) {
      const exp = item.exp;
      if (exp.t === "id") {
        state.keyed.set(exp.key, { item, index, block: block.block });
        this.stats.requests += 1;
        if (!item.optional) state.requiredLeft += 1;
        const check = exp.check;
        if (check && check.token !== undefined) {
          const existing = this.tokens.get(check.token);
          const allowed = check.starts === "run";
          if (existing) existing.allowed = existing.allowed && allowed;
          else this.tokens.set(check.token, { allowed, last: 0, done: false, block: block.block });
        }
      } else if (exp.t === "null") {
        const bucket = `${exp.code}|${exp.tag}`;
        state.nulls.set(bucket, (state.nulls.get(bucket) ?? 0) + 1);
        state.nullLeft += 1;
      }
    }
    return state;
  }

  /** Writes the block's lines; an "early" over-long line is cut off past the limit until its -32600 has come. */
  async send(block, state, endInput) {
    const rng = new Rng(block.writeMode.seed);
    const writeAll = (buffer) => writeChunked((bytes) => this.write(bytes), this.stats, buffer, block.writeMode, rng);
    let segment = [];
    let oversizeSoFar = 0;
    for (const [index, item] of block.items.entries()) {
      const last = index === block.items.length - 1;
      const terminator = last && endInput && block.noFinalNewline ? Buffer.alloc(0) : Buffer.from("\n");
      if (item.exp.t === "null" && item.exp.tag === "oversize") oversizeSoFar += 1;
      if (!item.early) {
        segment.push(item.line, terminator);
        continue;
      }
      // §1: the -32600 must come as soon as the limit is passed, before the line's newline arrives.
      const cut = Math.min(item.line.length, this.maxLineBytes + 1 + rng.int(0, 4096));
      segment.push(item.line.subarray(0, cut));
      await writeAll(Buffer.concat(segment));
      segment = [];
      state.barrier = oversizeSoFar;
      const seen = oversizeSoFar;
      const reported = this.aborted || (await this.waitUntil(() => state.oversizeSeen >= seen, this.blockTimeoutMs));
      state.barrier = undefined;
      if (!reported) {
        // Send the rest anyway, so the stream stays framed; stop after this block (each such wait costs a timeout).
        const within = `within ${this.blockTimeoutMs} ms`;
        const problem = `an over-long line was not reported ${within}, before its newline arrived (§1)`;
        this.violation(block.block, index, problem, item);
        this.aborted = true;
      }
      segment.push(item.line.subarray(cut), terminator);
    }
    await writeAll(Buffer.concat(segment));
  }

  countSent(block) {
    this.stats.lines += block.lines;
    if (typeof block.block !== "number") return;
    this.stats.sentinels += 1;
    this.stats.blocks += 1;
    for (const item of block.items) {
      if (item.sentinel) continue;
      const label = item.early ? `${item.kind}(early)` : item.kind;
      this.stats.kinds[label] = (this.stats.kinds[label] ?? 0) + 1;
    }
  }

  /** Waits for every answer the block must get; what never came is a violation, and ends the phase. */
  async settle(block, state, endInput) {
    const complete = () => state.sentinelDone && state.requiredLeft === 0 && state.nullLeft === 0;
    const timeoutMs = endInput ? this.exitTimeoutMs : this.blockTimeoutMs;
    let done = await this.waitUntil(complete, timeoutMs);
    if (!done && endInput) {
      await settlesWithin(this.closed, this.exitTimeoutMs);
      done = complete();
    }
    if (!done) {
      for (const record of state.keyed.values()) {
        if (record.item.optional) continue;
        const { exp, sentinel } = record.item;
        const problem = `no response for id ${preview(exp.key, 100)} (expected ${describeExpectation(exp)})`;
        this.violation(block.block, sentinel ? "sentinel" : record.index, problem, record.item);
      }
      for (const [bucket, left] of state.nulls) {
        if (left > 0) {
          const code = `${bucket.replace("|", " (")})`;
          this.violation(block.block, "-", `${left} expected response(s) with id null and code ${code} never came`);
        }
      }
      if (!this.exit) this.violation(block.block, "-", `block not complete after ${timeoutMs} ms; stopping this phase`);
      this.aborted = true;
    }
    this.forgetOld(block, state);
    if (this.stats.blocks % 64 === 0) this.sampleRss();
  }

  /** Optional answers (cancelled calls) may still come: they stay valid for a while, then are forgotten. */
  forgetOld(block, state) {
    for (const [key, record] of state.keyed) {
      if (record.item.optional) this.lingering.set(key, record);
    }
    for (const [key, record] of this.lingering) if (record.block < block.block - 50) this.lingering.delete(key);
    for (const [key, token] of this.tokens) {
      if (token.done || !token.allowed || token.block < block.block - 50) this.tokens.delete(key);
    }
  }

  sampleRss() {
    if (!this.pid || this.exit) return;
    const hwm = readHighWater(this.pid);
    if (hwm !== undefined) this.stats.peakRssBytes = Math.max(this.stats.peakRssBytes ?? 0, hwm);
  }

  /** The last line has no newline (§1: still processed), then stdin closes; the answer comes after EOF (§3). */
  async finish() {
    this.sampleRss();
    const id = `final-${this.phase}`;
    const text = `${JSON.stringify({ jsonrpc: "2.0", id, method: "ping" })}${this.finalCr ? "\r" : ""}`;
    const exp = keyedResult(id, { r: "ping" }, "ping");
    const item = { kind: "final-no-newline", line: Buffer.from(text), exp, sentinel: true };
    const writeMode = { mode: "mixed", split: false, pauses: 0, seed: 7 };
    if (!this.exit && !this.exitedEarly) {
      const block = { block: "final", items: [item], lines: 0, noFinalNewline: true, writeMode };
      await this.runBlock(block, { endInput: true });
    }
    if (!this.inputEnded) {
      this.inputEnded = true;
      this.child.stdin.end();
    }
    const closedInTime = await settlesWithin(this.closed, this.exitTimeoutMs);
    if (!closedInTime) {
      this.violation("final", "-", `the server did not exit within ${this.exitTimeoutMs} ms of stdin closing`);
      this.child.kill("SIGKILL");
      await this.closed;
    }
    this.checkExit(closedInTime);
  }

  checkExit(closedInTime) {
    this.stats.exitCode = this.exit.code;
    const { code, signal, error } = this.exit;
    if (error) this.violation("final", "-", `could not run the server: ${error.message}`);
    else if (closedInTime && (code !== 0 || signal !== null)) {
      const stderr = preview(this.stderrTail.slice(-1500), 1500);
      const how = `code ${code}, signal ${signal}`;
      this.violation("final", "-", `the server exited with ${how} after stdin closed (expected 0); stderr: ${stderr}`);
    }
    const rest = this.frames.pendingSize;
    if (rest > 0) {
      const text = preview(this.frames.unterminated().toString("utf8"), 200);
      this.violation("final", "-", `stdout ends with ${rest} bytes of an unterminated frame: ${text}`);
    }
  }
}

export { Session };
