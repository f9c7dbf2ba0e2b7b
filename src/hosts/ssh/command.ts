/**
 * The `ssh` command line (PROTOCOL.md §21.2). ssh joins what follows the destination into one line that the remote
 * user's shell reads, so that line holds only the operator's settings, each quoted; everything a caller sends
 * travels on the channel as JSON.
 */
import { DEFAULT_SSH_TIMEOUT_MS, type SshHostConfig } from "./config.js";

/** How long an idle shared connection stays up after its last session. */
export const CONTROL_PERSIST_SECONDS = 60;

/** A word for a POSIX shell: single quotes, with each quote inside closed, escaped and reopened. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The one line the remote user's shell reads: the far end's command, each word quoted. */
export function remoteCommandLine(words: readonly string[]): string {
  return words.map(shellQuote).join(" ");
}

/**
 * ssh's own bounds, from the longest an SSH host may keep silent (§21.2): the TCP connection and the handshake within
 * it, and keep-alives that end a session after about as long without a word. The first frame is bounded by a timer of
 * ours as well (session.ts): a far end can log in and then say nothing.
 */
export function silenceOptions(timeoutMs: number): Record<string, string> {
  const seconds = Math.max(1, Math.ceil(timeoutMs / 1000));
  const interval = Math.max(1, Math.floor(seconds / 3));
  const count = Math.max(1, Math.round(seconds / interval));
  return { ConnectTimeout: String(seconds), ServerAliveInterval: String(interval), ServerAliveCountMax: String(count) };
}

/** ssh's arguments, the program aside: a shared connection when controlDir is given (§21.4). */
export function sshArguments(
  host: SshHostConfig,
  controlDir: string | undefined,
  remoteLine: string | undefined,
  timeoutMs = DEFAULT_SSH_TIMEOUT_MS,
): string[] {
  const option = (key: string, value: string): string[] => ["-o", `${key}=${/\s/.test(value) ? `"${value}"` : value}`];
  return [
    "-T", // no terminal: the channel carries our frames, byte for byte
    ...option("BatchMode", "yes"), // never a prompt for a password or a host key: nobody is there to answer
    ...(controlDir
      ? [
          ...option("ControlMaster", "auto"),
          ...option("ControlPath", `${controlDir}/%C`),
          ...option("ControlPersist", String(CONTROL_PERSIST_SECONDS)),
        ]
      : []),
    ...(host.sshConfig ? ["-F", host.sshConfig] : []),
    // ssh takes an option's first value: the operator's, for this host, before our defaults.
    ...Object.entries(host.options).flatMap(([key, value]) => option(key, value)),
    ...Object.entries(silenceOptions(timeoutMs)).flatMap(([key, value]) => option(key, value)),
    "--",
    host.destination,
    ...(remoteLine === undefined ? [] : [remoteLine]),
  ];
}
