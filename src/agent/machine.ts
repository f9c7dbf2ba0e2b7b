/**
 * What code outside hosts/ may know of the machine this process runs on, before any host is built: the
 * configuration reads it, and so does the command line. hosts/local/machine.ts answers it, so the platform is
 * told apart in one folder; main.ts hands it in.
 */

type Env = Readonly<Record<string, string | undefined>>;

export interface ThisMachine {
  /** What separates CLAUDE_DISPATCH_ROOTS' paths here. */
  pathDelimiter: string;
  cpus: number;
  home: string;
  /** Reads the file CLAUDE_DISPATCH_HOSTS may name. */
  readTextFile(file: string): string;
  /**
   * The state directory for this environment (§15.1): CLAUDE_DISPATCH_STATE_DIR, else this machine's convention.
   * Throws StateError when the setting is not absolute or there is no home to put it in.
   */
  stateDirectory(env: Env): string;
  /** The path of the program a bare name or a path stands for, as this machine would run it; undefined: none. */
  findProgram(program: string, env: Env): string | undefined;
  isRegularFile(file: string): boolean;
  /** Whether a program found here runs only through a shell (which we never start): a Windows npm shim. */
  needsShell(program: string): boolean;
  /** Whether files here have an owner's mode (a private state directory is 0700 only where they do). */
  fileModes: boolean;
  /** The roots with links resolved, each an existing directory; throws Error saying which is not. */
  resolveRoots(roots: readonly string[]): Promise<string[]>;
  /** How a person's shell here is written to, for a command line printed to be pasted. */
  shell: PersonsShell;
}

export interface PersonsShell {
  /** A word quoted so that the shell reads it back unchanged. */
  quote(word: string): string;
  /** What ends a line that the next continues; undefined: a command stays on one line. */
  continuation: string | undefined;
}
