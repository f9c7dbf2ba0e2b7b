/**
 * Configuration from environment variables (PROTOCOL.md §11). A value that
 * is set but invalid is a startup error, never a silent fallback; every
 * invalid one is named, and doctor (§17) checks the rest with the valid ones.
 */
import path from "node:path";

import { MODEL_NAME, type AgentOffer, type HostOffer } from "./agent/options.js";
import type { RuntimeTraits } from "./agent/runtime.js";
import { HOME_AGENT, RUNTIMES, traitsOf } from "./runtimes/index.js";
import type { ThisMachine } from "./agent/machine.js";
import { DEFAULT_SSH_TIMEOUT_MS, parseHostsSetting, type HostEntry, type KnownAgents } from "./hosts/kinds.js";
import { programNotFound } from "./agent/ending.js";
import { ConfigError, Settings, type ConfigProblem } from "./core/settings.js";
import { clip } from "./core/text.js";
import { LOG_LEVELS, type LogLevel } from "./core/log.js";
import type { Policy } from "./agent/policy.js";
import { StateError } from "./store/records.js";
import { DEFAULT_MAX_LINE_BYTES } from "./server/stdio.js";

/** One agent's settings (§5.6, §7.5, §11), by the names its runtime declares. */
export interface AgentSettings {
  /** Its program: as its setting names it, else its name on PATH. */
  program: string;
  /** The permission modes a call may ask for: as its setting lists, else all but the dangerous ones. */
  allowedModes: readonly string[];
  /** What a call that names no mode or model gets, for an agent whose runtime has such a setting. */
  defaultMode?: string | undefined;
  defaultModel?: string | undefined;
}

/** The kill grace when none is set, or (for a command that must still kill) when the configuration is invalid. */
export const DEFAULT_KILL_GRACE_MS = 3000;

export interface Config {
  /** CLAUDE_DISPATCH_AGENTS as listed; unset: the default agent, and the others found at startup (§7). */
  agents: readonly string[] | undefined;
  /** Every agent this build can run, by name, as its settings make it (§7): offered or not. */
  agentSettings: Readonly<Record<string, AgentSettings>>;
  /** How many claude-dispatch servers sit above this one (0 for a host's own). */
  depth: number;
  maxDepth: number;
  maxLineBytes: number;
  maxOutputBytes: number;
  killGraceMs: number;
  jobRetentionMs: number;
  logLevel: LogLevel;
  /** Inline result text is cut here; claude_output pages the rest (§5.5). */
  maxResultChars: number;
  /** Longest quiet spell between progress notifications (§5.8). */
  heartbeatMs: number;
  /** The policy, except roots, which main resolves on disk, and the agents and hosts, which main offers. */
  policy: Omit<Policy, "roots" | "agents" | "hosts">;
  /** CLAUDE_DISPATCH_ROOTS as written, split on the platform's path delimiter. */
  roots: string[] | undefined;
  /** Agents running at once; later jobs queue (§8). */
  maxJobs: number;
  /** Where jobs are kept (§15). */
  stateDir: string;
  /** Disk that finished jobs may use; the oldest are removed beyond it. */
  stateMaxBytes: number;
  /** What shutdown does to running agents and queued jobs (§3). */
  onExit: OnExit;
  /** The operator's command run when a job this server owns ends (§8): argv, never a shell. */
  onDone: readonly string[] | undefined;
  /** Likewise, once per new permission request of a job this server owns (§18). */
  onInput: readonly string[] | undefined;
  /** Whether agents' permission prompts reach the caller (forward) or are refused as headless (deny) (§18). */
  approvals: Approvals;
  /** How long a permission request waits for an answer before it is denied (§18). */
  approvalTimeoutMs: number;
  /** Whether jobs run in a worktree of their own: the call's default, or always (§19). */
  worktree: WorktreePolicy;
  /** Where worktrees are made; unset: the state directory's worktrees folder. */
  worktreeDir: string | undefined;
  /** Other machines agents may run on, reached with ssh (§21); unset: none. */
  hosts: readonly HostEntry[] | undefined;
  /** ssh's program. */
  sshBin: string;
  /** How long an SSH host may keep silent: until a session's first frame, and mid-session (§21.2). */
  sshTimeoutMs: number;
}

