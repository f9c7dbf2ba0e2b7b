/**
 * Claims (PROTOCOL.md §15.3): which server (or `claude-dispatch kill`) took a
 * job over after restart number N. A claim file is created exclusively, so of
 * two claimants at once exactly one gets the job.
 *
 *   <state>/jobs/<id>/claim.N[.S]   the holder of restart N's slot S
 */
import { closeSync, linkSync, openSync, readdirSync, rmSync, writeFileSync, writeSync } from "node:fs";
import path from "node:path";

import { isSpecialFile, readTextFile } from "./files.js";
import { parseIdentity, type ProcessIdentity } from "./records.js";

/** Claim slots tried per restart before a job is left alone: each needs a holder that is gone before it. */
const MAX_CLAIM_SLOTS = 8;

export type HolderAlive = (holder: ProcessIdentity) => Promise<boolean | undefined>;

/**
 * Claims a job for the claimer taking it over after restart number
 * `generation`: the first claim slot it can take, where a later slot is tried
 * only while every earlier one is held by a process that is gone.
 */
export async function claimJob(
  jobDir: string,
  generation: number,
  claimer: ProcessIdentity,
  isAlive: HolderAlive,
  randomName: () => string,
): Promise<boolean> {
  for (let slot = 0; slot < MAX_CLAIM_SLOTS; slot += 1) {
    if (claimSlot(jobDir, generation, slot, claimer, randomName)) return true;
    // A FIFO or the like was never a claimant's (§15.1): it holds nothing, and the next slot is tried.
    if (isSpecialFile(claimFile(jobDir, generation, slot))) continue;
    const holder = claimHolder(jobDir, generation, slot);
    // A holder that may be alive (unknown counts, and so does a claim whose holder cannot be read) keeps the job.
    if (holder === undefined || (await isAlive(holder)) !== false) return false;
  }
  return false;
}

/**
 * Claims slot `slot` of restart `generation`. The claim file is written whole
 * under a temporary name and then linked into place, which fails if the slot
 * is taken: exactly one claimant gets each slot, and no one ever sees a claim
 * without its holder.
 */
export function claimSlot(
  jobDir: string,
  generation: number,
  slot: number,
  claimer: ProcessIdentity,
  randomName: () => string,
): boolean {
  return createExclusively(claimFile(jobDir, generation, slot), JSON.stringify(claimer), randomName);
}

/**
 * Creates file with this content unless it exists (false then): whole under a temporary name, then linked
 * into place, so of two creators exactly one succeeds and no one reads it half written.
 */
export function createExclusively(file: string, content: string, randomName: () => string): boolean {
  const temporary = `${file}.${randomName()}.tmp`;
  try {
    // A failure here (a full disk) is the caller's: it is not a file system without links.
    writeFileSync(temporary, content, { mode: 0o600, flag: "wx" });
    try {
      linkSync(temporary, file);
      return true;
    } catch (error) {
      // Any other failure is taken for a file system without hard links (FAT
      // gives EISDIR on Windows, shares EACCES or EPERM):
      // the exclusive create below is safe on its own, and throws if the folder itself is the problem.
      if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
      return createWithoutLinks(file, content);
    }
  } finally {
    rmSync(temporary, { force: true });
  }
}

/** Removes the claim files of earlier restarts, which no one reads again. */
export function dropClaimsBefore(jobDir: string, generation: number): void {
  for (const name of readdirSync(jobDir)) {
    const claimed = /^claim\.(\d+)(?:\.\d+)?$/.exec(name);
    if (claimed && Number(claimed[1]) < generation) rmSync(path.join(jobDir, name), { force: true });
  }
}

/** Who holds a claim slot, if anyone does. */
export function claimHolder(jobDir: string, generation: number, slot: number): ProcessIdentity | undefined {
  return parseIdentity(readTextFile(claimFile(jobDir, generation, slot)));
}

function claimFile(jobDir: string, generation: number, slot: number): string {
  return path.join(jobDir, slot === 0 ? `claim.${generation}` : `claim.${generation}.${slot}`);
}

/**
 * Exclusive create, then the holder written: still one claimant per slot. A
 * crash between the two leaves an empty claim, which no one can tell alive or
 * gone: the job is then left alone rather than risk running twice (§15.3).
 */
export function createWithoutLinks(file: string, content: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, "wx", 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
  try {
    writeSync(fd, content);
  } catch (error) {
    // Ours, made just now: an empty file left behind (a full disk) would hold its slot for ever.
    closeSync(fd);
    rmSync(file, { force: true });
    throw error;
  }
  closeSync(fd);
  return true;
}
