/**
 * Prints test/architecture/allowlist.ts as the tree is now, for when code that removed violations left
 * entries behind (the architecture test says so):
 *   node --import tsx test/architecture/update.ts > test/architecture/allowlist.ts
 * It imports no allowlist, so that redirection is safe. Read the diff: an entry it adds is a new violation.
 */
import { checkLineLengths } from "./lines.js";
import { quote } from "./ratchet.js";
import type { Violation } from "./source.js";
import { readLineFiles, readSource, RULES } from "./tree.js";

function ruleEntries(found: readonly Violation[]): string[] {
  const byFile = new Map<string, string[]>();
  for (const violation of found) byFile.set(violation.file, [...(byFile.get(violation.file) ?? []), violation.key]);
  return [...byFile].flatMap(([file, keys]) => [
    `    ${quote(file)}: [`,
    ...keys.sort().map((key) => `      ${quote(key)},`),
    "    ],",
  ]);
}

const files = readSource();
const out = [
  "/**",
  " * The violations the tree still has: the architecture test fails on one not listed here and on one listed",
  " * that no longer occurs. Rewritten, as the tree is, by",
  " *   node --import tsx test/architecture/update.ts > test/architecture/allowlist.ts",
  " */",
  'import type { Allowlist } from "./ratchet.js";',
  "",
  "/** Rule → file (relative to src/) → keys, a key repeated as often as it occurs. */",
  "export const ALLOWED: Readonly<Record<string, Allowlist>> = {",
];
for (const rule of RULES) {
  const found = rule.check(files);
  if (found.length === 0) continue;
  out.push(`  ${quote(rule.name)}: {`, ...ruleEntries(found), "  },");
}
out.push("};", "", "/** File (relative to the repository) → how many of its lines are over 120 characters. */");
out.push("export const LONG_LINES: Readonly<Record<string, number>> = {");
for (const [file, lines] of checkLineLengths(readLineFiles())) out.push(`  ${quote(file)}: ${lines.length},`);
out.push("};");
process.stdout.write(`${out.join("\n")}\n`);
