/**
 * Validation that turns a caller's `arguments` into typed input (PROTOCOL.md
 * §5). Strict: an unknown argument or a wrong type is an INVALID_ARGUMENT
 * error, never a silently ignored value; what the operator allows is the
 * policy's to decide afterwards (§5.6).
 */
import type { AgentOffer, AgentOptions, HostOffer } from "../agent/options.js";
import { DispatchError, quoted } from "../core/errors.js";
import { LISTED, LIST_STATUSES, decodeCursor, type ListInput, type ListStatus } from "./list-cursor.js";

export const LIMITS = {
  minTimeoutMs: 1_000,
  maxTimeoutMs: 86_400_000,
  defaultHoldMs: 30_000,
  maxHoldMs: 60_000,
  maxTurns: 10_000,
  maxBudgetUsd: 10_000,
  maxToolRules: 100,
  maxToolRuleChars: 500,
  maxAddDirs: 20,
  maxSystemPromptChars: 100_000,
  maxRespondMessageChars: 2_000,
  defaultSessions: 20,
  maxSessions: 200,
} as const;

/** What the operator's configuration changes in the tools' shapes. */
export interface ToolSettings {
  defaultTimeoutMs: number;
  maxResultChars: number;
  /** The agents this server offers, each with the modes a call may ask of it (§5.6, §7). */
  agents: readonly AgentOffer[];
  /** The agent a call naming none gets when it is offered (§7.5). */
  homeAgent: string;
  /** Other machines a call may name (§21); absent: none. */
  hosts?: readonly HostOffer[];
}

export interface RunInput {
  agent: string;
  /** Another machine the operator named (§21); undefined: this one. */
  host: string | undefined;
  prompt: string;
  cwd: string;
  sessionId: string | undefined;
  timeoutMs: number;
  options: AgentOptions;
  worktree: boolean | undefined;
}
export interface StartInput {
  agent: string;
  /** Another machine the operator named (§21); undefined: this one. */
  host: string | undefined;
  prompt: string;
  cwd: string;
  sessionId: string | undefined;
  options: AgentOptions;
  worktree: boolean | undefined;
}
export const WORKTREE_ACTIONS = ["diff", "merge", "discard"] as const;
export interface WorktreeInput {
  jobId: string;
  action: (typeof WORKTREE_ACTIONS)[number];
  offset: number;
  limit: number;
}
export interface WaitInput {
  jobId: string;
  holdMs: number;
}
export interface KillInput {
  jobId: string;
}
export interface RespondInput {
  jobId: string;
  requestId: string;
  decision: "allow" | "deny";
  message: string | undefined;
}
export const OUTPUT_VIEWS = ["result", "transcript", "approvals"] as const;
export interface OutputInput {
  jobId: string;
  view: (typeof OUTPUT_VIEWS)[number];
  offset: number;
  limit: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function invalid(detail: string): DispatchError {
  return new DispatchError("INVALID_ARGUMENT", detail);
}

/** `shown`: the arguments the message lists, when some accepted ones are not offered here (agent, host). */
export function checkKnown(
  args: Record<string, unknown>,
  allowed: readonly string[],
  shown: readonly string[] = allowed,
): void {
  for (const key of Object.keys(args)) {
    if (!allowed.includes(key)) throw invalid(`unknown argument ${quoted(key)}; expected only ${shown.join(", ")}`);
  }
}

/** A required argument that is absent (or null) is said to be so, not described as the wrong type. */
export function required(args: Record<string, unknown>, key: string): void {
  if (!present(args, key)) throw invalid(`${quoted(key)} is required`);
}

/** Optional arguments may be omitted or null: models often send null for "not given". */
export function present(args: Record<string, unknown>, key: string): boolean {
  return args[key] !== undefined && args[key] !== null;
}

export function requirePrompt(args: Record<string, unknown>): string {
  required(args, "prompt");
  const prompt = args.prompt;
  if (typeof prompt !== "string") throw invalid(`"prompt" must be a string, got ${describeType(prompt)}`);
  if (prompt.trim() === "") throw invalid(`"prompt" must not be empty`);
  return prompt;
}

/** Shape only; that the directory exists is checked by the handler through its injected file check. */
export function requireCwd(args: Record<string, unknown>): string {
  required(args, "cwd");
  const cwd = args.cwd;
  if (typeof cwd !== "string") throw invalid(`"cwd" must be a string, got ${describeType(cwd)}`);
  if (cwd.trim() === "") throw invalid(`"cwd" must not be empty`);
  if (cwd.includes("\0")) throw invalid(`"cwd" must not contain NUL`);
  return cwd;
}

export function optionalSessionId(args: Record<string, unknown>): string | undefined {
  if (!present(args, "session_id")) return undefined;
  const value = args.session_id;
  // A UUID can never be mistaken for a flag such as "--anything" (§10).
  if (typeof value !== "string" || !UUID.test(value)) {
    throw invalid(`"session_id" must be a session UUID as returned by an earlier run, got ${preview(value)}`);
  }
  return value.toLowerCase();
}

function requireJobId(args: Record<string, unknown>): string {
  required(args, "job_id");
  const value = args.job_id;
  if (typeof value !== "string" || value.trim() === "")
    throw invalid(`"job_id" must be a non-empty string, got ${preview(value)}`);
  return value;
}

export function integerIn(
  args: Record<string, unknown>,
  key: string,
  min: number,
  max: number,
  unit = "number of milliseconds",
): number {
  const value = args[key];
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw invalid(`"${key}" must be an integer ${unit}, got ${preview(value)}`);
  }
  if (value < min || value > max) throw invalid(`"${key}" must be between ${min} and ${max}, got ${value}`);
  return value;
}

