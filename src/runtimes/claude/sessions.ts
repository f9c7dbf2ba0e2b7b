/**
 * Claude Code's own sessions of a directory, read from its store (issue 15),
 * so a person or an assistant can resume earlier work by session id.
 *
 * Observed with Claude Code 2.1.332 (test/fixtures/sessions/ holds real
 * files): a session is `<config dir>/projects/<folder>/<session id>.jsonl`,
 * where the config dir is CLAUDE_CONFIG_DIR or ~/.claude and the folder is
 * the working directory's real path with every character but [A-Za-z0-9]
 * replaced by "-" (longer than 200 characters: cut, then "-" and a hash).
 * Each line is one JSON event with a `type`; `user` events carry `timestamp`,
 * `cwd`, `message.content` and, for a prompt, `turnPosition.turnIndex`: the
 * CLI's running count of prompts in the session, kept across --resume.
 *
 * Bounded on purpose: a session file grows without limit (2.1.332 writes
 * about 140 KB for one prompt), so only its first and last 64 KiB are read,
 * and only for the newest files of the folder.
 */
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  opendirSync,
  readSync,
  realpathSync,
  type Stats,
} from "node:fs";
import path from "node:path";

import type { AgentSession } from "../../agent/types.js";
import { forReading, forReadingOnOneLine } from "../../core/text.js";
import { isRecord } from "../../core/values.js";

export const DEFAULT_SESSION_LIMIT = 20;
export const MAX_SESSION_LIMIT = 200;
/** Bytes read from each end of a session file; a file up to twice this is read whole. */
export const SESSION_END_BYTES = 64 * 1024;
/**
 * Session files considered, newest by mtime first: files that turn out
 * unreadable are skipped for the next, up to this many.
 */
export const MAX_SESSION_FILES = 1000;
/** Directory entries looked at: a folder larger than this is listed from the first entries it returns. */
const MAX_FOLDER_ENTRIES = 50_000;
export const PROMPT_PREVIEW_CHARS = 120;
/** Claude Code cuts longer folder names and appends a hash of the whole path. */
const MAX_FOLDER_NAME_CHARS = 200;

/** As the CLI names them: a lowercase UUID. */
const SESSION_FILE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl$/;
const NEWLINE = 0x0a;

/**
 * One Claude Code session of a directory, as its file tells it. The fields of AgentSession, read so:
 * - session_id: what `--resume` takes, the file's name without `.jsonl`;
 * - started_at (ms since the epoch): the first timestamp in the file, which is when this file's session began (a
 *   forked session's copied history keeps its older timestamps, but comes after it); without one in the first
 *   64 KiB, the file's birth time, else its mtime;
 * - last_active_at: the latest timestamp in the file's last 64 KiB; without one, the file's mtime;
 * - first_prompt_preview: the first prompt (the first `user` event that is neither a tool result nor a meta or
 *   side-chain message, its text without `<system-reminder>` blocks), on one line, at most PROMPT_PREVIEW_CHARS
 *   characters ("…" marks a cut); empty when the first 64 KiB hold none;
 * - turns: prompts given (its user turns, not the model's turns a job's num_turns counts), the CLI's own counter
 *   `turnPosition.turnIndex` on the latest prompt. Exact (turns_exact) when the whole file was read (at most
 *   128 KiB), or when the last 64 KiB hold a prompt with that counter: any later prompt would be there too.
 *   Otherwise a lower bound: the counter or the count of prompts seen in the first and last 64 KiB, whichever is
 *   larger. A file with no counter (other CLI versions) read whole counts its prompts.
 */
export interface ClaudeSession extends AgentSession {
  /** The working directory the CLI recorded (the first `cwd` field), when one was read. */
  cwd?: string;
  /** The session file's path. */
  file: string;
  /** Its size when read. */
  bytes: number;
}

