/**
 * The host configuration for this install (PROTOCOL.md §17): the
 * `mcpServers` entry and the `claude mcp add -s user` line that `doctor`
 * prints, and the one-line hint for a server started from a terminal.
 */
import type { PersonsShell } from "../agent/machine.js";
import { DEPTH_VARIABLE } from "../config.js";
import { SERVER_NAME } from "../core/version.js";
import { printable } from "./format.js";

type Env = Readonly<Record<string, string | undefined>>;

/** Where this install is: what a host runs. */
export interface Install {
  nodePath: string;
  mainPath: string;
  /** The shell of the person who pastes what is printed. */
  shell: PersonsShell;
}

/**
 * Set per process, never by an operator: the depth a server gives its agents
 * (§7.4) and the marker on each agent's tree (hosts/local's TREE_MARKER_VARIABLE).
 * Pasted into a host's configuration they would gate or mislabel every server.
 */
const PER_PROCESS_VARIABLES: ReadonlySet<string> = new Set([DEPTH_VARIABLE, "CLAUDE_DISPATCH_TREE"]);

/**
 * The CLAUDE_DISPATCH_* variables of `env` a host must pass for its server to
 * be configured as this process is, by name; the per-process ones left out.
 */
export function hostEnvironment(env: Env): Record<string, string> {
  const entries = Object.entries(env).filter(
    (entry): entry is [string, string] =>
      entry[0].startsWith("CLAUDE_DISPATCH_") && entry[1] !== undefined && !PER_PROCESS_VARIABLES.has(entry[0]),
  );
  return Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** The `mcpServers` entry of a host's JSON configuration (Claude Desktop, Cursor) for this install. */
export function mcpServersEntry(
  install: Install,
  env: Env,
): { mcpServers: Record<string, { command: string; args: string[]; env: Record<string, string> }> } {
  return {
    mcpServers: { [SERVER_NAME]: { command: install.nodePath, args: [install.mainPath], env: hostEnvironment(env) } },
  };
}

/**
 * The `claude mcp add` line for this install and the CLAUDE_DISPATCH_* variables of `env`.
 * User scope: the default (local) scope is the current project only. The --env options
 * come after the name: --env takes several values, and before the name (Claude Code
 * 2.1.332) it takes the name too and the command fails; `--` ends them.
 */
export function claudeMcpAddLine(install: Install, env: Env): string {
  return claudeMcpAddWords(install, env).join(" ");
}

/**
 * The same command in lines of at most `width` columns where it is longer and the shell continues lines (POSIX:
 * each option on a line of its own, every line but the last ending in a backslash); else one line. A single word
 * longer than the width (a long path) stays whole.
 */
export function claudeMcpAddLines(install: Install, env: Env, width: number): string[] {
  const words = claudeMcpAddWords(install, env);
  const line = words.join(" ");
  const { continuation } = install.shell;
  if (line.length <= width || continuation === undefined) return [line];
  return words.map((word, index) => `${index === 0 ? "" : "  "}${word}${index < words.length - 1 ? continuation : ""}`);
}

/** The command, the --env options and the program after `--`, each quoted for the platform's shell. */
function claudeMcpAddWords(install: Install, env: Env): string[] {
  const { quote } = install.shell;
  const variables = Object.entries(hostEnvironment(env)).map(([name, value]) => `--env ${quote(`${name}=${value}`)}`);
  const program = `-- ${quote(install.nodePath)} ${quote(install.mainPath)}`;
  return [`claude mcp add -s user ${SERVER_NAME}`, ...variables, program];
}

/**
 * The one line on stderr when the server is started from a terminal: it is meant for a host, and how to add it to one.
 */
export function terminalHint(install: Install, env: Env): string {
  // Absolute paths, as doctor prints them: from a clone, `claude-dispatch` is not on PATH.
  const line =
    `${SERVER_NAME} is an MCP server on stdio, started by an MCP host. Add it to one, e.g. ` +
    `\`${claudeMcpAddLine(install, env)}\`; run it with --help or doctor for more.`;
  return `${printable(line).replace(/[\n\t]/g, " ")}\n`;
}
