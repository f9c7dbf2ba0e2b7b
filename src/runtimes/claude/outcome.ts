/**
 * How Claude Code's end reads as an outcome (PROTOCOL.md §7.3).
 */
import { OUTPUT_TOO_LARGE, endedWithoutResult, startFailure } from "../../agent/ending.js";
import type { ChildExit } from "../../agent/host.js";
import type { StateDisk } from "../../agent/runtime.js";
import type { AgentOutcome } from "../../agent/types.js";
import { errorMessage, toAgentResult } from "./result.js";
import type { ClaudeStream } from "./stream.js";
import { CLAUDE_TRAITS } from "./traits.js";

const SESSION_NOT_FOUND = /No conversation found with session ID: ?([^\s]*)/;

/**
 * Turns how the agent ended into an outcome (§7.3). The CLI exits 1 on API
 * errors yet still prints its result event, with is_error:true and a message
 * such as "Not logged in · Please run /login"; that message is the answer, so
 * the output is read before the exit code. `subtype` may say "success" on such
 * failures: only `is_error` is trusted.
 */
export function interpretExit(
  exit: ChildExit,
  stream: Pick<ClaudeStream, "overflow" | "resultEvent" | "printedStart"> &
    Partial<Pick<ClaudeStream, "streamedResultChars">>,
  bin: string,
  disk?: StateDisk,
): AgentOutcome {
  const unstarted = startFailure(exit, { bin, ...CLAUDE_TRAITS.program });
  if (unstarted) return unstarted;
  if (stream.overflow) return OUTPUT_TOO_LARGE;

  const event = stream.resultEvent();
  if (event && "resultNotStored" in stream && stream.resultNotStored) {
    return {
      ok: false,
      code: "STATE_ERROR",
      detail:
        "the agent finished, but its result could not be written to the job's result.txt (is the disk full?); it is " +
        "in the job's stdout.jsonl",
    };
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
      if (unknownSession)
        return { ok: false, code: "SESSION_NOT_FOUND", detail: sessionNotFound(unknownSession[1]), result };
      const status = result.apiErrorStatus === undefined ? "" : ` (API status ${result.apiErrorStatus})`;
      return { ok: false, code: "AGENT_ERROR", detail: `${message}${status}`, result };
    }
    return { ok: true, result };
  }

  const notFound = SESSION_NOT_FOUND.exec(exit.stderrTail);
  if (notFound) return { ok: false, code: "SESSION_NOT_FOUND", detail: sessionNotFound(notFound[1]) };
  return endedWithoutResult(exit, disk, { agent: CLAUDE_TRAITS.name, printed: stream.printedStart() });
}

function sessionNotFound(id: string | undefined): string {
  return `No conversation found with session ID ${id ?? ""} in this cwd`.replace("  ", " ");
}
