/**
 * One server process (Session): writes blocks, reads and checks every frame it writes. Part of the
 * fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { checkKeyed, preview } from "./checks.mjs";
import {
  DEFAULT_LINE_LIMIT, FAKE_CLAUDE, INVALID_REQUEST, KNOWN_CODES, OVERSIZE_MESSAGE, PARSE_ERROR,
} from "./constants.mjs";
import { hasOwn, idKey, isRecord, isRequestId, keyedResult } from "./oracle.mjs";
import { Rng } from "./random.mjs";
import { describeExpectation } from "./report.mjs";
import { readHighWater, serverEnvironment, settlesWithin, sleep } from "./server.mjs";

/** One server process: writes blocks, reads and checks every frame. */
class Session {
  constructor({ server, phase, maxLineBytes, seed, errorCodes, report, blockTimeoutMs, exitTimeoutMs, logLevel, baseEnv }) {
    this.phase = phase;
    this.seed = seed;
    this.errorCodes = errorCodes;
    this.report = report;
    this.blockTimeoutMs = blockTimeoutMs;
    this.exitTimeoutMs = exitTimeoutMs;
    this.stats = {
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
    this.pending = [];
    this.pendingSize = 0;
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
    const env = serverEnvironment(baseEnv, {
      CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE,
      CLAUDE_DISPATCH_STATE_DIR: this.stateDir,
      CLAUDE_DISPATCH_ON_EXIT: "kill",
      CLAUDE_DISPATCH_KILL_GRACE_MS: "500",
      CLAUDE_DISPATCH_LOG_LEVEL: logLevel,
      CLAUDE_DISPATCH_DEPTH: "0",
      CLAUDE_DISPATCH_MAX_DEPTH: "1",
      ...(maxLineBytes === DEFAULT_LINE_LIMIT ? {} : { CLAUDE_DISPATCH_MAX_LINE_BYTES: String(maxLineBytes) }),
    });
    this.child = spawn(process.execPath, [server], { env, stdio: ["pipe", "pipe", "pipe"] });
    this.pid = this.child.pid;
    this.child.stdout.on("data", (chunk) => this.onStdout(chunk));
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
      if (!this.inputEnded) this.violation("-", "-", `the server exited before stdin was closed (code ${code}, signal ${signal}); stderr: ${preview(this.stderrTail.slice(-1500), 1500)}`);
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
      for (const line of chunk.split("\n")) if (line.startsWith("claude-dispatch error:") && this.errorLogs.length < 20) this.errorLogs.push(line.slice(0, 500));
    }
  }

