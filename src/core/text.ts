/**
 * Short renderings of what an agent printed, for every runtime: clipped copies
 * (a V8 slice keeps its whole parent alive, and the parent may be megabytes of
 * agent output) and text on one line.
 */

/** The start of text, at most max characters, as a copy of its own. */
export const clip = (text: string, max: number): string => {
  const trimmed = text.trim();
  const kept = trimmed.length > max ? `${trimmed.slice(0, max)}…` : trimmed;
  return kept === "" ? kept : (JSON.parse(JSON.stringify(kept)) as string);
};

export const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim();

/** The end of text, at most max characters, copied for the same reason as clip. */
export const tail = (text: string, max: number): string => {
  const trimmed = text.trim();
  const kept = trimmed.length > max ? `…${trimmed.slice(-max)}` : trimmed;
  return kept === "" ? kept : (JSON.parse(JSON.stringify(kept)) as string);
};

/**
 * Terminal escape sequences: CSI (ESC [ … final), OSC (ESC ] … BEL or ST), and any other ESC plus one
 * character; the 8-bit CSI and OSC introducers too. Removed whole, so no part of one is obeyed or shown.
 */
const ESCAPE_SEQUENCE = /\u001b\[[\u0030-\u003f]*[\u0020-\u002f]*[\u0040-\u007e]?|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b[\u0020-\u007e]?|\u009b[\u0030-\u003f]*[\u0020-\u002f]*[\u0040-\u007e]?|\u009d[^\u0007\u001b\u009c]*(?:\u0007|\u009c)?/g;
/** C0 and C1 controls but tab and newline, DEL, bidirectional overrides, embeddings and isolates, the line and paragraph separators. */
const UNSAFE_CHARACTER = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text from an agent or a tool's input, made safe for a person or a model to read (PROTOCOL.md §10):
 * escape sequences removed, every other control character and bidirectional control replaced by U+FFFD.
 * Tab and newline stay (a carriage return does not: it could hide what precedes it on a terminal).
 */
export const forReading = (text: string): string => text.replace(ESCAPE_SEQUENCE, "").replace(UNSAFE_CHARACTER, "\uFFFD");

/** forReading on one line: every run of white space, newlines included, becomes one space. */
export const forReadingOnOneLine = (text: string): string => oneLine(forReading(text));