export function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

/** A received value in a message: a string as every echo is (quoted, §10); other values by their type. */
export function preview(value: unknown): string {
  if (typeof value === "string") return quoted(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  return describeType(value);
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

export function parseListInput(args: Record<string, unknown>): ListInput {
  checkKnown(args, ["status", "limit", "cursor"]);
  const statuses = present(args, "status") ? listStatuses(args.status) : undefined;
  const limit = present(args, "limit") ? integerIn(args, "limit", 1, LISTED.max, "number of jobs") : undefined;
  if (!present(args, "cursor")) return { statuses, limit: limit ?? LISTED.default, after: undefined };
  const cursor = typeof args.cursor === "string" ? decodeCursor(args.cursor) : undefined;
  if (!cursor)
    throw invalid(`"cursor" must be the next_cursor of an earlier claude_list page, got ${preview(args.cursor)}`);
  // The next page keeps the filter and limit of the one before, unless the call names its own (§5.7).
  return { statuses: statuses ?? cursor.statuses, limit: limit ?? cursor.limit, after: cursor.after };
}

/** One status or several: models send either. */
function listStatuses(value: unknown): ListStatus[] {
  const values = typeof value === "string" ? [value] : value;
  if (
    !Array.isArray(values) ||
    values.length === 0 ||
    !values.every((status) => (LIST_STATUSES as readonly unknown[]).includes(status))
  ) {
    throw invalid(
      `"status" must be one of ${LIST_STATUSES.join(", ")}, or a non-empty array of them, got ${preview(value)}`,
    );
  }
  return [...new Set(values as ListStatus[])];
}

export function parseOutputInput(args: Record<string, unknown>, settings: ToolSettings): OutputInput {
  checkKnown(args, ["job_id", "view", "offset", "limit"]);
  const jobId = requireJobId(args);
  let view: OutputInput["view"] = "result";
  if (present(args, "view")) {
    if (!(OUTPUT_VIEWS as readonly unknown[]).includes(args.view))
      throw invalid(`"view" must be "result", "transcript" or "approvals", got ${preview(args.view)}`);
    view = args.view as OutputInput["view"];
  }
  return {
    jobId,
    view,
    offset: present(args, "offset") ? integerIn(args, "offset", 0, Number.MAX_SAFE_INTEGER, "number of characters") : 0,
    limit: present(args, "limit")
      ? integerIn(args, "limit", 1, settings.maxResultChars, "number of characters")
      : settings.maxResultChars,
  };
}

export function parseRespondInput(args: Record<string, unknown>): RespondInput {
  checkKnown(args, ["job_id", "request_id", "decision", "message"]);
  const jobId = requireJobId(args);
  required(args, "request_id");
  const requestId = args.request_id;
  // A number is taken as the string it would be: models send 1 for "1".
  const request = typeof requestId === "number" && Number.isSafeInteger(requestId) ? String(requestId) : requestId;
  if (typeof request !== "string" || !/^[1-9][0-9]{0,8}$/.test(request)) {
    throw invalid(`"request_id" must be the request_id claude_wait reported, such as "1", got ${preview(requestId)}`);
  }
  // In the order of §5, each argument checked whole before the next: a bad
  // request_id is named before a missing decision.
  required(args, "decision");
  const decision = args.decision;
  if (decision !== "allow" && decision !== "deny")
    throw invalid(`"decision" must be "allow" or "deny", got ${preview(decision)}`);
  let message: string | undefined;
  if (present(args, "message")) {
    if (typeof args.message !== "string" || args.message.length > LIMITS.maxRespondMessageChars) {
      throw invalid(
        `"message" must be a string of at most ${LIMITS.maxRespondMessageChars} characters, got ` +
          `${preview(args.message)}`,
      );
    }
    message = args.message.trim() || undefined;
  }
  return { jobId, requestId: request, decision, message };
}

export function parseWorktreeInput(args: Record<string, unknown>, settings: ToolSettings): WorktreeInput {
  checkKnown(args, ["job_id", "action", "offset", "limit"]);
  const jobId = requireJobId(args);
  required(args, "action");
  if (!(WORKTREE_ACTIONS as readonly unknown[]).includes(args.action))
    throw invalid(`"action" must be "diff", "merge" or "discard", got ${preview(args.action)}`);
  return {
    jobId,
    action: args.action as WorktreeInput["action"],
    offset: present(args, "offset") ? integerIn(args, "offset", 0, Number.MAX_SAFE_INTEGER, "number of characters") : 0,
    limit: present(args, "limit")
      ? integerIn(args, "limit", 1, settings.maxResultChars, "number of characters")
      : settings.maxResultChars,
  };
}

export interface SessionsInput {
  cwd: string;
  limit: number;
}

export function parseSessionsInput(args: Record<string, unknown>): SessionsInput {
  checkKnown(args, ["cwd", "limit"]);
  return {
    cwd: requireCwd(args),
    limit: present(args, "limit")
      ? integerIn(args, "limit", 1, LIMITS.maxSessions, "number of sessions")
      : LIMITS.defaultSessions,
  };
}
