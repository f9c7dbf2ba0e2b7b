/**
 * Reads Claude Code's stream-json as it arrives (PROTOCOL.md §7.3): a live summary,
 * a bounded transcript and the final result event, never the whole output. What it
 * keeps for reading is cleaned as it is read (§10); the outcome is cleaned by the launcher.
 */
import { LineReader } from "../../core/lines.js";
import { forReading, forReadingOnOneLine, PiecewiseForReading } from "../../core/text.js";
import { Transcript } from "../../core/transcript.js";
import { isRecord } from "../../core/values.js";
import type { AgentOutputReader, OutputSource, ReaderOptions } from "../../agent/runtime.js";

export type { OutputSource };
import type { LiveSummary } from "../../agent/types.js";
import { parseStreamingMember } from "./json-stream.js";
import { findResultEvent, isResultEvent, num, str, type ResultEvent } from "./result.js";
import { clip, describeToolUse, tail } from "./text.js";

export type ClaudeStreamOptions = ReaderOptions;

/** Lines longer than this are left in the output file until the end, when only a result line is read back. */
const DEFERRED_LINE_BYTES = 256 * 1024;
const DEFERRED_HEAD_BYTES = 2048;

/** While stdout stays this small it is also kept whole, for output that is one pretty-printed object. */
const RAW_KEEP_BYTES = 1024 * 1024;
const LAST_TEXT_CHARS = 500;
const RECENT_MESSAGE_IDS = 1000;
const TOOL_RESULT_CHARS = 2000;
/** One assistant text in the transcript; the final answer is whole in the result anyway. */
const TEXT_ENTRY_CHARS = 20_000;

/**
 * Reads Claude Code's stream-json incrementally (§7.3): one event per line,
 * parsed as it arrives. It keeps a live summary, a bounded transcript and the
 * final result event, never the whole output. A malformed line is reported
 * and skipped; it does not end the job.
 */
export class ClaudeStream implements AgentOutputReader {
  readonly transcript: Transcript;
  overflow = false;
  private readonly reader: LineReader;
  private readonly summary: LiveSummary = { turns: 0, events: 0 };
  private readonly messageIds = new Set<string>();
  private readonly listeners = new Set<() => void>();
  private result: ResultEvent | undefined;
  /** Where a result line too long to hold while streaming is, to be read back at the end. */
  private deferredResult: { offset: number; length: number } | undefined;
  /** Set when the result's text was streamed to the result file instead of being held: its length. */
  private streamedChars: number | undefined;
  /** The result's text could not be written to the result file (a full disk). */
  resultNotStored = false;
  private head = "";
  private raw: Buffer[] | undefined;
  private rawBytes = 0;

  constructor(private readonly options: ClaudeStreamOptions) {
    this.transcript = new Transcript(options.transcriptChars, options.onTranscriptEntry);
    // With a file to read back from, nothing is kept for the fallback: the file is read instead.
    this.raw = options.source ? undefined : [];
    this.reader = new LineReader(
      options.maxLineBytes,
      (line) => this.onLine(line),
      () => {
        this.overflow = true;
        options.onOverflow();
      },
      options.source
        ? { overBytes: DEFERRED_LINE_BYTES, headBytes: DEFERRED_HEAD_BYTES, onDeferredLine: (head, offset, length) => this.onDeferredLine(head, offset, length) }
        : undefined,
    );
  }

  push(chunk: Buffer): void {
    // A character cut in two at the 300th byte would show as U+FFFD: drop it.
    if (this.head.length < 300) this.head += chunk.toString("utf8", 0, Math.min(chunk.length, 300)).replace(/\uFFFD$/, "");
    this.rawBytes += chunk.length;
    if (this.raw) {
      if (this.rawBytes <= RAW_KEEP_BYTES) this.raw.push(chunk);
      else this.raw = undefined;
    }
    this.reader.push(chunk);
  }

  /**
   * The output ended: a last line without a newline still counts, a long
   * result line is read back, and output that was not line-delimited is
   * searched whole. Then the raw copy goes.
   */
  end(): void {
    this.reader.finish();
    const source = this.options.source;
    if (!this.result && this.deferredResult && source) this.readDeferredResult(source, this.deferredResult);
    if (!this.result && this.raw) this.result = findResultEvent(Buffer.concat(this.raw).toString("utf8"));
    if (!this.result && source && this.rawBytes <= RAW_KEEP_BYTES) {
      const whole = source.read(0, this.rawBytes);
      if (whole) this.result = findResultEvent(whole.toString("utf8"));
    }
    this.raw = undefined;
  }

  /** The result's text went straight to the result file; this is its length in UTF-16 characters. */
  streamedResultChars(): number | undefined {
    return this.streamedChars;
  }

  /**
   * A result line too long to hold: its text is streamed into the result file, the rest parsed. The text is
   * cleaned on its way (§10), so the file holds what is served, and its length is the cleaned text's.
   */
  private readDeferredResult(source: OutputSource, { offset, length }: { offset: number; length: number }): void {
    this.deferredResult = undefined;
    let sink: ReturnType<NonNullable<OutputSource["createResult"]>> | undefined;
    let sinkFailed = false;
    const cleaner = new PiecewiseForReading();
    let cleanedChars = 0;
    const write = (text: string): void => {
      cleanedChars += text.length;
      if (sinkFailed || !sink || text === "") return;
      try {
        sink.write(text);
      } catch {
        // A full disk: the text stays in stdout.jsonl; the outcome says so rather than offer half a result.
        sinkFailed = true;
      }
    };
    try {
      sink = source.createResult?.();
    } catch {
      sinkFailed = true;
    }
    let parsed: ReturnType<typeof parseStreamingMember>;
    try {
      parsed = parseStreamingMember((at, size) => source.read(at, size), offset, length, "result", (piece) => write(cleaner.push(piece)));
      write(cleaner.end());
    } finally {
      try {
        sink?.close();
      } catch {
        sinkFailed = true;
      }
    }
    if (sinkFailed) this.resultNotStored = true;
    if (!parsed) {
      this.options.onMalformedLine?.(`a ${length}-byte line that is not one JSON object`);
      return;
    }
    this.onEvent(parsed.rest);
    if (this.result && parsed.chars !== undefined) this.streamedChars = cleanedChars;
  }

