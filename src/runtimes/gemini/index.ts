/**
 * Google's Gemini CLI as a runtime (PROTOCOL.md §7): the one place that knows what it is (traits.ts), its
 * flags (args.ts), its stream-json (reader.ts) and how its end reads (outcome.ts). Observed on
 * @google/gemini-cli 0.61.0.
 */
import type { Runtime } from "../../agent/runtime.js";
import { geminiArgs, geminiEnvironment } from "./args.js";
import { interpretGeminiExit } from "./outcome.js";
import { GeminiReader } from "./reader.js";
import { geminiReadiness } from "./readiness.js";
import { GEMINI_TRAITS } from "./traits.js";

export { geminiArgs, geminiEnvironment, geminiOptionProblem } from "./args.js";
export { apiError, interpretGeminiExit, type GeminiReading } from "./outcome.js";
export { GeminiReader, type GeminiResult } from "./reader.js";
export { describeToolCall } from "./text.js";
export { GEMINI_DANGEROUS_MODES, GEMINI_OPTIONS, GEMINI_PERMISSION_MODES, GEMINI_TRAITS } from "./traits.js";

/** Gemini CLI, run as `bin` (a name on PATH or a path: CLAUDE_DISPATCH_GEMINI_BIN). */
export function geminiRuntime(bin: string): Runtime<GeminiReader> {
  return {
    ...GEMINI_TRAITS,
    invocation: (spec) => ({ command: bin, args: geminiArgs(spec) }),
    environment: geminiEnvironment,
    createReader: (options) => new GeminiReader(options),
    outcome: (exit, reader, disk) => interpretGeminiExit(exit, reader, bin, disk),
    readiness: geminiReadiness,
  };
}
