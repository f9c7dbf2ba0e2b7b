/**
 * What the server writes: its stdout cut into frames, and each frame checked against §1, §4, §5.8, §9 and
 * the expectations of the block in flight. The functions take the Session (bench/fuzz/session.mjs) whose
 * state they read and record into. Part of the fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { checkKeyed, preview } from "./checks.mjs";
import { INVALID_REQUEST, KNOWN_CODES, OVERSIZE_MESSAGE, PARSE_ERROR } from "./constants.mjs";
import { hasOwn, idKey, isRecord, isRequestId } from "./oracle.mjs";

/** Cuts stdout into newline-terminated frames; the bytes after the last newline wait for the next chunk. */
class StdoutFrames {
  constructor() {
    this.pending = [];
    this.pendingSize = 0;
  }

  /** Calls onFrame with each frame that chunk completes. */
  push(chunk, onFrame) {
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
      onFrame(frame);
    }
  }

  /** The bytes of a frame still waiting for its newline. */
  unterminated() {
    return Buffer.concat(this.pending);
  }
}

/** A violation no line can be named for: it is the block's in flight. */
const atBlock = (session, message) => session.violation(session.where(), "-", message);

/** One frame: valid UTF-8, one JSON-RPC 2.0 value as JSON.stringify writes it, then a notification or a response. */
function checkFrame(session, bytes) {
  let text;
  try {
    text = session.decoder.decode(bytes);
  } catch {
    atBlock(session, `stdout line is not valid UTF-8: ${preview(bytes.toString("latin1"), 200)}`);
    return;
  }
  let message;
  try {
    message = JSON.parse(text);
  } catch {
    atBlock(session, `stdout line is not a JSON frame: "${preview(text, 200)}"`);
    return;
  }
  if (!isRecord(message) || message.jsonrpc !== "2.0") {
    atBlock(session, `stdout frame is not a JSON-RPC 2.0 object: ${preview(text, 200)}`);
    return;
  }
  // §1: every frame is one JSON.stringify value; anything else (pretty-printing, two values) does not round-trip.
  if (JSON.stringify(message) !== text) {
    atBlock(session, `stdout frame is not the JSON.stringify of one value: ${preview(text, 200)}`);
  }
  if (hasOwn(message, "method")) checkNotification(session, message, text);
  else if (hasOwn(message, "id")) checkResponse(session, message, text);
  else atBlock(session, `stdout frame is neither a response nor a notification: ${preview(text, 200)}`);
  session.checkDone();
}

/** §5.8: the only notification the server sends is progress, for a token a waiting request carried, counting up. */
function checkNotification(session, message, text) {
  session.stats.notifications += 1;
  const fail = (problem) => atBlock(session, `${problem}${preview(text, 200)}`);
  if (hasOwn(message, "id")) return fail("the server sent a request (it sends none): ");
  if (message.method !== "notifications/progress" || !isRecord(message.params)) {
    return fail("unexpected notification from the server: ");
  }
  const token = session.tokens.get(idKey(message.params.progressToken));
  if (!token) fail("progress for a token no request carried: ");
  else if (!token.allowed) fail("progress for a request that waits on no job (§5.8) or got a task handle (§16.4): ");
  else if (token.done) fail("progress after the response to its request (§5.8): ");
  else if (message.params.progress !== token.last + 1 || typeof message.params.message !== "string") {
    fail(`progress must start at 1 and grow by 1, with a message (§5.8): ${token.last} then `);
  } else token.last = message.params.progress;
}

/** Counts a response's JSON-RPC code and, for a tool result, its tool code (or "task" for a §16.4 handle). */
function countCodes(stats, message, hasError) {
  const codeLabel = hasError ? String(message.error.code) : "result";
  stats.codes[codeLabel] = (stats.codes[codeLabel] ?? 0) + 1;
  const result = message.result;
  if (hasError || !isRecord(result)) return;
  if (result.resultType === "task") stats.toolCodes.task = (stats.toolCodes.task ?? 0) + 1;
  else if (Array.isArray(result.content)) {
    const first = result.content[0];
    const toolCode = result.isError === true ? (/^([A-Z_]+):/.exec(first?.text ?? "")?.[1] ?? "?") : "ok";
    stats.toolCodes[toolCode] = (stats.toolCodes[toolCode] ?? 0) + 1;
  }
}

