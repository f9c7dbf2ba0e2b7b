/**
 * Every runtime, whole: what starting, following and reading an agent needs (PROTOCOL.md §7). The server loads
 * this after it has answered `initialize` (BENCHMARKS.md (a)); the command line and the tests import it directly.
 */
import type { Runtime } from "../agent/runtime.js";
import { DEFAULT_CLAUDE_BIN, claudeRuntime } from "./claude/index.js";
import { DEFAULT_CODEX_BIN, codexRuntime } from "./codex/index.js";
import { DEFAULT_GEMINI_BIN, geminiRuntime } from "./gemini/index.js";

/** The runtime named so, running `bin`; an unknown or absent name (records of earlier versions) is Claude Code. */
export function runtimeFor(name: string | undefined, bin?: string): Runtime {
  switch (name) {
    case "codex":
      return codexRuntime(bin ?? DEFAULT_CODEX_BIN);
    case "gemini":
      return geminiRuntime(bin ?? DEFAULT_GEMINI_BIN);
    default:
      return claudeRuntime(bin ?? DEFAULT_CLAUDE_BIN);
  }
}
