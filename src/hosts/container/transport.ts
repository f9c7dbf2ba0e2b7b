/**
 * A container engine's `exec -i` as a transport (PROTOCOL.md §21.2): the engine's stdin and stdout are those of
 * claude-dispatch in its remote mode inside a running container. The engine keeps nothing between sessions.
 */
import { environmentOf, type Transport } from "../remote/transport.js";
import type { ContainerHostConfig } from "./config.js";

/** What podman and docker need of this machine's environment to reach their engine; nothing else goes to them. */
export const ENGINE_ENVIRONMENT = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "LANG",
  "LC_ALL",
  "TMPDIR",
  "XDG_RUNTIME_DIR",
  "XDG_CONFIG_HOME",
  "XDG_DATA_HOME",
  "CONTAINERS_CONF",
  "CONTAINERS_STORAGE_CONF",
  "CONTAINERS_REGISTRIES_CONF",
  "CONTAINER_HOST",
  "CONTAINER_CONNECTION",
  "DOCKER_HOST",
  "DOCKER_CONFIG",
  "DOCKER_CONTEXT",
  "DOCKER_CERT_PATH",
  "DOCKER_TLS_VERIFY",
];

export class ContainerTransport implements Transport {
  readonly label: string;
  readonly program: string;
  readonly env: Readonly<Record<string, string | undefined>>;

  constructor(
    private readonly config: ContainerHostConfig,
    env: Readonly<Record<string, string | undefined>>,
  ) {
    this.label = config.engine;
    this.program = config.engineBin ?? config.engine;
    this.env = environmentOf(env, ENGINE_ENVIRONMENT);
  }

  sessionArgs(remote: readonly string[]): string[] {
    const { container, user } = this.config;
    // -i: our frames on its stdin; no -t: the channel carries them byte for byte. The engine's options end at the
    // container's name: what follows is the command inside, each word an argv element there.
    return ["exec", "-i", ...(user ? ["--user", user] : []), container, ...remote];
  }

  /** The engines' own exits: 125 the engine failed (no such container, not running), 126 and 127 the command. */
  failure(exitCode: number | null): string | undefined {
    const { engine, container } = this.config;
    if (exitCode === 125) return `${engine} could not exec in container ${container}`;
    if (exitCode === 126) return `the command cannot be run in container ${container}`;
    if (exitCode === 127) return `the command was not found in container ${container}`;
    return undefined;
  }
}
