/**
 * Agent slots shared by every server on the state directory (PROTOCOL.md
 * §15.7): CLAUDE_DISPATCH_MAX_JOBS agents at once across all of them.
 *
 *   <state>/slots/<n>.<g>        slot n's g-th holder: {pid, start_time, job}
 *   <state>/slots/<n>.<g>.free   that holder gave it back
 *
 * Files are only ever created, never rewritten. Slot n is free when its
 * highest holder file is given back, or (reclaim) when that holder is gone and
 * its job is not running: a job still running keeps its slot for the server
 * that takes it over. A claimant creates the next holder file exclusively,
 * then lists again and gives it back if a higher one appeared meanwhile, so
 * two claimants never both hold a slot; older files go once it is held.
 */
import { mkdirSync, readdirSync, rmSync, watch, type FSWatcher } from "node:fs";
import path from "node:path";

import { createExclusively } from "./claims.js";
import { readTextFile } from "./files.js";
import { parseIdentity, type ProcessIdentity } from "./records.js";

export interface Slot {
  readonly index: number;
  readonly generation: number;
}

export interface SlotFilesOptions {
  dir: string;
  count: number;
  holder: ProcessIdentity;
  randomName(): string;
  /** Whether a holder's job is running by its record (then its slot is kept for whoever takes it over). */
  jobRunning(jobId: string): boolean;
}

type IsAlive = (holder: ProcessIdentity) => Promise<boolean | undefined>;

export class SlotFiles {
  private watcher: FSWatcher | undefined;
  private readonly listeners = new Set<() => void>();

  constructor(private readonly options: SlotFilesOptions) {}

  /** A slot for the job if one is certainly free (given back, or never held). */
  take(jobId: string): Slot | undefined {
    const files = this.list();
    for (let index = 0; index < this.options.count; index += 1) {
      const top = topOf(files, index);
      if (top !== undefined && !files.has(`${index}.${top}.free`)) continue;
      const slot = this.claim(index, top === undefined ? 0 : top + 1, jobId);
      if (slot) return slot;
    }
    return undefined;
  }

  /** As take, and a slot whose holder is gone and whose job does not run is taken too. */
  async reclaim(jobId: string, isAlive: IsAlive): Promise<Slot | undefined> {
    const taken = this.take(jobId);
    if (taken) return taken;
    const files = this.list();
    for (let index = 0; index < this.options.count; index += 1) {
      const top = topOf(files, index);
      if (top === undefined) continue;
      const held = this.holderOf(index, top);
      // Unreadable holders and ones that may live keep their slot.
      if (!held || (await isAlive(held.identity)) !== false || this.options.jobRunning(held.job)) continue;
      const slot = this.claim(index, top + 1, jobId);
      if (slot) return slot;
    }
    return undefined;
  }

  /** The slot of a job taken over from a dead server, held now by this one; undefined when it had none. */
  inherit(jobId: string): Slot | undefined {
    const files = this.list();
    for (let index = 0; index < this.options.count; index += 1) {
      const top = topOf(files, index);
      if (top === undefined || files.has(`${index}.${top}.free`)) continue;
      const held = this.holderOf(index, top);
      if (held?.job !== jobId) continue;
      const { holder } = this.options;
      // Already this server's: one slot, not two.
      if (held.identity.pid === holder.pid && held.identity.start_time === holder.start_time) return { index, generation: top };
      return this.claim(index, top + 1, jobId);
    }
    return undefined;
  }

  give(slot: Slot): void {
    try {
      createExclusively(path.join(this.options.dir, `${slot.index}.${slot.generation}.free`), "", this.options.randomName);
    } catch {
      // Gone with the folder: nothing is held any more.
    }
  }

  /** Calls listener when a slot may have come free; notifications where the system has them. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    if (!this.watcher) {
      try {
        this.watcher = watch(this.options.dir, () => {
          for (const each of [...this.listeners]) each();
        });
        this.watcher.on("error", () => this.stopWatching());
      } catch {
        // No notifications: the caller's poll finds freed slots.
      }
    }
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stopWatching();
    };
  }

  private stopWatching(): void {
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** Holder file `index.generation`, made exclusively, kept only if no higher one appeared meanwhile. */
  private claim(index: number, generation: number, jobId: string): Slot | undefined {
    const { dir, holder, randomName } = this.options;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!createExclusively(path.join(dir, `${index}.${generation}`), JSON.stringify({ ...holder, job: jobId }), randomName)) return undefined;
    const files = this.list();
    if ((topOf(files, index) ?? generation) > generation) {
      this.give({ index, generation });
      return undefined;
    }
    for (const name of files) {
      const match = /^(\d+)\.(\d+)(\.free)?$/.exec(name);
      if (match && Number(match[1]) === index && Number(match[2]) < generation) rmSync(path.join(dir, name), { force: true });
    }
    return { index, generation };
  }

  private holderOf(index: number, generation: number): { identity: ProcessIdentity; job: string } | undefined {
    const text = readTextFile(path.join(this.options.dir, `${index}.${generation}`));
    const identity = parseIdentity(text);
    if (!identity || text === undefined) return undefined;
    const job = (JSON.parse(text) as { job?: unknown }).job;
    return typeof job === "string" ? { identity, job } : undefined;
  }

  private list(): Set<string> {
    try {
      return new Set(readdirSync(this.options.dir));
    } catch {
      return new Set();
    }
  }
}

/** The highest holder generation of slot index, if any. */
function topOf(files: ReadonlySet<string>, index: number): number | undefined {
  let top: number | undefined;
  const prefix = `${index}.`;
  for (const name of files) {
    if (!name.startsWith(prefix)) continue;
    const generation = /^\d+$/.exec(name.slice(prefix.length))?.[0];
    if (generation !== undefined && (top === undefined || Number(generation) > top)) top = Number(generation);
  }
  return top;
}
