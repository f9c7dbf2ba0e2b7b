/**
 * What Claude Code is, known at startup (PROTOCOL.md §5.6, §7, §18): its program and the setting that names it,
 * its permission modes, the options it has flags for, the operator's settings for it and its permission prompts.
 */
import type { RuntimeTraits } from "../../agent/runtime.js";
import { CLAUDE_PERMISSION_PROMPTS } from "./permission-prompt.js";

/** `--permission-mode`, in the CLI's words; without one the user's own Claude Code settings decide. */
export const CLAUDE_PERMISSION_MODES = [
  "default",
  "acceptEdits",
  "plan",
  "auto",
  "dontAsk",
  "bypassPermissions",
] as const;

/** bypassPermissions lets the agent do anything without asking: only an operator can allow it. */
export const CLAUDE_DANGEROUS_MODES: readonly string[] = ["bypassPermissions"];

/** Every option of §5.6 is one of its flags. Its settings have no agent in their names: it came first. */
export const CLAUDE_TRAITS = {
  name: "claude",
  label: "Claude Code",
  program: { setting: "CLAUDE_DISPATCH_CLAUDE_BIN", defaultBin: "claude", install: "install Claude Code" },
  supportedOptions: [
    "model",
    "permissionMode",
    "allowedTools",
    "disallowedTools",
    "maxTurns",
    "maxBudgetUsd",
    "appendSystemPrompt",
    "addDirs",
  ],
  permissionModes: CLAUDE_PERMISSION_MODES,
  dangerousModes: CLAUDE_DANGEROUS_MODES,
  policySettings: {
    modes: "CLAUDE_DISPATCH_PERMISSION_MODES",
    defaultMode: "CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE",
    defaultModel: "CLAUDE_DISPATCH_DEFAULT_MODEL",
  },
  permissionPrompts: CLAUDE_PERMISSION_PROMPTS,
} as const satisfies RuntimeTraits;
