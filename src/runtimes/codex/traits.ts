/**
 * What OpenAI Codex is, known at startup (PROTOCOL.md §5.6, §7.5): its program and the setting that names it,
 * its permission modes, the options `codex exec` has flags for and the operator's setting for its modes.
 */
import type { AgentOptions } from "../../agent/options.js";
import type { RuntimeTraits } from "../../agent/runtime.js";

/** The options `codex exec` has a flag for. It has none for turn or budget limits, tool rules or system prompts. */
export const CODEX_OPTIONS = ["model", "permissionMode", "addDirs"] as const satisfies readonly (keyof AgentOptions)[];

/**
 * `permission_mode` for Codex, in its own words: its three `--sandbox` values,
 * and the flag that drops both sandbox and approvals. Without a mode Codex
 * keeps its own default (read-only, or the operator's config.toml).
 */
export const CODEX_PERMISSION_MODES = [
  "read-only",
  "workspace-write",
  "danger-full-access",
  "dangerously-bypass-approvals-and-sandbox",
] as const;
export type CodexPermissionMode = (typeof CODEX_PERMISSION_MODES)[number];

/** Both run model-written commands unsandboxed. */
export const CODEX_DANGEROUS_MODES: readonly CodexPermissionMode[] = [
  "danger-full-access",
  "dangerously-bypass-approvals-and-sandbox",
];

/** The operator's defaults for model and mode are Claude Code's, so Codex has only its modes' setting (§7.5). */
export const CODEX_TRAITS = {
  name: "codex",
  label: "Codex",
  program: { setting: "CLAUDE_DISPATCH_CODEX_BIN", defaultBin: "codex", install: "install Codex (@openai/codex)" },
  supportedOptions: CODEX_OPTIONS,
  permissionModes: CODEX_PERMISSION_MODES,
  dangerousModes: CODEX_DANGEROUS_MODES,
  policySettings: { modes: "CLAUDE_DISPATCH_CODEX_PERMISSION_MODES" },
} as const satisfies RuntimeTraits;
