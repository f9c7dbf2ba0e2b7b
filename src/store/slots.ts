/**
 * Agent slots shared by every server on the state directory (PROTOCOL.md
 * §15.7): CLAUDE_DISPATCH_MAX_JOBS agents at once across all of them.
 *
 *   <state>/slots/<n>.<g>        slot n's g-th holder: {pid, start_time, job}
 *   <state>/slots/<n>.<g>.free   that holder gave it back (its file renamed; a
 *                                server before 2026-12 made this one beside it)
 *
 * Files are only ever created, never rewritten (an exclusive create, not
 * through a link: O_EXCL refuses any name that exists). Slot n is free when its
 * highest generation is given back, or (reclaim) when that holder is gone and
 * its job is not running: a job still running keeps its slot for the server
 * that takes it over. A claimant creates the generation past every one named
 * exclusively, then lists again and gives it back if a higher one appeared
 * meanwhile or its own was given back already (a name a rename freed), so two
 * claimants never both hold a slot; older files go once it is held.
 */
import { mkdirSync, readdirSync, renameSync, rmSync, watch, type FSWatcher } from "node:fs";
import path from "node:path";

import { createWithoutLinks } from "./claims.js";
import { isSpecialFile, readTextFile } from "./files.js";
import { parseIdentity, type ProcessIdentity } from "./records.js";

export interface Slot {
  readonly index: number;
  readonly generation: number;
}

export interface SlotFilesOptions {
  dir: string;
  count: number;
  holder: ProcessIdentity;
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
      const listing = files.get(index);
      const top = listing?.top;
      if (top !== undefined && !listing?.freed.has(top)) continue;
      const slot = this.claim(index, nextGeneration(listing), jobId);
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
      const listing = files.get(index);
      const top = listing?.top;
      if (top === undefined) continue;
      const held = this.holderOf(index, top);
      // Unreadable holders and ones that may live keep their slot; a FIFO or the like holds nothing (§15.1).
      if (held === undefined) continue;
      if (held && ((await isAlive(held.identity)) !== false || this.options.jobRunning(held.job))) continue;
      const slot = this.claim(index, nextGeneration(listing), jobId);
      if (slot) return slot;
    }
    return undefined;
  }

  /** The slot of a job taken over from a dead server, held now by this one; undefined when it had none. */
  inherit(jobId: string): Slot | undefined {
    const files = this.list();
    for (let index = 0; index < this.options.count; index += 1) {
      const listing = files.get(index);
      const top = listing?.top;
      if (top === undefined || listing?.freed.has(top)) continue;
      const held = this.holderOf(index, top);
      if (held?.job !== jobId) continue;
      const { holder } = this.options;
      // Already this server's: one slot, not two.
      if (held.identity.pid === holder.pid && held.identity.start_time === holder.start_time)
        return { index, generation: top };
      return this.claim(index, nextGeneration(listing), jobId);
    }
    return undefined;
  }

  /**
   * The holder file renamed to its `.free` name: the generation stays named, so a claim of it is refused (claim),
   * and no file is made or deleted (on some file systems each costs far more than a rename; BENCHMARKS.md (i)).
   */
  give(slot: Slot): void {
    const held = path.join(this.options.dir, `${slot.index}.${slot.generation}`);
    try {
      renameSync(held, `${held}.free`);
    } catch {
      // Gone with the folder, or removed by a later holder that reclaimed the slot: nothing is held any more.
    }
  }

  /**
   * These slots as the job layer's SlotPool (jobs/types.ts): shared by every
   * server, a gone holder's reclaimed by isAlive.
   */
  pool(isAlive: IsAlive) {
    return {
      shared: true,
      take: (jobId: string) => this.take(jobId),
      reclaim: (jobId: string) => this.reclaim(jobId, isAlive),
      inherit: (jobId: string) => this.inherit(jobId),
      give: (slot: Slot) => this.give(slot),
      onChange: (listener: () => void) => this.onChange(listener),
    };
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
    const { dir, holder } = this.options;
    try {
      const file = path.join(dir, `${index}.${generation}`);
      if (!createHolderFile(file, JSON.stringify({ ...holder, job: jobId }))) return undefined;
    } catch {
      // Not written (a full disk): no slot now; the job queues, and its queue's poll asks again (§15.7).
      return undefined;
    }
    const slot = this.list().get(index);
    // A higher holder came meanwhile; or this generation was held and given back already, its holder file
    // renamed away, and this claim planned from a listing older than that: either way the slot is not ours.
    if ((slot?.top ?? generation) > generation || slot?.freed.has(generation)) {
      this.give({ index, generation });
      return undefined;
    }
    // Given back, a generation may be named by its .free file alone.
    for (const older of new Set([...(slot?.generations ?? []), ...(slot?.freed ?? [])])) {
      if (older >= generation) continue;
      rmSync(path.join(dir, `${index}.${older}`), { force: true });
      rmSync(path.join(dir, `${index}.${older}.free`), { force: true });
    }
    return { index, generation };
  }

  /** Who holds the slot; undefined when that cannot be read, null when no holder ever wrote what stands there. */
  private holderOf(index: number, generation: number): { identity: ProcessIdentity; job: string } | null | undefined {
    const file = path.join(this.options.dir, `${index}.${generation}`);
    if (isSpecialFile(file)) return null;
    const text = readTextFile(file);
    const identity = parseIdentity(text);
    if (!identity || text === undefined) return undefined;
    const job = (JSON.parse(text) as { job?: unknown }).job;
    return typeof job === "string" ? { identity, job } : undefined;
  }

  /** Each slot's holder files, read in one listing of the folder. */
  private list(): Map<number, SlotListing> {
    const slots = new Map<number, SlotListing>();
    let names: string[];
    try {
      names = readdirSync(this.options.dir);
    } catch {
      return slots;
    }
    for (const name of names) {
      const match = /^(\d+)\.(\d+)(\.free)?$/.exec(name);
      if (!match) continue;
      const index = Number(match[1]);
      const generation = Number(match[2]);
      let slot = slots.get(index);
      if (!slot) slots.set(index, (slot = { top: undefined, generations: [], freed: new Set() }));
      if (match[3]) {
        slot.freed.add(generation);
      } else {
        slot.generations.push(generation);
        slot.top = Math.max(slot.top ?? generation, generation);
      }
    }
    return slots;
  }
}

/**
 * Past every generation named, releases included: a new holder file never looks given back, and a claim is
 * never of a generation already given back (which claim refuses).
 */
function nextGeneration(listing: SlotListing | undefined): number {
  return Math.max(listing?.top ?? -1, ...(listing?.freed ?? [])) + 1;
}

interface SlotListing {
  /** The highest holder file's generation; undefined when only releases are left. */
  top: number | undefined;
  generations: number[];
  freed: Set<number>;
}

/**
 * Created exclusively, then written: one file operation, not three (a temporary file and a link). A reader
 * that comes between the two finds no holder it can read, and such a slot counts as held.
 */
function createHolderFile(file: string, content: string): boolean {
  try {
    return createWithoutLinks(file, content);
  } catch (error) {
    // The folder is gone (the state directory was removed while the server ran): made again, once.
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    return createWithoutLinks(file, content);
  }
}
