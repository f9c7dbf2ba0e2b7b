/**
 * Configuration from environment variables (PROTOCOL.md §11). A value that
 * is set but invalid is a startup error, never a silent fallback.
 */
import { PERMISSION_MODES, type PermissionMode } from "./agent/options.js";
import { AGENT_NAMES, AGENT_PROGRAMS, MODES_SETTINGS, isAgentName, traitsOf, type AgentName } from "./runtimes/index.js";
import { findProgram } from "./hosts/local/find-program.js";
import { DEFAULT_SSH_TIMEOUT_MS, parseHostsSetting, type SshHostConfig } from "./hosts/ssh/config.js";
import type { AgentOffer } from "./agent/options.js";
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

export class ConfigError extends Error {}

type Env = Readonly<Record<string, string | undefined>>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

function optional(env: Env, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw === undefined || raw === "" ? undefined : raw;
}

function permissionMode(name: string, value: string): PermissionMode {
  if (!(PERMISSION_MODES as readonly string[]).includes(value)) {
    throw new ConfigError(`${name} must name permission modes among ${PERMISSION_MODES.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value as PermissionMode;
}

function loadPolicy(env: Env): Omit<Policy, "roots"> {
  const modesRaw = optional(env, "CLAUDE_DISPATCH_PERMISSION_MODES");
  const permissionModes = modesRaw
    ? modesRaw.split(",").map((mode) => permissionMode("CLAUDE_DISPATCH_PERMISSION_MODES", mode.trim()))
    : [...DEFAULT_PERMISSION_MODES];
  const defaultModeRaw = optional(env, "CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE");
  const defaultPermissionMode = defaultModeRaw ? permissionMode("CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE", defaultModeRaw) : undefined;
  if (defaultPermissionMode !== undefined && !permissionModes.includes(defaultPermissionMode)) {
    throw new ConfigError(`CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE ${defaultPermissionMode} is not among CLAUDE_DISPATCH_PERMISSION_MODES`);
  }
  const defaultModel = optional(env, "CLAUDE_DISPATCH_DEFAULT_MODEL");
  if (defaultModel !== undefined && !MODEL_NAME.test(defaultModel)) {
    throw new ConfigError(`CLAUDE_DISPATCH_DEFAULT_MODEL is not a model name: ${JSON.stringify(defaultModel)}`);
  }
  const budgetRaw = optional(env, "CLAUDE_DISPATCH_MAX_BUDGET_USD");
  const maxBudgetUsd = budgetRaw === undefined ? undefined : Number(budgetRaw);
  if (maxBudgetUsd !== undefined && (!/^\d+(\.\d+)?$/.test(budgetRaw ?? "") || !(maxBudgetUsd > 0) || maxBudgetUsd > 10_000)) {
    throw new ConfigError(`CLAUDE_DISPATCH_MAX_BUDGET_USD must be a number of dollars above 0 and at most 10000, got ${JSON.stringify(budgetRaw)}`);
  }
  const turns = optional(env, "CLAUDE_DISPATCH_MAX_TURNS");
  return {
    permissionModes,
    defaultPermissionMode,
    defaultModel,
    maxTurns: turns === undefined ? undefined : integer(env, "CLAUDE_DISPATCH_MAX_TURNS", 0, 1, 10_000),
    maxBudgetUsd,
    defaultTimeoutMs: integer(env, "CLAUDE_DISPATCH_DEFAULT_TIMEOUT_MS", DEFAULT_POLICY.defaultTimeoutMs, 1000, 86_400_000),
  };
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

export function loadConfig(env: Env, host: Partial<Host> = {}): Config {
  const { pathDelimiter, cpus, platform, home, readTextFile } = { ...DEFAULT_HOST, ...host };
  const logLevel = (env.CLAUDE_DISPATCH_LOG_LEVEL ?? "info").trim() || "info";
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(`CLAUDE_DISPATCH_LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, got ${JSON.stringify(logLevel)}`);
  }
  const claudeBin = env.CLAUDE_DISPATCH_CLAUDE_BIN?.trim() || AGENT_PROGRAMS.claude.bin;
  return {
    claudeBin,
    agents: loadAgents(env),
    codexBin: env.CLAUDE_DISPATCH_CODEX_BIN?.trim() || AGENT_PROGRAMS.codex.bin,
    geminiBin: env.CLAUDE_DISPATCH_GEMINI_BIN?.trim() || AGENT_PROGRAMS.gemini.bin,
    agentModes: { codex: loadAgentModes(env, "codex"), gemini: loadAgentModes(env, "gemini") },
    depth: integer(env, DEPTH_VARIABLE, 0, 0, 1000),
    maxDepth: integer(env, "CLAUDE_DISPATCH_MAX_DEPTH", 1, 0, 1000),
    maxLineBytes: integer(env, "CLAUDE_DISPATCH_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES, 1024, 1024 ** 3),
    maxOutputBytes: integer(env, "CLAUDE_DISPATCH_MAX_OUTPUT_BYTES", 64 * 1024 * 1024, 1024, 1024 ** 3),
    killGraceMs: integer(env, "CLAUDE_DISPATCH_KILL_GRACE_MS", 3000, 0, 60_000),
    jobRetentionMs: integer(env, "CLAUDE_DISPATCH_JOB_RETENTION_MS", 7 * 24 * 3600 * 1000, 0, 365 * 24 * 3600 * 1000),
    logLevel: logLevel as LogLevel,
    maxResultChars: integer(env, "CLAUDE_DISPATCH_MAX_RESULT_CHARS", 20_000, 1000, 10_000_000),
    heartbeatMs: integer(env, "CLAUDE_DISPATCH_HEARTBEAT_MS", 15_000, 1000, 600_000),
    // Each agent is a few hundred MB and busy; more than the CPUs only slows them all.
    maxJobs: integer(env, "CLAUDE_DISPATCH_MAX_JOBS", Math.max(2, cpus), 1, 1000),
    stateDir: loadStateDir(env, platform, home),
    stateMaxBytes: integer(env, "CLAUDE_DISPATCH_STATE_MAX_BYTES", 1024 ** 3, 1024 * 1024, 1024 ** 4),
    onExit: loadOnExit(env),
    onDone: loadCommand(env, "CLAUDE_DISPATCH_ON_DONE"),
    onInput: loadCommand(env, "CLAUDE_DISPATCH_ON_INPUT"),
    approvals: loadApprovals(env),
    approvalTimeoutMs: integer(env, "CLAUDE_DISPATCH_APPROVAL_TIMEOUT_MS", 600_000, 1000, 86_400_000),
    worktree: loadWorktree(env),
    worktreeDir: loadWorktreeDir(env),
    hosts: loadHosts(env, readTextFile),
    sshBin: optional(env, "CLAUDE_DISPATCH_SSH_BIN") ?? "ssh",
    sshTimeoutMs: integer(env, "CLAUDE_DISPATCH_SSH_TIMEOUT_MS", DEFAULT_SSH_TIMEOUT_MS, 1000, 600_000),
    policy: loadPolicy(env),
    roots: loadRoots(env, pathDelimiter),
  };
}

function loadStateDir(env: Env, platform: string, home: string): string {
  try {
    return stateDirectory(env, platform, home);
  } catch (error) {
    if (error instanceof StateError) throw new ConfigError(error.message);
    throw error;
  }
}

function loadOnExit(env: Env): OnExit {
  const value = optional(env, "CLAUDE_DISPATCH_ON_EXIT") ?? "keep";
  if (!(ON_EXIT_POLICIES as readonly string[]).includes(value)) {
    throw new ConfigError(`CLAUDE_DISPATCH_ON_EXIT must be one of ${ON_EXIT_POLICIES.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value as OnExit;
}

function loadAgents(env: Env): AgentName[] | undefined {
  const raw = optional(env, "CLAUDE_DISPATCH_AGENTS");
  if (raw === undefined) return undefined;
  const names = raw.split(",").map((name) => name.trim()).filter(Boolean);
  const unknown = names.find((name) => !isAgentName(name));
  if (unknown !== undefined || names.length === 0) {
    throw new ConfigError(`CLAUDE_DISPATCH_AGENTS must list, comma-separated, agents among ${AGENT_NAMES.join(", ")}, got ${JSON.stringify(raw)}`);
  }
  return [...new Set(names)] as AgentName[];
}

/** The modes a call may ask of another agent: as listed, else all but those that drop its safety checks. */
function loadAgentModes(env: Env, agent: "codex" | "gemini"): string[] {
  const runtime = traitsOf(agent);
  const name = MODES_SETTINGS[agent];
  const raw = optional(env, name);
  if (raw === undefined) return runtime.permissionModes.filter((mode) => !runtime.dangerousModes.includes(mode));
  const modes = raw.split(",").map((mode) => mode.trim()).filter(Boolean);
  const unknown = modes.find((mode) => !runtime.permissionModes.includes(mode));
  if (unknown !== undefined) throw new ConfigError(`${name} must name permission modes among ${runtime.permissionModes.join(", ")}, got ${JSON.stringify(unknown)}`);
  return modes;
}

function loadWorktree(env: Env): WorktreePolicy {
  const value = optional(env, "CLAUDE_DISPATCH_WORKTREE") ?? "off";
  if (!(WORKTREE_POLICIES as readonly string[]).includes(value)) {
    throw new ConfigError(`CLAUDE_DISPATCH_WORKTREE must be one of ${WORKTREE_POLICIES.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value as WorktreePolicy;
}

/** An absolute path, or unset; never relative, which would depend on where a host starts the server. */
function loadWorktreeDir(env: Env): string | undefined {
  const value = optional(env, "CLAUDE_DISPATCH_WORKTREE_DIR");
  if (value !== undefined && !(value.startsWith("/") || /^[A-Za-z]:[\\/]/.test(value) || value.startsWith("\\\\"))) {
    throw new ConfigError(`CLAUDE_DISPATCH_WORKTREE_DIR must be an absolute path, got ${JSON.stringify(value)}`);
  }
  return value;
}

function loadHosts(env: Env, readTextFile: (file: string) => string): SshHostConfig[] | undefined {
  const raw = optional(env, "CLAUDE_DISPATCH_HOSTS");
  if (raw === undefined) return undefined;
  try {
    return parseHostsSetting(raw, readTextFile, AGENT_NAMES);
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
}

function loadApprovals(env: Env): Approvals {
  const value = optional(env, "CLAUDE_DISPATCH_APPROVALS") ?? "forward";
  if (!(APPROVAL_POLICIES as readonly string[]).includes(value)) {
    throw new ConfigError(`CLAUDE_DISPATCH_APPROVALS must be one of ${APPROVAL_POLICIES.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value as Approvals;
}

/** Bounds on an operator's command (CLAUDE_DISPATCH_ON_DONE, CLAUDE_DISPATCH_ON_INPUT): an argv, not a script. */
const COMMAND_MAX_ARGS = 64;
const COMMAND_MAX_ARG_CHARS = 4096;

/** A JSON array of strings, the program first; never run through a shell, so nothing in it is interpreted. */
function loadCommand(env: Env, name: string): string[] | undefined {
  const raw = optional(env, name);
  if (raw === undefined) return undefined;
  const example = '["notify-send", "claude-dispatch"]';
  const array = `a JSON array of 1 to ${COMMAND_MAX_ARGS} strings`;
  const problem = `${name} must be ${array}, the program first (such as ${example})`;
  const got = JSON.stringify(raw.slice(0, 200));
  let argv: unknown;
  try {
    argv = JSON.parse(raw);
  } catch {
    throw new ConfigError(`${problem}, got ${got}`);
  }
  const valid =
    Array.isArray(argv) &&
    argv.length >= 1 &&
    argv.length <= COMMAND_MAX_ARGS &&
    argv.every((arg) => typeof arg === "string" && arg.length <= COMMAND_MAX_ARG_CHARS && !arg.includes("\0")) &&
    (argv[0] as string).trim() !== "";
  const each = `each at most ${COMMAND_MAX_ARG_CHARS} characters, the first not empty`;
  if (!valid) throw new ConfigError(`${problem}, ${each}; got ${got}`);
  return argv as string[];
}

/** Set but naming no directory (say ":") would refuse every call: that is a mistake, not a policy. */
function loadRoots(env: Env, pathDelimiter: string): string[] | undefined {
  const raw = optional(env, "CLAUDE_DISPATCH_ROOTS");
  if (raw === undefined) return undefined;
  const roots = raw
    .split(pathDelimiter)
    .map((root) => root.trim())
    .filter(Boolean);
  if (roots.length === 0) throw new ConfigError(`CLAUDE_DISPATCH_ROOTS names no directory: ${JSON.stringify(raw)}`);
  return roots;
}

/** The program an agent runs as: its setting, else its name on PATH. */
export function programOf(config: Config, agent: string): string {
  return agent === "codex" ? config.codexBin : agent === "gemini" ? config.geminiBin : config.claudeBin;
}

/**
 * The agents this server offers (§7), each with what a call may ask of it: CLAUDE_DISPATCH_AGENTS, else Claude Code and
 * the others whose program is found on PATH now. Claude Code is always the default, found or not: a GUI host's short
 * PATH must give SPAWN_FAILED with its fix, not an agent quietly missing.
 */
export function offeredAgents(config: Config, env: Env, platform: string): AgentOffer[] {
  const names =
    config.agents ?? ["claude", ...(["codex", "gemini"] as const).filter((name) => findProgram(programOf(config, name), env, { platform }) !== undefined)];
  return names.map((name) => {
    const runtime = traitsOf(name);
    return {
      name,
      modes: runtime.permissionModes,
      allowedModes: name === "claude" ? config.policy.permissionModes : config.agentModes[name],
      supportedOptions: runtime.supportedOptions,
      modesSetting: MODES_SETTINGS[name],
      ...(runtime.optionProblem ? { optionProblem: runtime.optionProblem } : {}),
    };
  });
}
