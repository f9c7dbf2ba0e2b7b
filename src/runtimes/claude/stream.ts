/**
 * Reads Claude Code's stream-json as it arrives (PROTOCOL.md §7.3): a live summary,
 * a bounded transcript and the final result event, never the whole output. What it
 * keeps for reading is cleaned as it is read (§10); the outcome is cleaned by the launcher.
 */
import { JsonLinesReader, parseJson, writeResultFile } from "../../agent/json-lines.js";
import type { OutputSource, ReaderOptions } from "../../agent/runtime.js";
import { forReading, forReadingOnOneLine } from "../../core/text.js";
import { isRecord } from "../../core/values.js";
import { parseStreamingMember } from "./json-stream.js";
import { findResultEvent, isResultEvent, num, str, type ResultEvent } from "./result.js";
import { clip, describeToolUse, tail } from "./text.js";

export type { OutputSource };
export type ClaudeStreamOptions = ReaderOptions;

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
 * final result event, never the whole output.
 */
export class ClaudeStream extends JsonLinesReader {
  private readonly messageIds = new Set<string>();
  private result: ResultEvent | undefined;
  /** Where a result line too long to hold while streaming is, to be read back at the end. */
  private deferredResult: { offset: number; length: number } | undefined;
  /** Set when the result's text was streamed to the result file instead of being held: its length. */
  private streamedChars: number | undefined;
  /** The result's text could not be written to the result file (a full disk). */
  resultNotStored = false;
  private raw: Buffer[] | undefined;
  private rawBytes = 0;

  constructor(options: ClaudeStreamOptions) {
    // A long line is left in the output file; a result line is read back from there at the end (§15.4).
    super(options, true);
    // With a file to read back from, nothing is kept for the fallback: the file is read instead.
    this.raw = options.source ? undefined : [];
  }

  override push(chunk: Buffer): void {
    this.rawBytes += chunk.length;
    if (this.raw) {
      if (this.rawBytes <= RAW_KEEP_BYTES) this.raw.push(chunk);
      else this.raw = undefined;
    }
    super.push(chunk);
  }

  /**
   * The output ended: a last line without a newline still counts, a long
   * result line is read back, and output that was not line-delimited is
   * searched whole. Then the raw copy goes.
   */
  override end(): void {
    super.end();
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
   * A result line too long to hold: its text is streamed into the result file, the rest parsed. On a full disk
   * the text stays in stdout.jsonl, and the outcome says so rather than offer half a result.
   */
  private readDeferredResult(source: OutputSource, { offset, length }: { offset: number; length: number }): void {
    this.deferredResult = undefined;
    const read = (at: number, size: number): Buffer | undefined => source.read(at, size);
    const written = writeResultFile(source, (write) => parseStreamingMember(read, offset, length, "result", write));
    if (!written.stored) this.resultNotStored = true;
    const parsed = written.value;
    if (!parsed) {
      this.options.onMalformedLine?.(`a ${length}-byte line that is not one JSON object`);
      return;
    }
    this.event(parsed.rest);
    if (this.result && parsed.chars !== undefined) this.streamedChars = written.chars;
  }

  /**
   * One turn per assistant message id. An id's blocks arrive together, so only
   * recent ids are remembered: memory does not grow with the number of turns.
   */
  private countTurn(messageId: string): void {
    if (this.messageIds.has(messageId)) return;
    this.messageIds.add(messageId);
    if (this.messageIds.size > RECENT_MESSAGE_IDS)
      this.messageIds.delete(this.messageIds.values().next().value as string);
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
  protected override onLongLine(head: Buffer, offset: number, length: number): void {
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
    this.changed();
  }

  hasResult(): boolean {
    return this.result !== undefined;
  }

  /** The final result event, once end() was called. */
  resultEvent(): ResultEvent | undefined {
    return this.result;
  }

  /** Lines of JSON objects, or of arrays of them: `--output-format json --verbose` prints every event as one array. */
  protected override eventsIn(text: string): Record<string, unknown>[] | undefined {
    if (!text.startsWith("{") && !text.startsWith("[")) return undefined;
    const parsed = parseJson(text);
    if (!parsed) return undefined;
    return (Array.isArray(parsed.value) ? parsed.value : [parsed.value]).filter(isRecord);
  }

  protected onEvent(event: Record<string, unknown>): void {
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
          this.transcript.append(
            `[done: ${str(event.subtype) ?? "result"}${event.is_error === true ? ", error" : ""}]`,
          );
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
      this.transcript.append(
        `${block.is_error === true ? "tool error" : "tool result"}: ${clip(content, TOOL_RESULT_CHARS)}`,
      );
    }
  }
}

function textBlocks(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .filter(
      (block): block is { type: "text"; text: string } =>
        isRecord(block) && block.type === "text" && typeof block.text === "string",
    )
    .map((block) => block.text)
    .join("\n");
}
