/**
 * Tool definitions, their JSON Schemas, and validation that turns a caller's
 * `arguments` into typed input (PROTOCOL.md §5). Validation is strict: an
 * unknown argument or a wrong type is an INVALID_ARGUMENT error, never a
 * silently ignored value.
 */
import { DispatchError, ERROR_CODES } from "./errors.js";

export const TOOL_NAMES = ["claude_run", "claude_start", "claude_wait", "claude_kill"] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

export function isToolName(name: string): name is ToolName {
  return (TOOL_NAMES as readonly string[]).includes(name);
}

export const LIMITS = {
  defaultTimeoutMs: 120_000,
  minTimeoutMs: 1_000,
  maxTimeoutMs: 86_400_000,
  defaultHoldMs: 30_000,
  maxHoldMs: 60_000,
} as const;

export interface RunInput {
  prompt: string;
  cwd: string;
  sessionId: string | undefined;
  timeoutMs: number;
}
export interface StartInput {
  prompt: string;
  cwd: string;
  sessionId: string | undefined;
}
export interface WaitInput {
  jobId: string;
  holdMs: number;
}
export interface KillInput {
  jobId: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function invalid(detail: string): DispatchError {
  return new DispatchError("INVALID_ARGUMENT", detail);
}

function checkKnown(args: Record<string, unknown>, allowed: readonly string[]): void {
  for (const key of Object.keys(args)) {
    if (!allowed.includes(key)) throw invalid(`unknown argument "${key}"; expected only ${allowed.join(", ")}`);
  }
}

/** Optional arguments may be omitted or null: models often send null for "not given". */
function present(args: Record<string, unknown>, key: string): boolean {
  return args[key] !== undefined && args[key] !== null;
}

function requirePrompt(args: Record<string, unknown>): string {
  const prompt = args.prompt;
  if (typeof prompt !== "string") throw invalid(`"prompt" must be a string, got ${describeType(prompt)}`);
  if (prompt.trim() === "") throw invalid(`"prompt" must not be empty`);
  return prompt;
}

/** Shape only; that the directory exists is checked by the handler through its injected file check. */
function requireCwd(args: Record<string, unknown>): string {
  const cwd = args.cwd;
  if (typeof cwd !== "string") throw invalid(`"cwd" must be a string, got ${describeType(cwd)}`);
  if (cwd.trim() === "") throw invalid(`"cwd" must not be empty`);
  if (cwd.includes("\0")) throw invalid(`"cwd" must not contain NUL`);
  return cwd;
}

function optionalSessionId(args: Record<string, unknown>): string | undefined {
  if (!present(args, "session_id")) return undefined;
  const value = args.session_id;
  // A UUID can never be mistaken for a flag such as "--anything" (§10).
  if (typeof value !== "string" || !UUID.test(value)) {
    throw invalid(`"session_id" must be a session UUID as returned by an earlier run, got ${preview(value)}`);
  }
  return value.toLowerCase();
}

function requireJobId(args: Record<string, unknown>): string {
  const value = args.job_id;
  if (typeof value !== "string" || value.trim() === "") throw invalid(`"job_id" must be a non-empty string, got ${preview(value)}`);
  return value;
}

function integerIn(args: Record<string, unknown>, key: string, min: number, max: number): number {
  const value = args[key];
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw invalid(`"${key}" must be an integer number of milliseconds, got ${preview(value)}`);
  }
  if (value < min || value > max) throw invalid(`"${key}" must be between ${min} and ${max}, got ${value}`);
  return value;
}

function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

function preview(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  return describeType(value);
}

export function parseRunInput(args: Record<string, unknown>): RunInput {
  checkKnown(args, ["prompt", "cwd", "session_id", "timeout_ms"]);
  return {
    prompt: requirePrompt(args),
    cwd: requireCwd(args),
    sessionId: optionalSessionId(args),
    timeoutMs: present(args, "timeout_ms")
      ? integerIn(args, "timeout_ms", LIMITS.minTimeoutMs, LIMITS.maxTimeoutMs)
      : LIMITS.defaultTimeoutMs,
  };
}

export function parseStartInput(args: Record<string, unknown>): StartInput {
  checkKnown(args, ["prompt", "cwd", "session_id"]);
  return { prompt: requirePrompt(args), cwd: requireCwd(args), sessionId: optionalSessionId(args) };
}

export function parseWaitInput(args: Record<string, unknown>): WaitInput {
  checkKnown(args, ["job_id", "hold_ms"]);
  const jobId = requireJobId(args);
  // Larger holds are capped rather than refused: waiting less than asked is harmless (§5.3).
  const holdMs = present(args, "hold_ms")
    ? Math.min(integerIn(args, "hold_ms", 0, Number.MAX_SAFE_INTEGER), LIMITS.maxHoldMs)
    : LIMITS.defaultHoldMs;
  return { jobId, holdMs };
}

export function parseKillInput(args: Record<string, unknown>): KillInput {
  checkKnown(args, ["job_id"]);
  return { jobId: requireJobId(args) };
}

/* ------------------------------------------------------------------ *
 * Definitions, as listed by tools/list
 * ------------------------------------------------------------------ */

