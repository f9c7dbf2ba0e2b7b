/**
 * Reads one JSON object whose string member may be megabytes long, without
 * ever holding that string: the member's text is handed out in pieces as it
 * is decoded, and the rest of the object is parsed as usual (§15.4). Used for
 * a long result line of the agent's output, read back from its file.
 */
import { StringDecoder } from "node:string_decoder";

export interface StreamedObject {
  /** The object, with the streamed member set to "". */
  rest: Record<string, unknown>;
  /** UTF-16 length of the streamed member's text; undefined when the object has no such string member. */
  chars: number | undefined;
}

const CHUNK_BYTES = 64 * 1024;

/**
 * Parses the JSON object in bytes [offset, offset + length) of a source read
 * piece by piece, streaming the top-level string member `key` to onText.
 * Returns undefined when the bytes are not one JSON object.
 */
export function parseStreamingMember(
  read: (offset: number, length: number) => Buffer | undefined,
  offset: number,
  length: number,
  key: string,
  onText: (text: string) => void,
): StreamedObject | undefined {
  const scanner = new MemberScanner(key, onText);
  const decoder = new StringDecoder("utf8");
  for (let position = offset; position < offset + length;) {
    const bytes = read(position, Math.min(CHUNK_BYTES, offset + length - position));
    if (!bytes || bytes.length === 0) return undefined;
    position += bytes.length;
    if (!scanner.feed(decoder.write(bytes))) return undefined;
  }
  if (!scanner.feed(decoder.end())) return undefined;
  return scanner.finish();
}

/** Copies everything but the member's value into `rest`, and decodes the value piece by piece. */
class MemberScanner {
  private rest: string[] = [];
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** At depth 1, the next string is a key. */
  private expectingKey = false;
  private lastKey: string | undefined;
  private keyText = "";
  private afterKeyColon = false;
  private capturing = false;
  private pendingEscape = "";
  private pendingHighSurrogate = "";
  private chars: number | undefined;

  constructor(
    private readonly key: string,
    private readonly onText: (text: string) => void,
  ) {}

  feed(text: string): boolean {
    let index = 0;
    while (index < text.length) {
      if (this.capturing) {
        index = this.capture(text, index);
        continue;
      }
      const char = text[index] as string;
      index += 1;
      if (this.inString) {
        this.rest.push(char);
        if (this.escaped) this.escaped = false;
        else if (char === "\\") this.escaped = true;
        else if (char === '"') this.inString = false;
        if (this.inString || char !== '"') {
          if (this.depth === 1 && this.expectingKey) this.keyText += char;
        } else if (this.depth === 1 && this.expectingKey) {
          this.lastKey = this.keyText;
          this.expectingKey = false;
        }
        continue;
      }
      if (char === '"') {
        if (this.depth === 1 && this.afterKeyColon && this.lastKey === JSON.stringify(this.key).slice(1, -1)) {
          // The value we stream: "" goes into the rest in its place.
          this.rest.push('""');
          this.capturing = true;
          this.chars = 0;
          this.afterKeyColon = false;
          continue;
        }
        this.inString = true;
        this.keyText = "";
        this.rest.push(char);
        continue;
      }
      this.rest.push(char);
      if (char === "{" || char === "[") {
        this.depth += 1;
        if (this.depth === 1 && char === "{") this.expectingKey = true;
      } else if (char === "}" || char === "]") {
        this.depth -= 1;
      } else if (char === "," && this.depth === 1) {
        this.expectingKey = true;
      }
      if (this.depth === 1 && char === ":") this.afterKeyColon = true;
      else if (this.depth !== 1 || (char !== " " && char !== "\t" && char !== "\n" && char !== "\r"))
        this.afterKeyColon = false;
    }
    return true;
  }

  /** Decodes the streamed string from text[index] on; returns where it stopped. */
  private capture(text: string, index: number): number {
    let end = index;
    // The closing quote: the first '"' not escaped.
    let closed = false;
    while (end < text.length) {
      const char = text[end] as string;
      if (this.pendingEscape !== "" || char === "\\") {
        this.pendingEscape += char;
        end += 1;
        if (isCompleteEscape(this.pendingEscape)) {
          this.emit(this.pendingEscape);
          this.pendingEscape = "";
        }
        continue;
      }
      const nextSpecial = findSpecial(text, end);
      if (nextSpecial > end) {
        this.emit(text.slice(end, nextSpecial));
        end = nextSpecial;
        continue;
      }
      if (char === '"') {
        closed = true;
        end += 1;
        break;
      }
    }
    if (closed) {
      if (this.pendingHighSurrogate) this.deliver(this.pendingHighSurrogate);
      this.pendingHighSurrogate = "";
      this.capturing = false;
    }
    return end;
  }

  /** Raw JSON string content without quotes or unfinished escapes: decoded and handed on. */
  private emit(raw: string): void {
    const decoded = raw.includes("\\") ? (JSON.parse(`"${raw}"`) as string) : raw;
    this.deliver(decoded);
  }

  /** A high surrogate waits for its pair, so each piece is valid UTF-16 on its own. */
  private deliver(decoded: string): void {
    let text = this.pendingHighSurrogate + decoded;
    this.pendingHighSurrogate = "";
    const last = text.charCodeAt(text.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) {
      this.pendingHighSurrogate = text.slice(-1);
      text = text.slice(0, -1);
    }
    if (text === "") return;
    this.chars = (this.chars ?? 0) + text.length;
    this.onText(text);
  }

  finish(): StreamedObject | undefined {
    if (this.capturing || this.inString || this.depth !== 0) return undefined;
    try {
      const value: unknown = JSON.parse(this.rest.join(""));
      if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
      return { rest: value as Record<string, unknown>, chars: this.chars };
    } catch {
      return undefined;
    }
  }
}

function isCompleteEscape(escape: string): boolean {
  return escape.length >= 2 && (escape[1] !== "u" || escape.length === 6);
}

/** The index of the next '"' or '\' at or after start, or text.length. */
function findSpecial(text: string, start: number): number {
  const quote = text.indexOf('"', start);
  const backslash = text.indexOf("\\", start);
  const candidates = [quote, backslash].filter((at) => at >= 0);
  return candidates.length === 0 ? text.length : Math.min(...candidates);
}
