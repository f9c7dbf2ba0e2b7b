/**
 * How Gemini CLI's end reads as an outcome (PROTOCOL.md §7.3). Observed on
 * 0.61.0: a run that got going ends with a result event (status "success" or
 * "error"); a failure before that prints only to stderr and exits with one of
 * the CLI's own codes.
 */
import { endedWithoutResult, startFailure } from "../../agent/ending.js";
import type { ChildExit } from "../../agent/host.js";
import type { StateDisk } from "../../agent/runtime.js";
import type { AgentOutcome, AgentResult } from "../../agent/types.js";
import { isRecord } from "../../core/values.js";
import type { GeminiReader } from "./reader.js";
import { GEMINI_TRAITS } from "./traits.js";
import { clip, oneLine, withoutAnsi } from "./text.js";

/** What stderr says when `--resume` names no session of this project (exit 42). */
const RESUME_FAILED = /Error resuming session: ([^\n]*)/;

/** The CLI's exit codes for failures of its own (FatalError subclasses), and what to do about each. */
const FATAL_EXITS: Readonly<Record<number, string>> = {
  41:
    "gemini could not authenticate (exit 41); set security.auth.selectedType in ~/.gemini/settings.json " +
    '("gemini-api-key" for GEMINI_API_KEY) and the key in the server\'s environment',
  42: "gemini refused its input (exit 42)",
  44: "gemini's sandbox failed (exit 44)",
  52: "gemini's configuration is invalid (exit 52); fix the settings file it names",
  53: "gemini reached its session turn limit (exit 53; model.maxSessionTurns in settings.json)",
  54: "a tool failed fatally in gemini (exit 54)",
  55:
    "gemini does not trust this cwd (exit 55); set GEMINI_CLI_TRUST_WORKSPACE=true in the server's environment, or " +
    "trust the folder in an interactive gemini",
  130: "gemini was cancelled (exit 130)",
};

/** The outcome needs of the reader only what it read. */
export type GeminiReading = Pick<
  GeminiReader,
  "overflow" | "resultEvent" | "answerText" | "errorMessages" | "permissionDenials" | "printedStart" | "live"
>;

/**
 * Turns how the agent ended into an outcome (§7.3). The result event, when
 * there is one, is the answer whatever the exit code: an API error exits with
 * its HTTP status (modulo 256) after printing a result of status "error".
 */
export function interpretGeminiExit(
  exit: ChildExit,
  stream: GeminiReading,
  bin: string,
  disk?: StateDisk,
): AgentOutcome {
  const unstarted = startFailure(exit, { bin, ...GEMINI_TRAITS.program });
  if (unstarted) return unstarted;
  if (stream.overflow) {
    return {
      ok: false,
      code: "OUTPUT_TOO_LARGE",
      detail:
        "an output line or response of the agent passed the size limit (CLAUDE_DISPATCH_MAX_OUTPUT_BYTES); " +
        "it was stopped",
    };
  }

  const event = stream.resultEvent();
  if (event) {
    const result = resultOf(stream, event.durationMs);
    const errors = stream.errorMessages();
    if (event.status === "success" && errors.length === 0)
      return { ok: true, result: { ...result, text: stream.answerText() } };
    if (event.status === "success") {
      // The run finished, but the CLI reported an error on the way (such as its own turn cap): the answer is kept.
      return {
        ok: false,
        code: "AGENT_ERROR",
        detail: errors.join("; "),
        result: { ...result, text: stream.answerText() },
      };
    }
    const message =
      event.errorMessage ??
      errors.at(-1) ??
      `Gemini CLI reported ${event.status === "error" ? "an error" : `status ${event.status}`}`;
    const api = apiError(message, exit.exitCode);
    if (api.status !== undefined) result.apiErrorStatus = api.status;
    const status = api.status === undefined ? "" : ` (API status ${api.status})`;
    return { ok: false, code: "AGENT_ERROR", detail: `${api.message}${status}`, result };
  }

  const resumeFailed = RESUME_FAILED.exec(withoutAnsi(exit.stderrTail));
  if (resumeFailed) {
    return {
      ok: false,
      code: "SESSION_NOT_FOUND",
      detail: `no Gemini CLI session to resume in this cwd: ${oneLine(resumeFailed[1] ?? "")}`,
    };
  }
  // Gemini CLI also exits 0 on SIGTERM without a result: BAD_OUTPUT.
  const stderr = clip(withoutAnsi(exit.stderrTail), 2000);
  return endedWithoutResult(exit, disk, {
    agent: GEMINI_TRAITS.name,
    printed: stream.printedStart(),
    stderr,
    knownExits: FATAL_EXITS,
  });
}

/** What the result holds for any outcome: no cost, which the CLI does not report. */
function resultOf(stream: GeminiReading, durationMs: number | undefined): AgentResult {
  const live = stream.live();
  const result: AgentResult = { numTurns: live.turns };
  if (live.sessionId !== undefined) result.sessionId = live.sessionId;
  if (durationMs !== undefined) result.durationMs = durationMs;
  const denials = stream.permissionDenials();
  if (denials.length > 0) result.permissionDenials = [...denials];
  return result;
}

/**
 * An API error as the CLI words it: `[API Error: {"error":{"code":400,"message":…}}]`,
 * or `[API Error: <message>]` and advice (a 429). The status is in the JSON when
 * there is JSON; otherwise the exit code has it, since the CLI exits with the
 * HTTP status and the OS keeps its low 8 bits: 144–255 are 400–511.
 */
export function apiError(message: string, exitCode: number | null): { message: string; status?: number } {
  const wrapped = /^\[API Error: ([\s\S]*)\]$/.exec(message.trim());
  if (wrapped) {
    const inner = parseJson(wrapped[1] ?? "");
    const error = isRecord(inner) && isRecord(inner.error) ? inner.error : undefined;
    const code = typeof error?.code === "number" ? error.code : undefined;
    const text = typeof error?.message === "string" ? error.message : undefined;
    if (text !== undefined) return { message: oneLine(text), ...(code !== undefined ? { status: code } : {}) };
  }
  const isApiError = message.trimStart().startsWith("[API Error");
  const status = isApiError && exitCode !== null && exitCode >= 144 && exitCode <= 255 ? exitCode + 256 : undefined;
  return { message: oneLine(message), ...(status !== undefined ? { status } : {}) };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