export interface ListSessionsOptions {
  /** Claude Code's configuration folder: claudeConfigDir() of the environment the sessions were made in. */
  configDir: string;
  /** The directory whose sessions to list; a symlink is resolved, as the CLI files sessions under the real path. */
  cwd: string;
  /** How many sessions at most, 1 to MAX_SESSION_LIMIT; default DEFAULT_SESSION_LIMIT. */
  limit?: number;
}

/** CLAUDE_CONFIG_DIR when set and not empty (the CLI reads it so), else `<home>/.claude`. */
export function claudeConfigDir(env: Readonly<Record<string, string | undefined>>, home: string): string {
  const configured = env.CLAUDE_CONFIG_DIR;
  return configured ? configured : path.join(home, ".claude");
}

/** Where Claude Code keeps the sessions of exactly this path (no symlink resolved): the CLI's own encoding. */
export function claudeProjectFolder(configDir: string, cwd: string): string {
  const name = cwd.replace(/[^a-zA-Z0-9]/g, "-");
  const folder =
    name.length <= MAX_FOLDER_NAME_CHARS
      ? name
      : `${name.slice(0, MAX_FOLDER_NAME_CHARS)}-${Math.abs(stringHash(cwd)).toString(36)}`;
  return path.join(configDir, "projects", folder);
}

/**
 * The folder listClaudeSessions reads: that of the directory's real path, or
 * of the path as given when it no longer resolves.
 */
export function claudeSessionFolder(configDir: string, cwd: string): string {
  return claudeProjectFolder(configDir, realDirectory(cwd));
}

/**
 * The directory's sessions, most recently active first, at most `limit`.
 * A missing folder is no sessions; a folder that cannot be read throws.
 * Files not named `<uuid>.jsonl`, symlinks and other non-regular files,
 * unreadable files and files without one JSON event are skipped, as are
 * lines that are not JSON (a running session's last line may be torn).
 * The newest MAX_SESSION_FILES files by mtime are considered; they are read
 * in that order until `limit` sessions are found, then ordered by
 * last_active_at.
 */
export function listClaudeSessions(options: ListSessionsOptions): ClaudeSession[] {
  const limit = options.limit ?? DEFAULT_SESSION_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_SESSION_LIMIT) {
    throw new RangeError(`limit must be a whole number from 1 to ${MAX_SESSION_LIMIT}, got ${limit}`);
  }
  const folder = claudeSessionFolder(options.configDir, options.cwd);
  const sessions: ClaudeSession[] = [];
  for (const candidate of newestSessionFiles(folder)) {
    const session = readSession(candidate);
    if (session) sessions.push(session);
    if (sessions.length === limit) break;
  }
  return sessions.sort((a, b) => b.last_active_at - a.last_active_at || a.session_id.localeCompare(b.session_id));
}

/** The directory's real path, as Claude Code files its sessions; as given (resolved) when it no longer exists. */
export function realDirectory(cwd: string): string {
  try {
    return realpathSync.native(cwd);
  } catch {
    // A deleted directory's sessions are still on file under its old path.
    return path.resolve(cwd);
  }
}

/** Java's String.hashCode, which Claude Code 2.1.332 appends (base 36) to a cut folder name. */
function stringHash(text: string): number {
  let hash = 0;
  for (let i = 0; i < text.length; i += 1) hash = (Math.imul(hash, 31) + text.charCodeAt(i)) | 0;
  return hash;
}

interface Candidate {
  sessionId: string;
  file: string;
  stats: Stats;
}

/**
 * The session files of a folder, newest mtime first, at most MAX_SESSION_FILES; lstat, so a symlink is never followed.
 */
