/**
 * The `ssh` command line (PROTOCOL.md §21.2). ssh joins what follows the destination into one line that the remote
 * user's shell reads, so that line holds only the operator's settings, each quoted; everything a caller sends
 * travels on the channel as JSON.
 */
import type { SshHostConfig } from "./config.js";

/** How long an idle shared connection stays up after its last session. */
export const CONTROL_PERSIST_SECONDS = 60;

/** A word for a POSIX shell: single quotes, with each quote inside closed, escaped and reopened. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** What the remote shell runs: the configured claude-dispatch in its remote mode. */
export function remoteCommandLine(host: Pick<SshHostConfig, "command" | "stateDir">): string {
  const words = [...host.command, "remote", ...(host.stateDir ? [`--state-dir=${host.stateDir}`] : [])];
  return words.map(shellQuote).join(" ");
}

/** ssh's arguments, the program aside: a shared connection when controlDir is given (§21.4). */
export function sshArguments(host: SshHostConfig, controlDir: string | undefined, remoteLine: string | undefined): string[] {
  const option = (key: string, value: string): string[] => ["-o", `${key}=${/\s/.test(value) ? `"${value}"` : value}`];
  return [
    "-T", // no terminal: the channel carries our frames, byte for byte
    ...option("BatchMode", "yes"), // never a prompt for a password or a host key: nobody is there to answer
    ...option("ServerAliveInterval", "15"), // a dead connection is noticed in about a minute, then followed again
    ...option("ServerAliveCountMax", "4"),
    ...(controlDir
      ? [...option("ControlMaster", "auto"), ...option("ControlPath", `${controlDir}/%C`), ...option("ControlPersist", String(CONTROL_PERSIST_SECONDS))]
      : []),
    ...(host.sshConfig ? ["-F", host.sshConfig] : []),
    ...Object.entries(host.options).flatMap(([key, value]) => option(key, value)),
    "--",
    host.destination,
    ...(remoteLine === undefined ? [] : [remoteLine]),
  ];
}
