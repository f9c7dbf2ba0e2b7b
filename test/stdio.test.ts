/**
 * The stdio transport (src/stdio.ts): the bounded line reader, the single
 * ordered writer, and the serve loop, over in-memory streams and inline
 * handlers. No child processes, no real sleeps.
 */
import assert from "node:assert/strict";
import { PassThrough, Writable } from "node:stream";
import { test } from "node:test";

import type { RequestHandler } from "../src/server/handler.js";
import {
  fail,
  isRecord,
  respond,
  serializedOnce,
  type OutgoingMessage,
  type RequestId,
} from "../src/server/jsonrpc.js";
import { LineReader } from "../src/core/lines.js";
import { createMessageWriter, serveStdio } from "../src/server/stdio.js";
import { RecordingLogger, settle, track } from "./helpers.js";
import { bounded, Watch } from "./support/events.js";

/* ------------------------------------------------------------------ *
 * Helpers
 * ------------------------------------------------------------------ */

interface Reader {
  reader: LineReader;
  lines: string[];
  oversized: number;
}

function lineReader(maxLineBytes = 1024): Reader {
  const state: Reader = { reader: undefined as unknown as LineReader, lines: [], oversized: 0 };
  state.reader = new LineReader(
    maxLineBytes,
    (line) => state.lines.push(line),
    () => (state.oversized += 1),
  );
  return state;
}

interface Deferred {
  promise: Promise<void>;
  resolve(): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

interface Collected {
  readonly raw: string;
  frames(): Array<Record<string, unknown>>;
  /** Resolves once count whole frames have arrived. */
  written(count: number): Promise<void>;
}

/** Everything written to a stream, and the frames in it. */
function collect(stream: PassThrough): Collected {
  let raw = "";
  const arrived = new Watch();
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    raw += chunk;
    arrived.changed();
  });
  return {
    get raw() {
      return raw;
    },
    async written(count: number): Promise<void> {
      await arrived.until(`${count} frames`, () => (raw.split("\n").length - 1 >= count ? true : undefined));
    },
    frames() {
      if (raw === "") return [];
      assert.ok(raw.endsWith("\n"), "output ends with a newline");
      return raw
        .slice(0, -1)
        .split("\n")
        .map((line) => {
          const parsed: unknown = JSON.parse(line);
          assert.ok(isRecord(parsed), `each line is one JSON object: ${line}`);
          assert.equal(parsed.jsonrpc, "2.0");
          return parsed;
        });
    },
  };
}

/**
 * An inline handler: echoes the method of each request, answers nothing to
 * notifications, and waits on `gates[id]` first when there is one.
 */
function echoHandler(gates: Map<RequestId, Promise<void>> = new Map()): RequestHandler {
  return async (message) => {
    if (!isRecord(message) || !("id" in message)) return null;
    const id = message.id as RequestId;
    const gate = gates.get(id);
    if (gate) await gate;
    return respond(id, { echo: message.method });
  };
}

function serve(handle: RequestHandler, maxLineBytes?: number) {
  const input = new PassThrough();
  const output = new PassThrough();
  const logger = new RecordingLogger();
  const writer = createMessageWriter(output, logger);
  const out = collect(output);
  const server = serveStdio({ input, writer, handle, logger, ...(maxLineBytes === undefined ? {} : { maxLineBytes }) });
  const send = (message: unknown): void => void input.write(`${JSON.stringify(message)}\n`);
  const request = (id: RequestId, method = "ping"): void => send({ jsonrpc: "2.0", id, method });
  /**
   * Waits for the count frames expected, then until every request so far is answered and handed to the stream,
   * and one more turn of the loop: a frame written by mistake would be in by then.
   */
  const drained = async (count: number): Promise<void> => {
    await out.written(count);
    await server.idle();
    await writer.flush();
    await settle();
  };
  return { input, output, logger, writer, out, server, send, request, drained };
}

/* ------------------------------------------------------------------ *
 * LineReader
 * ------------------------------------------------------------------ */

test("LineReader joins a line split across chunks", () => {
  const r = lineReader();
  r.reader.push(Buffer.from("ab"));
  assert.deepEqual(r.lines, []);
  r.reader.push(Buffer.from("c\nde"));
  assert.deepEqual(r.lines, ["abc"]);
  r.reader.push(Buffer.from("f"));
  r.reader.push(Buffer.from("\ng\nh"));
  assert.deepEqual(r.lines, ["abc", "def", "g"]);
  r.reader.push(Buffer.from("\n"));
  assert.deepEqual(r.lines, ["abc", "def", "g", "h"]);
  assert.equal(r.oversized, 0);
});

