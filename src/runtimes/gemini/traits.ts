/**
 * What Gemini CLI is, known at startup (PROTOCOL.md §5.6, §7.5): its program and the setting that names it, its
 * approval modes, the options it has flags for, the values it would misread and the operator's setting for its modes.
 */
import type { RuntimeTraits } from "../../agent/runtime.js";
import { geminiOptionProblem } from "./args.js";

/**
 * `--approval-mode`, in the CLI's words. Headless, nobody can approve a call,
 * so what would ask is refused. `yolo` approves every call and is the only
 * mode that offers the shell tool (run_shell_command) by itself; `auto_edit`
 * approves file edits; `plan` is read-only. In any mode, `allowed_tools`
 * naming run_shell_command (or `run_shell_command(git)`) offers and approves
 * the shell for commands the CLI does not judge risky (a redirection still asks).
 */
export const GEMINI_PERMISSION_MODES = ["default", "auto_edit", "yolo", "plan"] as const;
export const GEMINI_DANGEROUS_MODES: readonly string[] = ["yolo"];

/** The options the CLI has a flag for. It has none for disallowed tools, turns, budget or the system prompt. */
export const GEMINI_OPTIONS = ["model", "permissionMode", "allowedTools", "addDirs"] as const;

/** The operator's defaults for model and mode are Claude Code's, so Gemini CLI has only its modes' setting (§7.5). */
export const GEMINI_TRAITS = {
  name: "gemini",
  label: "Gemini CLI",
  program: {
    setting: "CLAUDE_DISPATCH_GEMINI_BIN",
    defaultBin: "gemini",
    install: "install Gemini CLI (@google/gemini-cli)",
  },
  supportedOptions: GEMINI_OPTIONS,
  permissionModes: GEMINI_PERMISSION_MODES,
  dangerousModes: GEMINI_DANGEROUS_MODES,
  policySettings: { modes: "CLAUDE_DISPATCH_GEMINI_PERMISSION_MODES" },
  optionProblem: geminiOptionProblem,
} as const satisfies RuntimeTraits;
