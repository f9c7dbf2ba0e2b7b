/**
 * The only file that knows Claude Code: its flags, its environment quirks and
 * the shapes of its output (PROTOCOL.md §7). Observed on CLI 2.1.197 and 2.1.332.
 */
import { dirname } from "node:path";

import type { ErrorCode } from "../../core/errors.js";
import { isRecord } from "../../server/jsonrpc.js";
import { parseStreamingMember } from "./json-stream.js";
import { LineReader } from "../../core/lines.js";
import type { AgentIdentity, AttachRequest, ChildExit, ChildHandle, OutputFiles, SpawnRequest } from "../../hosts/local/process.js";
import { Transcript } from "../../core/transcript.js";

export const DEFAULT_CLAUDE_BIN = "claude";

/** `--permission-mode` values accepted by CLI 2.1.197 and 2.1.332 alike. */
export const PERMISSION_MODES = ["default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"] as const;
export type PermissionMode = (typeof PERMISSION_MODES)[number];

/** How the agent may act (§5.6). Every value is validated before it gets here. */
export interface AgentOptions {
  model?: string;
  permissionMode?: PermissionMode;
  allowedTools?: string[];
  disallowedTools?: string[];
  maxTurns?: number;
  maxBudgetUsd?: number;
  appendSystemPrompt?: string;
  addDirs?: string[];
}

export interface AgentSpec {
  prompt: string;
  cwd: string;
  /** A validated UUID (§5): nothing else may reach argv. */
  resumeSessionId?: string;
  options?: AgentOptions;
  /** Files for the agent's stdout and stderr (§15); pipes when absent. */
  output?: OutputFiles;
  /** The tree marker to give the agent, made and recorded before the spawn (§15.2). */
  marker?: string;
  /** The prompt as a file already on disk (§15.2): then it is the agent's stdin, and `prompt` is not read. */
  promptFile?: string;
}

/**
 * The argv after the program name (§10). Every value travels as `--flag=value`,
 * so no value, whatever it starts with, can be read as a flag of its own.
 */
export function claudeArgs(spec: Pick<AgentSpec, "resumeSessionId" | "options">): string[] {
  const args = [
    "-p", // print mode: run headless and exit; the prompt is read from stdin
    "--output-format",
    "stream-json", // one JSON event per line as the agent works, ending with the result event
    "--verbose", // required by stream-json in print mode
  ];
  const options = spec.options ?? {};
  if (options.model !== undefined) args.push(`--model=${options.model}`);
  if (options.permissionMode !== undefined) args.push(`--permission-mode=${options.permissionMode}`);
  // Repeated flags accumulate; one tool rule per flag keeps rules with spaces or commas whole.
  for (const rule of options.allowedTools ?? []) args.push(`--allowedTools=${rule}`);
  for (const rule of options.disallowedTools ?? []) args.push(`--disallowedTools=${rule}`);
  if (options.maxTurns !== undefined) args.push(`--max-turns=${options.maxTurns}`);
  if (options.maxBudgetUsd !== undefined) args.push(`--max-budget-usd=${options.maxBudgetUsd}`);
  if (options.appendSystemPrompt !== undefined) args.push(`--append-system-prompt=${options.appendSystemPrompt}`);
  for (const directory of options.addDirs ?? []) args.push(`--add-dir=${directory}`);
  // Continue that conversation instead of paying to rebuild its context.
  if (spec.resumeSessionId !== undefined) args.push(`--resume=${spec.resumeSessionId}`);
  return args;
}

/**
 * The agent's environment. CLAUDECODE and CLAUDE_CODE_ENTRYPOINT are set when
 * this server runs under Claude Code, and since CLI 2.1.39 they make a child
 * `claude` refuse to start as a "nested session". Our own depth counter
 * (§7.4) is the recursion guard instead.
 */
export function agentEnvironment(
  base: Readonly<Record<string, string | undefined>>,
  extra: Readonly<Record<string, string>>,
): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...base, ...extra };
  delete env.CLAUDECODE;
  delete env.CLAUDE_CODE_ENTRYPOINT;
  return env;
}

export interface PermissionDenial {
  tool_name: string;
  tool_input?: unknown;
}

/** What we keep of Claude Code's result event. */
export interface AgentResult {
  sessionId?: string;
  text?: string;
  /** The text was written to the job's result file (§15.4) instead: its length. */
  textChars?: number;
  costUsd?: number;
  numTurns?: number;
  durationMs?: number;
  permissionDenials?: PermissionDenial[];
  apiErrorStatus?: number;
}

