/**
 * A host of CLAUDE_DISPATCH_HOSTS (PROTOCOL.md §21.1) reached with `ssh`. Every value
 * here goes to ssh's argv or, quoted, into the one remote command line; a caller's values never do.
 */
import {
  checkKeys,
  hasControl,
  isObject,
  optionalPath,
  parseRemoteEntry,
  type EntryParser,
  type Fail,
  type RemoteEntry,
} from "../remote/entry.js";

export interface SshHostConfig extends RemoteEntry {
  kind: "ssh";
  /** What `ssh` is given as the destination: `user@box`, or an alias of an ssh config. */
  destination: string;
  /** An ssh config file (`ssh -F`), instead of ~/.ssh/config. */
  sshConfig: string | undefined;
  /** More ssh options, each given as `-o Key=Value`. */
  options: Readonly<Record<string, string>>;
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
const KEYS = ["ssh", "ssh_config", "options"];

/**
 * One host of the setting that holds "ssh" (hosts/kinds.ts reads the rest); fail throws with the reason.
 * agentNames: the agents this build has, the home agent first (what a host offers when it says nothing).
 */
export const parseSshEntry: EntryParser<SshHostConfig> = (name, entry, agents, fail) => {
  checkKeys(entry, KEYS, fail);
  const destination = entry.ssh;
  if (typeof destination !== "string" || !/^[^\s\-][^\s]{0,254}$/.test(destination) || hasControl(destination)) {
    fail('needs "ssh": the destination ssh is given (user@box, or an alias), without spaces, not starting with -');
  }
  return {
    kind: "ssh",
    ...parseRemoteEntry(name, entry, agents, fail),
    destination: destination as string,
    sshConfig: optionalPath(entry.ssh_config, "ssh_config", fail),
    options: parseOptions(entry.options, fail),
  };
};

function parseOptions(value: unknown, fail: Fail): Record<string, string> {
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