function newestSessionFiles(folder: string): Candidate[] {
  let dir;
  try {
    dir = opendirSync(folder);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return [];
    throw error;
  }
  const candidates: Candidate[] = [];
  try {
    for (let seen = 0; seen < MAX_FOLDER_ENTRIES; seen += 1) {
      const entry = dir.readSync();
      if (entry === null) break;
      if (!SESSION_FILE.test(entry.name)) continue;
      const file = path.join(folder, entry.name);
      try {
        const stats = lstatSync(file);
        if (stats.isFile()) candidates.push({ sessionId: entry.name.slice(0, -".jsonl".length), file, stats });
      } catch {
        // Gone since the listing: a session being deleted is no session.
      }
    }
  } finally {
    dir.closeSync();
  }
  return candidates.sort((a, b) => b.stats.mtimeMs - a.stats.mtimeMs).slice(0, MAX_SESSION_FILES);
}

type SessionEvent = Record<string, unknown> & { type: string };

/** The file's first and last SESSION_END_BYTES as events; `whole` when that was all of it. */
interface FileEnds {
  head: SessionEvent[];
  tail: SessionEvent[];
  whole: boolean;
  bytes: number;
  stats: Stats;
}

function readSession(candidate: Candidate): ClaudeSession | undefined {
  const ends = readEnds(candidate.file);
  if (!ends || (ends.head.length === 0 && ends.tail.length === 0)) return undefined;
  const { head, tail, stats } = ends;
  const { turns, exact } = countTurns(ends);
  const cwd =
    head.map(cwdOf).find((value) => value !== undefined) ?? tail.map(cwdOf).findLast((value) => value !== undefined);
  return {
    session_id: candidate.sessionId,
    started_at: firstTimestamp(head) ?? (stats.birthtimeMs > 0 ? stats.birthtimeMs : stats.mtimeMs),
    last_active_at: latestTimestamp(tail) ?? stats.mtimeMs,
    first_prompt_preview: preview(firstPrompt(head)),
    turns,
    turns_exact: exact,
    ...(cwd === undefined ? {} : { cwd }),
    file: candidate.file,
    bytes: ends.bytes,
  };
}

/**
 * Opens without following a symlink and without blocking on a FIFO swapped in since the lstat; reads only the two ends.
 */
function readEnds(file: string): FileEnds | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0));
  } catch {
    return undefined;
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) return undefined;
    const size = stats.size;
    if (size <= 2 * SESSION_END_BYTES) {
      const events = parseLines(splitLines(readRange(fd, 0, size)));
      return { head: events, tail: events, whole: true, bytes: size, stats };
    }
    // The head's last line is cut unless it ends exactly at the boundary: only whole lines count.
    const headLines = splitLines(readRange(fd, 0, SESSION_END_BYTES));
    headLines.pop();
    // One byte more than the tail: when it is a newline, the tail starts on a whole line.
    const tailLines = splitLines(readRange(fd, size - SESSION_END_BYTES - 1, SESSION_END_BYTES + 1));
    tailLines.shift();
    return { head: parseLines(headLines), tail: parseLines(tailLines), whole: false, bytes: size, stats };
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

function readRange(fd: number, position: number, length: number): Buffer {
  const buffer = Buffer.alloc(length);
  let filled = 0;
  while (filled < length) {
    const read = readSync(fd, buffer, filled, length - filled, position + filled);
    if (read === 0) break;
    filled += read;
  }
  return buffer.subarray(0, filled);
}

/** Split on newline bytes before decoding: a cut never lands inside a character of a whole line. */
function splitLines(buffer: Buffer): Buffer[] {
  const lines: Buffer[] = [];
  let start = 0;
  for (let end = buffer.indexOf(NEWLINE); end !== -1; end = buffer.indexOf(NEWLINE, start)) {
    lines.push(buffer.subarray(start, end));
    start = end + 1;
  }
  lines.push(buffer.subarray(start));
  return lines;
}

function parseLines(lines: readonly Buffer[]): SessionEvent[] {
  const events: SessionEvent[] = [];
  for (const line of lines) {
    if (line.length === 0) continue;
    try {
      const value: unknown = JSON.parse(line.toString("utf8"));
      if (isRecord(value) && typeof value.type === "string") events.push(value as SessionEvent);
    } catch {
      // A torn or foreign line: the events around it still count.
    }
  }
  return events;
}

