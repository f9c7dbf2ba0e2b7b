/**
 * How Codex's end reads as an outcome (PROTOCOL.md §7.3). What it printed is
 * read before its exit code: a failed turn exits 1 with its reason on stdout,
 * while a resume of an unknown thread prints nothing and says so on stderr.
 */
import { OUTPUT_TOO_LARGE, endedWithoutResult, startFailure, type MissingEnd } from "../../agent/ending.js";
import type { ChildExit } from "../../agent/host.js";
import type { StateDisk } from "../../agent/runtime.js";
import type { AgentOutcome, AgentResult } from "../../agent/types.js";
import type { CodexReader } from "./reader.js";
import { CODEX_TRAITS } from "./traits.js";

/**
 * 0.171.0 on stderr, exit 1: "Error: thread/resume: thread/resume failed: no
 * rollout found for thread id <id> (code -32600)".
 */
const THREAD_NOT_FOUND = /no rollout found for thread id:? ?([^\s()]*)/i;

/**
 * An HTTP status in Codex's error messages: "unexpected status 401 Unauthorized: …",
 * "exceeded retry limit, last status: 429 Too Many Requests". Some errors name
 * none (a 500 reads "We’re currently experiencing high demand…"); none is guessed.
 */
const HTTP_STATUS = /\bstatus:? ([1-5]\d\d)\b/;

/** Codex ends by finishing its turn rather than by printing a result. */
const UNFINISHED_TURN: MissingEnd = {
  ended: "without finishing its turn",
  exited: "before finishing its turn",
  printed: "exited 0 without finishing a turn",
};

type ReadOutput = Pick<
  CodexReader,
  "overflow" | "turnEnd" | "errorMessage" | "completedTurns" | "threadId" | "printedStart"
>;

export function interpretCodexExit(exit: ChildExit, reader: ReadOutput, bin: string, disk?: StateDisk): AgentOutcome {
  const unstarted = startFailure(exit, { bin, ...CODEX_TRAITS.program });
  if (unstarted) return unstarted;
  if (reader.overflow) return OUTPUT_TOO_LARGE;

  const result: AgentResult = {};
  const threadId = reader.threadId();
  if (threadId !== undefined) result.sessionId = threadId;
  const ending = reader.turnEnd();
  if (ending?.kind === "completed") {
    result.numTurns = reader.completedTurns();
    if (ending.text === undefined) {
      return { ok: false, code: "BAD_OUTPUT", detail: "codex completed its turn without a final message", result };
    }
    return { ok: true, result: { ...result, text: ending.text } };
  }
  // A failed turn, or an error event the process exited on before saying the turn failed (not one killed after it).
  const failure = ending?.kind === "failed" ? ending.message : exit.signal === null ? reader.errorMessage() : undefined;
  if (failure !== undefined) {
    const status = HTTP_STATUS.exec(failure)?.[1];
    if (status !== undefined) result.apiErrorStatus = Number(status);
    return { ok: false, code: "AGENT_ERROR", detail: failure, result };
  }

  const notFound = THREAD_NOT_FOUND.exec(exit.stderrTail);
  if (notFound)
    return {
      ok: false,
      code: "SESSION_NOT_FOUND",
      detail: `No Codex conversation found with session ID ${notFound[1] ?? ""}`.trim(),
    };
  return endedWithoutResult(exit, disk, {
    agent: CODEX_TRAITS.name,
    printed: reader.printedStart(),
    missing: UNFINISHED_TURN,
  });
}