/** How the agent process ended, when it was this server's child (§15.2). */
export interface ExitStatus {
  code: number | null;
  signal: string | null;
}

export type AgentOutcome =
  | { ok: true; result: AgentResult; exit?: ExitStatus }
  | { ok: false; code: ErrorCode; detail: string; result?: AgentResult; exit?: ExitStatus };

interface ResultEvent {
  type: "result";
  [key: string]: unknown;
}

function isResultEvent(value: unknown): value is ResultEvent {
  return typeof value === "object" && value !== null && !Array.isArray(value) && (value as { type?: unknown }).type === "result";
}

/**
 * Finds the final result event. CLI 2.1.x prints one object; some versions
 * print a JSON array of events; stream-json is NDJSON. The last result wins.
 * Returns undefined when there is no result event at all.
 */
export function findResultEvent(stdout: string): ResultEvent | undefined {
  const text = stdout.trim();
  if (text === "") return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (isResultEvent(parsed)) return parsed;
    if (Array.isArray(parsed)) return parsed.findLast(isResultEvent);
    return undefined;
  } catch {
    // Not a single JSON value: try NDJSON below.
  }
  let last: ResultEvent | undefined;
  for (const line of text.split("\n")) {
    const candidate = line.trim();
    if (!candidate.startsWith("{")) continue;
    try {
      const parsed: unknown = JSON.parse(candidate);
      if (isResultEvent(parsed)) last = parsed;
    } catch {
      // A stray non-JSON line (a warning) does not hide the result after it.
    }
  }
  return last;
}

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);
const num = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined);

function summarizeDenials(value: unknown): PermissionDenial[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.flatMap((entry): PermissionDenial[] => {
    if (typeof entry !== "object" || entry === null) return [];
    const record = entry as Record<string, unknown>;
    const toolName = str(record.tool_name);
    if (!toolName) return [];
    return [{ tool_name: toolName, ...(record.tool_input === undefined ? {} : { tool_input: record.tool_input }) }];
  });
}

/** Reads a result event by key, never by position: field order differs between CLI versions. */
export function toAgentResult(event: ResultEvent): AgentResult {
  const result: AgentResult = {};
  const sessionId = str(event.session_id);
  const text = str(event.result);
  const costUsd = num(event.total_cost_usd);
  const numTurns = num(event.num_turns);
  const durationMs = num(event.duration_ms);
  const denials = summarizeDenials(event.permission_denials);
  const apiErrorStatus = num(event.api_error_status);
  if (sessionId !== undefined) result.sessionId = sessionId;
  if (text !== undefined) result.text = text;
  if (costUsd !== undefined) result.costUsd = costUsd;
  if (numTurns !== undefined) result.numTurns = numTurns;
  if (durationMs !== undefined) result.durationMs = durationMs;
  if (denials !== undefined && denials.length > 0) result.permissionDenials = denials;
  if (apiErrorStatus !== undefined) result.apiErrorStatus = apiErrorStatus;
  return result;
}

/** The message of an error result: `result` when present, else `errors` (max turns and budget print no `result`). */
function errorMessage(event: ResultEvent): string {
  const text = str(event.result);
  if (text) return text;
  const errors = Array.isArray(event.errors) ? event.errors.filter((e): e is string => typeof e === "string") : [];
  if (errors.length > 0) return errors.join("; ");
  const subtype = str(event.subtype);
  return subtype ? `Claude Code reported ${subtype}` : "Claude Code reported an error";
}

const SESSION_NOT_FOUND = /No conversation found with session ID: ?([^\s]*)/;

/**
 * The start of text, at most max characters, as a copy of its own: V8 keeps a
 * slice's whole parent alive, and the parent may be megabytes of agent output.
 */
const clip = (text: string, max: number): string => {
  const trimmed = text.trim();
  const kept = trimmed.length > max ? `${trimmed.slice(0, max)}…` : trimmed;
  return kept === "" ? kept : (JSON.parse(JSON.stringify(kept)) as string);
};

const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim();

/** The end of text, at most max characters, copied for the same reason as clip. */
const tail = (text: string, max: number): string => {
  const trimmed = text.trim();
  const kept = trimmed.length > max ? `…${trimmed.slice(-max)}` : trimmed;
  return kept === "" ? kept : (JSON.parse(JSON.stringify(kept)) as string);
};

