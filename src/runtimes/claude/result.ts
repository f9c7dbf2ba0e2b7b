/**
 * Claude Code's result event (PROTOCOL.md §7.3): found in what it printed, and
 * read by key, never by position.
 */
import type { AgentResult, PermissionDenial } from "../../agent/types.js";

export interface ResultEvent {
  type: "result";
  [key: string]: unknown;
}

export function isResultEvent(value: unknown): value is ResultEvent {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    (value as { type?: unknown }).type === "result"
  );
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

export const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);
export const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined;

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
export function errorMessage(event: ResultEvent): string {
  const text = str(event.result);
  if (text) return text;
  const errors = Array.isArray(event.errors) ? event.errors.filter((e): e is string => typeof e === "string") : [];
  if (errors.length > 0) return errors.join("; ");
  const subtype = str(event.subtype);
  return subtype ? `Claude Code reported ${subtype}` : "Claude Code reported an error";
}
