/**
 * Configuration from environment variables (PROTOCOL.md §11). A value that
 * is set but invalid is a startup error, never a silent fallback; every
 * invalid one is named, and doctor (§17) checks the rest with the valid ones.
 */
import { PERMISSION_MODES, type PermissionMode } from "./agent/options.js";
import { AGENT_NAMES, AGENT_PROGRAMS, MODES_SETTINGS, isAgentName, traitsOf, type AgentName } from "./runtimes/index.js";
import { findProgram, isRegularFile } from "./hosts/local/find-program.js";
import { DEFAULT_SSH_TIMEOUT_MS, parseHostsSetting, type SshHostConfig } from "./hosts/ssh/config.js";
import type { AgentOffer } from "./agent/options.js";
import { programNotFound } from "./agent/start-failure.js";
import { quoted } from "./core/errors.js";
import { clip } from "./core/text.js";
import { LOG_LEVELS, type LogLevel } from "./core/log.js";
import { DEFAULT_PERMISSION_MODES, DEFAULT_POLICY, type Policy } from "./agent/policy.js";
import { MODEL_NAME } from "./tools/validation.js";
import { stateDirectory } from "./hosts/local/state-location.js";
import { StateError } from "./store/records.js";
import { DEFAULT_MAX_LINE_BYTES } from "./server/stdio.js";