test("LineReader decodes a multi-byte character split at every byte boundary", () => {
  const text = '{"text":"café 😀 ✓ 中文"}';
  const bytes = Buffer.from(`${text}\n`, "utf8");
  for (let cut = 0; cut <= bytes.length; cut += 1) {
    const r = lineReader();
    r.reader.push(bytes.subarray(0, cut));
    r.reader.push(bytes.subarray(cut));
    assert.deepEqual(r.lines, [text], `split at byte ${cut}`);
  }
  // And one byte at a time.
  const r = lineReader();
  for (const byte of bytes) r.reader.push(Buffer.from([byte]));
  assert.deepEqual(r.lines, [text]);
  // "é" and "😀" alone, split inside the character.
  for (const char of ["é", "😀"]) {
    const encoded = Buffer.from(`${char}\n`, "utf8");
    for (let cut = 1; cut < encoded.length - 1; cut += 1) {
      const single = lineReader();
      single.reader.push(encoded.subarray(0, cut));
      single.reader.push(encoded.subarray(cut));
      assert.deepEqual(single.lines, [char]);
    }
  }
});

test("LineReader tolerates CRLF", () => {
  const r = lineReader();
  r.reader.push(Buffer.from("one\r\ntwo\r"));
  r.reader.push(Buffer.from("\nthree\n"));
  assert.deepEqual(r.lines, ["one", "two", "three"]);
});

test("LineReader skips blank lines", () => {
  const r = lineReader();
  r.reader.push(Buffer.from("\n\n   \n\r\n\t\nx\n\n"));
  assert.deepEqual(r.lines, ["x"]);
  assert.equal(r.oversized, 0);
});

test("LineReader emits a final line without a newline on finish()", () => {
  const r = lineReader();
  r.reader.push(Buffer.from("a\nlast"));
  assert.deepEqual(r.lines, ["a"]);
  r.reader.finish();
  assert.deepEqual(r.lines, ["a", "last"]);
  r.reader.finish();
  assert.deepEqual(r.lines, ["a", "last"], "a second finish emits nothing");

  const blank = lineReader();
  blank.reader.push(Buffer.from("a\n  "));
  blank.reader.finish();
  assert.deepEqual(blank.lines, ["a"]);
});

test("LineReader reports an over-long line once, over several chunks, and resyncs", () => {
  const r = lineReader(16);
  r.reader.push(Buffer.from("0123456789"));
  r.reader.push(Buffer.from("0123456789"));
  assert.equal(r.oversized, 1, "reported as soon as it passes the limit");
  r.reader.push(Buffer.from("0123456789".repeat(5)));
  r.reader.push(Buffer.from("tail"));
  assert.equal(r.oversized, 1);
  r.reader.push(Buffer.from("end\nnext\n"));
  assert.equal(r.oversized, 1);
  assert.deepEqual(r.lines, ["next"], "the line after the long one is delivered");
  r.reader.push(Buffer.from("x".repeat(40) + "\nafter\n"));
  assert.equal(r.oversized, 2, "a second long line is a second report");
  assert.deepEqual(r.lines, ["next", "after"]);
});

test("LineReader drops an over-long final line without a newline", () => {
  const r = lineReader(16);
  r.reader.push(Buffer.from("ok\n" + "y".repeat(30)));
  r.reader.finish();
  assert.equal(r.oversized, 1);
  assert.deepEqual(r.lines, ["ok"]);
});

test("LineReader delivers a line of exactly maxLineBytes", () => {
  const r = lineReader(16);
  r.reader.push(Buffer.from("0123456789abcdef\n"));
  assert.deepEqual(r.lines, ["0123456789abcdef"]);
  assert.equal(r.oversized, 0);
  r.reader.push(Buffer.from("01234567"));
  r.reader.push(Buffer.from("89abcdef"));
  r.reader.push(Buffer.from("\n"));
  assert.deepEqual(r.lines, ["0123456789abcdef", "0123456789abcdef"]);
  // The limit counts bytes: eight two-byte characters fit, nine do not.
  r.reader.push(Buffer.from(`${"é".repeat(8)}\n${"é".repeat(9)}\n`));
  assert.deepEqual(r.lines.at(-1), "é".repeat(8));
  assert.equal(r.oversized, 1);
  r.reader.push(Buffer.from("0123456789abcdefg\n"));
  assert.equal(r.oversized, 2, "one byte more is over");
});

/* ------------------------------------------------------------------ *
 * serveStdio
 * ------------------------------------------------------------------ */