export const WORKTREE_POLICIES = ["off", "on", "required"] as const;
export type WorktreePolicy = (typeof WORKTREE_POLICIES)[number];

export const APPROVAL_POLICIES = ["forward", "deny"] as const;
export type Approvals = (typeof APPROVAL_POLICIES)[number];

export const ON_EXIT_POLICIES = ["keep", "kill"] as const;
export type OnExit = (typeof ON_EXIT_POLICIES)[number];

export const DEPTH_VARIABLE = "CLAUDE_DISPATCH_DEPTH";

const DAY_MS = 86_400_000;

export { ConfigError, describeProblem, type ConfigProblem } from "./core/settings.js";

type Env = Readonly<Record<string, string | undefined>>;
/** The agents this build has (runtimes/index.ts); a test may declare another. */
type Runtimes = readonly RuntimeTraits[];

function loadPolicy(settings: Settings): Config["policy"] {
  return {
    maxTurns: settings.integer("CLAUDE_DISPATCH_MAX_TURNS", undefined, 1, 10_000),
    maxBudgetUsd: loadBudget(settings),
    defaultTimeoutMs: settings.integer("CLAUDE_DISPATCH_DEFAULT_TIMEOUT_MS", 120_000, 1000, DAY_MS),
    homeAgent: HOME_AGENT,
  };
}

/** Each runtime's settings, read under the names it declares: a runtime added to the list needs nothing here. */
function loadAgentSettings(settings: Settings, runtimes: Runtimes): Record<string, AgentSettings> {
  return Object.fromEntries(runtimes.map((runtime) => [runtime.name, loadAgent(settings, runtime)]));
}

function loadAgent(settings: Settings, runtime: RuntimeTraits): AgentSettings {
  const names = runtime.policySettings;
  const listed = settings.list(names.modes, runtime.permissionModes, "permission modes");
  const allowedModes = listed ?? runtime.permissionModes.filter((mode) => !runtime.dangerousModes.includes(mode));
  const program = settings.optional(runtime.program.setting) ?? runtime.program.defaultBin;
  const agent: AgentSettings = { program, allowedModes };
  if (names.defaultMode !== undefined) {
    let mode = settings.optional(names.defaultMode);
    // Against the modes as listed: when the list itself is invalid, its own problem says so.
    if (mode !== undefined && !allowedModes.includes(mode) && !settings.isInvalid(names.modes)) {
      const allowed = `must be one of the modes ${names.modes} allows (${allowedModes.join(", ")})`;
      mode = settings.refuse(names.defaultMode, mode, allowed, undefined);
    }
    agent.defaultMode = mode;
  }
  if (names.defaultModel !== undefined) {
    let model = settings.optional(names.defaultModel);
    if (model !== undefined && !MODEL_NAME.test(model)) {
      const name = "a model name: up to 200 letters, digits and . _ : / @ [ ] -, starting with a letter or digit";
      model = settings.refuse(names.defaultModel, model, `must be ${name}`, undefined);
    }
    agent.defaultModel = model;
  }
  return agent;
}

function loadBudget(settings: Settings): number | undefined {
  const raw = settings.optional("CLAUDE_DISPATCH_MAX_BUDGET_USD");
  if (raw === undefined) return undefined;
  const dollars = Number(raw);
  if (/^\d+(\.\d+)?$/.test(raw) && dollars > 0 && dollars <= 10_000) return dollars;
  const range = "must be a number of dollars above 0 and at most 10000";
  return settings.refuse("CLAUDE_DISPATCH_MAX_BUDGET_USD", raw, range, undefined);
}

/** Every setting read, and those that are invalid. */
type Checked = { config: Config; problems: ConfigProblem[] };

