/**
 * Allowlists that only shrink. Each rule lists today's violations by file and key (the enclosing declaration
 * and what it does, not a line number); a key repeats as often as it occurs. A violation not listed fails, and
 * so does a listed one that no longer occurs, so that the list is shortened as the code is fixed.
 */
import type { Violation } from "./source.js";

/** File (relative to src/) → the keys of its allowed violations. */
export type Allowlist = Readonly<Record<string, readonly string[]>>;

const ALLOWLIST_FILE = "test/architecture/allowlist.ts";

/** Single quotes around a key that holds double ones, as the allowlist writes it. */
export const quote = (text: string): string =>
  text.includes('"') && !text.includes("'") ? `'${text}'` : JSON.stringify(text);
const lines = (count: number): string => `${count} line${count === 1 ? "" : "s"}`;
const UPDATE = "node --import tsx test/architecture/update.ts";

export function formatViolation(found: Violation): string {
  return `src/${found.file}:${found.line}: ${found.message}\n    ${found.text}`;
}

/** What is wrong with the findings of one rule against its allowlist: new violations, then stale entries. */
export function ratchetProblems(rule: string, found: readonly Violation[], allowed: Allowlist = {}): string[] {
  const left = new Map(Object.entries(allowed).map(([file, keys]) => [file, [...keys]]));
  const problems: string[] = [];
  for (const violation of found) {
    const keys = left.get(violation.file) ?? [];
    const index = keys.indexOf(violation.key);
    if (index === -1) problems.push(formatViolation(violation));
    else keys.splice(index, 1);
  }
  for (const [file, keys] of left) {
    for (const key of keys) {
      const remove = `delete it from ALLOWED["${rule}"] in ${ALLOWLIST_FILE}`;
      problems.push(`src/${file}: ${quote(key)} no longer occurs: ${remove}`);
    }
  }
  return problems;
}

/** Long lines per file against their allowed counts: a count may neither grow nor shrink without the list. */
export function lineRatchetProblems(
  found: ReadonlyMap<string, readonly number[]>,
  allowed: Readonly<Record<string, number>>,
): string[] {
  const problems: string[] = [];
  const files = [...new Set([...found.keys(), ...Object.keys(allowed)])].sort();
  for (const file of files) {
    const long = found.get(file) ?? [];
    const limit = allowed[file] ?? 0;
    if (long.length > limit) {
      const which = long.length > 12 ? `${long.slice(0, 12).join(", ")}, …` : long.join(", ");
      problems.push(`${file}: ${lines(long.length)} over the limit where ${limit} may be (lines ${which})`);
    } else if (long.length < limit) {
      const lower = `lower LONG_LINES["${file}"] from ${limit} in ${ALLOWLIST_FILE}`;
      problems.push(`${file}: ${lines(long.length)} over the limit: ${lower}`);
    }
  }
  return problems;
}

export function problemReport(rule: string, problems: readonly string[]): string {
  const count = `${problems.length} problem${problems.length === 1 ? "" : "s"}`;
  const how = `fix a new violation rather than list it; ${UPDATE} prints the lists as the tree is now`;
  return `${rule}: ${count} (${how})\n${problems.join("\n")}`;
}
