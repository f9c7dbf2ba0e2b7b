/**
 * Lines at most MAX_LINE characters (issue 27 item 4), outside test fixtures and data tables. A data-table
 * line is one string literal alone on its line as an element of an array, as in a list of expected lines;
 * nothing else is exempt.
 */
import { MAX_LINE } from "./rules.js";
import { allNodes, parse, ts, type TS } from "./source.js";

/** Characters as a reader counts them: code points, not UTF-16 units. */
const width = (line: string): number => (line.length <= MAX_LINE ? line.length : [...line].length);

/** The lines (1-based) that are one string element of an array and nothing else. */
function dataTableLines(source: TS.SourceFile): Set<number> {
  const lines = new Set<number>();
  const texts = source.text.split("\n");
  for (const node of allNodes(source)) {
    if (!ts.isStringLiteral(node) && !ts.isNoSubstitutionTemplateLiteral(node)) continue;
    if (!ts.isArrayLiteralExpression(node.parent)) continue;
    const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
    const written = node.getText(source);
    const line = (texts[start] ?? "").trim().replace(/,$/, "");
    if (line === written) lines.add(start + 1);
  }
  return lines;
}

/** A line that may be a data-table row: one quoted string, perhaps with a comma. Only those need the parser. */
const ROW_SHAPE = /^\s*(["'`]).*\1,?\s*$/;

/** The lines (1-based) over MAX_LINE characters in one file, data-table lines aside. */
export function longLines(file: string, text: string): number[] {
  const long: number[] = [];
  let rows = false;
  text.split("\n").forEach((line, index) => {
    if (width(line.replace(/\r$/, "")) <= MAX_LINE) return;
    long.push(index + 1);
    rows ||= ROW_SHAPE.test(line);
  });
  if (!rows) return long;
  const table = dataTableLines(parse(file, text));
  return long.filter((line) => !table.has(line));
}

/** File (relative to the repository) → its long lines, for the files that have any. */
export function checkLineLengths(files: ReadonlyMap<string, string>): Map<string, number[]> {
  const found = new Map<string, number[]>();
  for (const [file, text] of files) {
    const lines = longLines(file, text);
    if (lines.length > 0) found.set(file, lines);
  }
  return found;
}
