/**
 * OpenAI Codex as a runtime (PROTOCOL.md §7): the one place that knows what it is (traits.ts), its flags
 * (args.ts), its `exec --json` events (reader.ts) and how its end reads (outcome.ts).
 */
import type { Runtime } from "../../agent/runtime.js";
import { codexArgs, codexEnvironment } from "./args.js";
import { interpretCodexExit } from "./outcome.js";
import { CodexReader } from "./reader.js";
import { codexReadiness } from "./readiness.js";
import { CODEX_TRAITS } from "./traits.js";

export { codexArgs, codexEnvironment } from "./args.js";
export { interpretCodexExit } from "./outcome.js";
export { CodexReader, type TurnEnd } from "./reader.js";
export { shellScript } from "./text.js";
export {
  CODEX_DANGEROUS_MODES,
  CODEX_OPTIONS,
  CODEX_PERMISSION_MODES,
  CODEX_TRAITS,
  type CodexPermissionMode,
} from "./traits.js";

/** Codex, run as `bin` (a name on PATH or a path: CLAUDE_DISPATCH_CODEX_BIN). */
export function codexRuntime(bin: string): Runtime<CodexReader> {
  return {
    ...CODEX_TRAITS,
    invocation: (spec) => ({ command: bin, args: codexArgs(spec) }),
    environment: codexEnvironment,
    createReader: (options) => new CodexReader(options),
    outcome: (exit, reader, disk) => interpretCodexExit(exit, reader, bin, disk),
    readiness: codexReadiness,
  };
}
