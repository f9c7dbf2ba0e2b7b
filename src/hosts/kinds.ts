/**
 * CLAUDE_DISPATCH_HOSTS (PROTOCOL.md §21.1): the hosts an operator names, read here, each entry by the parser of
 * its kind, which the key it holds picks. Another kind of host is a folder under hosts/ and a line in KINDS.
 */
import path from "node:path";

import { parseContainerEntry, type ContainerHostConfig } from "./container/config.js";
import { parsePodEntry, type PodHostConfig } from "./pod/config.js";
import { parseSandboxEntry, type SandboxHostConfig } from "./sandbox/config.js";
import { parseSshEntry, type SshHostConfig } from "./ssh/config.js";
import type { EntryParser, KnownAgents } from "./remote/entry.js";

export type { KnownAgents };

/** A host as the setting names it: its kind, its name, and its kind's settings. */
export type HostEntry = SshHostConfig | ContainerHostConfig | PodHostConfig | SandboxHostConfig;

/** CLAUDE_DISPATCH_SSH_TIMEOUT_MS unset: how long a host may keep silent (§21.2). */
export { DEFAULT_SSH_TIMEOUT_MS } from "./ssh/config.js";

interface HostKind {
  /** The key an entry of this kind holds. */
  key: string;
  parse: EntryParser<HostEntry>;
}

/** A pod's entry may name one of its containers: "pod" is looked for before "container". */
const KINDS: readonly HostKind[] = [
  { key: "ssh", parse: parseSshEntry },
  { key: "pod", parse: parsePodEntry },
  { key: "container", parse: parseContainerEntry },
  { key: "image", parse: parseSandboxEntry },
];

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_HOSTS = 64;

/** The hosts named by the setting: a JSON object, or the path of a file holding one. Throws Error with the reason. */
export function parseHostsSetting(raw: string, readFile: (file: string) => string, agents: KnownAgents): HostEntry[] {
  const text = raw.trim();
  let json = text;
  if (!text.startsWith("{") && !text.startsWith("[")) {
    if (!path.isAbsolute(text))
      throw new Error(
        `CLAUDE_DISPATCH_HOSTS must be a JSON object or the absolute path of a JSON file, got ` +
          `${JSON.stringify(text.slice(0, 200))}`,
      );
    try {
      json = readFile(text);
    } catch (error) {
      throw new Error(`CLAUDE_DISPATCH_HOSTS names ${text}, which cannot be read: ${(error as Error).message}`);
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    throw new Error(`CLAUDE_DISPATCH_HOSTS is not valid JSON: ${(error as Error).message}`);
  }
  if (!isObject(value))
    throw new Error("CLAUDE_DISPATCH_HOSTS must be a JSON object mapping host names to their settings");
  const hosts = Object.entries(value).map(([name, entry]) => parseEntry(name, entry, agents));
  if (hosts.length > MAX_HOSTS) throw new Error(`CLAUDE_DISPATCH_HOSTS names more than ${MAX_HOSTS} hosts`);
  return hosts;
}

/** Where a host is, in a person's words. */
export function whereIs(entry: HostEntry): string {
  switch (entry.kind) {
    case "ssh":
      return entry.destination;
    case "container":
      return `${entry.engine} container ${entry.container}`;
    case "pod":
      return `pod ${entry.pod}${entry.namespace ? ` in ${entry.namespace}` : ""}`;
    case "sandbox":
      return `${entry.engine} sandboxes of ${entry.image}`;
  }
}

function parseEntry(name: string, entry: unknown, agents: KnownAgents): HostEntry {
  const fail = (problem: string): never => {
    throw new Error(`CLAUDE_DISPATCH_HOSTS: host ${JSON.stringify(name.slice(0, 64))} ${problem}`);
  };
  // "local" is this machine's host, which no entry may stand for.
  if (!NAME.test(name) || name === "local")
    fail('is not a usable name (letters, digits, . _ -, at most 64, not "local")');
  if (!isObject(entry)) return fail("must be an object");
  // The first kind whose key it holds; another kind's key is then an unknown setting of that one.
  const kind = KINDS.find((each) => Object.hasOwn(entry, each.key));
  if (!kind) return fail(`needs one of ${KINDS.map((each) => `"${each.key}"`).join(", ")}: how it is reached`);
  return kind.parse(name, entry, agents, fail);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
