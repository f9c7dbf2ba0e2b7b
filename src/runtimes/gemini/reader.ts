/**
 * Reads Gemini CLI's `--output-format stream-json` as it arrives (PROTOCOL.md
 * §7.3): a live summary, a bounded transcript and the final answer, never the
 * whole output. Observed on 0.61.0 (test/fixtures/gemini/): one event per line,
 *
 *   init        {session_id, model}
 *   message     {role: "user", content}             the prompt, echoed
 *   message     {role: "assistant", content, delta}  a piece of the model's text
 *   tool_use    {tool_name, tool_id, parameters}
 *   tool_result {tool_id, status, output, error?: {type, message}}
 *   error       {severity: "warning" | "error", message}
 *   result      {status: "success" | "error", error?: {type, message}, stats}
 *
 * The result carries no text and no session id: the answer is the assistant
 * text after the last tool call, and the session id comes from init. What it
 * keeps for reading is cleaned as it is read (§10); the outcome is cleaned by the launcher.
 */
import { JsonLinesReader } from "../../agent/json-lines.js";
import { forReading, forReadingOnOneLine } from "../../core/text.js";
import { isRecord } from "../../core/values.js";
import type { PermissionDenial } from "../../agent/types.js";
import { clip, describeToolCall, tail } from "./text.js";

const LAST_TEXT_CHARS = 500;
const TOOL_RESULT_CHARS = 2000;
/** One assistant message in the transcript; the final answer is whole in the result anyway. */
const TEXT_ENTRY_CHARS = 20_000;
const NOTE_CHARS = 2000;
/** Tool calls awaiting their result, remembered so a refused one can be named; more at once is not plausible. */
const PENDING_TOOLS = 1000;
const DENIALS_KEPT = 100;

/** The result event, read by key. */
export interface GeminiResult {
  status: string;
  /** The error's message, when the result says what failed. */
  errorMessage?: string;
  errorType?: string;
  durationMs?: number;
}

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);
const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined;

/**
 * Gemini CLI's stream-json, read incrementally. A turn is one model response:
 * it begins with the first text or tool call after the prompt or after tool
 * results, so a run that calls a tool once and then answers has two turns. An
 * assistant message is the run of text pieces between other events; it is one
 * transcript entry. A malformed line is reported and skipped.
 */
export class GeminiReader extends JsonLinesReader {
  /** Inside a model response: a text piece or tool call was read since the prompt or the last tool result. */
  private responding = false;
  /** The text of the current assistant message, up to what its transcript entry shows. */
  private message: string[] = [];
  private messageChars = 0;
  /** The end of the current message, for the live summary. */
  private messageEnd = "";
  /** The text since the last tool call: the answer, once the result says the run is over. */
  private answer: string[] = [];
  private answerBytes = 0;
  private result: GeminiResult | undefined;
  private readonly errors: string[] = [];
  private readonly pendingTools = new Map<string, PermissionDenial>();
  private readonly denials: PermissionDenial[] = [];

  override end(): void {
    super.end();
    this.endMessage();
  }

  hasResult(): boolean {
    return this.result !== undefined;
  }

  /** The result event, once read. */
  resultEvent(): GeminiResult | undefined {
    return this.result;
  }

  /** The assistant text after the last tool call. */
  answerText(): string {
    return this.answer.join("");
  }

  /** The messages of `error` events of severity "error", oldest first (at most a few). */
  errorMessages(): readonly string[] {
    return this.errors;
  }

  /** Tool calls the CLI refused to run: by its policy, or because they would have needed a person's approval. */
  permissionDenials(): readonly PermissionDenial[] {
    return this.denials;
  }

  /** Lets go of the answer, which may be megabytes, once the outcome holds it. */
  forgetResult(): void {
    this.result = undefined;
    this.answer = [];
  }

  protected onEvent(event: Record<string, unknown>): void {
    const isText = event.type === "message" && event.role === "assistant";
    if (!isText) this.endMessage();
    switch (event.type) {
      case "init":
        this.onInit(event);
        return;
      case "message":
        if (isText) this.onText(str(event.content) ?? "");
        return;
      case "tool_use":
        this.onToolUse(event);
        return;
      case "tool_result":
        this.onToolResult(event);
        return;
      case "error":
        this.onError(event);
        return;
      case "result":
        this.onResult(event);
        return;
      default:
        return;
    }
  }

