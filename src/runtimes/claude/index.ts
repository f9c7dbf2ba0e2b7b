/**
 * Claude Code as a runtime (PROTOCOL.md §7): the one place that knows its
 * flags (args.ts), its stream-json (stream.ts, result.ts) and how its end
 * reads (outcome.ts).
 */
import type { Runtime } from "../../agent/runtime.js";
import { CLAUDE_TRAITS, agentEnvironment, claudeArgs } from "./args.js";
import { interpretExit } from "./outcome.js";
import { ClaudeStream } from "./stream.js";
import { claudeReadiness } from "./readiness.js";

export { CLAUDE_TRAITS, DEFAULT_CLAUDE_BIN, agentEnvironment, claudeArgs } from "./args.js";
export { DISK_FULL_BYTES, interpretExit } from "./outcome.js";
export { findResultEvent, toAgentResult } from "./result.js";
export {
  DEFAULT_SESSION_LIMIT,
  MAX_SESSION_LIMIT,
  claudeConfigDir,
  claudeProjectFolder,
  claudeSessionFolder,
  listClaudeSessions,
  type ClaudeSession,
  type ListSessionsOptions,
} from "./sessions.js";
export { ClaudeStream, type ClaudeStreamOptions } from "./stream.js";
export { describeToolUse } from "./text.js";

/** Claude Code, run as `bin` (a name on PATH or a path: CLAUDE_DISPATCH_CLAUDE_BIN). */
export function claudeRuntime(bin: string): Runtime<ClaudeStream> {
  return {
    ...CLAUDE_TRAITS,
    invocation: (spec) => ({ command: bin, args: claudeArgs(spec) }),
    environment: agentEnvironment,
    createReader: (options) => new ClaudeStream(options),
    outcome: (exit, reader, disk) => interpretExit(exit, reader, bin, disk),
    readiness: claudeReadiness,
  };
}
