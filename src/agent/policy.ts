/**
 * The operator's policy (PROTOCOL.md §5.6, §11): what the model may ask of an
 * agent. A call that breaks it is refused with POLICY_DENIED, never quietly
 * changed; what a call leaves out is filled from the operator's defaults.
 */
import { DispatchError } from "../core/errors.js";
import { OPTION_ARGUMENTS, type AgentOffer, type AgentOptions, type HostOffer } from "./options.js";

/** A cwd or add_dirs entry as the host checked it (§5): its resolved path, or why it cannot be used. */
export type DirectoryCheck =
  { ok: true; path: string } | { ok: false; code: "INVALID_ARGUMENT" | "POLICY_DENIED"; problem: string };

export interface Policy {
  /** Caps; when set they also apply to calls that name no limit, of an agent with a flag for it. */
  maxTurns: number | undefined;
  maxBudgetUsd: number | undefined;
  defaultTimeoutMs: number;
  /** Real paths every cwd and add_dirs entry must lie inside; undefined means anywhere. */
  roots: readonly string[] | undefined;
  /** The agents offered, each with what a call may ask of it and the operator's defaults for it (§5.6, §7). */
  agents: readonly AgentOffer[];
  /** The agent a call naming none gets when it is offered, else the first offered (§7.5). */
  homeAgent: string;
  /** Other machines agents may run on (§21); absent: this one only. */
  hosts?: readonly HostOffer[];
}

/**
 * A directory on another machine (§21), checked here by its path alone: absolute, and inside one of the host's
 * roots once "." and ".." are resolved. That machine checks it again with its links resolved, before anything runs.
 */
export function checkRemoteDirectory(dir: string, roots: readonly string[]): DirectoryCheck {
  if (!dir.startsWith("/"))
    return { ok: false, code: "INVALID_ARGUMENT", problem: "must be an absolute path on that host" };
  const normal = normalizePosix(dir);
  const inside = roots.some((root) => {
    const base = normalizePosix(root);
    return normal === base || normal.startsWith(base === "/" ? "/" : `${base}/`);
  });
  return inside
    ? { ok: true, path: normal }
    : { ok: false, code: "POLICY_DENIED", problem: `is outside the host's roots (${roots.join(", ")})` };
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

function denied(detail: string): DispatchError {
  return new DispatchError("POLICY_DENIED", detail);
}

/**
 * One path for every agent: its options and mode checked against what it offers, the caps applied to the options
 * it has, and the operator's defaults for it filled in where the call names none.
 */
export function applyPolicy(
  requested: AgentOptions,
  policy: Policy,
  agent: string = policy.homeAgent,
  host?: string,
): AgentOptions {
  const offer = offerOn(policy, agent, host);
  const options: AgentOptions = { ...requested };
  for (const key of Object.keys(options) as (keyof AgentOptions)[]) {
    if (offer.supportedOptions.includes(key)) continue;
    throw denied(`${OPTION_ARGUMENTS[key]} is not an option of agent "${agent}"`);
  }
  if (options.permissionMode !== undefined && !offer.allowedModes.includes(options.permissionMode)) {
    throw denied(modeRefusal(offer, options.permissionMode, policy.homeAgent, host));
  }
  if (options.maxTurns !== undefined && policy.maxTurns !== undefined && options.maxTurns > policy.maxTurns) {
    throw denied(`max_turns ${options.maxTurns} is above the operator's cap of ${policy.maxTurns}`);
  }
  const budget = options.maxBudgetUsd;
  if (budget !== undefined && policy.maxBudgetUsd !== undefined && budget > policy.maxBudgetUsd) {
    throw denied(`max_budget_usd ${budget} is above the operator's cap of ${policy.maxBudgetUsd}`);
  }
  const has = (key: keyof AgentOptions): boolean => offer.supportedOptions.includes(key);
  const permissionMode = options.permissionMode ?? offer.defaultMode;
  const model = options.model ?? offer.defaultModel;
  const maxTurns = options.maxTurns ?? (has("maxTurns") ? policy.maxTurns : undefined);
  const maxBudgetUsd = options.maxBudgetUsd ?? (has("maxBudgetUsd") ? policy.maxBudgetUsd : undefined);
  if (permissionMode !== undefined) options.permissionMode = permissionMode;
  if (model !== undefined) options.model = model;
  if (maxTurns !== undefined) options.maxTurns = maxTurns;
  if (maxBudgetUsd !== undefined) options.maxBudgetUsd = maxBudgetUsd;
  return options;
}

/** The agent as offered where the job runs: a host's own modes for it replace the operator's (§21.1). */
function offerOn(policy: Policy, agent: string, host: string | undefined): AgentOffer {
  const offer = policy.agents.find((candidate) => candidate.name === agent);
  if (!offer) throw denied(`agent "${agent}" is not offered here`);
  const modes =
    host === undefined ? undefined : policy.hosts?.find((each) => each.name === host)?.allowedModes?.[agent];
  return modes ? { ...offer, allowedModes: modes } : offer;
}

/**
 * A mode the operator does not allow. The default agent's is refused "here", naming the setting only for a mode
 * that drops its safety checks; another agent's names itself and the setting (§5.6, §7.5); on a host, the host.
 */
function modeRefusal(offer: AgentOffer, mode: string, homeAgent: string, host: string | undefined): string {
  const named = offer.name !== homeAgent;
  const setting = host === undefined ? offer.modesSetting : `"permission_modes" of host ${host}`;
  const allowIt = ` (an operator can allow it with ${setting})`;
  const hint = named || host !== undefined || offer.dangerousModes.includes(mode) ? allowIt : "";
  const agent = named ? `for agent "${offer.name}"` : "";
  const where = [agent, host === undefined ? "" : `on host ${host}`].filter(Boolean).join(" ") || "here";
  const allowed = offer.allowedModes.join(", ") || "none";
  return `permission_mode "${mode}" is not allowed ${where}${hint}; allowed: ${allowed}`;
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
  agent: string = policy.homeAgent,
  host?: string,
): Promise<{ cwd: string; options: AgentOptions }> {
  const require = async (dir: string, label: string): Promise<string> => {
    const check = await checkDirectory(dir);
    if (!check.ok) throw new DispatchError(check.code, `"${label}" ${check.problem}`);
    return check.path;
  };
  const options = applyPolicy(requested, policy, agent, host);
  const resolvedCwd = await require(cwd, "cwd");
  if (options.addDirs) {
    const resolved: string[] = [];
    for (const [index, dir] of options.addDirs.entries()) resolved.push(await require(dir, `add_dirs[${index}]`));
    options.addDirs = resolved;
  }
  return { cwd: resolvedCwd, options };
}