/** A short, single-line description of a tool call: "Bash · npm test", "Edit · src/app.ts". */
export function describeToolUse(name: string, input: unknown): string {
  if (!isRecord(input)) return name;
  const key = ["command", "file_path", "notebook_path", "path", "pattern", "url", "query", "description", "prompt"].find(
    (candidate) => typeof input[candidate] === "string" && input[candidate] !== "",
  );
  const detail = key ? (input[key] as string) : Object.keys(input).length > 0 ? JSON.stringify(input) : "";
  return detail ? `${name} · ${clip(oneLine(detail), 80)}` : name;
}

/** What a running job has done so far, from its stream-json events (§5.3, §5.8). */
export interface LiveSummary {
  sessionId?: string;
  model?: string;
  /** Model turns so far: distinct assistant messages. */
  turns: number;
  /** The latest tool call, as describeToolUse renders it. */
  lastTool?: string;
  /** The latest assistant text, clipped. */
  lastText?: string;
  /** Which of the two came last. */
  lastActivity?: "tool" | "text";
  /** Known only from the result event. */
  costUsd?: number;
  /** Events read so far: grows with every line the agent prints. */
  events: number;
}

export interface ClaudeStreamOptions {
  /** The longest single output line accepted; longer is OUTPUT_TOO_LARGE. */
  maxLineBytes: number;
  /** Transcript size kept for claude_output. */
  transcriptChars: number;
  onOverflow(): void;
  onMalformedLine?(line: string): void;
  /**
   * The output as a file that can be read again (§15). Then lines over
   * DEFERRED_LINE_BYTES are not held while they stream by: a long final
   * result is read back from the file once, when the agent has ended.
   */
  source?: OutputSource;
}

/** The agent's output file, read again, and where a long result's text is written (§15.4). */
export interface OutputSource {
  read(offset: number, length: number): Buffer | undefined;
  /** Starts the result file afresh; returns how to add text to it and close it. Without it (a replay), a long result's text is skipped. */
  createResult?(): { write(text: string): void; close(): void };
}

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
export class ClaudeStream {
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
    this.transcript = new Transcript(options.transcriptChars);
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