test("serveStdio answers malformed JSON with -32700 and keeps serving", async () => {
  const s = serve(echoHandler());
  s.input.write("{not json\n");
  s.request(1);
  await s.drained(2);
  const frames = s.out.frames();
  assert.equal(frames.length, 2);
  const [parseError, answer] = frames;
  assert.equal(parseError?.id, null);
  assert.equal((parseError?.error as { code: number }).code, -32700);
  assert.match((parseError?.error as { message: string }).message, /^Parse error/);
  assert.deepEqual(answer, { jsonrpc: "2.0", id: 1, result: { echo: "ping" } });
});

test("serveStdio answers an over-long line with -32600 and then the next request", async () => {
  const s = serve(echoHandler(), 64);
  s.input.write(`{"jsonrpc":"2.0","id":99,"method":"${"x".repeat(40)}`);
  s.input.write("x".repeat(100));
  s.input.write(`${"x".repeat(100)}"}\n`);
  s.request(2);
  await s.drained(2);
  const frames = s.out.frames();
  assert.equal(frames.length, 2);
  assert.equal(frames[0]?.id, null);
  assert.equal((frames[0]?.error as { code: number }).code, -32600);
  assert.deepEqual(frames[1], { jsonrpc: "2.0", id: 2, result: { echo: "ping" } });
  assert.ok(s.logger.lines.some((line) => line.startsWith("warn ") && line.includes("64 bytes")));
});

test("serveStdio does not let a slow request delay a fast one", async () => {
  const slow = deferred();
  const s = serve(echoHandler(new Map([[1, slow.promise]])));
  s.request(1, "slow");
  s.request(2, "fast");
  await s.out.written(1);
  assert.equal(s.out.frames()[0]?.id, 2);
  slow.resolve();
  await s.drained(2);
  assert.deepEqual(
    s.out.frames().map((frame) => frame.id),
    [2, 1],
  );
});

test("serveStdio writes nothing for notifications", async () => {
  const s = serve(echoHandler());
  s.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  s.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } });
  // Read in order: once the request after them is answered, they were handled.
  s.request("after");
  await s.drained(1);
  assert.deepEqual(s.out.frames(), [{ jsonrpc: "2.0", id: "after", result: { echo: "ping" } }]);
});

test("serveStdio: ended resolves at end of input and idle() once in-flight requests finish", async () => {
  const slow = deferred();
  const s = serve(echoHandler(new Map([[1, slow.promise]])));
  const ended = track(s.server.ended);
  s.request(1, "slow");
  await settle();
  assert.equal(ended.done, false);
  s.input.end();
  await s.server.ended;
  const idle = track(s.server.idle());
  await settle();
  assert.equal(idle.done, false, "a request is still in flight");
  assert.equal(s.out.raw, "");
  slow.resolve();
  await s.drained(1);
  assert.deepEqual(s.out.frames(), [{ jsonrpc: "2.0", id: 1, result: { echo: "slow" } }]);
});

test("serveStdio answers a final request that has no trailing newline", async () => {
  const s = serve(echoHandler());
  s.input.end('{"jsonrpc":"2.0","id":3,"method":"last"}');
  await s.server.ended;
  await s.drained(1);
  assert.deepEqual(s.out.frames(), [{ jsonrpc: "2.0", id: 3, result: { echo: "last" } }]);
});

test("serveStdio reads requests split across chunks, with CRLF and multi-byte text", async () => {
  const s = serve(echoHandler());
  const bytes = Buffer.from('{"jsonrpc":"2.0","id":"é😀","method":"çava"}\r\n', "utf8");
  for (const byte of bytes) s.input.write(Buffer.from([byte]));
  await s.drained(1);
  assert.deepEqual(s.out.frames(), [{ jsonrpc: "2.0", id: "é😀", result: { echo: "çava" } }]);
});

