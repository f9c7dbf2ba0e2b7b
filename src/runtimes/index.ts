/**
 * The agent CLIs this build can run (PROTOCOL.md §7), as each declares itself: its name, program and setting,
 * permission modes, options and permission prompts, known at startup. A runtime's reader loads with the first
 * job (all.ts, BENCHMARKS.md (a)). Another agent is a folder under runtimes/ and a line in RUNTIMES (its whole
 * runtime in all.ts too, which the type checker asks for); the configuration, the policy, the tools, doctor and
 * the approver take it from here.
 */
import type { ProgramSetting, PermissionPrompts, RuntimeTraits } from "../agent/runtime.js";
import { CLAUDE_TRAITS } from "./claude/traits.js";
import { CODEX_TRAITS } from "./codex/traits.js";
import { GEMINI_TRAITS } from "./gemini/traits.js";

const LISTED = [CLAUDE_TRAITS, CODEX_TRAITS, GEMINI_TRAITS] as const;

export const RUNTIMES: readonly RuntimeTraits[] = LISTED;

/** The first listed: offered always, and the one a call naming no agent gets (§7.5). */
export const HOME_AGENT: AgentName = LISTED[0].name;

export type AgentName = (typeof LISTED)[number]["name"];

export const AGENT_NAMES: readonly AgentName[] = LISTED.map((runtime) => runtime.name);

export function isAgentName(name: string): name is AgentName {
  return (AGENT_NAMES as readonly string[]).includes(name);
}

/** The traits of the runtime named so, among `runtimes`; undefined when this build has none of that name. */
export function traitsOf(name: string, runtimes: readonly RuntimeTraits[] = RUNTIMES): RuntimeTraits | undefined {
  return runtimes.find((runtime) => runtime.name === name);
}

/** Each agent's program when no setting names one, the setting that does, and how to install it. */
export const AGENT_PROGRAMS = Object.fromEntries(
  RUNTIMES.map((runtime) => [runtime.name, runtime.program]),
) as Readonly<Record<AgentName, ProgramSetting>>;

/** The permission prompts the approver answers (§18): those of each runtime that forwards them, by tool name. */
export const PERMISSION_PROMPTS: readonly PermissionPrompts[] = RUNTIMES.flatMap((runtime) =>
  runtime.permissionPrompts ? [runtime.permissionPrompts] : [],
);
