/**
 * What carries the channel to `claude-dispatch remote` on another machine (PROTOCOL.md §21.2): a program started
 * here with argv (never a shell) whose stdin and stdout are the far end's. ssh is one; a container engine's `exec -i`
 * and `kubectl exec -i` are others. The protocol, follow and reconnect, kill and approvals are the same over each
 * (remote-host.ts); a transport says only how its command line is built and what its own failures look like.
 */

export interface Transport {
  /** The program's name in messages: "ssh", "podman", "kubectl". */
  readonly label: string;
  /** The program to start: a path, or a name on PATH. */
  readonly program: string;
  /** Its environment: this machine's, only what the program needs. None of it reaches the agent. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The arguments of one session, the program aside: `remote` is the far end's command line, word by word. */
  sessionArgs(remote: readonly string[]): string[];
  /**
   * How an ended session failed, when the transport itself did (ssh's 255, an engine's 125, what kubectl printed): a
   * phrase; undefined when the exit was the far end's own.
   */
  failure(exitCode: number | null, stderr: string): string | undefined;
  /** The arguments of a last command closing what the transport keeps between sessions (ssh's shared connection). */
  closingArgs?(): string[] | undefined;
}

type Env = Readonly<Record<string, string | undefined>>;

/** The variables of this machine's environment a transport's program needs, by name; nothing else goes to it. */
export function environmentOf(env: Env, names: readonly string[]): Env {
  return Object.fromEntries(names.filter((name) => env[name] !== undefined).map((name) => [name, env[name]]));
}
