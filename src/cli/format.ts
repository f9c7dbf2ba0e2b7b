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
export function table(header: readonly string[], rows: readonly string[][], rightAligned: ReadonlySet<number>): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, column) => Math.max(...all.map((row) => (row[column] ?? "").length)));
  return all.map((row) =>
    row
      .map((cell, column) => (rightAligned.has(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0)))
      .join("  ")
      .trimEnd(),
  );
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

/** What the user typed, as a message quotes it: the server's one echo rule (errors.ts quoted, PROTOCOL.md §10), never a terminal escape. */
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
