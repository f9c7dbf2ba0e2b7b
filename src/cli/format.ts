/**
 * How the command line prints: tables, ages, costs and sizes, and text from
 * a job or from the user made safe for a terminal.
 */
import path from "node:path";

import { quoted } from "../core/errors.js";
import { forReading } from "../core/text.js";

/** A prompt preview in a table: the rest of the prompt is what `show` is for. */
export const PREVIEW_COLUMN_CHARS = 60;

/** Columns as wide as their content; numbers right-aligned; no trailing spaces. */
export function table(
  header: readonly string[],
  rows: readonly string[][],
  rightAligned: ReadonlySet<number>,
  fit?: TableFit,
): string[] {
  return fitTable(header, rows, rightAligned, fit ?? { width: undefined }).lines;
}

/** How a column gives way to a short width: a path in its middle (`~/src/…/deep/dir`), a prompt at its end. */
export type Elision = "middle" | "end";

export interface TableFit {
  /** The columns the lines must fit in (PROTOCOL.md §17); undefined: as wide as their content. */
  width: number | undefined;
  /** The columns, by header, that may be cut; any other (an id, a number) is never cut. */
  elide?: Readonly<Record<string, Elision>>;
  /** Columns, by header, left out in this order while the others do not fit even at their narrowest. */
  leaveOut?: readonly string[];
}

const COLUMN_GAP = "  ";
/** A column cut narrower than this says too little to be worth its room: one of `leaveOut` goes instead. */
const NARROWEST_CUT_COLUMN = 8;

/**
 * The table within fit.width: the cuttable columns narrowed, the widest first, down to NARROWEST_CUT_COLUMN;
 * then the `leaveOut` columns dropped one by one, which `leftOut` names. A table whose uncut columns are wider
 * than the width stays wider: an id is never cut.
 */
export function fitTable(
  header: readonly string[],
  rows: readonly string[][],
  rightAligned: ReadonlySet<number>,
  fit: TableFit,
): { lines: string[]; leftOut: string[] } {
  // A tab or a newline would move what follows it: a cell is one line of spaces and text.
  const all = [header, ...rows].map((row) => row.map((cell) => cell.replace(/[\t\n]/g, " ")));
  let shown = header.map((_, column) => column);
  const leftOut: string[] = [];
  for (;;) {
    const natural = shown.map((column) => Math.max(...all.map((row) => displayWidth(row[column] ?? ""))));
    const elisions = shown.map((column) => fit.elide?.[header[column] ?? ""]);
    const gaps = COLUMN_GAP.length * (shown.length - 1);
    const room = fit.width === undefined ? Number.POSITIVE_INFINITY : fit.width - gaps;
    const widths = narrowed(natural, elisions, room);
    const next = fit.leaveOut?.find((name) => shown.some((column) => header[column] === name));
    if (sum(widths) <= room || next === undefined) {
      const lines = all.map((row) =>
        shown
          .map((column, index) => {
            const width = widths[index] ?? 0;
            const cell = cut(row[column] ?? "", width, elisions[index]);
            const padding = " ".repeat(Math.max(0, width - displayWidth(cell)));
            return rightAligned.has(column) ? padding + cell : cell + padding;
          })
          .join(COLUMN_GAP)
          .trimEnd(),
      );
      return { lines, leftOut };
    }
    shown = shown.filter((column) => header[column] !== next);
    leftOut.push(next);
  }
}

