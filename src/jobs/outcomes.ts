/**
 * A job's outcome as its record keeps it (PROTOCOL.md §15.2), and back: read back cleaned (§10), as the
 * record may have been written by anything that can write the state directory.
 */
import { outcomeForReading } from "../agent/reading.js";
import type { AgentOutcome } from "../agent/types.js";
import type { StoredOutcome } from "../store/records.js";

export function storedOutcome(outcome: AgentOutcome, textOnDisk: boolean): StoredOutcome {
  const stored: StoredOutcome = { ok: outcome.ok };
  if (!outcome.ok) {
    stored.code = outcome.code;
    stored.detail = outcome.detail;
  }
  if (outcome.exit) stored.exit = outcome.exit;
  if (outcome.result) {
    const { text, textChars, ...rest } = outcome.result;
    stored.result = rest;
    // Only a length whose text is on disk: a result.txt that could not be
    // written must not read back as an empty result.
    const chars = textOnDisk ? (textChars ?? text?.length) : undefined;
    if (chars !== undefined) stored.result_chars = chars;
  }
  return stored;
}

export function outcomeFrom(stored: StoredOutcome | undefined): AgentOutcome {
  if (!stored) return { ok: false, code: "AGENT_LOST", detail: "the record holds no outcome" };
  const result =
    stored.result && stored.result_chars !== undefined
      ? { ...stored.result, textChars: stored.result_chars }
      : stored.result;
  if (stored.ok) return outcomeForReading({ ok: true, result: result ?? {} });
  return outcomeForReading({
    ok: false,
    code: stored.code ?? "INTERNAL_ERROR",
    detail: stored.detail ?? "",
    ...(result ? { result } : {}),
  });
}

/** The outcome of a kill that left processes alive (§8). */
export function killFailed(survivors: readonly number[]): { ok: false; code: "KILL_FAILED"; detail: string } {
  return { ok: false, code: "KILL_FAILED", detail: `processes ${survivors.join(", ")} survived SIGKILL` };
}
