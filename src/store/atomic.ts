/**
 * Writing and reading the state directory's files whole or in ranges: records
 * are replaced atomically (a temporary file, then a rename), so a reader sees
 * the old one or the new one, never half of one; nothing goes through a link.
 */
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";

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

/** A file written whole with this text: created or emptied, private, never through a link. */
export function writeTextFile(file: string, text: string): void {
  const out = createTextFile(file);
  try {
    out.write(text);
  } finally {
    out.close();
  }
}

/**
 * A new file with this text, private, created exclusively (a file or link already there is an error), flushed if asked.
 */
export function writeNewFile(file: string, text: string, flush: boolean): void {
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NO_FOLLOW, 0o600);
  try {
    writeFileSync(fd, text);
    if (flush) fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
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