/** Column widths within room, taking a column from the widest cuttable ones each time; never below their floor. */
function narrowed(natural: readonly number[], elisions: readonly (Elision | undefined)[], room: number): number[] {
  const widths = [...natural];
  const floors = natural.map((width, index) => (elisions[index] ? Math.min(width, NARROWEST_CUT_COLUMN) : width));
  for (let excess = sum(widths) - room; excess > 0; excess -= 1) {
    let widest = -1;
    widths.forEach((width, index) => {
      if (width > (floors[index] ?? width) && (widest < 0 || width > (widths[widest] ?? 0))) widest = index;
    });
    if (widest < 0) break;
    widths[widest] = (widths[widest] ?? 0) - 1;
  }
  return widths;
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

function cut(cell: string, width: number, elision: Elision | undefined): string {
  if (elision === undefined || displayWidth(cell) <= width) return cell;
  return elision === "middle" ? elideMiddle(cell, width) : elideEnd(cell, width);
}

/** The start of text in at most `columns` columns, an ellipsis ending what was cut. */
export function elideEnd(text: string, columns: number): string {
  if (displayWidth(text) <= columns) return text;
  return columns < 1 ? "" : `${headOf(text, columns - 1)}…`;
}

/**
 * A path in at most `columns` columns, its start and its end kept, cut at separators where it can: the
 * folder a job runs in is told by its last names, the tree it is in by its first (`~/src/…/deep/dir`).
 */
export function elideMiddle(text: string, columns: number): string {
  if (displayWidth(text) <= columns) return text;
  if (columns < 1) return "";
  const room = columns - 1;
  let head = headOf(text, Math.floor(room / 3));
  const headEnd = Math.max(head.lastIndexOf("/"), head.lastIndexOf("\\"));
  if (headEnd >= 0) head = head.slice(0, headEnd + 1);
  let end = tailOf(text, room - displayWidth(head));
  const endStart = end.search(/[\\/]/);
  // Cut at a separator unless that would throw away most of what room is left.
  if (endStart > 0 && endStart < end.length / 2) end = end.slice(endStart);
  return `${head}…${end}`;
}

/** The longest start of text within `columns` columns. */
function headOf(text: string, columns: number): string {
  let width = 0;
  let end = 0;
  for (const character of text) {
    width += characterWidth(character);
    if (width > columns) break;
    end += character.length;
  }
  return text.slice(0, end);
}

/** The longest end of text within `columns` columns. */
function tailOf(text: string, columns: number): string {
  const characters = [...text];
  let width = 0;
  let start = characters.length;
  while (start > 0 && width + characterWidth(characters[start - 1] as string) <= columns) {
    start -= 1;
    width += characterWidth(characters[start] as string);
  }
  return characters.slice(start).join("");
}

/** East Asian wide characters and the common emoji: two columns on a terminal. */
const WIDE_CHARACTER = new RegExp(
  String.raw`[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3` +
    String.raw`\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6` +
    String.raw`\u{1f300}-\u{1f64f}\u{1f900}-\u{1f9ff}\u{20000}-\u{3fffd}]`,
  "u",
);

function characterWidth(character: string): number {
  return WIDE_CHARACTER.test(character) ? 2 : 1;
}

/** The columns text takes on a terminal: never fewer than it really takes (a combining mark counts one). */
export function displayWidth(text: string): number {
  if (/^[\x20-\x7e]*$/.test(text)) return text.length;
  let width = 0;
  for (const character of text) width += characterWidth(character);
  return width;
}

/**
 * A line of prose in lines of at most `width` columns, broken at spaces; a longer word (a path) where the line ends.
 */
export function wrap(line: string, width: number | undefined): string[] {
  if (width === undefined || displayWidth(line) <= width) return [line];
  const lines: string[] = [];
  let current = "";
  for (let word of line.split(" ")) {
    for (;;) {
      const joined = current === "" ? word : `${current} ${word}`;
      if (displayWidth(joined) <= width) {
        current = joined;
        break;
      }
      if (current !== "") {
        lines.push(current);
        current = "";
        continue;
      }
      // At least one character a line, however narrow the width.
      const head = headOf(word, width) || ([...word][0] as string);
      lines.push(head);
      word = word.slice(head.length);
    }
  }
  if (current !== "") lines.push(current);
  return lines;
}

/** "45s", "3m", "2h", "5d": the largest whole unit. */
export function formatAge(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

export function formatCost(usd: number): string {
  return `$${usd.toFixed(usd < 0.1 ? 4 : 2)}`;
}

export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

export function shortenHome(dir: string, home: string | undefined): string {
  if (!home || home === "/" || home === "\\") return dir;
  if (dir === home) return "~";
  return dir.startsWith(home + path.sep) ? `~${dir.slice(home.length)}` : dir;
}

export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * What the user typed, as a message quotes it: the server's one echo rule (errors.ts
 * quoted, PROTOCOL.md §10), never a terminal escape.
 */
export function echo(text: string): string {
  return printable(quoted(text));
}

/** Every run of whitespace, newlines included, as one space. */
export function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

export function firstLine(text: string): string {
  return text.trim().split("\n")[0]?.trim() ?? "";
}

export function indent(text: string): string {
  return text
    .split("\n")
    .map((line) => (line === "" ? "" : `  ${line}`))
    .join("\n");
}

/**
 * Prompts, results and agent output may hold terminal escapes and bidirectional controls: never obeyed, the
 * server's one rule for text a person reads (PROTOCOL.md §10). A command cleans what it prints where it prints it.
 */
export const printable = forReading;
