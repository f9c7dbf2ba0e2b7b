/**
 * How an agent's end reads as an outcome where every runtime reads it alike (PROTOCOL.md §7.3): a failure to
 * start, overlong output, and an end its output says nothing about. Each runtime reads its own result first and
 * names its program, its setting and how to install it; only what its CLI prints is its own.
 */
import { clip } from "../core/text.js";
import type { ChildExit } from "./host.js";
import type { ProgramSetting, StateDisk } from "./runtime.js";
import type { AgentOutcome } from "./types.js";

/** The program as configured, with its setting. */
export interface AgentProgram extends ProgramSetting {
  bin: string;
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

/**
 * Free space below which an agent that ended without a result is taken
 * to have lost its output to a full disk (§7.3). A write to a full disk fails
 * once the last free block is used, so free space is then close to zero (the
 * probe's bavail already leaves out root's reserve); the margin allows for
 * what was freed between the failed write and the probe, such as temporary
 * files deleted as the agent exited. 1 MiB is too little for an agent to
 * work in anyway, while a disk that is merely low, with megabytes left, is
 * not blamed for a failure of the agent's own.
 */
export const DISK_FULL_BYTES = 1024 * 1024;

/** What messages say the CLI did not do, in each place one says so. */
export interface MissingEnd {
  /** "… ended without printing a result; it was started by an earlier server …" */
  ended: string;
  /** "… exited with code 1 and printed no result" */
  exited: string;
  /** "… printed no result event: {\"partial" */
  printed: string;
}

/** A CLI that ends by printing a result event, as Claude Code and Gemini CLI do. */
export const NO_RESULT_EVENT: MissingEnd = {
  ended: "without printing a result",
  exited: "and printed no result",
  printed: "printed no result event",
};

export interface EndWithoutResult {
  /** The CLI as messages name it: "claude". */
  agent: string;
  /** The start of what it printed (the reader's printedStart). */
  printed: string;
  /** Its stderr's end as messages show it; default: as it was written, clipped. */
  stderr?: string;
  /** Default NO_RESULT_EVENT. */
  missing?: MissingEnd;
  /** Exit codes the CLI gives failures of its own, each with what to do: AGENT_ERROR rather than AGENT_EXITED. */
  knownExits?: Readonly<Record<number, string>>;
}

/**
 * An end the output says nothing about (§7.3), once the runtime found no result and no unknown session: a full
 * disk whatever the exit said, an agent an earlier server started, a non-zero exit, or output without a result.
 */
export function endedWithoutResult(exit: ChildExit, disk: StateDisk | undefined, end: EndWithoutResult): AgentOutcome {
  const { agent, missing = NO_RESULT_EVENT } = end;
  const stderr = end.stderr ?? clip(exit.stderrTail, 2000);
  if (disk?.freeBytes !== undefined && disk.freeBytes < DISK_FULL_BYTES) {
    const where = `${disk.freeBytes} bytes free in ${disk.dir}`;
    const lost = "the agent's output could not be written to stdout.jsonl; free space and run it again";
    const detail = `the disk holding the state directory is full (${where}): ${lost}`;
    return { ok: false, code: "STATE_ERROR", detail };
  }
  if (exit.unobserved) {
    const unknown = "it was started by an earlier server, so its exit status is unknown";
    const detail = `${agent} ended ${missing.ended}; ${unknown}`;
    return { ok: false, code: "AGENT_LOST", detail: stderr ? `${detail}; its stderr ends: ${stderr}` : detail };
  }
  const known = exit.exitCode === null ? undefined : end.knownExits?.[exit.exitCode];
  if (known) return { ok: false, code: "AGENT_ERROR", detail: stderr ? `${known}: ${stderr}` : known };
  if (exit.exitCode !== 0) {
    const signal = exit.signal ?? "a signal";
    const how = exit.exitCode === null ? `was killed by ${signal}` : `exited with code ${exit.exitCode}`;
    const detail = stderr ? `${agent} ${how}: ${stderr}` : `${agent} ${how} ${missing.exited}`;
    return { ok: false, code: "AGENT_EXITED", detail };
  }
  const shown = clip(end.printed, 300);
  return {
    ok: false,
    code: "BAD_OUTPUT",
    detail: shown ? `${agent} ${missing.printed}: ${shown}` : `${agent} exited 0 and printed nothing`,
  };
}
