/**
 * The index of finished jobs (PROTOCOL.md §15.5): one JSON line each,
 * appended whenever a job's final record is written. A cache only: a job
 * missing from it (a lost line, an older state directory) has its record read
 * at startup and is indexed then, so nothing depends on the index being complete.
 *
 *   <state>/finished.jsonl   {"id", "finished_at", "bytes"} a line
 */
import { closeSync, writeSync } from "node:fs";
import path from "node:path";

import { isRecord } from "../core/values.js";
import { writeAtomically } from "./atomic.js";
import { openForAppending, readTextFile } from "./files.js";
import { isJobId, type IndexedJob } from "./records.js";

const INDEX_FILE = "finished.jsonl";
/**
 * The index is rewritten at startup once it holds this many lines per live entry (removed jobs leave theirs behind).
 */
const INDEX_SLACK = 2;

/** Adds a finished job; a failure only costs a read of its record at the next startup. */
export function appendToIndex(root: string, entry: IndexedJob): void {
  try {
    const fd = openForAppending(path.join(root, INDEX_FILE));
    try {
      // One write of one short line: appends from several processes do not interleave.
      writeSync(fd, `${JSON.stringify(entry)}\n`);
    } finally {
      closeSync(fd);
    }
  } catch {
    // The index is a cache.
  }
}

/** Every well-formed line, by job id (the last line of an id wins); a torn line is skipped. */
export function readIndex(root: string): Map<string, IndexedJob> {
  const entries = new Map<string, IndexedJob>();
  const text = readTextFile(path.join(root, INDEX_FILE)) ?? "";
  for (const line of text.split("\n")) {
    if (line === "") continue;
    try {
      const value: unknown = JSON.parse(line);
      if (
        isRecord(value) &&
        typeof value.id === "string" &&
        isJobId(value.id) &&
        Number.isFinite(value.finished_at) &&
        Number.isSafeInteger(value.bytes)
      ) {
        entries.set(value.id, { id: value.id, finished_at: value.finished_at as number, bytes: value.bytes as number });
      }
    } catch {
      // A torn line: its job is read from its record instead.
    }
  }
  return entries;
}

/** Rewrites the index with the live entries alone, once the lines of deleted jobs outnumber them. */
export function compactIndex(root: string, lines: number, live: readonly IndexedJob[], randomName: () => string): void {
  if (lines <= INDEX_SLACK * live.length + 64) return;
  try {
    writeAtomically(
      path.join(root, INDEX_FILE),
      live.map((entry) => `${JSON.stringify(entry)}\n`).join(""),
      false,
      randomName,
    );
  } catch {
    // Left as it was: still correct, only longer.
  }
}
