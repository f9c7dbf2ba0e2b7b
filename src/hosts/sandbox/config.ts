/**
 * A host of CLAUDE_DISPATCH_HOSTS (PROTOCOL.md §21.1) that is a fresh container per job, made from an image: the
 * job's directory (or its worktree) mounted read-write at the same path, the variables listed passed by name, the
 * extra mounts read-only unless marked writable, and nothing else of this machine.
 */
import { parseEngine, USER, type Engine } from "../container/config.js";
import {
  checkKeys,
  hasControl,
  isAbsolutePosix,
  isObject,
  optionalWord,
  parseRemoteEntry,
  type EntryParser,
  type Fail,
  type RemoteEntry,
} from "../remote/entry.js";

export interface SandboxMount {
  source: string;
  target: string;
  writable: boolean;
}

export interface SandboxHostConfig extends RemoteEntry {
  kind: "sandbox";
  /** The image each job's container is made from: claude-dispatch and the agent CLI in it, and `sleep`. */
  image: string;
  engine: Engine;
  engineBin: string | undefined;
  /** Variables of this machine's environment given to the container by name (an API key): nothing else is. */
  env: readonly string[];
  mounts: readonly SandboxMount[];
  /** The engine's network for the container: "none" unless the entry names one. */
  network: string;
  /** Who the container's processes run as (`run --user`); unset: the image's user. */
  user: string | undefined;
}

const KEYS = ["image", "engine", "engine_bin", "env", "mounts", "network", "user"];
/** An image reference: registry/name:tag or @digest, no spaces, not an option. */
const IMAGE = /^[A-Za-z0-9][A-Za-z0-9._\-/:@]{0,254}$/;
const VARIABLE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** A network mode or name as the engines take it: none, host, bridge, slirp4netns, a network's name. */
const NETWORK = /^[A-Za-z0-9][A-Za-z0-9_.:\-=,]{0,127}$/;
/** What --mount's comma-separated fields could not hold. */
const UNMOUNTABLE = /[,"'\n]/;

/** One host of the setting that holds "image" (hosts/kinds.ts reads the rest). */
export const parseSandboxEntry: EntryParser<SandboxHostConfig> = (name, entry, agents, fail) => {
  checkKeys(entry, KEYS, fail);
  const image = entry.image;
  if (typeof image !== "string" || !IMAGE.test(image))
    fail('needs "image": the image each job\'s container is made from, such as "localhost/agents:1"');
  const network = entry.network ?? "none";
  if (typeof network !== "string" || !NETWORK.test(network)) fail('has a "network" that is not a network\'s name');
  return {
    kind: "sandbox",
    ...parseRemoteEntry(name, entry, agents, fail),
    image: image as string,
    ...parseEngine(entry, fail),
    env: parseVariables(entry.env, fail),
    mounts: parseMounts(entry.mounts, fail),
    network: network as string,
    user: optionalWord(entry.user, "user", USER, "a user name or uid (user[:group])", fail),
  };
};

function parseVariables(value: unknown, fail: Fail): string[] {
  if (value === undefined) return [];
  const valid =
    Array.isArray(value) &&
    value.length <= 64 &&
    value.every((name) => typeof name === "string" && VARIABLE.test(name));
  return valid ? [...new Set(value as string[])] : fail('has "env" that is not a list of variable names');
}

/** [{"source": "/abs", "target": "/abs", "writable": false}]: target defaults to source, writable to false. */
function parseMounts(value: unknown, fail: Fail): SandboxMount[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > 32) return fail('has "mounts" that is not a list of at most 32 mounts');
  return value.map((mount, index) => {
    const bad = (): never =>
      fail(`has a mount (${index + 1}) that is not {"source": absolute path, "target"?: absolute path, "writable"?}`);
    if (!isObject(mount) || Object.keys(mount).some((key) => !["source", "target", "writable"].includes(key)))
      return bad();
    const { source, target = source, writable = false } = mount;
    if (!isAbsolutePosix(source) || !isAbsolutePosix(target) || typeof writable !== "boolean") return bad();
    if (UNMOUNTABLE.test(source) || UNMOUNTABLE.test(target) || hasControl(source + target)) return bad();
    return { source, target, writable };
  });
}
