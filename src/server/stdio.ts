/**
 * The stdio transport (PROTOCOL.md §1): a bounded line reader, one serialized
 * writer for every outgoing frame, and a loop that handles requests
 * concurrently. Streams are passed in; nothing here reads process globals.
 */
import type { Readable, Writable } from "node:stream";

import {
  INTERNAL_ERROR,
  INVALID_REQUEST,
  PARSE_ERROR,
  SERIALIZED,
  fail,
  isRecord,
  isRequestId,
  type OutgoingMessage,
} from "./jsonrpc.js";
import type { Logger } from "../core/log.js";
import type { RequestHandler } from "./handler.js";
import { LineReader } from "../core/lines.js";

export const DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024;

export interface MessageWriter {
  /** Queues one frame; resolves once the stream accepted it (or the stream is gone). */
  write(message: OutgoingMessage): Promise<void>;
  /** Resolves when everything queued so far has been handed to the stream. */
  flush(): Promise<void>;
}

/**
 * One writer for responses and notifications alike, so frames never
 * interleave and stay in order. It waits for 'drain' under backpressure, and
 * after EPIPE (the host went away) it drops frames instead of throwing.
 */
export function createMessageWriter(stream: Writable, logger: Logger): MessageWriter {
  let tail: Promise<void> = Promise.resolve();
  let broken = false;
  // A result serialized once (tools/list's, some 33 KB) is encoded once too: each frame then copies its bytes
  // instead of encoding the text again (BENCHMARKS.md (c)).
  const encoded = new WeakMap<object, Buffer>();
  const CLOSE = Buffer.from("}\n");

  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (!broken) logger.warn(`stdout closed (${error.code ?? error.message}); dropping further output`);
    broken = true;
  });

  function writeLine(line: string | Buffer): Promise<void> {
    if (broken || stream.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      if (stream.write(line)) return resolve();
      const done = (): void => {
        stream.off("drain", done);
        stream.off("error", done);
        stream.off("close", done);
        resolve();
      };
      stream.on("drain", done);
      stream.on("error", done);
      stream.on("close", done);
    });
  }

  function write(message: OutgoingMessage): Promise<void> {
    let line: string | Buffer;
    try {
      const result = "result" in message && isRecord(message.result) ? message.result : undefined;
      const cached = result ? (result as { [SERIALIZED]?: string })[SERIALIZED] : undefined;
      if (result && cached !== undefined && "id" in message) {
        let bytes = encoded.get(result);
        if (!bytes) encoded.set(result, (bytes = Buffer.from(cached)));
        const head = Buffer.from(`{"jsonrpc":"2.0","id":${JSON.stringify(message.id)},"result":`);
        line = Buffer.concat([head, bytes, CLOSE]);
      } else {
        line = `${JSON.stringify(message)}\n`;
      }
    } catch (error) {
      // Only our own values are serialized; if one cannot be, answer the request with an error rather than nothing.
      logger.error(`cannot serialize an outgoing frame: ${(error as Error).message}`);
      const id = "id" in message ? message.id : null;
      line = `${JSON.stringify(fail(id, INTERNAL_ERROR, "Internal error: unserializable result"))}\n`;
    }
    tail = tail.then(() => writeLine(line));
    return tail;
  }

  function flush(): Promise<void> {
    return tail;
  }

  return { write, flush };
}

export interface StdioServerOptions {
  input: Readable;
  writer: MessageWriter;
  handle: RequestHandler;
  logger: Logger;
  maxLineBytes?: number;
}

export interface StdioServer {
  /** Resolves when the input ends (EOF or error). */
  readonly ended: Promise<void>;
  /** Resolves once every request received so far has been answered. */
  idle(): Promise<void>;
}

/**
 * Reads frames and hands each to the handler without awaiting it, so a
 * claude_wait holding for a minute never delays a ping or a claude_kill.
 */
export function serveStdio(options: StdioServerOptions): StdioServer {
  const { input, writer, handle, logger } = options;
  const inFlight = new Set<Promise<void>>();

  function dispatch(message: unknown): void {
    // Through a promise, so even a handler that throws synchronously is answered.
    const task = Promise.resolve()
      .then(() => handle(message))
      .then((response) => (response ? writer.write(response) : undefined))
      .catch((error: unknown) => {
        // The handler is total; this is a last guard so a request is never left unanswered.
        logger.error(`handler failed: ${(error as Error)?.message ?? String(error)}`);
        const id = isRecord(message) && isRequestId(message.id) ? message.id : null;
        if (id !== null) return writer.write(fail(id, INTERNAL_ERROR, "Internal error"));
        return undefined;
      })
      .finally(() => inFlight.delete(task));
    inFlight.add(task);
  }

  const reader = new LineReader(
    options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES,
    (line) => {
      let message: unknown;
      try {
        message = JSON.parse(line);
      } catch (error) {
        void writer.write(fail(null, PARSE_ERROR, `Parse error: ${(error as Error).message}`));
        return;
      }
      dispatch(message);
    },
    () => {
      logger.warn(`dropped an input line longer than ${options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES} bytes`);
      void writer.write(fail(null, INVALID_REQUEST, "Invalid Request: line exceeds the maximum length"));
    },
  );

  const ended = new Promise<void>((resolve) => {
    input.on("data", (chunk: Buffer | string) =>
      reader.push(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk),
    );
    input.once("end", () => {
      reader.finish();
      resolve();
    });
    input.once("error", (error: Error) => {
      logger.warn(`stdin failed: ${error.message}`);
      resolve();
    });
    input.once("close", () => resolve());
  });

  async function idle(): Promise<void> {
    while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
  }

  return { ended, idle };
}