test("serveStdio writes each frame as one complete JSON object and a newline", async () => {
  const gates = new Map<RequestId, Promise<void>>();
  const big = "ü".repeat(50_000);
  const handle: RequestHandler = async (message) => {
    if (!isRecord(message) || !("id" in message)) return null;
    const id = message.id as RequestId;
    await gates.get(id);
    return respond(id, { text: `${String(id)}:${big}`, lines: "a\nb\r\nc" });
  };
  const s = serve(handle);
  const release: Deferred[] = [];
  for (let id = 0; id < 20; id += 1) {
    const gate = deferred();
    gates.set(id, gate.promise);
    release.push(gate);
    s.request(id);
  }
  s.input.write("garbage\n");
  // Its error is the first frame: every request has been read by then.
  await s.out.written(1);
  // Release in an interleaved order so responses finish concurrently.
  for (let i = 19; i >= 0; i -= 2) release[i]?.resolve();
  for (let i = 0; i < 20; i += 2) release[i]?.resolve();
  await s.drained(21);
  assert.ok(s.out.raw.endsWith("\n"));
  const frames = s.out.frames();
  assert.equal(frames.length, 21);
  const ids = frames.filter((frame) => "result" in frame).map((frame) => frame.id as number);
  assert.deepEqual(
    [...ids].sort((a, b) => a - b),
    Array.from({ length: 20 }, (_, i) => i),
  );
  for (const frame of frames) {
    if (!("result" in frame)) continue;
    const result = frame.result as { text: string; lines: string };
    assert.equal(result.text, `${String(frame.id)}:${big}`);
    assert.equal(result.lines, "a\nb\r\nc");
  }
  assert.equal(frames.filter((frame) => "error" in frame).length, 1);
});

test("a handler that rejects still produces exactly one -32603 for that id", async () => {
  const handle: RequestHandler = async (message) => {
    if (isRecord(message) && message.method === "ok") return respond(message.id as RequestId, {});
    throw new Error("boom");
  };
  const s = serve(handle);
  s.request(5, "explode");
  s.send({ jsonrpc: "2.0", method: "explode" });
  s.request("s", "ok");
  await s.drained(2);
  const frames = s.out.frames();
  assert.equal(frames.length, 2);
  const failure = frames.find((frame) => frame.id === 5);
  assert.deepEqual(failure, { jsonrpc: "2.0", id: 5, error: { code: -32603, message: "Internal error" } });
  assert.deepEqual(
    frames.find((frame) => frame.id === "s"),
    { jsonrpc: "2.0", id: "s", result: {} },
  );
  assert.ok(s.logger.lines.some((line) => line.startsWith("error ") && line.includes("boom")));
});

/* ------------------------------------------------------------------ *
 * createMessageWriter
 * ------------------------------------------------------------------ */

function frame(id: number): OutgoingMessage {
  return respond(id, { n: id, pad: "x".repeat(100) });
}

/** A Writable with highWaterMark 1 whose write callbacks the test releases by hand. */
/** A stream that takes each frame only when the test calls its callback; took(n) resolves once n were handed to it. */
function manualSink() {
  const callbacks: Array<(error?: Error | null) => void> = [];
  const received: string[] = [];
  const handed = new Watch();
  const sink = new Writable({
    highWaterMark: 1,
    write(chunk: Buffer, _encoding, callback) {
      received.push(chunk.toString("utf8"));
      callbacks.push(callback);
      handed.changed();
    },
  });
  const took = async (count: number): Promise<void> => {
    await handed.until(`${count} frames handed to the stream`, () => (received.length >= count ? true : undefined));
  };
  return { sink, callbacks, received, took };
}

function epipe(): NodeJS.ErrnoException {
  return Object.assign(new Error("write EPIPE"), { code: "EPIPE", errno: -32, syscall: "write" });
}

test("createMessageWriter keeps order under backpressure", async () => {
  const received: string[] = [];
  let drains = 0;
  let maxOtherBytesBuffered = 0;
  const sink = new Writable({
    highWaterMark: 1,
    write(chunk: Buffer, _encoding, callback) {
      received.push(chunk.toString("utf8"));
      maxOtherBytesBuffered = Math.max(maxOtherBytesBuffered, sink.writableLength - chunk.length);
      setImmediate(callback);
    },
  });
  sink.on("drain", () => (drains += 1));
  const writer = createMessageWriter(sink, new RecordingLogger());
  const resolved: number[] = [];
  const writes = Array.from({ length: 50 }, (_, i) => writer.write(frame(i)).then(() => void resolved.push(i)));
  await Promise.all(writes);
  assert.equal(received.length, 50);
  received.forEach((line, i) => {
    assert.ok(line.endsWith("\n"));
    assert.equal((JSON.parse(line) as { id: number }).id, i);
  });
  assert.deepEqual(
    resolved,
    Array.from({ length: 50 }, (_, i) => i),
    "write() promises resolve in order",
  );
  assert.ok(drains > 0, "backpressure happened");
  assert.equal(
    maxOtherBytesBuffered,
    0,
    "the writer waits for drain: never more than one frame in the stream's buffer",
  );
});