  private onInit(event: Record<string, unknown>): void {
    const sessionId = str(event.session_id);
    const model = str(event.model);
    if (sessionId) this.summary.sessionId = forReadingOnOneLine(sessionId);
    if (model) this.summary.model = forReadingOnOneLine(model);
    this.transcript.append(`[session ${sessionId ?? "?"}${model ? ` · model ${model}` : ""}]`);
  }

  private beginResponse(): void {
    if (this.responding) return;
    this.responding = true;
    this.summary.turns += 1;
  }

  private onText(piece: string): void {
    if (piece === "") return;
    this.beginResponse();
    // The answer is held whole until the outcome takes it, so it is bounded like a line.
    this.answerBytes += Buffer.byteLength(piece, "utf8");
    if (this.answerBytes > this.options.maxLineBytes) {
      this.answer = [];
      this.overflowed();
    } else if (!this.overflow) {
      this.answer.push(piece);
    }
    if (this.messageChars <= TEXT_ENTRY_CHARS) {
      this.message.push(piece);
      this.messageChars += piece.length;
    }
    // One character more than is shown, so tail() still marks a cut.
    this.messageEnd = `${this.messageEnd}${piece}`.slice(-(LAST_TEXT_CHARS + 1));
    const shown = forReading(tail(this.messageEnd, LAST_TEXT_CHARS));
    if (shown !== "") {
      this.summary.lastText = shown;
      this.summary.lastActivity = "text";
    }
  }

  /** The current assistant message ends: it becomes one transcript entry. */
  private endMessage(): void {
    if (this.message.length === 0) return;
    const text = this.message.join("");
    this.message = [];
    this.messageChars = 0;
    this.messageEnd = "";
    if (text.trim() !== "") this.transcript.append(`assistant: ${clip(text, TEXT_ENTRY_CHARS)}`);
  }

  private onToolUse(event: Record<string, unknown>): void {
    const name = str(event.tool_name) ?? "tool";
    this.beginResponse();
    // Text before a tool call was not the answer.
    this.answer = [];
    this.answerBytes = 0;
    this.summary.lastTool = describeToolCall(name, event.parameters);
    this.summary.lastActivity = "tool";
    this.transcript.append(`tool: ${this.summary.lastTool}`);
    const id = str(event.tool_id);
    if (id !== undefined) {
      if (this.pendingTools.size >= PENDING_TOOLS)
        this.pendingTools.delete(this.pendingTools.keys().next().value as string);
      this.pendingTools.set(id, {
        tool_name: name,
        ...(event.parameters === undefined ? {} : { tool_input: event.parameters }),
      });
    }
  }

  private onToolResult(event: Record<string, unknown>): void {
    this.responding = false;
    const id = str(event.tool_id);
    const call = id === undefined ? undefined : this.pendingTools.get(id);
    if (id !== undefined) this.pendingTools.delete(id);
    const output = str(event.output) ?? "";
    if (event.status !== "error") {
      this.transcript.append(`tool result: ${clip(output, TOOL_RESULT_CHARS)}`);
      return;
    }
    const error = isRecord(event.error) ? event.error : {};
    const message = str(error.message) ?? output;
    this.transcript.append(`tool error: ${clip(message, TOOL_RESULT_CHARS)}`);
    // A call the policy denied, or one that would have asked a person (there is none headless).
    const refused = error.type === "policy_violation" || /requires user confirmation/.test(message);
    if (refused && call && this.denials.length < DENIALS_KEPT) this.denials.push(call);
  }

  private onError(event: Record<string, unknown>): void {
    const severity = str(event.severity) ?? "error";
    const message = clip(str(event.message) ?? "", NOTE_CHARS);
    this.transcript.append(`[${severity}: ${message}]`);
    if (severity === "error" && this.errors.length < 5) this.errors.push(message);
  }

  private onResult(event: Record<string, unknown>): void {
    const status = str(event.status) ?? "unknown";
    const result: GeminiResult = { status };
    if (isRecord(event.error)) {
      const message = str(event.error.message);
      const type = str(event.error.type);
      if (message !== undefined) result.errorMessage = clip(message, NOTE_CHARS);
      if (type !== undefined) result.errorType = type;
    }
    const durationMs = isRecord(event.stats) ? num(event.stats.duration_ms) : undefined;
    // An error's stats say 0 ms: not a duration.
    if (durationMs !== undefined && durationMs > 0) result.durationMs = durationMs;
    this.result = result;
    this.transcript.append(`[done: ${status}]`);
  }
}