function timestampOf(event: SessionEvent): number | undefined {
  if (typeof event.timestamp !== "string") return undefined;
  const ms = Date.parse(event.timestamp);
  return Number.isFinite(ms) ? ms : undefined;
}

function firstTimestamp(events: readonly SessionEvent[]): number | undefined {
  for (const event of events) {
    const ms = timestampOf(event);
    if (ms !== undefined) return ms;
  }
  return undefined;
}

/** The latest, not the last: the CLI writes some events slightly out of time order. */
function latestTimestamp(events: readonly SessionEvent[]): number | undefined {
  let latest: number | undefined;
  for (const event of events) {
    const ms = timestampOf(event);
    if (ms !== undefined && (latest === undefined || ms > latest)) latest = ms;
  }
  return latest;
}

/** Only shown: cleaned for reading (PROTOCOL.md §10), as the prompt is. */
function cwdOf(event: SessionEvent): string | undefined {
  return typeof event.cwd === "string" && event.cwd !== "" ? forReading(event.cwd) : undefined;
}

/**
 * A prompt's text, or undefined when the event is no prompt (a tool result, a
 * meta or side-chain message, anything but `user`).
 */
function promptText(event: SessionEvent): string | undefined {
  if (event.type !== "user" || event.isSidechain === true || event.isMeta === true || !isRecord(event.message))
    return undefined;
  const content = event.message.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content) || content.some((block) => isRecord(block) && block.type === "tool_result"))
    return undefined;
  return content
    .filter(
      (block): block is { type: "text"; text: string } =>
        isRecord(block) && block.type === "text" && typeof block.text === "string",
    )
    .map((block) => block.text)
    .filter((text) => !text.trimStart().startsWith("<system-reminder>"))
    .join("\n");
}

function turnCounter(event: SessionEvent): number | undefined {
  const position = event.turnPosition;
  if (!isRecord(position)) return undefined;
  const index = position.turnIndex;
  return typeof index === "number" && Number.isSafeInteger(index) && index >= 0 ? index : undefined;
}

/** The first prompt with text; else the first queued prompt (its queue line comes first). */
function firstPrompt(head: readonly SessionEvent[]): string {
  for (const event of head) {
    const text = promptText(event);
    if (text !== undefined && text.trim() !== "") return text;
  }
  const queued = head.find(
    (event) => event.type === "queue-operation" && event.operation === "enqueue" && typeof event.content === "string",
  );
  return typeof queued?.content === "string" ? queued.content : "";
}

/** Whatever wrote the session file wrote the prompt: cleaned for reading (PROTOCOL.md §10). */
function preview(text: string): string {
  const line = forReadingOnOneLine(text);
  return line.length > PROMPT_PREVIEW_CHARS ? `${line.slice(0, PROMPT_PREVIEW_CHARS - 1)}…` : line;
}

interface PromptCount {
  prompts: number;
  counter: number | undefined;
}

function promptCount(events: readonly SessionEvent[]): PromptCount {
  let prompts = 0;
  let counter: number | undefined;
  for (const event of events) {
    if (promptText(event) === undefined) continue;
    prompts += 1;
    const index = turnCounter(event);
    if (index !== undefined) counter = Math.max(counter ?? 0, index);
  }
  return { prompts, counter };
}

/** See ClaudeSession.turns. */
function countTurns(ends: FileEnds): { turns: number; exact: boolean } {
  if (ends.whole) {
    const { prompts, counter } = promptCount(ends.head);
    return { turns: Math.max(counter ?? 0, prompts), exact: true };
  }
  const head = promptCount(ends.head);
  const tail = promptCount(ends.tail);
  // The counter only grows, and a later prompt than one in the tail would be in the tail too.
  if (tail.counter !== undefined) return { turns: Math.max(tail.counter, tail.prompts), exact: true };
  return { turns: Math.max(head.counter ?? 0, head.prompts + tail.prompts), exact: false };
}
