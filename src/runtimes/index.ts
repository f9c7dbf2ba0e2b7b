/**
 * The agent CLIs this build can run (PROTOCOL.md §7), by the name a call's
 * `agent` gives: each runtime's own folder knows its CLI; this file only
 * names them, with the settings an operator uses for each.
 */
import type { Runtime } from "../agent/runtime.js";
import { DEFAULT_CLAUDE_BIN, claudeRuntime } from "./claude/index.js";
import { DEFAULT_CODEX_BIN, codexRuntime } from "./codex/index.js";
import { DEFAULT_GEMINI_BIN, geminiRuntime } from "./gemini/index.js";

export const AGENT_NAMES = ["claude", "codex", "gemini"] as const;
export type AgentName = (typeof AGENT_NAMES)[number];

export function isAgentName(name: string): name is AgentName {
  return (AGENT_NAMES as readonly string[]).includes(name);
}

/** Each agent's program when no setting names one, and the setting that does. */
export const AGENT_PROGRAMS: Readonly<Record<AgentName, { bin: string; setting: string }>> = {
  claude: { bin: DEFAULT_CLAUDE_BIN, setting: "CLAUDE_DISPATCH_CLAUDE_BIN" },
  codex: { bin: DEFAULT_CODEX_BIN, setting: "CLAUDE_DISPATCH_CODEX_BIN" },
  gemini: { bin: DEFAULT_GEMINI_BIN, setting: "CLAUDE_DISPATCH_GEMINI_BIN" },
};

/** The setting that lists the permission modes a call may ask of each agent (§5.6). */
export const MODES_SETTINGS: Readonly<Record<AgentName, string>> = {
  claude: "CLAUDE_DISPATCH_PERMISSION_MODES",
  codex: "CLAUDE_DISPATCH_CODEX_PERMISSION_MODES",
  gemini: "CLAUDE_DISPATCH_GEMINI_PERMISSION_MODES",
};

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
