/**
 * A host of CLAUDE_DISPATCH_HOSTS (PROTOCOL.md §21.1) that is a running container: claude-dispatch inside it is
 * reached with the engine's `exec -i`, podman's or docker's, which carries the channel as ssh does.
 */
import {
  checkKeys,
  optionalPath,
  optionalWord,
  parseRemoteEntry,
  type EntryParser,
  type Fail,
  type RemoteEntry,
} from "../remote/entry.js";

export const ENGINES = ["podman", "docker"] as const;
export type Engine = (typeof ENGINES)[number];

export interface ContainerHostConfig extends RemoteEntry {
  kind: "container";
  /** The container's name or id, as the engine's `exec` takes it. */
  container: string;
  engine: Engine;
  /** The engine's program when the operator names one; unset: its name on PATH. */
  engineBin: string | undefined;
  /** The user claude-dispatch runs as inside (`exec --user`); unset: the container's own. */
  user: string | undefined;
}

const KEYS = ["container", "engine", "engine_bin", "user"];
/** podman's and docker's names: a letter or digit first, then letters, digits, _ . - */
const CONTAINER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
/** A user name or uid, with a group or gid after a colon. */
export const USER = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})?$/;

/** "engine" (podman unless said) and "engine_bin", as a container host and a sandbox name them. */
export function parseEngine(
  entry: Readonly<Record<string, unknown>>,
  fail: Fail,
): { engine: Engine; engineBin: string | undefined } {
  const engine = entry.engine ?? "podman";
  if (!ENGINES.includes(engine as Engine)) fail(`has an "engine" that is not one of ${ENGINES.join(", ")}`);
  return { engine: engine as Engine, engineBin: optionalPath(entry.engine_bin, "engine_bin", fail) };
}

/** One host of the setting that holds "container" (hosts/kinds.ts reads the rest). */
export const parseContainerEntry: EntryParser<ContainerHostConfig> = (name, entry, agents, fail) => {
  checkKeys(entry, KEYS, fail);
  const container = entry.container;
  if (typeof container !== "string" || !CONTAINER_NAME.test(container))
    fail('needs "container": the name or id of a running container (letters, digits, _ . -, at most 128)');
  return {
    kind: "container",
    ...parseRemoteEntry(name, entry, agents, fail),
    container: container as string,
    ...parseEngine(entry, fail),
    user: optionalWord(entry.user, "user", USER, "a user name or uid (user[:group])", fail),
  };
};
