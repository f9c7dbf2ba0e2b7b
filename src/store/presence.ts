/**
 * Who carries a state directory's work now (PROTOCOL.md §15.8). Every server, and the headless carrier, keeps a
 * file in servers/ while it runs: who it is, its role, and the settings it runs with, so that a carrier started in
 * place of one that died runs as it did. The carrier also holds the one carrier slot, taken as agent slots are
 * (slots.ts): of two carriers started at once, one gets it and the other exits.
 *
 *   <state>/servers/<pid>.<random>.json   {pid, start_time, role, since, settings}
 *   <state>/carrier/0.<g>[.free]          the carrier slot's g-th holder
 */
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";

import { createExclusively } from "./claims.js";
import { readTextFile, watchFolder } from "./files.js";
import { parseIdentity, type ProcessIdentity } from "./records.js";
import { SlotFiles, type Slot } from "./slots.js";

export type PresenceRole = "server" | "carrier";

export interface Presence extends ProcessIdentity {
  role: PresenceRole;
  /** When it joined, ms since the epoch. */
  since: number;
  /** Its CLAUDE_DISPATCH_* variables: the policy and limits it runs with. */
  settings: Record<string, string>;
}

export interface PresenceEntry {
  /** The file's name in servers/. */
  name: string;
  presence: Presence;
}

/** The settings a presence records: every CLAUDE_DISPATCH_* variable, nothing else of the environment. */
export function settingsOf(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (name.startsWith("CLAUDE_DISPATCH_") && value !== undefined) settings[name] = value;
  }
  return settings;
}

export class PresenceFiles {
  readonly dir: string;

  constructor(
    root: string,
    private readonly randomName: () => string,
  ) {
    this.dir = path.join(root, "servers");
  }

  /** Adds this process; the function returned removes it again (a second call does nothing). */
  add(presence: Presence): () => void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const name = `${presence.pid}.${this.randomName()}.json`;
    createExclusively(path.join(this.dir, name), JSON.stringify(presence), this.randomName);
    return () => this.remove(name);
  }

  remove(name: string): void {
    rmSync(path.join(this.dir, name), { force: true });
  }

  /** Every presence on file, alive or not; what cannot be read as one is left out. */
  list(): PresenceEntry[] {
    let names: string[];
    try {
      names = readdirSync(this.dir).filter((name) => /^\d+\.[\w-]+\.json$/.test(name));
    } catch {
      return [];
    }
    return names.flatMap((name) => {
      const presence = parsePresence(readTextFile(path.join(this.dir, name)));
      return presence ? [{ name, presence }] : [];
    });
  }

  /** Calls onChange when a presence comes or goes, where the system notifies; undefined where it does not. */
  watch(onChange: () => void): (() => void) | undefined {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    return watchFolder(this.dir, (name) => name.endsWith(".json"), onChange);
  }
}

function parsePresence(text: string | undefined): Presence | undefined {
  const identity = parseIdentity(text);
  if (!identity || text === undefined) return undefined;
  const value = JSON.parse(text) as Partial<Presence>;
  if ((value.role !== "server" && value.role !== "carrier") || !Number.isFinite(value.since)) return undefined;
  const settings: Record<string, string> = {};
  if (value.settings && typeof value.settings === "object") {
    for (const [name, setting] of Object.entries(value.settings)) {
      if (name.startsWith("CLAUDE_DISPATCH_") && typeof setting === "string") settings[name] = setting;
    }
  }
  return { ...identity, role: value.role, since: value.since as number, settings };
}

type IsAlive = (holder: ProcessIdentity) => Promise<boolean | undefined>;

/** The one carrier slot of a state directory: held by the carrier that runs, reclaimed from one that died. */
export class CarrierSlot {
  private readonly slots: SlotFiles;
  private held: Slot | undefined;

  constructor(root: string, holder: ProcessIdentity) {
    const dir = path.join(root, "carrier");
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // A carrier that died holds nothing: there is no job to keep its slot for.
    this.slots = new SlotFiles({ dir, count: 1, holder, jobRunning: () => false });
  }

  /** True when this process holds the slot now (taken, or reclaimed from a holder that is gone). */
  async take(isAlive: IsAlive): Promise<boolean> {
    this.held ??= await this.slots.reclaim("carrier", isAlive);
    return this.held !== undefined;
  }

  release(): void {
    if (this.held) this.slots.give(this.held);
    this.held = undefined;
  }
}
