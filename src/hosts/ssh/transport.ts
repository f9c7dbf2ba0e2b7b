/**
 * ssh as a transport (PROTOCOL.md §21.2): one connection per host shared by its sessions when a control folder is
 * given, BatchMode, the silence bound as ssh's own options, and the far end's command line joined into the one line
 * that the remote user's shell reads.
 */
import { chmodSync, lstatSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import type { Logger } from "../../core/log.js";
import { environmentOf, type Transport } from "../remote/transport.js";
import { remoteCommandLine, sshArguments } from "./command.js";
import type { SshHostConfig } from "./config.js";

export interface SshTransportOptions {
  config: SshHostConfig;
  /** ssh's program: a path, or a name on PATH. */
  sshBin: string;
  /** A private folder for the shared connection's socket; undefined: no sharing. */
  controlDir: string | undefined;
  /** This machine's environment: ssh is given only what it needs of it. */
  env: Readonly<Record<string, string | undefined>>;
  timeoutMs: number;
}

/** What ssh needs to find keys, the agent and its config; nothing else of ours goes to it. */
const SSH_ENVIRONMENT = ["PATH", "HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT"];

/** A Unix socket's path is at most 104–108 bytes; ssh adds the 40 of %C and 17 of a temporary suffix. */
const SOCKET_FOLDER_MAX = 104 - 58;

export class SshTransport implements Transport {
  readonly label = "ssh";
  readonly program: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  private used = false;

  constructor(private readonly options: SshTransportOptions) {
    this.program = options.sshBin;
    const { env } = options;
    this.env = environmentOf(env, SSH_ENVIRONMENT);
  }

  sessionArgs(remote: readonly string[]): string[] {
    this.used = true;
    const { config, controlDir, timeoutMs } = this.options;
    return sshArguments(config, controlDir, remoteCommandLine(remote), timeoutMs);
  }

  /** 255 is ssh's own failure: no connection, a refused key, a host key that does not match. */
  failure(exitCode: number | null): string | undefined {
    return exitCode === 255 ? "ssh failed" : undefined;
  }

  /** `-O exit` goes before the destination: ssh reads no options after it. */
  closingArgs(): string[] | undefined {
    const { config, controlDir, timeoutMs } = this.options;
    if (!this.used || !controlDir) return undefined;
    return ["-O", "exit", ...sshArguments(config, controlDir, undefined, timeoutMs)];
  }
}

/**
 * The private folder the shared connections' sockets live in (§21.4), a socket there giving whoever reaches it our
 * login on that machine: the state directory's ssh folder, else a short one of ours in the temporary folder;
 * undefined: no sharing.
 */
export function socketFolder(stateDir: string, uid: number | undefined, logger: Logger): string | undefined {
  const preferred = path.join(stateDir, "ssh");
  const folder =
    preferred.length <= SOCKET_FOLDER_MAX ? preferred : path.join(tmpdir(), `claude-dispatch-ssh-${uid ?? "user"}`);
  try {
    mkdirSync(folder, { recursive: true, mode: 0o700 });
    const info = lstatSync(folder);
    if (info.isSymbolicLink() || !info.isDirectory() || (uid !== undefined && info.uid !== uid))
      throw new Error("it is not a folder of this user's");
    chmodSync(folder, 0o700);
    if (folder.length > SOCKET_FOLDER_MAX) throw new Error("its path is too long for a socket");
    return folder;
  } catch (error) {
    logger.warn(`ssh connections are not shared: cannot use ${folder} for their sockets: ${(error as Error).message}`);
    return undefined;
  }
}
