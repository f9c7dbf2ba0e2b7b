/**
 * Writing and reading the state directory's files whole or in ranges: records
 * are replaced atomically (a temporary file, then a rename), so a reader sees
 * the old one or the new one, never half of one; nothing goes through a link.
 */
import { closeSync, constants, fstatSync, fsync, fsyncSync, openSync, readSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";

import { NO_FOLLOW, openForReading, openForWriting } from "./files.js";

/** Bytes [offset, offset + length) of a file, or undefined when it cannot be read. */
export function readFileRange(file: string, offset: number, length: number): Buffer | undefined {
  let fd: number | undefined;
  try {
    fd = openForReading(file);
    const available = Math.max(0, Math.min(length, fstatSync(fd).size - offset));
    const buffer = Buffer.alloc(available);
    const read = available === 0 ? 0 : readSync(fd, buffer, 0, available, offset);
    return read === available ? buffer : buffer.subarray(0, read);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** A file written from the start in pieces, private to this user. */
export function createTextFile(file: string): { write(text: string): void; close(): void } {
  const fd = openForWriting(file);
  return {
    write: (text) => void writeSync(fd, text),
    close: () => closeSync(fd),
  };
}

/** A new file with this text, private, created exclusively (a file or link already there is an error), flushed if asked. */
export function writeNewFile(file: string, text: string, flush: boolean): void {
  const fd = openNewFile(file, text);
  try {
    if (flush) fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** As writeNewFile, flushed later: the promise settles when the text is on disk. */
export function writeNewFileThenFlush(file: string, text: string): Promise<void> {
  return flushAndClose(openNewFile(file, text));
}

/**
 * As writeAtomically, but flushed after the rename: the promise settles when the text is on disk. Until
 * then a power failure may leave the file empty or missing, but a crash of this process loses nothing.
 */
export function writeAtomicallyThenFlush(file: string, text: string, randomName: () => string): Promise<void> {
  const temporary = `${file}.${randomName()}.tmp`;
  let fd: number | undefined;
  try {
    fd = openNewFile(temporary, text);
    renameSync(temporary, file);
  } catch (error) {
    if (fd !== undefined) closeSync(fd);
    rmSync(temporary, { force: true });
    throw error;
  }
  return flushAndClose(fd);
}

/** Created exclusively and never through a link, with its text written; the descriptor is the caller's to close. */
function openNewFile(file: string, text: string): number {
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NO_FOLLOW, 0o600);
  try {
    writeFileSync(fd, text);
    return fd;
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}

/**
 * The flush runs in the thread pool: this thread goes on, and the flushes of a burst of jobs share the
 * file system's journal commits instead of waiting for one each.
 */
function flushAndClose(fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    fsync(fd, (error) => {
      closeSync(fd);
      if (error) reject(error);
      else resolve();
    });
  });
}

/** Temporary file in the same folder, flushed if asked, then renamed over the target. */
export function writeAtomically(file: string, text: string, flush: boolean, randomName: () => string): void {
  // A random name: two writers (the server and the CLI) never share a temporary file.
  const temporary = `${file}.${randomName()}.tmp`;
  try {
    // Exclusive: a link planted under the temporary name is never written through.
    writeNewFile(temporary, text, flush);
    renameSync(temporary, file);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}


