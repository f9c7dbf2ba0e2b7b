/**
 * A bounded, append-only text log addressed by absolute character offsets
 * (PROTOCOL.md §5.7). When it grows past its cap the oldest entries are
 * dropped, and offsets keep their meaning: `start` says where it now begins.
 * Entries are what an agent did, kept cleaned for reading (§10), so pages
 * are cut from the text that is served and add up to it.
 */
import { forReading } from "./text.js";

export interface TextPage {
  /** Absolute offset of the first character returned (moved up if the asked one was dropped). */
  offset: number;
  text: string;
  /** Absolute end of the log: the total number of characters ever written. */
  end: number;
  /** Characters dropped from the front to respect the cap. */
  start: number;
}

export class Transcript {
  private entries: string[] = [];
  private first = 0; // index of the first kept entry
  private kept = 0; // characters kept
  private dropped = 0; // characters dropped from the front

  /**
   * onAppend hears every entry whole and cleaned, before any is dropped: a
   * reader that keeps none of them itself (`logs -f`).
   */
  constructor(
    private readonly maxChars: number,
    private readonly onAppend?: (entry: string) => void,
  ) {}

  get start(): number {
    return this.dropped;
  }

  get end(): number {
    return this.dropped + this.kept;
  }

  /** Appends one entry as a line, cleaned (§10). An entry longer than the cap keeps only its tail. */
  append(raw: string): void {
    const entry = forReading(raw);
    this.onAppend?.(entry);
    let line = `${entry}\n`;
    if (line.length > this.maxChars) {
      this.dropped += line.length - this.maxChars;
      line = line.slice(line.length - this.maxChars);
    }
    this.entries.push(line);
    this.kept += line.length;
    while (this.kept > this.maxChars) {
      const oldest = this.entries[this.first] as string;
      this.first += 1;
      this.kept -= oldest.length;
      this.dropped += oldest.length;
    }
    // Compact now and then, so dropped entries do not pin memory.
    if (this.first > 1024 && this.first * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.first);
      this.first = 0;
    }
  }

  /** Drops everything kept so far; offsets keep their meaning. */
  release(): void {
    this.dropped += this.kept;
    this.kept = 0;
    this.entries = [];
    this.first = 0;
  }

  /** Characters currently held in memory. */
  get size(): number {
    return this.kept;
  }

  page(offset: number, limit: number): TextPage {
    const from = Math.max(offset, this.dropped);
    const to = Math.min(this.end, from + limit);
    const parts: string[] = [];
    let position = this.dropped;
    for (let i = this.first; i < this.entries.length && position < to; i += 1) {
      const entry = this.entries[i] as string;
      const entryEnd = position + entry.length;
      if (entryEnd > from) parts.push(entry.slice(Math.max(0, from - position), Math.min(entry.length, to - position)));
      position = entryEnd;
    }
    return { offset: Math.min(from, this.end), text: parts.join(""), end: this.end, start: this.dropped };
  }
}
