/**
 * Reads `codex exec --json` as it arrives (PROTOCOL.md §7.3): a live summary,
 * a bounded transcript and how the turn ended, never the whole output.
 *
 * Codex prints one event per line: thread.started{thread_id}, turn.started,
 * item.started / item.updated / item.completed{item}, turn.completed{usage},
 * and on failure error{message} and turn.failed{error{message}}. Its items
 * are command_execution, agent_message, reasoning, file_change,
 * mcp_tool_call, web_search, todo_list and error (a warning). It reports no
 * cost, no duration and no model round trips: a "turn" here is Codex's own,
 * one prompt answered, so one `codex exec` run is normally one turn. What it
 * keeps for reading is cleaned as it is read (§10); the outcome is cleaned by the launcher.
 */
import { JsonLinesReader } from "../../agent/json-lines.js";
import { forReading, forReadingOnOneLine } from "../../core/text.js";
import { isRecord } from "../../core/values.js";
import { clip, contentText, describeTool, mcpArguments, shellScript, tail } from "./text.js";

const LAST_TEXT_CHARS = 500;
const TOOL_RESULT_CHARS = 2000;
/** One assistant text in the transcript; the final answer is whole in the result anyway. */
const TEXT_ENTRY_CHARS = 20_000;
const NOTE_CHARS = 500;

/** How the last turn ended: its final answer, or Codex's message. */
export type TurnEnd = { kind: "completed"; text: string | undefined } | { kind: "failed"; message: string };

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);
const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined;

/** Results are an agent_message's text, one line among the rest: held in memory, bounded by maxLineBytes. */
export class CodexReader extends JsonLinesReader {
  /** Tool items already shown as started, by item id, so their completion adds only the result. */
  private readonly shownTools = new Set<string>();
  /** The latest agent_message of the turn under way: its final answer if the turn completes. */
  private turnText: string | undefined;
  private ending: TurnEnd | undefined;
  private turnsCompleted = 0;
  /** The latest top-level error event: the reason when no turn.failed follows. */
  private lastError: string | undefined;

  /** A turn ended, completed or failed: Codex said how the run went. */
  hasResult(): boolean {
    return this.ending !== undefined;
  }

  forgetResult(): void {
    if (this.ending?.kind === "completed") this.ending = { kind: "completed", text: undefined };
    this.turnText = undefined;
  }

  turnEnd(): TurnEnd | undefined {
    return this.ending;
  }

  /** The latest error event's message, which may not have ended the turn. */
  errorMessage(): string | undefined {
    return this.lastError;
  }

  completedTurns(): number {
    return this.turnsCompleted;
  }

  threadId(): string | undefined {
    return this.summary.sessionId;
  }

  protected onEvent(event: Record<string, unknown>): void {
    switch (event.type) {
      case "thread.started": {
        const threadId = str(event.thread_id);
        if (threadId) this.summary.sessionId = forReadingOnOneLine(threadId);
        this.transcript.append(`[session ${threadId ?? "?"}]`);
        return;
      }
      case "turn.started":
        this.summary.turns += 1;
        this.turnText = undefined;
        this.ending = undefined;
        this.shownTools.clear();
        return;
      case "turn.completed":
        this.turnsCompleted += 1;
        this.ending = { kind: "completed", text: this.turnText };
        this.transcript.append("[done: success]");
        return;
      case "turn.failed": {
        const message =
          (isRecord(event.error) ? str(event.error.message) : undefined) ?? this.lastError ?? "the turn failed";
        if (message !== this.lastError) this.transcript.append(`[error: ${clip(message, NOTE_CHARS)}]`);
        this.ending = { kind: "failed", message };
        this.transcript.append("[done: failed, error]");
        return;
      }
      case "error": {
        const message = str(event.message) ?? "an error";
        this.lastError = message;
        this.transcript.append(`[error: ${clip(message, NOTE_CHARS)}]`);
        return;
      }
      case "item.started":
      case "item.updated":
      case "item.completed":
        if (isRecord(event.item)) this.onItem(event.item, event.type === "item.completed");
        return;
      default:
        return;
    }
  }

  private onItem(item: Record<string, unknown>, completed: boolean): void {
    const id = str(item.id) ?? "";
    this.describeItem(id, item, completed);
    // Its completion is its last event: the id need not be remembered any longer.
    if (completed) this.shownTools.delete(id);
  }

  private describeItem(id: string, item: Record<string, unknown>, completed: boolean): void {
    switch (item.type) {
      case "agent_message": {
        const text = str(item.text);
        if (!completed || text === undefined || text.trim() === "") return;
        this.turnText = text;
        this.summary.lastText = forReading(tail(text, LAST_TEXT_CHARS));
        this.summary.lastActivity = "text";
        this.transcript.append(`assistant: ${clip(text, TEXT_ENTRY_CHARS)}`);
        return;
      }
      case "command_execution":
        this.showTool(id, describeTool("shell", shellScript(str(item.command) ?? "")));
        if (completed) this.onCommandDone(item);
        return;
      case "mcp_tool_call": {
        const name = [str(item.server), str(item.tool)].filter((part) => part !== undefined && part !== "").join(".");
        this.showTool(id, describeTool(name || "mcp", mcpArguments(item.arguments)));
        if (!completed) return;
        const error = isRecord(item.error) ? str(item.error.message) : undefined;
        if (error !== undefined || item.status === "failed")
          this.transcript.append(`tool error: ${clip(error ?? "failed", TOOL_RESULT_CHARS)}`);
        else
          this.transcript.append(
            `tool result: ${clip(isRecord(item.result) ? contentText(item.result.content) : "", TOOL_RESULT_CHARS)}`,
          );
        return;
      }
      case "file_change": {
        const changes = Array.isArray(item.changes) ? item.changes.filter(isRecord) : [];
        const list = changes.map((change) => `${str(change.kind) ?? "change"} ${str(change.path) ?? "?"}`).join(", ");
        this.showTool(id, describeTool("apply_patch", list));
        if (completed)
          this.transcript.append(
            item.status === "failed" ? "tool error: the patch was not applied" : "tool result: applied",
          );
        return;
      }
      case "web_search":
        this.showTool(id, describeTool("web_search", str(item.query) ?? ""));
        return;
      case "error":
        // Warnings, such as a model Codex has no metadata for; the turn goes on.
        if (completed) this.transcript.append(`[warning: ${clip(str(item.message) ?? "", NOTE_CHARS)}]`);
        return;
      default:
        // reasoning, todo_list, plan: not part of the transcript, as Claude Code's thinking is not.
        return;
    }
  }

  /** A tool call, once: an item may be seen started, updated and completed. */
  private showTool(id: string, description: string): void {
    if (id !== "" && this.shownTools.has(id)) return;
    if (id !== "") this.shownTools.add(id);
    this.summary.lastTool = description;
    this.summary.lastActivity = "tool";
    this.transcript.append(`tool: ${description}`);
  }

  private onCommandDone(item: Record<string, unknown>): void {
    const output = clip(str(item.aggregated_output) ?? "", TOOL_RESULT_CHARS);
    const exitCode = num(item.exit_code);
    if (item.status === "completed" && (exitCode === undefined || exitCode === 0)) {
      this.transcript.append(`tool result: ${output}`);
      return;
    }
    const how = exitCode !== undefined ? `exit ${exitCode}` : (str(item.status) ?? "failed");
    this.transcript.append(`tool error: ${output ? `${how}: ${output}` : how}`);
  }
}
