/**
 * How an agent may act (PROTOCOL.md §5.6): the tools' vocabulary, the same
 * for every runtime. Each runtime maps it to its own CLI's flags, and names
 * its own permission modes (agent/runtime.ts).
 */

/** Every value is validated before it gets here (§5.6). */
export interface AgentOptions {
  model?: string;
  /** One of the chosen agent's own modes, as its runtime declares them (RuntimeTraits.permissionModes). */
  permissionMode?: string;
  allowedTools?: string[];
  disallowedTools?: string[];
  maxTurns?: number;
  maxBudgetUsd?: number;
  appendSystemPrompt?: string;
  addDirs?: string[];
}

/**
 * A model a call or the operator names (§5.6): aliases (sonnet), full ids (claude-opus-4-8[1m]) and provider ids
 * (us.anthropic.…:0, arn:…/…). Never a leading dash. Here, not with the tools' validation, which the server loads
 * only after its first answer: the configuration checks it before.
 */
export const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:/@[\]-]{0,199}$/;

/**
 * The agents a server offers, and what a call may ask of each (§5.6, §7): from each runtime and the operator's policy.
 */
export interface AgentOffer {
  /** "claude", "codex", "gemini": a call's `agent`. */
  name: string;
  /** How people are told of it: "Claude Code". */
  label: string;
  /** Every permission mode the agent has, in its own words. */
  modes: readonly string[];
  /** Those that drop its own safety checks: a refusal of one says which setting allows it. */
  dangerousModes: readonly string[];
  /** Those the operator allows (the dangerous ones only when said). */
  allowedModes: readonly string[];
  /** What a call that names no mode or model gets, when the operator set it for this agent. */
  defaultMode?: string;
  defaultModel?: string;
  /** The options its CLI has a flag for. */
  supportedOptions: readonly (keyof AgentOptions)[];
  /** The setting that allows more modes, for the refusal's hint. */
  modesSetting: string;
  /** Why a value its CLI would misread is refused, if it would. */
  optionProblem?(options: AgentOptions): string | undefined;
  /** Why its program cannot be started here now, with the fix (§7.5); undefined when it can. */
  missingProgram?(): string | undefined;
}

/** A machine the operator named, as the tools see it (§21): a call's `host`, where its cwd may be, and its agents. */
export interface HostOffer {
  name: string;
  /** Absolute paths on that machine. */
  roots: readonly string[];
  agents: readonly string[];
  /** The modes each agent named may be asked for there, instead of those the operator allows it (§21.1). */
  allowedModes?: Readonly<Record<string, readonly string[]>> | undefined;
}

/** The option names callers use, for messages. */
export const OPTION_ARGUMENTS: Readonly<Record<keyof AgentOptions, string>> = {
  model: "model",
  permissionMode: "permission_mode",
  allowedTools: "allowed_tools",
  disallowedTools: "disallowed_tools",
  maxTurns: "max_turns",
  maxBudgetUsd: "max_budget_usd",
  appendSystemPrompt: "append_system_prompt",
  addDirs: "add_dirs",
};
