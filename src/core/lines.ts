/** Splitting a byte stream into bounded lines: stdin frames (§1) and the agent's stream-json (§7.3). */

const NEWLINE = 0x0a;

/**
 * Splits a byte stream into lines. It splits on the newline byte before
 * decoding: 0x0A never occurs inside a multi-byte UTF-8 sequence, so a
 * character split across chunks is always decoded whole. A line longer than
 * maxLineBytes is dropped as it arrives (never buffered whole), reported
 * once, and reading resumes after its newline.
 */
export interface DeferredLines {
  /** Lines longer than this are not buffered; their place in the stream is reported instead. */
  overBytes: number;
  /** The line's first bytes (at most headBytes), its offset in the stream and its length, without the newline. */
  onDeferredLine(head: Buffer, offset: number, length: number): void;
  headBytes: number;
}

export class LineReader {
  private parts: Buffer[] = [];
  private size = 0;
  private discarding = false;
  /** Bytes of the stream before the current chunk. */
  private streamOffset = 0;
  private lineStart = 0;
  /** Set while a long line is being skipped for later reading. */
  private deferredHead: Buffer | undefined;

  constructor(
    private readonly maxLineBytes: number,
    private readonly onLine: (line: string) => void,
    private readonly onOversizedLine: () => void,
    private readonly deferred?: DeferredLines,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, start);
      const end = newline === -1 ? chunk.length : newline;
      this.append(chunk.subarray(start, end));
      if (newline === -1) break;
      this.completeLine();
      start = newline + 1;
      this.lineStart = this.streamOffset + start;
    }
    this.streamOffset += chunk.length;
  }

  /** At end of input a final line without a newline still counts. */
  finish(): void {
    if ((this.size > 0 || this.deferredHead) && !this.discarding) this.completeLine();
    this.reset();
  }

  private append(part: Buffer): void {
    if (this.discarding || part.length === 0) return;
    if (this.size + part.length > this.maxLineBytes) {
      this.reset();
      this.discarding = true;
      this.onOversizedLine();
      return;
    }
    this.size += part.length;
    if (this.deferredHead) return;
    this.parts.push(part);
    if (this.deferred && this.size > this.deferred.overBytes) {
      const joined = Buffer.concat(this.parts);
      this.deferredHead = Buffer.from(joined.subarray(0, this.deferred.headBytes));
      this.parts = [];
    }
  }

  private completeLine(): void {
    if (this.discarding) {
      this.discarding = false;
      return;
    }
    if (this.deferredHead) {
      const head = this.deferredHead;
      const length = this.size;
      this.reset();
      this.deferred?.onDeferredLine(head, this.lineStart, length);
      return;
    }
    const bytes = this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.size);
    this.reset();
    let line = bytes.toString("utf8");
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (line.trim() !== "") this.onLine(line);
  }

  private reset(): void {
    this.parts = [];
    this.size = 0;
    this.discarding = false;
    this.deferredHead = undefined;
  }
}
