/**
 * What every host reached through `claude-dispatch remote` has in its entry of CLAUDE_DISPATCH_HOSTS (PROTOCOL.md
 * §21.1), whatever carries the channel: the roots there, how claude-dispatch is run there, its state directory, and
 * the agents offered there. Each kind's parser reads its own keys and hands the rest to parseRemoteEntry.
 */
import path from "node:path";

export interface RemoteEntry {
  /** What a call's `host` says. */
  name: string;
  /** Absolute paths there; every cwd must lie inside one. */
  roots: string[];
  /** How claude-dispatch is run there: a program and its first arguments. */
  command: string[];
  /** Its state directory there; unset: that end's default. */
  stateDir: string | undefined;
  /** The agents offered there, and each one's program as the operator names it; none: that end's setting or PATH. */
  agents: string[];
  programs: Readonly<Record<string, string>>;
  /** The modes each agent may be asked for there, instead of the operator's (§21.1); none: the operator's. */
  permissionModes: Readonly<Record<string, readonly string[]>> | undefined;
}

export type Fail = (problem: string) => never;

/** This build's agents, the home agent first, and each one's permission modes in its CLI's words. */
export interface KnownAgents {
  names: readonly string[];
  modesOf(agent: string): readonly string[];
}

/** A kind's parser of its entry; fail throws the reason. */
export type EntryParser<Entry> = (
  name: string,
  entry: Readonly<Record<string, unknown>>,
  agents: KnownAgents,
  fail: Fail,
) => Entry;

/** What the channel runs there: the configured claude-dispatch in its remote mode, on its state directory. */
export function farEndCommand(entry: Pick<RemoteEntry, "command" | "stateDir">): string[] {
  return [...entry.command, "remote", ...(entry.stateDir ? [`--state-dir=${entry.stateDir}`] : [])];
}

const REMOTE_KEYS = ["roots", "command", "state_dir", "agents", "programs", "permission_modes"];

/** Fails on a key that is neither the kind's own nor one every remote host has. */
export function checkKeys(entry: Readonly<Record<string, unknown>>, ownKeys: readonly string[], fail: Fail): void {
  const known = [...ownKeys, ...REMOTE_KEYS];
  const unknown = Object.keys(entry).find((key) => !known.includes(key));
  if (unknown !== undefined) fail(`has an unknown setting ${JSON.stringify(unknown)} (known: ${known.join(", ")})`);
}

/** The keys every remote host has; the home agent is offered there when it says none. */
export function parseRemoteEntry(
  name: string,
  entry: Readonly<Record<string, unknown>>,
  agents: KnownAgents,
  fail: Fail,
): RemoteEntry {
  const roots = entry.roots;
  if (
    !Array.isArray(roots) ||
    roots.length === 0 ||
    roots.length > 64 ||
    !roots.every((root) => isAbsolutePosix(root))
  ) {
    fail('needs "roots": 1 to 64 absolute paths on that machine');
  }
  return {
    name,
    roots: (roots as string[]).map((root) => path.posix.normalize(root).replace(/(.)\/+$/, "$1")),
    command: parseCommand(entry.command, fail),
    stateDir:
      entry.state_dir === undefined
        ? undefined
        : isAbsolutePosix(entry.state_dir)
          ? entry.state_dir
          : fail("has a state_dir that is not an absolute path"),
    agents: parseAgents(entry.agents, agents.names, fail),
    programs: parsePrograms(entry.programs, agents.names, fail),
    permissionModes: parseModes(entry.permission_modes, agents, fail),
  };
}

function parseCommand(value: unknown, fail: Fail): string[] {
  if (value === undefined) return ["claude-dispatch"];
  const valid =
    Array.isArray(value) &&
    value.length >= 1 &&
    value.length <= 16 &&
    value.every((arg) => typeof arg === "string" && arg !== "" && arg.length <= 4096 && !hasControl(arg));
  return valid
    ? (value as string[])
    : fail('has a "command" that is not 1 to 16 strings (such as ["npx", "-y", "claude-dispatch@1.2.3"])');
}

function parseAgents(value: unknown, agentNames: readonly string[], fail: Fail): string[] {
  if (value === undefined) return agentNames.slice(0, 1);
  const valid =
    Array.isArray(value) &&
    value.length >= 1 &&
    value.every((name) => typeof name === "string" && agentNames.includes(name));
  return valid
    ? [...new Set(value as string[])]
    : fail(`has "agents" that is not a list of agents among ${agentNames.join(", ")}`);
}

function parsePrograms(value: unknown, agentNames: readonly string[], fail: Fail): Record<string, string> {
  if (value === undefined) return {};
  if (!isObject(value))
    return fail('has "programs" that is not an object (such as {"claude": "/usr/local/bin/claude"})');
  const programs: Record<string, string> = {};
  for (const [agent, program] of Object.entries(value)) {
    if (
      !agentNames.includes(agent) ||
      typeof program !== "string" ||
      program === "" ||
      program.length > 4096 ||
      hasControl(program)
    )
      fail(`has an unusable program for ${JSON.stringify(agent)}`);
    programs[agent] = program as string;
  }
  return programs;
}

export function isAbsolutePosix(value: unknown): value is string {
  return typeof value === "string" && value.startsWith("/") && value.length <= 4096 && !hasControl(value);
}

export function hasControl(text: string): boolean {
  return /[\u0000-\u001f\u007f]/.test(text);
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An absolute path on this machine (a config file, a program), or unset. */
export function optionalPath(value: unknown, key: string, fail: Fail): string | undefined {
  if (value === undefined) return undefined;
  return typeof value === "string" && path.isAbsolute(value) && !hasControl(value)
    ? value
    : fail(`has a ${key} that is not an absolute path`);
}

/** A word an operator gives a transport (a container's name, a namespace): matching `pattern`, or unset. */
export function optionalWord(
  value: unknown,
  key: string,
  pattern: RegExp,
  what: string,
  fail: Fail,
): string | undefined {
  if (value === undefined) return undefined;
  return typeof value === "string" && pattern.test(value) ? value : fail(`has a "${key}" that is not ${what}`);
}

/** {"claude": ["bypassPermissions"]}: for each agent named, 1 to 16 of its own modes. */
function parseModes(value: unknown, agents: KnownAgents, fail: Fail): Record<string, string[]> | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) return fail('has "permission_modes" that is not an object (such as {"claude": ["default"]})');
  const modes: Record<string, string[]> = {};
  for (const [agent, listed] of Object.entries(value)) {
    if (!agents.names.includes(agent)) fail(`has "permission_modes" for ${JSON.stringify(agent)}, not an agent`);
    const known = agents.modesOf(agent);
    const valid =
      Array.isArray(listed) &&
      listed.length >= 1 &&
      listed.length <= 16 &&
      listed.every((mode) => typeof mode === "string" && known.includes(mode));
    if (!valid) fail(`has "permission_modes" for ${agent} that are not 1 or more of ${known.join(", ")}`);
    modes[agent] = [...new Set(listed as string[])];
  }
  return modes;
}
