/**
 * The agent CLIs this build can run (PROTOCOL.md §7), by the name a call's
 * `agent` gives: their traits and settings, known at startup. Each runtime's
 * own folder knows its CLI; its reader loads with the first job (all.ts,
 * BENCHMARKS.md (a)).
 */
import type { RuntimeTraits } from "../agent/runtime.js";
import type { AgentProgram } from "../agent/start-failure.js";
import { CLAUDE_PROGRAM, CLAUDE_TRAITS } from "./claude/args.js";
import { CODEX_PROGRAM, CODEX_TRAITS } from "./codex/args.js";
import { GEMINI_PROGRAM, GEMINI_TRAITS } from "./gemini/args.js";

export const AGENT_NAMES = ["claude", "codex", "gemini"] as const;
export type AgentName = (typeof AGENT_NAMES)[number];

export function isAgentName(name: string): name is AgentName {
  return (AGENT_NAMES as readonly string[]).includes(name);
}

/** Each agent's program when no setting names one, the setting that does, and how to install it. */
export const AGENT_PROGRAMS: Readonly<Record<AgentName, Omit<AgentProgram, "bin">>> = {
  claude: CLAUDE_PROGRAM,
  codex: CODEX_PROGRAM,
  gemini: GEMINI_PROGRAM,
};

/** The setting that lists the permission modes a call may ask of each agent (§5.6). */
export const MODES_SETTINGS: Readonly<Record<AgentName, string>> = {
  claude: "CLAUDE_DISPATCH_PERMISSION_MODES",
  codex: "CLAUDE_DISPATCH_CODEX_PERMISSION_MODES",
  gemini: "CLAUDE_DISPATCH_GEMINI_PERMISSION_MODES",
};

/** What each agent's CLI accepts; an unknown or absent name (records of earlier versions) is Claude Code. */
export function traitsOf(name: string | undefined): RuntimeTraits {
  return name === "codex" ? CODEX_TRAITS : name === "gemini" ? GEMINI_TRAITS : CLAUDE_TRAITS;
}
