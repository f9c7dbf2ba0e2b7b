/**
 * The tree marker: a variable in each agent's environment, unique per agent, that every descendant inherits
 * unless it scrubs its environment. It finds the processes that escaped the tree before a snapshot saw them,
 * and vouches for an agent an earlier server started (§6, §15.3).
 */

/** Set in each agent's environment; its value is unique per agent. */
export const TREE_MARKER_VARIABLE = "CLAUDE_DISPATCH_TREE";

/** The marker as it appears in /proc/<pid>/environ: "NAME=value". */
export function markerEntry(value: string): string {
  return `${TREE_MARKER_VARIABLE}=${value}`;
}

/** Whether a NUL-separated environment holds this exact "NAME=value" entry. */
export function hasVariable(environment: string, entry: string): boolean {
  return (
    environment.startsWith(`${entry}\0`) ||
    environment.includes(`\0${entry}\0`) ||
    environment === entry ||
    environment.endsWith(`\0${entry}`)
  );
}
