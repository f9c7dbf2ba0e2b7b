/**
 * How Claude Code's end reads as an outcome (PROTOCOL.md §7.3).
 */
import type { ChildExit } from "../../agent/host.js";
import { OUTPUT_TOO_LARGE, startFailure } from "../../agent/start-failure.js";
import type { StateDisk } from "../../agent/runtime.js";
import type { AgentOutcome } from "../../agent/types.js";
import { CLAUDE_PROGRAM } from "./args.js";
import { errorMessage, toAgentResult } from "./result.js";
import type { ClaudeStream } from "./stream.js";
import { clip } from "./text.js";

const SESSION_NOT_FOUND = /No conversation found with session ID: ?([^\s]*)/;

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
  const unstarted = startFailure(exit, { bin, ...CLAUDE_PROGRAM });
  if (unstarted) return unstarted;
  if (stream.overflow) return OUTPUT_TOO_LARGE;

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

