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

/** Classifies anything thrown; unexpected throws become INTERNAL_ERROR so the vocabulary stays closed. */
export function toDispatchError(error: unknown): DispatchError {
  if (error instanceof DispatchError) return error;
  if (error instanceof Error) return new DispatchError("INTERNAL_ERROR", error.message);
  return new DispatchError("INTERNAL_ERROR", String(error));
}

/** The agent-facing text of a failure: "CODE: detail". */
export function formatError(code: ErrorCode, detail: string): string {
  return `${code}: ${detail}`;
}
