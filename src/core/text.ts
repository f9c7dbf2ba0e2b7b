/**
 * Short renderings of what an agent printed, for every runtime: clipped copies
 * (a V8 slice keeps its whole parent alive, and the parent may be megabytes of
 * agent output) and text on one line; and the one cleaner of text a person or
 * a model reads (PROTOCOL.md §10).
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

const PARAMETERS_AND_FINAL = String.raw`[\u0030-\u003f]*[\u0020-\u002f]*[\u0040-\u007e]?`;
/** A string's body stops at any introducer: no match spans the start of another (PiecewiseForReading relies on it). */
const STRING_BODY = String.raw`[^\u0007\u001b\u009b\u009c\u009d\n]*`;
/** Terminal escape sequences, removed whole so that no part of one is obeyed or shown. */
const ESCAPE_SEQUENCE = new RegExp(
  [
    String.raw`\u001b\[${PARAMETERS_AND_FINAL}`, // CSI
    // OSC, DCS, SOS, PM, APC: to BEL or ST, else to the line's end.
    String.raw`\u001b[\]PX^_]${STRING_BODY}(?:\u0007|\u001b\\)?`,
    String.raw`\u001b[\u0020-\u002f]*[\u0030-\u007e]?`, // any other ESC, its intermediates and final (charset, ST, RIS)
    String.raw`\u009b${PARAMETERS_AND_FINAL}`, // 8-bit CSI
    String.raw`\u009d${STRING_BODY}(?:\u0007|\u009c)?`, // 8-bit OSC
  ].join("|"),
  "g",
);
/**
 * C0 and C1 controls but tab and newline, DEL, bidirectional marks, embeddings, overrides and isolates, U+2028, U+2029.
 */
const CONTROLS =
  String.raw`\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c` +
  String.raw`\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069`;
/** Those, and the tag characters: invisible to a person, read by a model. */
const UNSAFE_CHARACTER = new RegExp(String.raw`[${CONTROLS}\u{e0000}-\u{e007f}]`, "gu");
/**
 * Anything forReading could change (a tag's first half too): most text has
 * none, and comes back as it is after one scan.
 */
const NEEDS_CLEANING = new RegExp(String.raw`[${CONTROLS}]|\udb40`);

/**
 * Text from an agent or a tool's input, made safe for a person or a model to read (PROTOCOL.md §10):
 * escape sequences removed, every other control character, bidirectional control and tag replaced by U+FFFD.
 * Tab and newline stay, and a CRLF line end becomes a newline; a lone carriage return does not stay (it could
 * hide what precedes it on a terminal). Cleaning clean text changes nothing.
 */
export const forReading = (text: string): string => {
  if (!NEEDS_CLEANING.test(text)) return text;
  return text.replace(/\r\n/g, "\n").replace(ESCAPE_SEQUENCE, "").replace(UNSAFE_CHARACTER, "\uFFFD");
};

/** forReading on one line: every run of white space, newlines included, becomes one space. */
export const forReadingOnOneLine = (text: string): string => oneLine(forReading(text));

/** Where an escape sequence may start. */
const INTRODUCERS = ["\u001b", "\u009b", "\u009d"];
const ESCAPE_SEQUENCE_HERE = new RegExp(ESCAPE_SEQUENCE.source, "y");
/** An escape sequence longer than this, cut between two pieces, is cleaned as two: its introducer still goes. */
const MAX_HELD_CHARS = 4096;

/**
 * forReading for text that arrives in pieces (a result streamed to its file): the end of a piece that may
 * continue in the next (an escape sequence, a carriage return before its newline, half a surrogate pair)
 * waits for it, so the pieces come out as the whole text would.
 */
export class PiecewiseForReading {
  private held = "";

  push(piece: string): string {
    const text = this.held + piece;
    const cut = unfinishedFrom(text);
    this.held = text.slice(cut);
    return forReading(text.slice(0, cut));
  }

  /** The text ended: what was held. */
  end(): string {
    const rest = forReading(this.held);
    this.held = "";
    return rest;
  }
}

function unfinishedFrom(text: string): number {
  let cut = text.length;
  const last = text.charCodeAt(text.length - 1);
  if (last === 0x0d || (last >= 0xd800 && last <= 0xdbff)) cut -= 1;
  const start = Math.max(...INTRODUCERS.map((introducer) => text.lastIndexOf(introducer)));
  if (start >= 0 && text.length - start <= MAX_HELD_CHARS) {
    ESCAPE_SEQUENCE_HERE.lastIndex = start;
    ESCAPE_SEQUENCE_HERE.exec(text);
    // The sequence runs to the end: the next piece may lengthen it.
    if (ESCAPE_SEQUENCE_HERE.lastIndex === text.length) cut = Math.min(cut, start);
  }
  return cut;
}

/** A JSON value nested deeper than this is cut there: rendering it must not exhaust the stack. */
const MAX_DEPTH = 64;

/** A JSON value (a tool's input) with every string in it, keys included, cleaned by forReading. */
export function valueForReading(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return forReading(value);
  if (typeof value !== "object" || value === null) return value;
  if (depth >= MAX_DEPTH) return "…";
  if (Array.isArray(value)) return value.map((item) => valueForReading(item, depth + 1));
  const entries = Object.entries(value).map(([key, item]) => [forReading(key), valueForReading(item, depth + 1)]);
  return Object.fromEntries(entries);
}
