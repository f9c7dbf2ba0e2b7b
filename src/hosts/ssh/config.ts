/**
 * A host of CLAUDE_DISPATCH_HOSTS (PROTOCOL.md §21.1) reached with `ssh`. Every value
 * here goes to ssh's argv or, quoted, into the one remote command line; a caller's values never do.
 */
import path from "node:path";

export interface SshHostConfig {
  kind: "ssh";
  /** What a call's `host` says. */
  name: string;
  /** What `ssh` is given as the destination: `user@box`, or an alias of an ssh config. */
  destination: string;
  /** Absolute paths on that machine; every cwd must lie inside one. */
  roots: string[];
  /** An ssh config file (`ssh -F`), instead of ~/.ssh/config. */
  sshConfig: string | undefined;
  /** More ssh options, each given as `-o Key=Value`. */
  options: Readonly<Record<string, string>>;
  /** How claude-dispatch is run there: a program and its first arguments. */
  command: string[];
  /** Its state directory there; unset: that machine's default. */
  stateDir: string | undefined;
  /**
   * The agents offered there, and each one's program as the operator names
   * it; none: that machine's own setting or PATH.
   */
  agents: string[];
  programs: Readonly<Record<string, string>>;
}

/** CLAUDE_DISPATCH_SSH_TIMEOUT_MS unset: how long a host may keep silent (§21.2). */
export const DEFAULT_SSH_TIMEOUT_MS = 30_000;

/** Ours: what a host sets here is overridden, or would break the channel. */
const RESERVED_OPTIONS = [
  "batchmode",
  "controlmaster",
  "controlpath",
  "controlpersist",
  "requesttty",
  "remotecommand",
  "sessiontype",
  "stdinnull",
  "forkafterauthentication",
];
const KEYS = ["ssh", "roots", "ssh_config", "options", "command", "state_dir", "agents", "programs"];

/**
 * One host of the setting that holds "ssh" (hosts/kinds.ts reads the rest); fail throws with the reason.
 * agentNames: the agents this build has, the home agent first (what a host offers when it says nothing).
 */
export function parseSshEntry(
  name: string,
  entry: Readonly<Record<string, unknown>>,
  agentNames: readonly string[],
  fail: (problem: string) => never,
): SshHostConfig {
  const unknown = Object.keys(entry).find((key) => !KEYS.includes(key));
  if (unknown !== undefined) fail(`has an unknown setting ${JSON.stringify(unknown)} (known: ${KEYS.join(", ")})`);
  const destination = entry.ssh;
  if (typeof destination !== "string" || !/^[^\s\-][^\s]{0,254}$/.test(destination) || hasControl(destination)) {
    fail('needs "ssh": the destination ssh is given (user@box, or an alias), without spaces, not starting with -');
  }
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
    kind: "ssh",
    name,
    destination: destination as string,
    roots: (roots as string[]).map((root) => path.posix.normalize(root).replace(/(.)\/+$/, "$1")),
    sshConfig: optionalPath(entry.ssh_config, "ssh_config", fail),
    options: parseOptions(entry.options, fail),
    command: parseCommand(entry.command, fail),
    stateDir:
      entry.state_dir === undefined
        ? undefined
        : isAbsolutePosix(entry.state_dir)
          ? entry.state_dir
          : fail("has a state_dir that is not an absolute path"),
    agents: parseAgents(entry.agents, agentNames, fail),
    programs: parsePrograms(entry.programs, agentNames, fail),
  };
}

function parseOptions(value: unknown, fail: (problem: string) => never): Record<string, string> {
  if (value === undefined) return {};
  if (!isObject(value)) return fail('has "options" that is not an object of ssh options (such as {"Port": 2222})');
  const options: Record<string, string> = {};
  for (const [key, option] of Object.entries(value)) {
    const text = typeof option === "number" && Number.isSafeInteger(option) ? String(option) : option;
    if (!/^[A-Za-z][A-Za-z0-9]{0,63}$/.test(key) || typeof text !== "string" || text.length > 1024 || hasControl(text))
      fail(`has an unusable ssh option ${JSON.stringify(key)}`);
    if (RESERVED_OPTIONS.includes(key.toLowerCase())) fail(`sets ${key}, which claude-dispatch sets itself`);
    options[key] = text as string;
  }
  return options;
}

function parseCommand(value: unknown, fail: (problem: string) => never): string[] {
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

function parseAgents(value: unknown, agentNames: readonly string[], fail: (problem: string) => never): string[] {
  if (value === undefined) return agentNames.slice(0, 1);
  const valid =
    Array.isArray(value) &&
    value.length >= 1 &&
    value.every((name) => typeof name === "string" && agentNames.includes(name));
  return valid
    ? [...new Set(value as string[])]
    : fail(`has "agents" that is not a list of agents among ${agentNames.join(", ")}`);
}

function parsePrograms(
  value: unknown,
  agentNames: readonly string[],
  fail: (problem: string) => never,
): Record<string, string> {
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

function optionalPath(value: unknown, key: string, fail: (problem: string) => never): string | undefined {
  if (value === undefined) return undefined;
  return typeof value === "string" && path.isAbsolute(value) && !hasControl(value)
    ? value
    : fail(`has a ${key} that is not an absolute path`);
}

function isAbsolutePosix(value: unknown): value is string {
  return typeof value === "string" && value.startsWith("/") && value.length <= 4096 && !hasControl(value);
}

function hasControl(text: string): boolean {
  return /[\u0000-\u001f\u007f]/.test(text);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
