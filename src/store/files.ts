/**
 * Opening files in the state directory without following symbolic links
 * (PROTOCOL.md §15.1): a link planted there (result.txt pointing at ~/.ssh/id_ed25519,
 * stdout.jsonl at a file to overwrite) is refused, never read or written through.
 * Only a regular file is accepted, and nothing waits to find out: every open is
 * non-blocking, so a FIFO (which blocks an open until its other end appears) or a
 * device is refused at once with a StateError saying what stands there.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, watch } from "node:fs";
import type { FSWatcher, Stats } from "node:fs";

import { ignoreError } from "./listeners.js";
import { StateError } from "./records.js";

/** O_NOFOLLOW where the system has it (POSIX); Windows has no such flag, and the state folder's ACL is its guard. */
export const NO_FOLLOW = constants.O_NOFOLLOW ?? 0;
/** Never wait in open() (a FIFO without its other end), never take a terminal for ours; no effect on a regular file. */
const NO_WAIT = (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0);
/** The pieces readInChunks hands on. */
const CHUNK_BYTES = 64 * 1024;

/** Opens a regular file for reading, never through a link. Throws (ELOOP for a link) like openSync. */
export function openForReading(file: string): number {
  return regularFile(file, constants.O_RDONLY);
}

/** Opens (creating it private) a regular file to append to, never through a link. */
export function openForAppending(file: string): number {
  return regularFile(file, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT);
}

/** Opens (creating or emptying it, private) a regular file to write, never through a link. */
export function openForWriting(file: string): number {
  return regularFile(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC);
}

/** Opens (creating it private, keeping what it holds) a regular file to read and write, never through a link. */
export function openForUpdating(file: string): number {
  return regularFile(file, constants.O_RDWR | constants.O_CREAT);
}

/** A whole small file as text, or undefined when it is missing, a link or not a regular file. */
export function readTextFile(file: string): string | undefined {
  try {
    return readRegularTextFile(file);
  } catch {
    return undefined;
  }
}

/** A whole small file as text; throws as openForReading does (StateError for a FIFO, a socket, a device). */
export function readRegularTextFile(file: string): string {
  const fd = openForReading(file);
  try {
    // Sized by the file, so a thousand small records do not cost a thousand large buffers.
    const buffer = Buffer.allocUnsafe(fstatSync(fd).size);
    let length = 0;
    while (length < buffer.length) {
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
    }
    return buffer.toString("utf8", 0, length);
  } finally {
    closeSync(fd);
  }
}

/**
 * Hands a file to onChunk a piece at a time, never whole; nothing when it is missing or a link, and StateError
 * (as openForReading) when a FIFO or the like stands in its place.
 */
export function readInChunks(file: string, onChunk: (chunk: Buffer) => void): void {
  let fd: number;
  try {
    fd = openForReading(file);
  } catch (error) {
    if (error instanceof StateError) throw error;
    return;
  }
  try {
    for (let position = 0; ;) {
      const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
      const read = readSync(fd, buffer, 0, CHUNK_BYTES, position);
      if (read === 0) return;
      position += read;
      onChunk(read === CHUNK_BYTES ? buffer : Buffer.from(buffer.subarray(0, read)));
    }
  } finally {
    closeSync(fd);
  }
}

/** Opens file with these flags (not through a link, not waiting), keeping it only when it is a regular file. */
function regularFile(file: string, flags: number): number {
  let fd: number;
  try {
    fd = openSync(file, flags | NO_FOLLOW | NO_WAIT, 0o600);
  } catch (error) {
    // A socket, or a FIFO opened to write with no reader, says ENXIO: refused as what it is.
    if ((error as NodeJS.ErrnoException).code === "ENXIO") refuseSpecialFile(file);
    throw error;
  }
  // Closed unless found regular, fstat failing included.
  let kind: string | undefined = "not a regular file";
  try {
    kind = kindOf(fstatSync(fd));
  } finally {
    if (kind !== undefined) closeSync(fd);
  }
  if (kind !== undefined) throw notRegular(file, kind);
  return fd;
}

/** What a file that is not a regular one is, in a phrase; undefined for a regular file. */
function kindOf(info: Stats): string | undefined {
  if (info.isFile()) return undefined;
  if (info.isFIFO()) return "a FIFO";
  if (info.isSocket()) return "a socket";
  if (info.isCharacterDevice() || info.isBlockDevice()) return "a device";
  if (info.isDirectory()) return "a directory";
  return "not a regular file";
}

function notRegular(file: string, kind: string): StateError {
  const what = kind === "not a regular file" ? kind : `${kind}, not a regular file`;
  return new StateError(`${file} is ${what}; only regular files are read or written in the state directory (§15.1)`);
}

/**
 * Refuses a file a call needs when something other than a regular file or a link stands in its place (§15.1):
 * a StateError naming it. A missing file or a link is left to the caller, which takes either for no file.
 */
export function refuseSpecialFile(file: string): void {
  const kind = specialKindAt(file);
  if (kind !== undefined) throw notRegular(file, kind);
}

/** Whether something other than a regular file or a link stands at file: never written by claude-dispatch. */
export function isSpecialFile(file: string): boolean {
  return specialKindAt(file) !== undefined;
}

/** What stands at file when it is neither a regular file nor a link; undefined for those and for no file. */
function specialKindAt(file: string): string | undefined {
  let info: Stats;
  try {
    info = lstatSync(file);
  } catch {
    return undefined;
  }
  return info.isSymbolicLink() ? undefined : kindOf(info);
}

/**
 * Calls onChange when an entry of folder that isNews names changes, through the file system's notifications;
 * undefined where they cannot be had (the caller then polls). The returned function stops it.
 */
export function watchFolder(
  folder: string,
  isNews: (name: string) => boolean,
  onChange: () => void,
): (() => void) | undefined {
  let watcher: FSWatcher;
  try {
    watcher = watch(folder, (_event, name) => {
      if (name === null || isNews(name)) onChange();
    });
  } catch {
    return undefined;
  }
  const stop = (): void => {
    watcher.close();
    // A closed watcher outlives its use: nothing of the caller's may stay on it (listeners.ts).
    watcher.removeAllListeners();
    watcher.on("error", ignoreError);
  };
  // A folder removed meanwhile (pruned): no more news from it; the caller's poll reads the rest.
  watcher.on("error", stop);
  return stop;
}