test("createMessageWriter writes a result serialized once as the same bytes for every id", async () => {
  const received: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      received.push(Buffer.from(chunk));
      callback();
    },
  });
  const writer = createMessageWriter(sink, new RecordingLogger());
  // Several bytes per character, and a string id, as a listing and a host may have.
  const tools = () => ({ tools: [{ name: "claude_run", title: "Run · “agent” ✓ 🚀" }] });
  const listing = serializedOnce(tools());
  await writer.write(respond(1, listing));
  await writer.write(respond("req-2", listing));
  await writer.write(respond(3, { plain: "é" }));
  assert.deepEqual(
    received.map((chunk) => chunk.toString("utf8")),
    [
      `${JSON.stringify(respond(1, tools()))}\n`,
      `${JSON.stringify(respond("req-2", tools()))}\n`,
      `${JSON.stringify(respond(3, { plain: "é" }))}\n`,
    ],
  );
});

test("createMessageWriter write() resolves only once the stream took the frame", async () => {
  const { sink, callbacks, received, took } = manualSink();
  const writer = createMessageWriter(sink, new RecordingLogger());
  const first = track(writer.write(frame(0)));
  const second = track(writer.write(frame(1)));
  await took(1);
  await settle();
  assert.equal(received.length, 1, "the second frame waits for drain");
  assert.equal(first.done, false);
  callbacks[0]?.();
  await bounded("the first write", first.promise);
  await took(2);
  assert.equal(second.done, false);
  callbacks[1]?.();
  await bounded("the second write", second.promise);
});

test("createMessageWriter flush() resolves after the queued frames were handed over", async () => {
  const { sink, callbacks, received, took } = manualSink();
  const writer = createMessageWriter(sink, new RecordingLogger());
  await writer.flush();
  void writer.write(frame(0));
  void writer.write(frame(1));
  void writer.write(frame(2));
  const flushed = track(writer.flush());
  for (let i = 0; i < 3; i += 1) {
    await took(i + 1);
    assert.equal(received.length, i + 1);
    assert.equal(flushed.done, false, `flush waits for frame ${i}`);
    callbacks[i]?.();
  }
  await bounded("the flush", flushed.promise);
  assert.deepEqual(
    received.map((line) => (JSON.parse(line) as { id: number }).id),
    [0, 1, 2],
  );
});

test("createMessageWriter drops frames quietly after the stream emits EPIPE", async () => {
  const received: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      received.push(chunk.toString("utf8"));
      callback();
    },
  });
  const logger = new RecordingLogger();
  const writer = createMessageWriter(sink, logger);
  await writer.write(frame(0));
  assert.equal(received.length, 1);
  sink.emit("error", epipe());
  await writer.write(frame(1));
  await writer.write(frame(2));
  await writer.flush();
  assert.equal(received.length, 1, "nothing is written after EPIPE");
  assert.equal(
    logger.lines.filter((line) => line.startsWith("warn ") && line.includes("EPIPE")).length,
    1,
    "warned once",
  );
});

test("createMessageWriter resolves a write blocked on drain when EPIPE arrives", async () => {
  const { sink, callbacks, received, took } = manualSink();
  const logger = new RecordingLogger();
  const writer = createMessageWriter(sink, logger);
  const writes = [writer.write(frame(0)), writer.write(frame(1)), writer.write(frame(2))];
  await took(1);
  assert.equal(received.length, 1);
  callbacks[0]?.(epipe());
  await Promise.all(writes);
  await writer.flush();
  assert.equal(received.length, 1);
  assert.ok(logger.lines.some((line) => line.includes("EPIPE")));
  // And later frames are dropped too.
  await writer.write(frame(3));
  assert.equal(received.length, 1);
});

test("createMessageWriter resolves writes to a destroyed stream", async () => {
  const { sink, received } = manualSink();
  const writer = createMessageWriter(sink, new RecordingLogger());
  // Not events.once: it would reject on the "error" that comes first.
  const closed = new Promise((resolve) => sink.once("close", resolve));
  sink.destroy(epipe());
  await closed;
  await writer.write(frame(0));
  await writer.flush();
  assert.deepEqual(received, []);
});

test("createMessageWriter answers an unserializable response with -32603 for its id", async () => {
  const output = new PassThrough();
  const out = collect(output);
  const logger = new RecordingLogger();
  const writer = createMessageWriter(output, logger);
  await writer.write(respond(9, { big: BigInt(1) }));
  await writer.write(fail(null, -32700, "Parse error"));
  await out.written(2);
  const frames = out.frames();
  assert.deepEqual(frames[0], {
    jsonrpc: "2.0",
    id: 9,
    error: { code: -32603, message: "Internal error: unserializable result" },
  });
  assert.equal(frames[1]?.id, null);
  assert.ok(logger.lines.some((line) => line.startsWith("error ")));
});
