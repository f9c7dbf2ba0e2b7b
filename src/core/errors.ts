/**
 * The closed vocabulary of tool failures (PROTOCOL.md §9). Every failed tool
 * call is a CallToolResult with isError:true whose text starts "CODE: detail".
 * A test keeps this list equal to PROTOCOL.md's error table.
 */
export const ERROR_CODES = [
  "INVALID_ARGUMENT",
  "POLICY_DENIED",
  "JOB_NOT_FOUND",
  "DEPTH_LIMIT",
  "SHUTTING_DOWN",
  "SPAWN_FAILED",
  "SESSION_NOT_FOUND",
  "AGENT_ERROR",
  "AGENT_EXITED",
  "BAD_OUTPUT",
  "OUTPUT_TOO_LARGE",
  "AGENT_LOST",
  "TIMEOUT",
  "KILLED",
  "KILL_FAILED",
  "STATE_ERROR",
  "GIT_FAILED",
  "HOST_FAILED",
  "INTERNAL_ERROR",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** A failure already classified where it happened; passed through unchanged. */
export class DispatchError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, detail: string) {
    super(detail);
    this.name = "DispatchError";
    this.code = code;
  }
}

/** What INTERNAL_ERROR tells the model (§9): an exception's own text (paths, a stack) goes to the log, never to it. */
export const INTERNAL_ERROR_DETAIL = "an unexpected error; the server's log has the details";

/** A write that failed for want of space (ENOSPC) or quota (EDQUOT). */
export function isDiskFull(error: unknown): boolean {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return code === "ENOSPC" || code === "EDQUOT";
}

/**
 * Classifies anything thrown; unexpected throws become INTERNAL_ERROR with a fixed sentence, so the vocabulary
 * stays closed and no exception text reaches a model: the caller logs describeThrown(error). A full disk that
 * escaped its own classification is still STATE_ERROR.
 */
export function toDispatchError(error: unknown): DispatchError {
  if (error instanceof DispatchError) return error;
  if (isDiskFull(error)) return new DispatchError("STATE_ERROR", "a disk is full; free some space there");
  return new DispatchError("INTERNAL_ERROR", INTERNAL_ERROR_DETAIL);
}

/** Everything known about a throw, for the log: its stack (which starts with its message), else its text. */
export function describeThrown(error: unknown): string {
  if (error instanceof Error) return error.stack ?? `${error.name}: ${error.message}`;
  return String(error);
}

/** The agent-facing text of a failure: "CODE: detail". */
export function formatError(code: ErrorCode, detail: string): string {
  return `${code}: ${detail}`;
}

/** How much of a caller's value a message quotes back (PROTOCOL.md §10). */
export const ECHO_MAX_CHARS = 60;

/**
 * A caller's value as every message echoes it (PROTOCOL.md §10): its first
 * maxChars characters, one fewer rather than split a surrogate pair, then "…"
 * when cut, written as a JSON string. The few characters JSON.stringify leaves
 * raw that end or garble a line (C1 controls, U+2028, U+2029) are escaped too,
 * so the echo is one printable line whatever the caller sent.
 */
export function quoted(value: string, maxChars: number = ECHO_MAX_CHARS): string {
  let end = Math.max(0, Math.min(Math.floor(maxChars), value.length));
  if (
    end < value.length &&
    end > 0 &&
    isHighSurrogate(value.charCodeAt(end - 1)) &&
    isLowSurrogate(value.charCodeAt(end))
  )
    end -= 1;
  const cut = end < value.length ? `${value.slice(0, end)}…` : value;
  return JSON.stringify(cut).replace(
    /[\u007f-\u009f\u2028\u2029]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