/** A response: well formed, a §9 code, and matched to exactly one request of this block (or a lingering one). */
function checkResponse(session, message, text) {
  session.stats.responses += 1;
  const hasResult = hasOwn(message, "result");
  const hasError = hasOwn(message, "error");
  if (hasResult === hasError) {
    atBlock(session, `a response must carry exactly one of result and error: ${preview(text, 200)}`);
    return;
  }
  const error = message.error;
  if (hasError && !(isRecord(error) && Number.isInteger(error.code) && typeof error.message === "string")) {
    atBlock(session, `malformed error object: ${preview(text, 200)}`);
    return;
  }
  countCodes(session.stats, message, hasError);
  if (hasError && !KNOWN_CODES.has(error.code)) {
    atBlock(session, `error code ${error.code} is not a JSON-RPC code of §9: ${preview(text, 200)}`);
  }
  if (message.id === null) {
    if (!hasError) atBlock(session, `a result with id null: ${preview(text, 200)}`);
    else checkNullIdError(session, error);
    return;
  }
  if (!isRequestId(message.id)) {
    atBlock(session, `response id is neither a string, a number nor null: ${preview(text, 200)}`);
    return;
  }
  checkKeyedResponse(session, message, text);
}

/** An error with id null answers no line by name: it must fill a bucket (code and kind) the block expects. */
function checkNullIdError(session, error) {
  const block = session.current;
  const oversize = error.code === INVALID_REQUEST && error.message === OVERSIZE_MESSAGE;
  const tag = oversize ? "oversize" : error.code === PARSE_ERROR ? "parse" : "other";
  const bucket = `${error.code}|${tag}`;
  if (block && (block.nulls.get(bucket) ?? 0) > 0) {
    block.nulls.set(bucket, block.nulls.get(bucket) - 1);
    block.nullLeft -= 1;
    if (tag === "oversize") block.oversizeSeen += 1;
    if (tag === "parse" && !error.message.startsWith("Parse error")) {
      const got = preview(error.message, 100);
      session.violation(block.block, "-", `-32700 message should read "Parse error: …", got "${got}"`);
    }
    return;
  }
  // It cannot name its line; the lines that expect no response at all are the likely senders.
  const silent = block
    ? block.items.map((item, index) => (item.exp.t === "none" ? `${index}:${item.kind}` : undefined)).filter(Boolean)
    : [];
  session.violation(
    session.where(),
    "-",
    `unexpected response with id null: ${error.code} "${preview(error.message, 200)}" ` +
      `(lines of this block that expect no response: ${silent.join(" ") || "none"})`,
  );
}

/** A response with a usable id: the one answer to a request in flight, checked against that request's expectation. */
function checkKeyedResponse(session, message, text) {
  const block = session.current;
  const key = idKey(message.id);
  let record = block ? block.keyed.get(key) : undefined;
  if (record) block.keyed.delete(key);
  else {
    record = session.lingering.get(key);
    if (record) session.lingering.delete(key);
  }
  if (!record) {
    const duplicate = session.answered.some((set) => set.has(key));
    const what = duplicate ? "a second response" : "a response to an id never sent (or not in flight)";
    atBlock(session, `${what} for id ${preview(key, 120)}: ${preview(text, 200)}`);
    return;
  }
  session.answered[0].add(key);
  if (!record.item.optional && block && record.block === block.block) block.requiredLeft -= 1;
  if (record.item.sentinel && block) block.sentinelDone = true;
  const check = record.item.exp.check;
  if (check && check.token !== undefined) {
    const token = session.tokens.get(check.token);
    if (token) token.done = true;
  }
  for (const problem of checkKeyed(message, record.item.exp, session.errorCodes)) {
    session.violation(record.block, record.index, problem, record.item);
  }
}

export { checkFrame, StdoutFrames };