const PROMPT = { type: "string", minLength: 1, description: "The task or question for Claude Code, in plain language." };
const CWD = {
  type: "string",
  minLength: 1,
  description: "Absolute path of the project directory Claude Code works in. It must exist.",
};
const SESSION_ID = {
  type: "string",
  pattern: "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
  description: "session_id from an earlier result, to continue that conversation with its context. Omit to start fresh.",
};
const JOB_ID = { type: "string", minLength: 1, description: "job_id returned by claude_start (or by claude_run)." };

export const JOB_STATUSES = ["running", "completed", "failed", "killed", "error"] as const;
export type ReportStatus = (typeof JOB_STATUSES)[number];

/** One output schema for all four tools: a job report (§5.5). */
export const OUTPUT_SCHEMA = {
  type: "object",
  properties: {
    status: {
      type: "string",
      enum: [...JOB_STATUSES],
      description: "running, completed, failed or killed describe the job; error means this call itself failed.",
    },
    job_id: { type: "string" },
    session_id: { type: "string", description: "Pass as session_id to continue this conversation." },
    result: { type: "string", description: "Claude Code's final answer." },
    cost_usd: { type: "number" },
    num_turns: { type: "integer" },
    duration_ms: { type: "integer", description: "Agent-reported run time." },
    elapsed_s: { type: "integer", description: "Seconds since the job started, frozen when it finished." },
    already_finished: { type: "boolean", description: "claude_kill only: the job had finished before the kill." },
    permission_denials: {
      type: "array",
      items: { type: "object", properties: { tool_name: { type: "string" }, tool_input: {} }, required: ["tool_name"] },
    },
    api_error_status: { type: "integer", description: "HTTP status of the Anthropic API error behind an AGENT_ERROR." },
    error: {
      type: "object",
      properties: { code: { type: "string", enum: [...ERROR_CODES] }, detail: { type: "string" } },
      required: ["code", "detail"],
    },
  },
  required: ["status"],
} as const;

export interface ToolDefinition {
  name: ToolName;
  title: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema: typeof OUTPUT_SCHEMA;
  annotations: Record<string, boolean | string>;
}

export const TOOL_DEFINITIONS: readonly ToolDefinition[] = [
  {
    name: "claude_run",
    title: "Run Claude Code and wait",
    description:
      "Run Claude Code headless in a project directory and wait for its answer. Use for short tasks " +
      "(questions about the code, small edits) that finish within a couple of minutes. Returns the result " +
      "and a session_id: pass it back as session_id to continue the same conversation. For anything " +
      "longer, use claude_start and claude_wait instead: this call is killed at timeout_ms.",
    inputSchema: {
      type: "object",
      properties: {
        prompt: PROMPT,
        cwd: CWD,
        session_id: SESSION_ID,
        timeout_ms: {
          type: "integer",
          minimum: LIMITS.minTimeoutMs,
          maximum: LIMITS.maxTimeoutMs,
          description: `Kill the run after this many milliseconds (default ${LIMITS.defaultTimeoutMs}).`,
        },
      },
      required: ["prompt", "cwd"],
      additionalProperties: false,
    },
    outputSchema: OUTPUT_SCHEMA,
    annotations: { title: "Run Claude Code and wait", readOnlyHint: false, openWorldHint: true },
  },
  {
    name: "claude_start",
    title: "Start a Claude Code job",
    description:
      "Start Claude Code headless in the background and return a job_id at once. Use for long tasks " +
      "(features, refactors, test fixing). Then call claude_wait with the job_id until it is no longer " +
      "running, and claude_kill to stop it. Pass session_id to continue an earlier conversation.",
    inputSchema: {
      type: "object",
      properties: { prompt: PROMPT, cwd: CWD, session_id: SESSION_ID },
      required: ["prompt", "cwd"],
      additionalProperties: false,
    },
    outputSchema: OUTPUT_SCHEMA,
    annotations: { title: "Start a Claude Code job", readOnlyHint: false, openWorldHint: true },
  },
  {
    name: "claude_wait",
    title: "Wait for a Claude Code job",
    description:
      "Wait up to hold_ms for a job started by claude_start, then report it: still running (with elapsed " +
      "seconds: call claude_wait again), completed (with the result and session_id), failed (with the " +
      "error), or killed. Safe to call repeatedly.",
    inputSchema: {
      type: "object",
      properties: {
        job_id: JOB_ID,
        hold_ms: {
          type: "integer",
          minimum: 0,
          description: `How long to wait for the job to finish before reporting anyway (default ${LIMITS.defaultHoldMs}; values above ${LIMITS.maxHoldMs} are capped).`,
        },
      },
      required: ["job_id"],
      additionalProperties: false,
    },
    outputSchema: OUTPUT_SCHEMA,
    annotations: { title: "Wait for a Claude Code job", readOnlyHint: true, openWorldHint: false },
  },
  {
    name: "claude_kill",
    title: "Stop a Claude Code job",
    description:
      "Stop a running job and every process it started. Use when a job is stuck or no longer needed. " +
      "Killing a job that already finished changes nothing and says so.",
    inputSchema: {
      type: "object",
      properties: { job_id: JOB_ID },
      required: ["job_id"],
      additionalProperties: false,
    },
    outputSchema: OUTPUT_SCHEMA,
    annotations: {
      title: "Stop a Claude Code job",
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: true,
      openWorldHint: false,
    },
  },
];