  onStdout(chunk) {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      if (newline === -1) {
        if (start < chunk.length) {
          const rest = chunk.subarray(start);
          this.pending.push(rest);
          this.pendingSize += rest.length;
        }
        return;
      }
      const part = chunk.subarray(start, newline);
      const frame = this.pending.length === 0 ? part : Buffer.concat([...this.pending, part]);
      this.pending = [];
      this.pendingSize = 0;
      start = newline + 1;
      this.onFrame(frame);
    }
  }

  where() {
    return this.current ? this.current.block : "-";
  }

  onFrame(bytes) {
    let text;
    try {
      text = this.decoder.decode(bytes);
    } catch {
      this.violation(this.where(), "-", `stdout line is not valid UTF-8: ${preview(bytes.toString("latin1"), 200)}`);
      return;
    }
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      this.violation(this.where(), "-", `stdout line is not a JSON frame: "${preview(text, 200)}"`);
      return;
    }
    if (!isRecord(message) || message.jsonrpc !== "2.0") {
      this.violation(this.where(), "-", `stdout frame is not a JSON-RPC 2.0 object: ${preview(text, 200)}`);
      return;
    }
    // §1: every frame is one JSON.stringify value; anything else (pretty-printing, two values) does not round-trip.
    if (JSON.stringify(message) !== text) this.violation(this.where(), "-", `stdout frame is not the JSON.stringify of one value: ${preview(text, 200)}`);
    if (hasOwn(message, "method")) this.onNotification(message, text);
    else if (hasOwn(message, "id")) this.onResponse(message, text);
    else this.violation(this.where(), "-", `stdout frame is neither a response nor a notification: ${preview(text, 200)}`);
    this.checkDone();
  }

  onNotification(message, text) {
    this.stats.notifications += 1;
    if (hasOwn(message, "id")) {
      this.violation(this.where(), "-", `the server sent a request (it sends none): ${preview(text, 200)}`);
      return;
    }
    if (message.method !== "notifications/progress" || !isRecord(message.params)) {
      this.violation(this.where(), "-", `unexpected notification from the server: ${preview(text, 200)}`);
      return;
    }
    const key = idKey(message.params.progressToken);
    const token = this.tokens.get(key);
    if (!token) this.violation(this.where(), "-", `progress for a token no request carried: ${preview(text, 200)}`);
    else if (!token.allowed) this.violation(this.where(), "-", `progress for a request that waits on no job (§5.8) or got a task handle (§16.4): ${preview(text, 200)}`);
    else if (token.done) this.violation(this.where(), "-", `progress after the response to its request (§5.8): ${preview(text, 200)}`);
    else if (message.params.progress !== token.last + 1 || typeof message.params.message !== "string") {
      this.violation(this.where(), "-", `progress must start at 1 and grow by 1, with a message (§5.8): ${token.last} then ${preview(text, 200)}`);
    } else token.last = message.params.progress;
  }

  onResponse(message, text) {
    this.stats.responses += 1;
    const hasResult = hasOwn(message, "result");
    const hasError = hasOwn(message, "error");
    if (hasResult === hasError) {
      this.violation(this.where(), "-", `a response must carry exactly one of result and error: ${preview(text, 200)}`);
      return;
    }
    if (hasError && !(isRecord(message.error) && Number.isInteger(message.error.code) && typeof message.error.message === "string")) {
      this.violation(this.where(), "-", `malformed error object: ${preview(text, 200)}`);
      return;
    }
    const codeLabel = hasError ? String(message.error.code) : "result";
    this.stats.codes[codeLabel] = (this.stats.codes[codeLabel] ?? 0) + 1;
    if (hasResult && isRecord(message.result) && message.result.resultType === "task") this.stats.toolCodes.task = (this.stats.toolCodes.task ?? 0) + 1;
    else if (hasResult && isRecord(message.result) && Array.isArray(message.result.content)) {
      const first = message.result.content[0];
      const toolCode = message.result.isError === true ? (/^([A-Z_]+):/.exec(first?.text ?? "")?.[1] ?? "?") : "ok";
      this.stats.toolCodes[toolCode] = (this.stats.toolCodes[toolCode] ?? 0) + 1;
    }
    if (hasError && !KNOWN_CODES.has(message.error.code)) {
      this.violation(this.where(), "-", `error code ${message.error.code} is not a JSON-RPC code of §9: ${preview(text, 200)}`);
    }
    const block = this.current;
    if (message.id === null) {
      if (!hasError) {
        this.violation(this.where(), "-", `a result with id null: ${preview(text, 200)}`);
        return;
      }
      const tag = message.error.code === INVALID_REQUEST && message.error.message === OVERSIZE_MESSAGE ? "oversize" : message.error.code === PARSE_ERROR ? "parse" : "other";
      const bucket = `${message.error.code}|${tag}`;
      if (block && (block.nulls.get(bucket) ?? 0) > 0) {
        block.nulls.set(bucket, block.nulls.get(bucket) - 1);
        block.nullLeft -= 1;
        if (tag === "oversize") block.oversizeSeen += 1;
        if (tag === "parse" && !message.error.message.startsWith("Parse error")) {
          this.violation(block.block, "-", `-32700 message should read "Parse error: …", got "${preview(message.error.message, 100)}"`);
        }
      } else {
        // It cannot name its line; the lines that expect no response at all are the likely senders.
        const silent = block ? block.items.map((item, index) => (item.exp.t === "none" ? `${index}:${item.kind}` : undefined)).filter(Boolean) : [];
        this.violation(this.where(), "-", `unexpected response with id null: ${message.error.code} "${preview(message.error.message, 200)}" (lines of this block that expect no response: ${silent.join(" ") || "none"})`);
      }
      return;
    }
    if (!isRequestId(message.id)) {
      this.violation(this.where(), "-", `response id is neither a string, a number nor null: ${preview(text, 200)}`);
      return;
    }
    const key = idKey(message.id);
    let record = block ? block.keyed.get(key) : undefined;
    if (record) block.keyed.delete(key);
    else {
      record = this.lingering.get(key);
      if (record) this.lingering.delete(key);
    }
    if (!record) {
      const duplicate = this.answered.some((set) => set.has(key));
      this.violation(this.where(), "-", `${duplicate ? "a second response" : "a response to an id never sent (or not in flight)"} for id ${preview(key, 120)}: ${preview(text, 200)}`);
      return;
    }
    this.answered[0].add(key);
    if (!record.item.optional && block && record.block === block.block) block.requiredLeft -= 1;
    if (record.item.sentinel && block) block.sentinelDone = true;
    const check = record.item.exp.check;
    if (check && check.token !== undefined) {
      const token = this.tokens.get(check.token);
      if (token) token.done = true;
    }
    for (const problem of checkKeyed(message, record.item.exp, this.errorCodes)) this.violation(record.block, record.index, problem, record.item);
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

  /** Writes bytes in chunks of 1 B to 64 KiB, sometimes cutting a multi-byte character and pausing so the halves arrive apart. */
  async writeChunked(buffer, writeMode, rng) {
    let offset = 0;
    let pauses = writeMode.pauses;
    // In a split block, one cut is forced inside some multi-byte character, however big the chunks.
    let forced = -1;
    if (writeMode.split && buffer.length > 1) {
      const from = rng.int(1, buffer.length - 1);
      for (let j = from; j < Math.min(buffer.length, from + 4096); j += 1) {
        if ((buffer[j] & 0xc0) === 0x80) {
          forced = j;
          break;
        }
      }
    }
    while (offset < buffer.length) {
      let size;
      if (writeMode.mode === "big") size = rng.int(16384, 65536);
      else if (writeMode.mode === "tiny") size = rng.int(1, 16);
      else size = rng.logInt(1, 65536);
      let end = Math.min(buffer.length, offset + size);
      let pause = false;
      if (forced > offset && forced < end) {
        end = forced;
        pause = pauses > 0;
      } else if (writeMode.split && end < buffer.length && rng.chance(0.8)) {
        // Move the cut onto a UTF-8 continuation byte nearby, if there is one: the character is split across writes.
        for (let j = end; j < Math.min(buffer.length, end + 256); j += 1) {
          if ((buffer[j] & 0xc0) === 0x80 && j > offset) {
            end = j;
            pause = pauses > 0;
            break;
          }
        }
      }
      await this.write(buffer.subarray(offset, end));
      this.stats.writes += 1;
      if (end < buffer.length && (buffer[end] & 0xc0) === 0x80) this.stats.splitCharacters += 1;
      offset = end;
      if (pause) {
        pauses -= 1;
        await sleep(1);
      }
    }
  }

  async runBlock(block, { endInput = false } = {}) {
    const state = {
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
    this.current = state;
    this.answered.unshift(new Set());
    this.answered.length = 2;

    const rng = new Rng(block.writeMode.seed);
    let segment = [];
    let oversizeSoFar = 0;
    for (const [index, item] of block.items.entries()) {
      const last = index === block.items.length - 1;
      const terminator = last && endInput && block.noFinalNewline ? Buffer.alloc(0) : Buffer.from("\n");
      if (item.exp.t === "null" && item.exp.tag === "oversize") oversizeSoFar += 1;
      if (item.early) {
        // §1: the -32600 must come as soon as the limit is passed, before the line's newline arrives.
        const cut = Math.min(item.line.length, this.maxLineBytes + 1 + rng.int(0, 4096));
        segment.push(item.line.subarray(0, cut));
        await this.writeChunked(Buffer.concat(segment), block.writeMode, rng);
        segment = [];
        state.barrier = oversizeSoFar;
        const reported = this.aborted || (await this.waitUntil(() => state.oversizeSeen >= oversizeSoFar, this.blockTimeoutMs));
        state.barrier = undefined;
        if (!reported) {
          // Send the rest anyway, so the stream stays framed; stop after this block (each such wait costs a timeout).
          this.violation(block.block, index, `an over-long line was not reported within ${this.blockTimeoutMs} ms, before its newline arrived (§1)`, item);
          this.aborted = true;
        }
        segment.push(item.line.subarray(cut), terminator);
      } else {
        segment.push(item.line, terminator);
      }
    }
    await this.writeChunked(Buffer.concat(segment), block.writeMode, rng);
    this.stats.lines += block.lines;
    if (typeof block.block === "number") {
      this.stats.sentinels += 1;
      this.stats.blocks += 1;
      for (const item of block.items) {
        if (item.sentinel) continue;
        const label = item.early ? `${item.kind}(early)` : item.kind;
        this.stats.kinds[label] = (this.stats.kinds[label] ?? 0) + 1;
      }
    }
    if (endInput) {
      this.inputEnded = true;
      this.child.stdin.end();
    }

    const complete = () => state.sentinelDone && state.requiredLeft === 0 && state.nullLeft === 0;
    let done = await this.waitUntil(complete, endInput ? this.exitTimeoutMs : this.blockTimeoutMs);
    if (!done && endInput) {
      await settlesWithin(this.closed, this.exitTimeoutMs);
      done = complete();
    }
    if (!done) {
      for (const record of state.keyed.values()) {
        if (!record.item.optional) this.violation(block.block, record.item.sentinel ? "sentinel" : record.index, `no response for id ${preview(record.item.exp.key, 100)} (expected ${describeExpectation(record.item.exp)})`, record.item);
      }
      for (const [bucket, left] of state.nulls) {
        if (left > 0) this.violation(block.block, "-", `${left} expected response(s) with id null and code ${bucket.replace("|", " (")}) never came`);
      }
      if (!this.exit) this.violation(block.block, "-", `block not complete after ${endInput ? this.exitTimeoutMs : this.blockTimeoutMs} ms; stopping this phase`);
      this.aborted = true;
    }
    // Optional answers (cancelled calls) may still come: they stay valid for a while, then are forgotten.
    for (const [key, record] of state.keyed) {
      if (record.item.optional) this.lingering.set(key, record);
    }
    if (this.lingering.size > 0) {
      for (const [key, record] of this.lingering) if (record.block < block.block - 50) this.lingering.delete(key);
    }
    for (const [key, token] of this.tokens) if (token.done || !token.allowed || token.block < block.block - 50) this.tokens.delete(key);
    if (this.stats.blocks % 64 === 0) this.sampleRss();
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
    const item = { kind: "final-no-newline", line: Buffer.from(text), exp: keyedResult(id, { r: "ping" }, "ping"), sentinel: true };
    if (!this.exit && !this.exitedEarly) await this.runBlock({ block: "final", items: [item], lines: 0, noFinalNewline: true, writeMode: { mode: "mixed", split: false, pauses: 0, seed: 7 } }, { endInput: true });
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
    this.stats.exitCode = this.exit.code;
    if (this.exit.error) this.violation("final", "-", `could not run the server: ${this.exit.error.message}`);
    else if (closedInTime && (this.exit.code !== 0 || this.exit.signal !== null)) {
      this.violation("final", "-", `the server exited with code ${this.exit.code}, signal ${this.exit.signal} after stdin closed (expected 0); stderr: ${preview(this.stderrTail.slice(-1500), 1500)}`);
    }
    if (this.pendingSize > 0) this.violation("final", "-", `stdout ends with ${this.pendingSize} bytes of an unterminated frame: ${preview(Buffer.concat(this.pending).toString("utf8"), 200)}`);
  }
}

export { Session };
