/**
 * Claude Code as a runtime (PROTOCOL.md §7): the one place that knows what it is (traits.ts), its flags
 * (args.ts), its stream-json (stream.ts, result.ts), how its end reads (outcome.ts), its permission prompts
 * (permission-prompt.ts) and its sessions on disk (sessions.ts).
 */
import { DispatchError } from "../../core/errors.js";
import type { Runtime, SessionStore } from "../../agent/runtime.js";
import { agentEnvironment, claudeArgs } from "./args.js";
import { approverEnvironment } from "./permission-prompt.js";
import { interpretExit } from "./outcome.js";
import { ClaudeStream } from "./stream.js";
import { claudeReadiness } from "./readiness.js";
import { claudeConfigDir, claudeSessionFolder, listClaudeSessions, realDirectory } from "./sessions.js";
import { CLAUDE_TRAITS } from "./traits.js";

export { agentEnvironment, claudeArgs } from "./args.js";
export { interpretExit } from "./outcome.js";
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
export { CLAUDE_PERMISSION_MODES, CLAUDE_TRAITS } from "./traits.js";

/** Claude Code, run as `bin` (a name on PATH or a path: CLAUDE_DISPATCH_CLAUDE_BIN). */
export function claudeRuntime(bin: string): Runtime<ClaudeStream> {
  return {
    ...CLAUDE_TRAITS,
    invocation: (spec) => {
      const env = approverEnvironment(spec.approver);
      return { command: bin, args: claudeArgs(spec), ...(env ? { env } : {}) };
    },
    environment: agentEnvironment,
    createReader: (options) => new ClaudeStream(options),
    outcome: (exit, reader, disk) => interpretExit(exit, reader, bin, disk),
    readiness: claudeReadiness,
    sessions: claudeSessions,
  };
}

/** Its sessions, under CLAUDE_CONFIG_DIR or ~/.claude as the CLI itself looks (§20). */
function claudeSessions(env: Readonly<Record<string, string | undefined>>, home: string | undefined): SessionStore {
  if (!env.CLAUDE_CONFIG_DIR && !home) {
    throw new DispatchError("INVALID_ARGUMENT", "no home directory to find ~/.claude in; set CLAUDE_CONFIG_DIR");
  }
  const configDir = claudeConfigDir(env, home ?? "");
  return {
    label: CLAUDE_TRAITS.label,
    folderOf: (dir) => claudeSessionFolder(configDir, dir),
    realPath: realDirectory,
    list: (dir, limit) => listClaudeSessions({ configDir, cwd: dir, limit }),
  };
}
