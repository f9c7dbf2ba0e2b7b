/**
 * How an agent may act (PROTOCOL.md §5.6): the tools' vocabulary, the same
 * for every runtime. Each runtime maps it to its own CLI's flags.
 */

/** The permission modes a call may ask for; a runtime without one of them refuses it. */
export const PERMISSION_MODES = ["default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"] as const;
export type PermissionMode = (typeof PERMISSION_MODES)[number];

/** Every value is validated before it gets here (§5.6). */
export interface AgentOptions {
  model?: string;
  permissionMode?: PermissionMode;
  allowedTools?: string[];
  disallowedTools?: string[];
  maxTurns?: number;
  maxBudgetUsd?: number;
  appendSystemPrompt?: string;
  addDirs?: string[];
}
