/**
 * What every runtime's reader shares (PROTOCOL.md §7.3): an agent CLI that prints one JSON event a line, read as
 * it arrives into a live summary and a bounded transcript, with its lines bounded, its start kept for BAD_OUTPUT,
 * and a long result written to the job's result file (§15.4). A runtime's reader keeps only its event handling.
 */
import { LineReader } from "../core/lines.js";
import { PiecewiseForReading } from "../core/text.js";
import { Transcript } from "../core/transcript.js";
import { isRecord } from "../core/values.js";
import type { AgentOutputReader, OutputSource, ReaderOptions } from "./runtime.js";
import type { LiveSummary } from "./types.js";

/** With a file to read back from, lines longer than this are left there while they stream by (§15.4). */
const LONG_LINE_BYTES = 256 * 1024;
const LONG_LINE_HEAD_BYTES = 2048;
/** What BAD_OUTPUT shows of the output's start. */
const PRINTED_START_CHARS = 300;

type JsonEvent = Record<string, unknown>;

export abstract class JsonLinesReader implements AgentOutputReader {
  readonly transcript: Transcript;
  overflow = false;
  protected readonly summary: LiveSummary = { turns: 0, events: 0 };
  private readonly lines: LineReader;
  private readonly listeners = new Set<() => void>();
  private head = "";

  /** `longLines`: lines too long to hold are handed to onLongLine instead, when the output can be read again. */
  constructor(
    protected readonly options: ReaderOptions,
    longLines = false,
  ) {
    this.transcript = new Transcript(options.transcriptChars, options.onTranscriptEntry);
    const deferred =
      longLines && options.source
        ? {
            overBytes: LONG_LINE_BYTES,
            headBytes: LONG_LINE_HEAD_BYTES,
            onDeferredLine: (head: Buffer, offset: number, length: number) => this.onLongLine(head, offset, length),
          }
        : undefined;
    this.lines = new LineReader(
      options.maxLineBytes,
      (line) => this.onLine(line),
      () => this.overflowed(),
      deferred,
    );
  }

  /** One event of the CLI's, counted in the summary. */
  protected abstract onEvent(event: JsonEvent): void;
  abstract hasResult(): boolean;
  abstract forgetResult(): void;

  /** A line too long to hold, by its first bytes and its place in the output; only with `longLines`. */
  protected onLongLine(_head: Buffer, _offset: number, _length: number): void {}

  /** The events a line holds, trimmed: one JSON object, by default; undefined when it is not JSON of that shape. */
  protected eventsIn(text: string): JsonEvent[] | undefined {
    const parsed = text.startsWith("{") ? parseJson(text) : undefined;
    return parsed && isRecord(parsed.value) ? [parsed.value] : undefined;
  }

  push(chunk: Buffer): void {
    // A character cut in two at the last byte would show as U+FFFD: drop it.
    if (this.head.length < PRINTED_START_CHARS) {
      this.head += chunk.toString("utf8", 0, Math.min(chunk.length, PRINTED_START_CHARS)).replace(/\uFFFD$/, "");
    }
    this.lines.push(chunk);
  }

  /** The output ended: a last line without a newline still counts. */
  end(): void {
    this.lines.finish();
  }

  live(): LiveSummary {
    return { ...this.summary };
  }

  onActivity(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The start of what the agent printed, for BAD_OUTPUT. */
  printedStart(): string {
    return this.head;
  }

  /** The output passed a bound: the agent is stopped, once. */
  protected overflowed(): void {
    if (this.overflow) return;
    this.overflow = true;
    this.options.onOverflow();
  }

  protected event(event: JsonEvent): void {
    this.summary.events += 1;
    this.onEvent(event);
  }

  /** Tells the listeners the summary may have changed. */
  protected changed(): void {
    for (const listener of this.listeners) listener();
  }

  /** A malformed line is reported and skipped; it does not end the job. */
  private onLine(line: string): void {
    const events = this.eventsIn(line.trim());
    if (!events) {
      this.options.onMalformedLine?.(line);
      return;
    }
    for (const event of events) this.event(event);
    this.changed();
  }
}

/** A JSON text's value, or undefined when it is not JSON. */
export function parseJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

/** What writing a long result's text to the job's result file came to. */
export interface Written<T> {
  value: T;
  /** The text's length once cleaned, in UTF-16 characters: what the file holds when stored. */
  chars: number;
  /** False when the file could not be made or written (a full disk); without a file to write (a replay), true. */
  stored: boolean;
}

/**
 * Writes a long result's text to the result file as `produce` hands it out, cleaned on its way (§10), so the
 * file holds what is served. A write that fails (a full disk) stops the writing; the text stays in stdout.jsonl.
 */
export function writeResultFile<T>(source: OutputSource, produce: (write: (text: string) => void) => T): Written<T> {
  let sink: ReturnType<NonNullable<OutputSource["createResult"]>> | undefined;
  let failed = false;
  let chars = 0;
  const cleaner = new PiecewiseForReading();
  const write = (text: string): void => {
    chars += text.length;
    if (failed || !sink || text === "") return;
    try {
      sink.write(text);
    } catch {
      failed = true;
    }
  };
  try {
    sink = source.createResult?.();
  } catch {
    failed = true;
  }
  let value: T;
  try {
    value = produce((piece) => write(cleaner.push(piece)));
    write(cleaner.end());
  } finally {
    try {
      sink?.close();
    } catch {
      failed = true;
    }
  }
  return { value, chars, stored: !failed };
}
