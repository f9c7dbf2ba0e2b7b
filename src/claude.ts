/**
 * The only file that knows Claude Code: its flags, its environment quirks and
 * the shapes of its output (PROTOCOL.md §7). Observed on CLI 2.1.197 and 2.1.332.
 */
import type { ErrorCode } from "./errors.js";
import type { ChildExit, ChildHandle, SpawnRequest } from "./process.js";

export const DEFAULT_CLAUDE_BIN = "claude";

export interface AgentSpec {
  prompt: string;
  cwd: string;
  /** A validated UUID (§5): nothing else may reach argv. */
  resumeSessionId?: string;
}

/** The argv after the program name. Every element is a constant or a validated UUID. */
export function claudeArgs(spec: Pick<AgentSpec, "resumeSessionId">): string[] {
  const args = [
    "-p", // print mode: run headless and exit; the prompt is read from stdin
    "--output-format",
    "json", // one result object with result, session_id, cost and turns
  ];
  if (spec.resumeSessionId !== undefined) {
    args.push("--resume", spec.resumeSessionId); // continue that conversation instead of paying to rebuild context
  }
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
  costUsd?: number;
  numTurns?: number;
  durationMs?: number;
  permissionDenials?: PermissionDenial[];
  apiErrorStatus?: number;
}

export type AgentOutcome =
  | { ok: true; result: AgentResult }
  | { ok: false; code: ErrorCode; detail: string; result?: AgentResult };

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

const clip = (text: string, max: number): string => {
  const trimmed = text.trim();
  return trimmed.length > max ? `${trimmed.slice(0, max)}…` : trimmed;
};

/**
 * Turns how the agent ended into an outcome (§7.3). The CLI exits 1 on API
 * errors yet still prints its result JSON, with is_error:true and a message
 * such as "Not logged in · Please run /login"; that message is the answer, so
 * stdout is read before the exit code. `subtype` may say "success" on such
 * failures: only `is_error` is trusted.
 */
export function interpretExit(exit: ChildExit, bin: string): AgentOutcome {
  if (exit.spawnError) {
    if (exit.spawnError.code === "ENOENT" && !exit.spawnError.missingCwd) {
      const detail =
        bin === DEFAULT_CLAUDE_BIN
          ? "claude not found on PATH; install Claude Code or set CLAUDE_DISPATCH_CLAUDE_BIN"
          : `${bin} not found (CLAUDE_DISPATCH_CLAUDE_BIN); check the path`;
      return { ok: false, code: "SPAWN_FAILED", detail };
    }
    return { ok: false, code: "SPAWN_FAILED", detail: `could not start ${bin}: ${exit.spawnError.message}` };
  }
  if (exit.stdoutOverflow) {
    return { ok: false, code: "OUTPUT_TOO_LARGE", detail: "the agent's output passed the capture limit (CLAUDE_DISPATCH_MAX_OUTPUT_BYTES); it was stopped" };
  }

  const event = findResultEvent(exit.stdout);
  if (event) {
    const result = toAgentResult(event);
    if (event.is_error === true) {
      const status = result.apiErrorStatus === undefined ? "" : ` (API status ${result.apiErrorStatus})`;
      return { ok: false, code: "AGENT_ERROR", detail: `${errorMessage(event)}${status}`, result };
    }
    return { ok: true, result };
  }

  const notFound = SESSION_NOT_FOUND.exec(exit.stderrTail);
  if (notFound) {
    return { ok: false, code: "SESSION_NOT_FOUND", detail: `No conversation found with session ID ${notFound[1] ?? ""} in this cwd`.trim() };
  }
  if (exit.exitCode !== 0) {
    const how = exit.exitCode === null ? `was killed by ${exit.signal ?? "a signal"}` : `exited with code ${exit.exitCode}`;
    const stderr = clip(exit.stderrTail, 2000);
    return { ok: false, code: "AGENT_EXITED", detail: stderr ? `claude ${how}: ${stderr}` : `claude ${how} and printed no result` };
  }
  const shown = clip(exit.stdout, 300);
  return { ok: false, code: "BAD_OUTPUT", detail: shown ? `claude printed no result JSON: ${shown}` : "claude exited 0 and printed nothing" };
}

/** What the job registry needs from an agent: its outcome and a way to stop it. */
export interface AgentRun {
  readonly pid: number | undefined;
  readonly outcome: Promise<AgentOutcome>;
  kill(): Promise<{ survivors: number[] }>;
}

export type AgentLauncher = (spec: AgentSpec) => AgentRun;

export interface ClaudeLauncherOptions {
  start(request: SpawnRequest): ChildHandle;
  bin: string;
  env: Readonly<Record<string, string | undefined>>;
  maxStdoutBytes: number;
  stderrTailBytes: number;
}

export function createClaudeLauncher(options: ClaudeLauncherOptions): AgentLauncher {
  return (spec) => {
    const handle = options.start({
      command: options.bin,
      args: claudeArgs(spec),
      cwd: spec.cwd,
      env: options.env,
      stdin: spec.prompt, // never argv: no quoting, no shell, no length limit
      maxStdoutBytes: options.maxStdoutBytes,
      stderrTailBytes: options.stderrTailBytes,
    });
    return {
      pid: handle.pid,
      outcome: handle.exited.then((exit) => interpretExit(exit, options.bin)),
      kill: () => handle.killTree(),
    };
  };
}
