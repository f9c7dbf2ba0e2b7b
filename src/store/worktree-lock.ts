/**
 * One operation at a time on a job's worktree, across every server of the
 * state directory and the command line (PROTOCOL.md §19.1): a merge, a discard
 * and retention's removal each hold the job's worktree lock, and read the
 * record again under it, so the record says what happened to the user's
 * checkout. The lock is a file in the job's folder, so removing the folder
 * (retention) ends it, and an operation on a removed job finds no folder.
 *
 *   <state>/jobs/<id>/worktree.lock.S   slot S's holder
 *
 * A holder that died leaves its slot behind: the next one takes a later slot,
 * checks every other slot's holder is gone, and clears theirs.
 */
import { readdirSync, rmSync } from "node:fs";
import path from "node:path";

import { DispatchError } from "../core/errors.js";
import { createExclusively, type HolderAlive } from "./claims.js";
import { readTextFile } from "./files.js";
import { parseIdentity, type ProcessIdentity } from "./records.js";

const SLOTS = 8;
const SLOT_FILE = /^worktree\.lock\.([0-7])$/;

export interface HeldWorktreeLock {
  release(): void;
}

function slotFile(jobDir: string, slot: number): string {
  return path.join(jobDir, `worktree.lock.${slot}`);
}

function takenSlots(jobDir: string): number[] {
  return readdirSync(jobDir).flatMap((name) => {
    const slot = SLOT_FILE.exec(name)?.[1];
    return slot === undefined ? [] : [Number(slot)];
  });
}

const sameHolder = (a: ProcessIdentity | undefined, b: ProcessIdentity): boolean =>
  a?.pid === b.pid && a.start_time === b.start_time;

/**
 * Takes the lock of the job in jobDir for holder. Throws JOB_NOT_FOUND when the job's folder is gone, and
 * INVALID_ARGUMENT when another process that may be alive holds it.
 */
export async function lockWorktree(
  jobDir: string,
  jobId: string,
  holder: ProcessIdentity,
  isAlive: HolderAlive,
  randomName: () => string,
): Promise<HeldWorktreeLock> {
  const content = JSON.stringify(holder);
  let mine: number | undefined;
  try {
    for (let slot = 0; slot < SLOTS && mine === undefined; slot += 1)
      if (createExclusively(slotFile(jobDir, slot), content, randomName)) mine = slot;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      throw new DispatchError("JOB_NOT_FOUND", `job ${jobId} was removed from the state directory meanwhile`);
    throw error;
  }
  if (mine === undefined)
    throw new DispatchError(
      "INVALID_ARGUMENT",
      `job ${jobId}'s worktree lock files are all taken: remove ${path.join(jobDir, "worktree.lock.*")} once no ` +
        `merge or discard of it runs`,
    );
  const release = (): void => {
    if (sameHolder(parseIdentity(readTextFile(slotFile(jobDir, mine as number))), holder))
      rmSync(slotFile(jobDir, mine as number), { force: true });
  };
  // Checked after taking a slot: of two takers at once, each sees the other, and neither goes on.
  for (const slot of takenSlots(jobDir)) {
    if (slot === mine) continue;
    const other = parseIdentity(readTextFile(slotFile(jobDir, slot)));
    if (other === undefined || (await isAlive(other)) !== false) {
      release();
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `another merge or discard of job ${jobId}'s worktree is under way${other ? ` (process ${other.pid})` : ""}: ` +
          `try again once it has finished`,
      );
    }
    if (sameHolder(parseIdentity(readTextFile(slotFile(jobDir, slot))), other))
      rmSync(slotFile(jobDir, slot), { force: true });
  }
  return { release };
}

/**
 * For retention, which cannot wait: the lock if no slot is taken at all, else undefined (the job is left for later).
 */
export function lockWorktreeNow(
  jobDir: string,
  holder: ProcessIdentity,
  randomName: () => string,
): HeldWorktreeLock | undefined {
  try {
    if (takenSlots(jobDir).length > 0 || !createExclusively(slotFile(jobDir, 0), JSON.stringify(holder), randomName))
      return undefined;
  } catch {
    return undefined;
  }
  return { release: () => rmSync(slotFile(jobDir, 0), { force: true }) };
}