  /**
   * One turn per assistant message id. An id's blocks arrive together, so only
   * recent ids are remembered: memory does not grow with the number of turns.
   */
  private countTurn(messageId: string): void {
    if (this.messageIds.has(messageId)) return;
    this.messageIds.add(messageId);
    if (this.messageIds.size > RECENT_MESSAGE_IDS) this.messageIds.delete(this.messageIds.values().next().value as string);
    this.summary.turns += 1;
  }

  /** Lets go of the result event, whose text may be megabytes, once the outcome holds what is needed of it. */
  forgetResult(): void {
    this.result = undefined;
  }

  /**
   * A line too long to hold while streaming (§15.4). Its first bytes say what
   * it is: a result is read back at the end; anything else is only counted.
   */
  private onDeferredLine(head: Buffer, offset: number, length: number): void {
    const start = head.toString("utf8");
    const type = /"type"\s*:\s*"([a-z_]+)"/.exec(start)?.[1] ?? "unknown";
    this.summary.events += 1;
    if (type === "result") {
      this.result = undefined;
      this.deferredResult = { offset, length };
    } else {
      const messageId = type === "assistant" ? /"id"\s*:\s*"(msg[^"]*)"/.exec(start)?.[1] : undefined;
      if (messageId !== undefined) this.countTurn(messageId);
      this.transcript.append(`[${type} event of ${length} bytes, too long to show here]`);
    }
    for (const listener of this.listeners) listener();
  }

  live(): LiveSummary {
    return { ...this.summary };
  }

  /** Calls listener after each event that changed the summary; returns the unsubscribe. */
  onActivity(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  hasResult(): boolean {
    return this.result !== undefined;
  }

  /** The final result event, once end() was called. */
  resultEvent(): ResultEvent | undefined {
    return this.result;
  }

  /** The start of what the agent printed, for BAD_OUTPUT. */
  printedStart(): string {
    return this.head;
  }

  private onLine(line: string): void {
    const text = line.trim();
    if (!text.startsWith("{") && !text.startsWith("[")) {
      this.options.onMalformedLine?.(line);
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      this.options.onMalformedLine?.(line);
      return;
    }
    // `--output-format json --verbose` prints every event as one JSON array.
    for (const event of Array.isArray(parsed) ? parsed : [parsed]) {
      if (isRecord(event)) this.onEvent(event);
    }
    for (const listener of this.listeners) listener();
  }

  private onEvent(event: Record<string, unknown>): void {
    this.summary.events += 1;
    const sessionId = str(event.session_id);
    if (sessionId) this.summary.sessionId = forReadingOnOneLine(sessionId);
    switch (event.type) {
      case "system":
        if (event.subtype === "init") {
          const model = str(event.model);
          if (model) this.summary.model = forReadingOnOneLine(model);
          this.transcript.append(`[session ${sessionId ?? "?"}${model ? ` · model ${model}` : ""}]`);
        }
        return;
      case "assistant":
        this.onAssistant(event.message);
        return;
      case "user":
        this.onToolResults(event.message);
        return;
      case "result":
        if (isResultEvent(event)) {
          this.result = event;
          this.deferredResult = undefined;
          const cost = num(event.total_cost_usd);
          if (cost !== undefined) this.summary.costUsd = cost;
          const turns = num(event.num_turns);
          if (turns !== undefined) this.summary.turns = turns;
          this.transcript.append(`[done: ${str(event.subtype) ?? "result"}${event.is_error === true ? ", error" : ""}]`);
        }
        return;
      default:
        return;
    }
  }

  private onAssistant(message: unknown): void {
    if (!isRecord(message)) return;
    const id = str(message.id);
    if (id !== undefined) this.countTurn(id);
    for (const block of Array.isArray(message.content) ? message.content : []) {
      if (!isRecord(block)) continue;
      if (block.type === "text" && typeof block.text === "string" && block.text.trim() !== "") {
        this.summary.lastText = forReading(tail(block.text, LAST_TEXT_CHARS));
        this.summary.lastActivity = "text";
        this.transcript.append(`assistant: ${clip(block.text, TEXT_ENTRY_CHARS)}`);
      } else if (block.type === "tool_use" && typeof block.name === "string") {
        this.summary.lastTool = describeToolUse(block.name, block.input);
        this.summary.lastActivity = "tool";
        this.transcript.append(`tool: ${this.summary.lastTool}`);
      }
    }
  }

  private onToolResults(message: unknown): void {
    if (!isRecord(message) || !Array.isArray(message.content)) return;
    for (const block of message.content) {
      if (!isRecord(block) || block.type !== "tool_result") continue;
      const content = typeof block.content === "string" ? block.content : textBlocks(block.content);
      this.transcript.append(`${block.is_error === true ? "tool error" : "tool result"}: ${clip(content, TOOL_RESULT_CHARS)}`);
    }
  }
}

function textBlocks(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .filter((block): block is { type: "text"; text: string } => isRecord(block) && block.type === "text" && typeof block.text === "string")
    .map((block) => block.text)
    .join("\n");
}