  /** A result line too long to hold: its text is streamed into the result file, the rest parsed. */
  private readDeferredResult(source: OutputSource, { offset, length }: { offset: number; length: number }): void {
    this.deferredResult = undefined;
    let sink: ReturnType<NonNullable<OutputSource["createResult"]>> | undefined;
    let sinkFailed = false;
    const write = (text: string): void => {
      if (sinkFailed || !sink) return;
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
      parsed = parseStreamingMember((at, size) => source.read(at, size), offset, length, "result", write);
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
    if (this.result && parsed.chars !== undefined) this.streamedChars = parsed.chars;
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
    if (sessionId) this.summary.sessionId = sessionId;
    switch (event.type) {
      case "system":
        if (event.subtype === "init") {
          const model = str(event.model);
          if (model) this.summary.model = model;
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
        this.summary.lastText = tail(block.text, LAST_TEXT_CHARS);
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

/**
 * Free space below which an agent that ended without a result event is taken
 * to have lost its output to a full disk (§7.3). A write to a full disk fails
 * once the last free block is used, so free space is then close to zero (the
 * probe's bavail already leaves out root's reserve); the margin allows for
 * what was freed between the failed write and the probe, such as temporary
 * files deleted as the agent exited. 1 MiB is too little for an agent to
 * work in anyway, while a disk that is merely low, with megabytes left, is
 * not blamed for a failure of the agent's own.
 */
export const DISK_FULL_BYTES = 1024 * 1024;

/** The free space of the disk holding an agent's stdout.jsonl, measured after the agent ended (§7.3). */
export interface StateDisk {
  /** The folder of stdout.jsonl. */
  dir: string;
  /** Bytes available to this server; undefined when unknown. */
  freeBytes: number | undefined;
}

/**
 * Turns how the agent ended into an outcome (§7.3). The CLI exits 1 on API
 * errors yet still prints its result event, with is_error:true and a message
 * such as "Not logged in · Please run /login"; that message is the answer, so
 * the output is read before the exit code. `subtype` may say "success" on such
 * failures: only `is_error` is trusted.
 */
export function interpretExit(
  exit: ChildExit,
  stream: Pick<ClaudeStream, "overflow" | "resultEvent" | "printedStart"> & Partial<Pick<ClaudeStream, "streamedResultChars">>,
  bin: string,
  disk?: StateDisk,
): AgentOutcome {
  if (exit.spawnError) {
    if (exit.spawnError.outputFiles) return { ok: false, code: "STATE_ERROR", detail: exit.spawnError.message };
    if (exit.spawnError.code === "ENOENT" && !exit.spawnError.missingCwd) {
      const detail =
        bin === DEFAULT_CLAUDE_BIN
          ? "claude not found on PATH; install Claude Code or set CLAUDE_DISPATCH_CLAUDE_BIN"
          : `${bin} not found (CLAUDE_DISPATCH_CLAUDE_BIN); check the path`;
      return { ok: false, code: "SPAWN_FAILED", detail };
    }
    return { ok: false, code: "SPAWN_FAILED", detail: `could not start ${bin}: ${exit.spawnError.message}` };
  }
  if (stream.overflow) {
    return { ok: false, code: "OUTPUT_TOO_LARGE", detail: "an output line of the agent passed the size limit (CLAUDE_DISPATCH_MAX_OUTPUT_BYTES); it was stopped" };
  }

  const event = stream.resultEvent();
  if (event && "resultNotStored" in stream && stream.resultNotStored) {
    return { ok: false, code: "STATE_ERROR", detail: "the agent finished, but its result could not be written to the job's result.txt (is the disk full?); it is in the job's stdout.jsonl" };
  }
  if (event) {
    const result = toAgentResult(event);
    const streamedChars = stream.streamedResultChars?.();
    if (streamedChars !== undefined) {
      delete result.text;
      result.textChars = streamedChars;
    }
    if (event.is_error === true) {
      const message = errorMessage(event);
      // With stream-json an unknown --resume id is an error result rather than only stderr.
      const unknownSession = SESSION_NOT_FOUND.exec(message);
      if (unknownSession) return { ok: false, code: "SESSION_NOT_FOUND", detail: sessionNotFound(unknownSession[1]), result };
      const status = result.apiErrorStatus === undefined ? "" : ` (API status ${result.apiErrorStatus})`;
      return { ok: false, code: "AGENT_ERROR", detail: `${message}${status}`, result };
    }
    return { ok: true, result };
  }

  const notFound = SESSION_NOT_FOUND.exec(exit.stderrTail);
  if (notFound) return { ok: false, code: "SESSION_NOT_FOUND", detail: sessionNotFound(notFound[1]) };
  // No result and a full disk: the result most likely could not be written, whatever the exit said (§7.3).
  if (disk?.freeBytes !== undefined && disk.freeBytes < DISK_FULL_BYTES) {
    const detail = `the disk holding the state directory is full (${disk.freeBytes} bytes free in ${disk.dir}): the agent's output could not be written to stdout.jsonl; free space and run it again`;
    return { ok: false, code: "STATE_ERROR", detail };
  }
  if (exit.unobserved) {
    const stderr = clip(exit.stderrTail, 2000);
    const detail = "claude ended without printing a result; it was started by an earlier server, so its exit status is unknown";
    return { ok: false, code: "AGENT_LOST", detail: stderr ? `${detail}; its stderr ends: ${stderr}` : detail };
  }
  if (exit.exitCode !== 0) {
    const how = exit.exitCode === null ? `was killed by ${exit.signal ?? "a signal"}` : `exited with code ${exit.exitCode}`;
    const stderr = clip(exit.stderrTail, 2000);
    return { ok: false, code: "AGENT_EXITED", detail: stderr ? `claude ${how}: ${stderr}` : `claude ${how} and printed no result` };
  }
  const shown = clip(stream.printedStart(), 300);
  return { ok: false, code: "BAD_OUTPUT", detail: shown ? `claude printed no result event: ${shown}` : "claude exited 0 and printed nothing" };
}

function sessionNotFound(id: string | undefined): string {
  return `No conversation found with session ID ${id ?? ""} in this cwd`.replace("  ", " ");
}

/** What the job registry needs from an agent: its outcome, its progress, and a way to stop it. */
export interface AgentRun {
  readonly pid: number | undefined;
  /** The tree marker's value when known at spawn: recorded with the pid at once (§15.2). */
  readonly marker: string | undefined;
  /** Who the agent is, for its record (§15.2). */
  identity(): Promise<AgentIdentity>;
  readonly outcome: Promise<AgentOutcome>;
  /** Resolves once the output already written was read (an adopted agent's), so the job is served caught up. */
  readonly ready: Promise<void>;
  kill(): Promise<{ survivors: number[]; undetermined?: true }>;
  live(): LiveSummary;
  onActivity(listener: () => void): () => void;
  readonly transcript: Transcript;
}

export type AgentLauncher = (spec: AgentSpec) => AgentRun;

/** An agent an earlier server started, as its record describes it (§15.3). */
export interface AgentToAttach {
  /** Undefined for an agent known to be gone whose pid was never recorded. */
  pid: number | undefined;
  startTime: string | undefined;
  marker: string | undefined;
  output: OutputFiles;
}

export type AgentAttacher = (agent: AgentToAttach) => AgentRun;

export interface ClaudeLauncherOptions {
  start(request: SpawnRequest): ChildHandle;
  attach(request: AttachRequest): ChildHandle;
  /** Reads the output files again, for a long result line (§15.4); without it, long lines are held in memory. */
  files?: {
    readRange(file: string, offset: number, length: number): Buffer | undefined;
    create(file: string): { write(text: string): void; close(): void };
    /** Bytes free on the disk holding dir; undefined when unknown. Asked only when an agent ended without a result (§7.3). */
    freeBytes?(dir: string): number | undefined;
  };
  bin: string;
  env: Readonly<Record<string, string | undefined>>;
  maxLineBytes: number;
  transcriptChars: number;
  stderrTailBytes: number;
  onMalformedLine?(line: string): void;
}

/** A probe that throws knows no more than one that answers undefined. */
function measureDisk(probe: (dir: string) => number | undefined, dir: string): StateDisk {
  try {
    return { dir, freeBytes: probe(dir) };
  } catch {
    return { dir, freeBytes: undefined };
  }
}

export interface ClaudeAgents {
  launch: AgentLauncher;
  attach: AgentAttacher;
}

export function createClaudeAgents(options: ClaudeLauncherOptions): ClaudeAgents {
  /** Reads one agent's output, whoever started it. */
  const follow = (output: OutputFiles | undefined, start: (onStdout: (chunk: Buffer) => void) => ChildHandle): AgentRun => {
    let handle: ChildHandle | undefined;
    const files = options.files;
    const stream = new ClaudeStream({
      maxLineBytes: options.maxLineBytes,
      transcriptChars: options.transcriptChars,
      // An agent printing a line this long is broken; stop it rather than buffer more.
      onOverflow: () => void handle?.killTree(),
      ...(options.onMalformedLine ? { onMalformedLine: options.onMalformedLine } : {}),
      ...(output?.resultPath && files
        ? {
            source: {
              read: (offset: number, length: number) => files.readRange(output.stdoutPath, offset, length),
              createResult: () => files.create(output.resultPath as string),
            },
          }
        : {}),
    });
    handle = start((chunk) => stream.push(chunk));
    const started = handle;
    return {
      pid: started.pid,
      marker: started.marker,
      identity: () => started.identity(),
      outcome: started.exited.then((exit) => {
        stream.end();
        // Asked only when there is no result to read: a full disk may be why (§7.3).
        const probe = files?.freeBytes;
        const noResult = !exit.spawnError && !stream.overflow && !stream.resultEvent();
        const disk = output && probe && noResult ? measureDisk(probe, dirname(output.stdoutPath)) : undefined;
        const outcome = interpretExit(exit, stream, options.bin, disk);
        stream.forgetResult();
        // An attached agent was not our child: its exit status is unknown, not null.
        return exit.unobserved || exit.spawnError ? outcome : { ...outcome, exit: { code: exit.exitCode, signal: exit.signal } };
      }),
      ready: started.ready ?? Promise.resolve(),
      kill: () => started.killTree(),
      live: () => stream.live(),
      onActivity: (listener) => stream.onActivity(listener),
      transcript: stream.transcript,
    };
  };
  return {
    launch: (spec) =>
      follow(spec.output, (onStdout) =>
        options.start({
          command: options.bin,
          args: claudeArgs(spec),
          cwd: spec.cwd,
          env: options.env,
          // Never argv: no quoting, no shell, no length limit. From the prompt file when there is one, so it arrives whole (§15.2).
          stdin: spec.promptFile ? { file: spec.promptFile } : spec.prompt,
          onStdout,
          stderrTailBytes: options.stderrTailBytes,
          ...(spec.output ? { output: spec.output } : {}),
          ...(spec.marker ? { marker: spec.marker } : {}),
        }),
      ),
    attach: (agent) => follow(agent.output, (onStdout) => options.attach({ ...agent, onStdout, stderrTailBytes: options.stderrTailBytes })),
  };
}
