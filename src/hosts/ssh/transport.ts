/**
 * ssh as a transport (PROTOCOL.md §21.2): one connection per host shared by its sessions when a control folder is
 * given, BatchMode, the silence bound as ssh's own options, and the far end's command line joined into the one line
 * that the remote user's shell reads.
 */
import type { Transport } from "../remote/transport.js";
import { remoteCommandLine, sshArguments } from "./command.js";
import type { SshHostConfig } from "./config.js";

export interface SshTransportOptions {
  config: SshHostConfig;
  /** ssh's program: a path, or a name on PATH. */
  sshBin: string;
  /** A private folder for the shared connection's socket; undefined: no sharing. */
  controlDir: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  timeoutMs: number;
}

export class SshTransport implements Transport {
  readonly label = "ssh";
  readonly program: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  private used = false;

  constructor(private readonly options: SshTransportOptions) {
    this.program = options.sshBin;
    this.env = options.env;
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