/** The configuration, or a ConfigError naming every invalid setting (§11). */
export function loadConfig(env: Env, machine: ThisMachine, runtimes: Runtimes = RUNTIMES): Config {
  const { config, problems } = checkConfig(env, machine, runtimes);
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/**
 * Every setting checked (doctor, §17): each invalid one named, and read as its default in the configuration
 * returned, which holds every valid setting as it is set.
 */
export function checkConfig(env: Env, machine: ThisMachine, runtimes: Runtimes = RUNTIMES): Checked {
  const { pathDelimiter, cpus, readTextFile } = machine;
  const settings = new Settings(env);
  const names = runtimes.map((runtime) => runtime.name);
  const config: Config = {
    agents: unique(settings.list("CLAUDE_DISPATCH_AGENTS", names, "agents")),
    agentSettings: loadAgentSettings(settings, runtimes),
    depth: settings.integer(DEPTH_VARIABLE, 0, 0, 1000),
    maxDepth: settings.integer("CLAUDE_DISPATCH_MAX_DEPTH", 1, 0, 1000),
    maxLineBytes: settings.integer("CLAUDE_DISPATCH_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES, 1024, 1024 ** 3),
    maxOutputBytes: settings.integer("CLAUDE_DISPATCH_MAX_OUTPUT_BYTES", 64 * 1024 * 1024, 1024, 1024 ** 3),
    killGraceMs: settings.integer("CLAUDE_DISPATCH_KILL_GRACE_MS", DEFAULT_KILL_GRACE_MS, 0, 60_000),
    jobRetentionMs: settings.integer("CLAUDE_DISPATCH_JOB_RETENTION_MS", 7 * DAY_MS, 0, 365 * DAY_MS),
    logLevel: settings.oneOf("CLAUDE_DISPATCH_LOG_LEVEL", LOG_LEVELS, "info"),
    maxResultChars: settings.integer("CLAUDE_DISPATCH_MAX_RESULT_CHARS", 20_000, 1000, 10_000_000),
    heartbeatMs: settings.integer("CLAUDE_DISPATCH_HEARTBEAT_MS", 15_000, 1000, 600_000),
    // Each agent is a few hundred MB and busy; more than the CPUs only slows them all.
    maxJobs: settings.integer("CLAUDE_DISPATCH_MAX_JOBS", Math.max(2, cpus), 1, 1000),
    stateDir: loadStateDir(settings, machine),
    stateMaxBytes: settings.integer("CLAUDE_DISPATCH_STATE_MAX_BYTES", 1024 ** 3, 1024 * 1024, 1024 ** 4),
    onExit: settings.oneOf("CLAUDE_DISPATCH_ON_EXIT", ON_EXIT_POLICIES, "keep"),
    onDone: loadCommand(settings, "CLAUDE_DISPATCH_ON_DONE"),
    onInput: loadCommand(settings, "CLAUDE_DISPATCH_ON_INPUT"),
    approvals: settings.oneOf("CLAUDE_DISPATCH_APPROVALS", APPROVAL_POLICIES, "forward"),
    approvalTimeoutMs: settings.integer("CLAUDE_DISPATCH_APPROVAL_TIMEOUT_MS", 600_000, 1000, DAY_MS),
    worktree: settings.oneOf("CLAUDE_DISPATCH_WORKTREE", WORKTREE_POLICIES, "off"),
    worktreeDir: loadWorktreeDir(settings),
    hosts: loadHosts(settings, readTextFile, {
      names,
      modesOf: (agent) => traitsOf(agent, runtimes)?.permissionModes ?? [],
    }),
    sshBin: settings.optional("CLAUDE_DISPATCH_SSH_BIN") ?? "ssh",
    sshTimeoutMs: settings.integer("CLAUDE_DISPATCH_SSH_TIMEOUT_MS", DEFAULT_SSH_TIMEOUT_MS, 1000, 600_000),
    policy: loadPolicy(settings),
    roots: loadRoots(settings, pathDelimiter),
  };
  return { config, problems: settings.problems };
}

function loadStateDir(settings: Settings, machine: ThisMachine): string {
  try {
    return machine.stateDirectory(settings.env);
  } catch (error) {
    if (!(error instanceof StateError)) throw error;
    const name = "CLAUDE_DISPATCH_STATE_DIR";
    const set = settings.optional(name);
    // No directory stands in for it: doctor skips what needs it (§17), and nothing else runs.
    if (set !== undefined) return settings.refuse(name, set, "must be an absolute path", "");
    return settings.refuse(name, "", "must be set: there is no home directory", "");
  }
}

/** An absolute path, or unset; never relative, which would depend on where a host starts the server. */
function loadWorktreeDir(settings: Settings): string | undefined {
  const value = settings.optional("CLAUDE_DISPATCH_WORKTREE_DIR");
  const absolute = (dir: string): boolean =>
    dir.startsWith("/") || dir.startsWith("\\\\") || /^[A-Za-z]:[\\/]/.test(dir);
  if (value === undefined || absolute(value)) return value;
  return settings.refuse("CLAUDE_DISPATCH_WORKTREE_DIR", value, "must be an absolute path", undefined);
}

type HostsRead = HostEntry[] | undefined;

function loadHosts(settings: Settings, readFile: ThisMachine["readTextFile"], agents: KnownAgents): HostsRead {
  const name = "CLAUDE_DISPATCH_HOSTS";
  const raw = settings.optional(name);
  if (raw === undefined) return undefined;
  try {
    return parseHostsSetting(raw, readFile, agents);
  } catch (error) {
    // The parser's reason starts with the setting's name; here it follows what the setting must be.
    const reason = clip((error as Error).message.replace(/^CLAUDE_DISPATCH_HOSTS:? /, ""), 300);
    // "must be …" is what the problem already says; anything else is what is wrong with this value.
    const where = reason.startsWith("host ") ? "in this one," : "this one";
    const which = reason.startsWith("must be ") ? "" : `; ${where} ${reason}`;
    const range = "must be a JSON object of hosts (§21.1) or the absolute path of a file holding one";
    return settings.refuse(name, raw, `${range}${which}`, undefined);
  }
}

/** Bounds on an operator's command (CLAUDE_DISPATCH_ON_DONE, CLAUDE_DISPATCH_ON_INPUT): an argv, not a script. */
const COMMAND_MAX_ARGS = 64;
const COMMAND_MAX_ARG_CHARS = 4096;

/** A JSON array of strings, the program first; never run through a shell, so nothing in it is interpreted. */
function loadCommand(settings: Settings, name: string): string[] | undefined {
  const raw = settings.optional(name);
  if (raw === undefined) return undefined;
  let argv: unknown;
  try {
    argv = JSON.parse(raw);
  } catch {
    argv = undefined;
  }
  const valid =
    Array.isArray(argv) &&
    argv.length >= 1 &&
    argv.length <= COMMAND_MAX_ARGS &&
    argv.every((arg) => typeof arg === "string" && arg.length <= COMMAND_MAX_ARG_CHARS && !arg.includes("\0")) &&
    (argv[0] as string).trim() !== "";
  if (valid) return argv as string[];
  const example = '["notify-send", "claude-dispatch"]';
  const each = `each at most ${COMMAND_MAX_ARG_CHARS} characters and the first not empty`;
  const range =
    `must be a JSON array of 1 to ${COMMAND_MAX_ARGS} strings, the program first (such as ` + `${example}), ${each}`;
  return settings.refuse(name, raw, range, undefined);
}

/** Each name once, in the order first given. */
function unique<T>(items: readonly T[] | undefined): T[] | undefined {
  return items && [...new Set(items)];
}

/** Set but naming no directory (say ":") would refuse every call: that is a mistake, not a policy. */
function loadRoots(settings: Settings, pathDelimiter: string): string[] | undefined {
  const raw = settings.optional("CLAUDE_DISPATCH_ROOTS");
  if (raw === undefined) return undefined;
  const roots = raw
    .split(pathDelimiter)
    .map((root) => root.trim())
    .filter(Boolean);
  if (roots.length > 0) return roots;
  const range = `must name at least one directory, separated by "${pathDelimiter}"`;
  return settings.refuse("CLAUDE_DISPATCH_ROOTS", raw, range, undefined);
}

/** The program an agent runs as: its setting, else its name on PATH; an agent this build lacks, its name. */
export function programOf(config: Config, agent: string): string {
  return config.agentSettings[agent]?.program ?? agent;
}

/**
 * The agents this server offers (§7), each with what a call may ask of it: CLAUDE_DISPATCH_AGENTS, else the
 * default agent and the others whose program is found on PATH now. The default agent is offered found or not: a
 * GUI host's short PATH must give SPAWN_FAILED with its fix, not an agent quietly missing. A call for an agent
 * whose program is not there now fails at once with that fix (missingProgram), before any job is made.
 */
export function offeredAgents(config: Config, env: Env, here: ProgramFinder, runtimes = RUNTIMES): AgentOffer[] {
  const found = (name: string): boolean => here.findProgram(programOf(config, name), env) !== undefined;
  const known = runtimes.map((runtime) => runtime.name);
  // The home agent, listed first, is offered found or not.
  const names = config.agents ?? known.filter((name, index) => index === 0 || found(name));
  return names.flatMap((name) => {
    const runtime = traitsOf(name, runtimes);
    const agent = config.agentSettings[name];
    const missing = (): string | undefined => missingProgram(config, name, env, here, runtimes);
    return runtime && agent ? [offerOf(runtime, agent, missing)] : [];
  });
}

/** The hosts of CLAUDE_DISPATCH_HOSTS as the tools offer them (§21.1). */
export function hostOffers(config: Config): HostOffer[] {
  return (config.hosts ?? []).map(({ name, roots, agents, permissionModes }) => ({
    name,
    roots,
    agents,
    ...(permissionModes ? { allowedModes: permissionModes } : {}),
  }));
}

/** What a call may ask of one agent, from what its runtime declares and what the operator set. */
function offerOf(runtime: RuntimeTraits, agent: AgentSettings, missing?: () => string | undefined): AgentOffer {
  const { name, label, permissionModes: modes, dangerousModes, supportedOptions, optionProblem } = runtime;
  const { allowedModes, defaultMode, defaultModel } = agent;
  const modesSetting = runtime.policySettings.modes;
  const offer: AgentOffer = { name, label, modes, dangerousModes, allowedModes, supportedOptions, modesSetting };
  if (defaultMode !== undefined) offer.defaultMode = defaultMode;
  if (defaultModel !== undefined) offer.defaultModel = defaultModel;
  if (optionProblem) offer.optionProblem = optionProblem;
  if (missing) offer.missingProgram = missing;
  return offer;
}

/**
 * The policy of an unset environment (§11): no caps, no roots, and the default agent offered with the modes its
 * unset setting allows; its program is not looked for.
 */
export const DEFAULT_POLICY: Policy = {
  ...loadPolicy(new Settings({})),
  roots: undefined,
  agents: RUNTIMES.filter((runtime) => runtime.name === HOME_AGENT).map((runtime) =>
    offerOf(runtime, loadAgent(new Settings({}), runtime)),
  ),
};

/** Why an agent's program cannot be started here: undefined when it can. */
type Missing = string | undefined;

/** What looking for an agent's program needs of this machine. */
export type ProgramFinder = Pick<ThisMachine, "findProgram" | "isRegularFile">;

/** Why the agent's program cannot be started here, as its spawn would say (§7.3); undefined when it is there. */
export function missingProgram(
  config: Config,
  name: string,
  env: Env,
  here: ProgramFinder,
  runtimes?: Runtimes,
): Missing {
  const bin = programOf(config, name);
  if (here.findProgram(bin, env) !== undefined) return undefined;
  const program = traitsOf(name, runtimes ?? RUNTIMES)?.program;
  if (!program) return `${bin} not found`;
  const { defaultBin, setting } = program;
  if (bin !== defaultBin && here.isRegularFile(bin)) return `${bin} is not executable (${setting}); check its mode`;
  return programNotFound({ bin, ...program });
}

/** What the server says once at its start (§7.5): the agents it offers, any it cannot start, and those not found. */
export function agentsAtStart(offers: readonly AgentOffer[], config: Config): { level: "info" | "warn"; text: string } {
  const names = offers.map((offer) => offer.name);
  const missing = offers.flatMap((offer) => {
    const why = offer.missingProgram?.();
    return why === undefined ? [] : [`${offer.name} cannot start: ${why}`];
  });
  const unfound = unofferedAgents(names, config);
  const notOffered = unfound.length > 0 ? [`${unfound.join(" and ")} not found, so not offered`] : [];
  const text = [`agents: ${names.join(", ")}`, ...missing, ...notOffered].join("; ");
  return { level: missing.length > 0 ? "warn" : "info", text };
}

/** The agents left out because their program was not found: none when CLAUDE_DISPATCH_AGENTS lists them (§7.5). */
export function unofferedAgents(offered: readonly string[], config: Config): string[] {
  return config.agents === undefined ? Object.keys(config.agentSettings).filter((name) => !offered.includes(name)) : [];
}

/** Where this machine's job worktrees go (§19): CLAUDE_DISPATCH_WORKTREE_DIR, else the state directory's worktrees/. */
export function worktreeRootOf(config: Pick<Config, "worktreeDir" | "stateDir">): string {
  return config.worktreeDir ?? path.join(config.stateDir, "worktrees");
}