export interface Config {
  claudeBin: string;
  /** CLAUDE_DISPATCH_AGENTS as listed; unset: Claude Code, and the other agents whose program is found at startup (§7). */
  agents: readonly AgentName[] | undefined;
  /** The other agents' programs, and the permission modes a call may ask of each (§5.6, §7). */
  codexBin: string;
  geminiBin: string;
  agentModes: Readonly<Record<"codex" | "gemini", readonly string[]>>;
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
  /** The policy, except roots, which main resolves on disk. */
  policy: Omit<Policy, "roots">;
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
  hosts: readonly SshHostConfig[] | undefined;
  /** ssh's program. */
  sshBin: string;
  /** How long an SSH host may keep silent: up to a session's first frame, and mid-session through ssh's keep-alives (§21.2). */
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

/** A setting set but invalid: its name, its value as set, and what it must be ("must be one of keep, kill"). */
export interface ConfigProblem {
  setting: string;
  value: string;
  problem: string;
}

/** The configuration is invalid: the server refuses to start (§11), naming every invalid setting. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly ConfigProblem[]) {
    const each = problems.map((problem) => `  ${describeProblem(problem)}`);
    const only = problems.length === 1 ? problems[0] : undefined;
    super(only ? describeProblem(only) : [`${problems.length} settings are invalid:`, ...each].join("\n"));
  }
}

/** "CLAUDE_DISPATCH_ON_EXIT must be one of keep, kill, got "detach"": the value echoed as §10 echoes values. */
export function describeProblem({ setting, value, problem }: ConfigProblem): string {
  return value === "" ? `${setting} ${problem}` : `${setting} ${problem}, got ${quoted(value)}`;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Reads settings from the environment: each invalid one recorded and read as its default, so that all are checked. */
class Settings {
  readonly problems: ConfigProblem[] = [];

  constructor(readonly env: Env) {}

  /** Trimmed; unset, empty or only whitespace is undefined. */
  optional(name: string): string | undefined {
    const raw = this.env[name]?.trim();
    return raw === undefined || raw === "" ? undefined : raw;
  }

  /** Records the problem and gives the fallback in the invalid value's place. */
  refuse<T>(setting: string, value: string, problem: string, fallback: T): T {
    this.problems.push({ setting, value, problem });
    return fallback;
  }

  isInvalid(name: string): boolean {
    return this.problems.some((problem) => problem.setting === name);
  }

  /** Plain decimal digits within the range (§11). */
  integer<T extends number | undefined>(name: string, fallback: T, min: number, max: number): number | T {
    const raw = this.env[name];
    if (raw === undefined || raw.trim() === "") return fallback;
    const value = /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
    if (Number.isSafeInteger(value) && value >= min && value <= max) return value;
    return this.refuse(name, raw, `must be an integer from ${min} to ${max}`, fallback);
  }

  oneOf<T extends string>(name: string, values: readonly T[], fallback: T): T {
    const value = this.optional(name) ?? fallback;
    if ((values as readonly string[]).includes(value)) return value as T;
    return this.refuse(name, value, `must be one of ${values.join(", ")}`, fallback);
  }

  /** A comma-separated list of names among `known`; undefined when unset or invalid. */
  list(name: string, known: readonly string[], what: string): string[] | undefined {
    const raw = this.optional(name);
    if (raw === undefined) return undefined;
    const names = raw.split(",").map((entry) => entry.trim()).filter(Boolean);
    if (names.length > 0 && names.every((entry) => known.includes(entry))) return names;
    return this.refuse(name, raw, `must list, comma-separated, ${what} among ${known.join(", ")}`, undefined);
  }
}

function loadPolicy(settings: Settings): Omit<Policy, "roots"> {
  const { defaultTimeoutMs } = DEFAULT_POLICY;
  const modesSetting = "CLAUDE_DISPATCH_PERMISSION_MODES";
  const listed = settings.list(modesSetting, PERMISSION_MODES, "permission modes") as PermissionMode[] | undefined;
  const permissionModes = listed ?? [...DEFAULT_PERMISSION_MODES];
  const defaultSetting = "CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE";
  let defaultPermissionMode = settings.optional(defaultSetting) as PermissionMode | undefined;
  // Against the modes as listed: when the list itself is invalid, its own problem says so.
  const unlisted = defaultPermissionMode !== undefined && !permissionModes.includes(defaultPermissionMode);
  if (defaultPermissionMode !== undefined && unlisted && !settings.isInvalid(modesSetting)) {
    const allowed = `must be one of the modes ${modesSetting} allows (${permissionModes.join(", ")})`;
    defaultPermissionMode = settings.refuse(defaultSetting, defaultPermissionMode, allowed, undefined);
  }
  let defaultModel = settings.optional("CLAUDE_DISPATCH_DEFAULT_MODEL");
  if (defaultModel !== undefined && !MODEL_NAME.test(defaultModel)) {
    const name = "a model name: up to 200 letters, digits and . _ : / @ [ ] -, starting with a letter or digit";
    defaultModel = settings.refuse("CLAUDE_DISPATCH_DEFAULT_MODEL", defaultModel, `must be ${name}`, undefined);
  }
  return {
    permissionModes,
    defaultPermissionMode,
    defaultModel,
    maxTurns: settings.integer("CLAUDE_DISPATCH_MAX_TURNS", undefined, 1, 10_000),
    maxBudgetUsd: loadBudget(settings),
    defaultTimeoutMs: settings.integer("CLAUDE_DISPATCH_DEFAULT_TIMEOUT_MS", defaultTimeoutMs, 1000, DAY_MS),
  };
}

function loadBudget(settings: Settings): number | undefined {
  const raw = settings.optional("CLAUDE_DISPATCH_MAX_BUDGET_USD");
  if (raw === undefined) return undefined;
  const dollars = Number(raw);
  if (/^\d+(\.\d+)?$/.test(raw) && dollars > 0 && dollars <= 10_000) return dollars;
  const range = "must be a number of dollars above 0 and at most 10000";
  return settings.refuse("CLAUDE_DISPATCH_MAX_BUDGET_USD", raw, range, undefined);
}

/** Where this machine keeps things: the path delimiter, the CPU count, the platform and the home directory. */
export interface Host {
  pathDelimiter: string;
  cpus: number;
  platform: string;
  home: string;
  /** Reads the file CLAUDE_DISPATCH_HOSTS may name. */
  readTextFile(file: string): string;
}

const DEFAULT_HOST: Host = {
  pathDelimiter: ":",
  cpus: 2,
  platform: "linux",
  home: "/nonexistent",
  readTextFile: () => {
    throw new Error("no file can be read here");
  },
};

/** The configuration, or a ConfigError naming every invalid setting (§11). */
export function loadConfig(env: Env, host: Partial<Host> = {}): Config {
  const { config, problems } = checkConfig(env, host);
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/**
 * Every setting checked (doctor, §17): each invalid one named, and read as its default in the configuration
 * returned, which holds every valid setting as it is set.
 */
export function checkConfig(env: Env, host: Partial<Host> = {}): { config: Config; problems: ConfigProblem[] } {
  const { pathDelimiter, cpus, platform, home, readTextFile } = { ...DEFAULT_HOST, ...host };
  const settings = new Settings(env);
  const config: Config = {
    claudeBin: settings.optional("CLAUDE_DISPATCH_CLAUDE_BIN") ?? AGENT_PROGRAMS.claude.defaultBin,
    agents: unique(settings.list("CLAUDE_DISPATCH_AGENTS", AGENT_NAMES, "agents")?.filter(isAgentName)),
    codexBin: settings.optional("CLAUDE_DISPATCH_CODEX_BIN") ?? AGENT_PROGRAMS.codex.defaultBin,
    geminiBin: settings.optional("CLAUDE_DISPATCH_GEMINI_BIN") ?? AGENT_PROGRAMS.gemini.defaultBin,
    agentModes: { codex: loadAgentModes(settings, "codex"), gemini: loadAgentModes(settings, "gemini") },
    depth: settings.integer(DEPTH_VARIABLE, 0, 0, 1000),
    maxDepth: settings.integer("CLAUDE_DISPATCH_MAX_DEPTH", 1, 0, 1000),
    maxLineBytes: settings.integer("CLAUDE_DISPATCH_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES, 1024, 1024 ** 3),
    maxOutputBytes: settings.integer("CLAUDE_DISPATCH_MAX_OUTPUT_BYTES", 64 * 1024 * 1024, 1024, 1024 ** 3),
    killGraceMs: settings.integer("CLAUDE_DISPATCH_KILL_GRACE_MS", 3000, 0, 60_000),
    jobRetentionMs: settings.integer("CLAUDE_DISPATCH_JOB_RETENTION_MS", 7 * DAY_MS, 0, 365 * DAY_MS),
    logLevel: settings.oneOf("CLAUDE_DISPATCH_LOG_LEVEL", LOG_LEVELS, "info"),
    maxResultChars: settings.integer("CLAUDE_DISPATCH_MAX_RESULT_CHARS", 20_000, 1000, 10_000_000),
    heartbeatMs: settings.integer("CLAUDE_DISPATCH_HEARTBEAT_MS", 15_000, 1000, 600_000),
    // Each agent is a few hundred MB and busy; more than the CPUs only slows them all.
    maxJobs: settings.integer("CLAUDE_DISPATCH_MAX_JOBS", Math.max(2, cpus), 1, 1000),
    stateDir: loadStateDir(settings, platform, home),
    stateMaxBytes: settings.integer("CLAUDE_DISPATCH_STATE_MAX_BYTES", 1024 ** 3, 1024 * 1024, 1024 ** 4),
    onExit: settings.oneOf("CLAUDE_DISPATCH_ON_EXIT", ON_EXIT_POLICIES, "keep"),
    onDone: loadCommand(settings, "CLAUDE_DISPATCH_ON_DONE"),
    onInput: loadCommand(settings, "CLAUDE_DISPATCH_ON_INPUT"),
    approvals: settings.oneOf("CLAUDE_DISPATCH_APPROVALS", APPROVAL_POLICIES, "forward"),
    approvalTimeoutMs: settings.integer("CLAUDE_DISPATCH_APPROVAL_TIMEOUT_MS", 600_000, 1000, DAY_MS),
    worktree: settings.oneOf("CLAUDE_DISPATCH_WORKTREE", WORKTREE_POLICIES, "off"),
    worktreeDir: loadWorktreeDir(settings),
    hosts: loadHosts(settings, readTextFile),
    sshBin: settings.optional("CLAUDE_DISPATCH_SSH_BIN") ?? "ssh",
    sshTimeoutMs: settings.integer("CLAUDE_DISPATCH_SSH_TIMEOUT_MS", DEFAULT_SSH_TIMEOUT_MS, 1000, 600_000),
    policy: loadPolicy(settings),
    roots: loadRoots(settings, pathDelimiter),
  };
  return { config, problems: settings.problems };
}

function loadStateDir(settings: Settings, platform: string, home: string): string {
  try {
    return stateDirectory(settings.env, platform, home);
  } catch (error) {
    if (!(error instanceof StateError)) throw error;
    const name = "CLAUDE_DISPATCH_STATE_DIR";
    const set = settings.optional(name);
    // No directory stands in for it: doctor skips what needs it (§17), and nothing else runs.
    if (set !== undefined) return settings.refuse(name, set, "must be an absolute path", "");
    return settings.refuse(name, "", "must be set: there is no home directory", "");
  }
}

/** The modes a call may ask of another agent: as listed, else all but those that drop its safety checks. */
function loadAgentModes(settings: Settings, agent: "codex" | "gemini"): string[] {
  const runtime = traitsOf(agent);
  const listed = settings.list(MODES_SETTINGS[agent], runtime.permissionModes, "permission modes");
  return listed ?? runtime.permissionModes.filter((mode) => !runtime.dangerousModes.includes(mode));
}

/** An absolute path, or unset; never relative, which would depend on where a host starts the server. */
function loadWorktreeDir(settings: Settings): string | undefined {
  const value = settings.optional("CLAUDE_DISPATCH_WORKTREE_DIR");
  const absolute = (dir: string): boolean =>
    dir.startsWith("/") || dir.startsWith("\\\\") || /^[A-Za-z]:[\\/]/.test(dir);
  if (value === undefined || absolute(value)) return value;
  return settings.refuse("CLAUDE_DISPATCH_WORKTREE_DIR", value, "must be an absolute path", undefined);
}

function loadHosts(settings: Settings, readTextFile: (file: string) => string): SshHostConfig[] | undefined {
  const name = "CLAUDE_DISPATCH_HOSTS";
  const raw = settings.optional(name);
  if (raw === undefined) return undefined;
  try {
    return parseHostsSetting(raw, readTextFile, AGENT_NAMES);
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
    `must be a JSON array of 1 to ${COMMAND_MAX_ARGS} strings, the program first (such as ${example}), ${each}`;
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

/** The program an agent runs as: its setting, else its name on PATH. */
export function programOf(config: Config, agent: string): string {
  return agent === "codex" ? config.codexBin : agent === "gemini" ? config.geminiBin : config.claudeBin;
}

/**
 * The agents this server offers (§7), each with what a call may ask of it: CLAUDE_DISPATCH_AGENTS, else Claude Code and
 * the others whose program is found on PATH now. Claude Code is always the default, found or not: a GUI host's short
 * PATH must give SPAWN_FAILED with its fix, not an agent quietly missing. A call for an agent whose program is not
 * there now fails at once with that fix (missingProgram), before any job is made.
 */
export function offeredAgents(config: Config, env: Env, platform: string): AgentOffer[] {
  const found = (name: AgentName): boolean => findProgram(programOf(config, name), env, { platform }) !== undefined;
  const names = config.agents ?? ["claude", ...(["codex", "gemini"] as const).filter(found)];
  return names.map((name) => {
    const runtime = traitsOf(name);
    return {
      name,
      modes: runtime.permissionModes,
      allowedModes: name === "claude" ? config.policy.permissionModes : config.agentModes[name],
      supportedOptions: runtime.supportedOptions,
      modesSetting: MODES_SETTINGS[name],
      ...(runtime.optionProblem ? { optionProblem: runtime.optionProblem } : {}),
      missingProgram: () => missingProgram(config, name, env, platform),
    };
  });
}

/** Why the agent's program cannot be started here, as its spawn would say (§7.3); undefined when it is there. */
export function missingProgram(config: Config, name: AgentName, env: Env, platform: string): string | undefined {
  const bin = programOf(config, name);
  if (findProgram(bin, env, { platform }) !== undefined) return undefined;
  const { defaultBin, setting, install } = AGENT_PROGRAMS[name];
  if (bin !== defaultBin && isRegularFile(bin)) return `${bin} is not executable (${setting}); check its mode`;
  return programNotFound({ bin, defaultBin, setting, install });
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
export function unofferedAgents(offered: readonly string[], config: Config): AgentName[] {
  return config.agents === undefined ? AGENT_NAMES.filter((name) => !offered.includes(name)) : [];
}
