/**
 * Opening files in the state directory without following symbolic links
 * (PROTOCOL.md §15.1): a link planted there (result.txt pointing at ~/.ssh/id_ed25519,
 * stdout.jsonl at a file to overwrite) is refused, never read or written through.
 * Only a regular file is accepted: a FIFO or device would block or leak.
 */
import { closeSync, constants, fstatSync, openSync, readSync, watch, type FSWatcher } from "node:fs";

/** O_NOFOLLOW where the system has it (POSIX); Windows has no such flag, and the state folder's ACL is its guard. */
export const NO_FOLLOW = constants.O_NOFOLLOW ?? 0;

/** Opens a regular file for reading, never through a link. Throws (ELOOP for a link) like openSync. */
export function openForReading(file: string): number {
  return regularFile(openSync(file, constants.O_RDONLY | NO_FOLLOW), file);
}

/** Opens (creating it private) a regular file to append to, never through a link. */
export function openForAppending(file: string): number {
  return regularFile(openSync(file, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | NO_FOLLOW, 0o600), file);
}

/** Opens (creating or emptying it, private) a regular file to write, never through a link. */
export function openForWriting(file: string): number {
  return regularFile(openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | NO_FOLLOW, 0o600), file);
}

/** A whole small file as text, or undefined when it is missing, a link or not a regular file. */
export function readTextFile(file: string): string | undefined {
  let fd: number;
  try {
    fd = openForReading(file);
  } catch {
    return undefined;
  }
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
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

function regularFile(fd: number, file: string): number {
  let isFile = false;
  try {
    isFile = fstatSync(fd).isFile();
  } finally {
    if (!isFile) closeSync(fd);
  }
  if (!isFile) throw Object.assign(new Error(`${file} is not a regular file`), { code: "EINVAL" });
  return fd;
}

/**
 * Calls onChange when an entry of folder that isNews names changes, through the file system's notifications;
 * undefined where they cannot be had (the caller then polls). The returned function stops it.
 */
export function watchFolder(folder: string, isNews: (name: string) => boolean, onChange: () => void): (() => void) | undefined {
  let watcher: FSWatcher;
  try {
    watcher = watch(folder, (_event, name) => {
      if (name === null || isNews(name)) onChange();
    });
  } catch {
    return undefined;
  }
  // A folder removed meanwhile (pruned): no more news from it; the caller's poll reads the rest.
  watcher.on("error", () => watcher.close());
  return () => watcher.close();
}
