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
 * A taker takes the lowest free slot, marked as checking, and looks at the
 * others; once no other stands in its way it marks its slot as held, and looks
 * again. In its way: a holder (marked so, or by a server from before the
 * marks), and a checker at a lower slot, which it waits for. So of takers at
 * once the lowest goes on, and a checker that finds a holder never does.
 * A holder that died leaves its slot behind: it is cleared by the next taker
 * that finds it gone.
 */
import { readdirSync, rmSync } from "node:fs";
import path from "node:path";

import { sleep, type Clock } from "../core/clock.js";
import { DispatchError } from "../core/errors.js";
import { writeAtomically } from "./atomic.js";
import { createExclusively, type HolderAlive } from "./claims.js";
import { readTextFile } from "./files.js";
import { parseIdentity, type ProcessIdentity } from "./records.js";

const SLOTS = 8;
const SLOT_FILE = /^worktree\.lock\.([0-7])$/;
/** A checker decides in a listing and a few liveness checks: waited for this long at a time, up to 100 times. */
const PAUSE_MS = 20;
const MAX_PAUSES = 100;

/** What the taker of a slot does about the others: go on, wait for a lower checker, or give up. */
type Verdict = { go: true } | { go: false; wait: boolean; other: ProcessIdentity | undefined };

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

/** A slot file's content while its taker is still checking; a holder's is its identity alone. */
function checkingContent(holder: ProcessIdentity): string {
  return JSON.stringify({ ...holder, checking: true });
}

function isChecking(text: string | undefined): boolean {
  try {
    return (JSON.parse(text ?? "") as { checking?: unknown }).checking === true;
  } catch {
    return false;
  }
}

/**
 * What the other slots say to the taker of slot mine, marked as holder or not yet; the files of holders found gone are
 * cleared on the way. A higher slot held is in the way of a checker only: a holder that marked itself after another
 * took a lower slot gives way when it looks again.
 */
async function othersSay(jobDir: string, mine: number, marked: boolean, isAlive: HolderAlive): Promise<Verdict> {
  let lowerChecker: ProcessIdentity | undefined;
  for (const slot of takenSlots(jobDir)) {
    if (slot === mine) continue;
    const text = readTextFile(slotFile(jobDir, slot));
    // Given back or cleared since the listing.
    if (text === undefined) continue;
    const other = parseIdentity(text);
    if (other !== undefined && (await isAlive(other)) === false) {
      if (sameHolder(parseIdentity(readTextFile(slotFile(jobDir, slot))), other))
        rmSync(slotFile(jobDir, slot), { force: true });
      continue;
    }
    // Unreadable, or an identity that may be alive: a holder unless it says it is checking.
    if (other === undefined || !isChecking(text)) {
      if (slot < mine || !marked) return { go: false, wait: false, other };
    } else if (slot < mine) lowerChecker = other;
  }
  return lowerChecker === undefined ? { go: true } : { go: false, wait: true, other: lowerChecker };
}

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
  clock: Clock,
): Promise<HeldWorktreeLock> {
  let mine: number | undefined;
  try {
    for (let slot = 0; slot < SLOTS && mine === undefined; slot += 1)
      if (createExclusively(slotFile(jobDir, slot), checkingContent(holder), randomName)) mine = slot;
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
  const file = slotFile(jobDir, mine);
  const release = (): void => {
    if (sameHolder(parseIdentity(readTextFile(file)), holder)) rmSync(file, { force: true });
  };
  try {
    for (const marked of [false, true]) {
      if (marked) writeAtomically(file, JSON.stringify(holder), false, randomName);
      for (let pauses = 0; ; pauses += 1) {
        const verdict = await othersSay(jobDir, mine, marked, isAlive);
        if (verdict.go) break;
        if (!verdict.wait || pauses === MAX_PAUSES) {
          const other = verdict.other ? ` (process ${verdict.other.pid})` : "";
          throw new DispatchError(
            "INVALID_ARGUMENT",
            `another merge or discard of job ${jobId}'s worktree is under way${other}: try again once it has finished`,
          );
        }
        await sleep(clock, PAUSE_MS);
      }
    }
  } catch (error) {
    release();
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      throw new DispatchError("JOB_NOT_FOUND", `job ${jobId} was removed from the state directory meanwhile`);
    throw error;
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
