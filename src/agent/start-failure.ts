/**
 * How any agent's failure to start, or its overlong output, reads as an
 * outcome (PROTOCOL.md §7.3): the same for every runtime, which names its
 * program, its setting and how to install it.
 */
import type { ChildExit } from "./host.js";
import type { AgentOutcome } from "./types.js";

export interface AgentProgram {
  /** The program as configured, and its default name on PATH. */
  bin: string;
  defaultBin: string;
  /** The setting that names it, and how to install it: "CLAUDE_DISPATCH_CODEX_BIN", "install Codex (@openai/codex)". */
  setting: string;
  install: string;
}

/** The outcome of a spawn that failed, or undefined when the agent started. */
export function startFailure(exit: ChildExit, program: AgentProgram): AgentOutcome | undefined {
  const error = exit.spawnError;
  if (!error) return undefined;
  if (error.outputFiles) return { ok: false, code: "STATE_ERROR", detail: error.message };
  if (error.code === "ENOENT" && !error.missingCwd) {
    return { ok: false, code: "SPAWN_FAILED", detail: programNotFound(program) };
  }
  return { ok: false, code: "SPAWN_FAILED", detail: `could not start ${program.bin}: ${error.message}` };
}

/** The program is not there: how to install it, or which setting names a path that is wrong. */
export function programNotFound(program: AgentProgram): string {
  return program.bin === program.defaultBin
    ? `${program.bin} not found on PATH; ${program.install} or set ${program.setting}`
    : `${program.bin} not found (${program.setting}); check the path`;
}

export const OUTPUT_TOO_LARGE: AgentOutcome = {
  ok: false,
  code: "OUTPUT_TOO_LARGE",
  detail: "an output line of the agent passed the size limit (CLAUDE_DISPATCH_MAX_OUTPUT_BYTES); it was stopped",
};
