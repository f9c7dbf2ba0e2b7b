/**
 * The operator's policy (PROTOCOL.md §5.6, §11): what the model may ask of an
 * agent. A call that breaks it is refused with POLICY_DENIED, never quietly
 * changed; what a call leaves out is filled from the operator's defaults.
 */
import { DEFAULT_AGENT, OPTION_ARGUMENTS, PERMISSION_MODES, type AgentOffer, type AgentOptions, type HostOffer, type PermissionMode } from "./options.js";

/** A cwd or add_dirs entry as the host checked it (§5): its resolved path, or why it cannot be used. */
export type DirectoryCheck =
  | { ok: true; path: string }
  | { ok: false; code: "INVALID_ARGUMENT" | "POLICY_DENIED"; problem: string };
import { DispatchError } from "../core/errors.js";

export interface Policy {
  /** Modes a call may ask for. */
  permissionModes: readonly PermissionMode[];
  defaultPermissionMode: PermissionMode | undefined;
  defaultModel: string | undefined;
  /** Caps; when set they also apply to calls that name no limit. */
  maxTurns: number | undefined;
  maxBudgetUsd: number | undefined;
  defaultTimeoutMs: number;
  /** Real paths every cwd and add_dirs entry must lie inside; undefined means anywhere. */
  roots: readonly string[] | undefined;
  /** The agents offered, with the modes the operator allows each (§7); absent: Claude Code alone. */
  agents?: readonly AgentOffer[];
  /** Other machines agents may run on (§21); absent: this one only. */
  hosts?: readonly HostOffer[];
}

/**
 * A directory on another machine (§21), checked here by its path alone: absolute, and inside one of the host's
 * roots once "." and ".." are resolved. That machine checks it again with its links resolved, before anything runs.
 */
export function checkRemoteDirectory(dir: string, roots: readonly string[]): DirectoryCheck {
  if (!dir.startsWith("/")) return { ok: false, code: "INVALID_ARGUMENT", problem: "must be an absolute path on that host" };
  const normal = normalizePosix(dir);
  const inside = roots.some((root) => {
    const base = normalizePosix(root);
    return normal === base || normal.startsWith(base === "/" ? "/" : `${base}/`);
  });
  return inside ? { ok: true, path: normal } : { ok: false, code: "POLICY_DENIED", problem: `is outside the host's roots (${roots.join(", ")})` };
}

function normalizePosix(dir: string): string {
  const parts: string[] = [];
  for (const part of dir.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/** bypassPermissions lets the agent do anything without asking: only an operator can allow it. */
export const DEFAULT_PERMISSION_MODES: readonly PermissionMode[] = PERMISSION_MODES.filter((mode) => mode !== "bypassPermissions");

export const DEFAULT_POLICY: Policy = {
  permissionModes: DEFAULT_PERMISSION_MODES,
  defaultPermissionMode: undefined,
  defaultModel: undefined,
  maxTurns: undefined,
  maxBudgetUsd: undefined,
  defaultTimeoutMs: 120_000,
  roots: undefined,
};

function denied(detail: string): DispatchError {
  return new DispatchError("POLICY_DENIED", detail);
}

export function applyPolicy(requested: AgentOptions, policy: Policy, agent: string = DEFAULT_AGENT): AgentOptions {
  const options: AgentOptions = { ...requested };
  if (agent !== DEFAULT_AGENT) return applyOtherAgentPolicy(options, policy, agent);
  if (options.permissionMode !== undefined && !(policy.permissionModes as readonly string[]).includes(options.permissionMode)) {
    const hint = options.permissionMode === "bypassPermissions" ? " (an operator can allow it with CLAUDE_DISPATCH_PERMISSION_MODES)" : "";
    throw denied(`permission_mode "${options.permissionMode}" is not allowed here${hint}; allowed: ${policy.permissionModes.join(", ") || "none"}`);
  }
  if (options.maxTurns !== undefined && policy.maxTurns !== undefined && options.maxTurns > policy.maxTurns) {
    throw denied(`max_turns ${options.maxTurns} is above the operator's cap of ${policy.maxTurns}`);
  }
  if (options.maxBudgetUsd !== undefined && policy.maxBudgetUsd !== undefined && options.maxBudgetUsd > policy.maxBudgetUsd) {
    throw denied(`max_budget_usd ${options.maxBudgetUsd} is above the operator's cap of ${policy.maxBudgetUsd}`);
  }
  const permissionMode = options.permissionMode ?? policy.defaultPermissionMode;
  const model = options.model ?? policy.defaultModel;
  const maxTurns = options.maxTurns ?? policy.maxTurns;
  const maxBudgetUsd = options.maxBudgetUsd ?? policy.maxBudgetUsd;
  if (permissionMode !== undefined) options.permissionMode = permissionMode;
  if (model !== undefined) options.model = model;
  if (maxTurns !== undefined) options.maxTurns = maxTurns;
  if (maxBudgetUsd !== undefined) options.maxBudgetUsd = maxBudgetUsd;
  return options;
}

/** Another agent's call: its own allowed modes and the caps it has flags for; Claude Code's defaults do not apply. */
function applyOtherAgentPolicy(options: AgentOptions, policy: Policy, agent: string): AgentOptions {
  const offer = policy.agents?.find((candidate) => candidate.name === agent);
  if (!offer) throw denied(`agent "${agent}" is not offered here`);
  for (const key of Object.keys(options) as (keyof AgentOptions)[]) {
    if (!offer.supportedOptions.includes(key)) throw denied(`${OPTION_ARGUMENTS[key]} is not an option of agent "${agent}"`);
  }
  if (options.permissionMode !== undefined && !offer.allowedModes.includes(options.permissionMode)) {
    throw denied(`permission_mode "${options.permissionMode}" is not allowed for agent "${agent}" (an operator can allow it with ${offer.modesSetting}); allowed: ${offer.allowedModes.join(", ") || "none"}`);
  }
  if (options.maxTurns !== undefined && policy.maxTurns !== undefined && options.maxTurns > policy.maxTurns) {
    throw denied(`max_turns ${options.maxTurns} is above the operator's cap of ${policy.maxTurns}`);
  }
  const maxTurns = options.maxTurns ?? (offer.supportedOptions.includes("maxTurns") ? policy.maxTurns : undefined);
  if (maxTurns !== undefined) options.maxTurns = maxTurns;
  return options;
}

/**
 * Applies the policy and checks cwd and every add_dirs entry (§5, §5.6):
 * for a new call, and again for a queued job taken over after a restart,
 * since the operator may have tightened the policy meanwhile (§15.3).
 * Returns the options and directories the agent gets; throws DispatchError.
 */
export async function admitAgent(
  cwd: string,
  requested: AgentOptions,
  policy: Policy,
  checkDirectory: (dir: string) => Promise<DirectoryCheck>,
  agent: string = DEFAULT_AGENT,
): Promise<{ cwd: string; options: AgentOptions }> {
  const require = async (dir: string, label: string): Promise<string> => {
    const check = await checkDirectory(dir);
    if (!check.ok) throw new DispatchError(check.code, `"${label}" ${check.problem}`);
    return check.path;
  };
  const options = applyPolicy(requested, policy, agent);
  const resolvedCwd = await require(cwd, "cwd");
  if (options.addDirs) {
    const resolved: string[] = [];
    for (const [index, dir] of options.addDirs.entries()) resolved.push(await require(dir, `add_dirs[${index}]`));
    options.addDirs = resolved;
  }
  return { cwd: resolvedCwd, options };
}
