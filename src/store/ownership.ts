/**
 * Whether the state directory is ours (PROTOCOL.md §15.1): it, `jobs/` and `slots/`, and each job's folder
 * and record, real folders and files (not links) of this user's, as OpenSSH's StrictModes asks of ~/.ssh.
 * A job planted in a folder another user can write would run as this user.
 */
import { chmodSync, lstatSync, mkdirSync, type Stats } from "node:fs";
import path from "node:path";

import { StateError, isJobId } from "./records.js";

/** The folders of a state directory that open() makes private and check() checks (§15.1, §15.8). */
export function stateFolders(root: string): string[] {
  // Who carries the work (§15.8) is read from servers/ and carrier/: checked as jobs/ is.
  return [root, ...["jobs", "slots", "servers", "carrier"].map((name) => path.join(root, name))];
}

/**
 * Creates the state directory's folders, private to this user (0700), or checks that the ones there are ours.
 * Throws StateError saying what is wrong.
 */
export function openFolders(root: string, folders: readonly string[], uid: number | undefined): void {
  const problem = firstProblem(folders, uid, false);
  if (problem) throw new StateError(`cannot use the state directory ${root}: ${problem}`);
  try {
    for (const folder of folders) mkdirSync(folder, { recursive: true, mode: 0o700 });
    // Made just now, or checked above: a link swapped in meanwhile is caught again.
    const swapped = firstProblem(folders, uid, true);
    if (swapped) throw new StateError(swapped);
    // mkdir's mode is filtered by the umask and leaves an existing folder as it was.
    for (const folder of folders) chmodSync(folder, 0o700);
  } catch (error) {
    const why = `${(error as Error).message}; set CLAUDE_DISPATCH_STATE_DIR to a writable folder`;
    throw new StateError(`cannot use the state directory ${root}: ${why}`);
  }
}

/** Checks the folders without creating or changing anything: StateError when one is not ours; a missing one is fine. */
export function checkFolders(root: string, folders: readonly string[], uid: number | undefined): void {
  const problem = firstProblem(folders, uid, false);
  if (problem) throw new StateError(`refusing the state directory ${root}: ${problem}`);
}

function firstProblem(folders: readonly string[], uid: number | undefined, required: boolean): string | undefined {
  for (const folder of folders) {
    const problem = folderProblem(folder, uid, required);
    if (problem) return problem;
  }
  return undefined;
}

/** Why a folder of the state directory is not to be trusted, if it is not; a missing one is fine unless required. */
function folderProblem(folder: string, uid: number | undefined, required: boolean): string | undefined {
  let info: Stats;
  try {
    info = lstatSync(folder);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" && !required) return undefined;
    return `${folder}: ${(error as Error).message}`;
  }
  if (info.isSymbolicLink()) return `${folder} is a symbolic link; point CLAUDE_DISPATCH_STATE_DIR at the real folder`;
  if (!info.isDirectory()) return `${folder} is not a directory`;
  if (uid !== undefined && info.uid !== uid) {
    const owner = `${folder} is owned by uid ${info.uid}, not by this user (uid ${uid})`;
    return `${owner}; jobs found there would run as this user, so it is not used`;
  }
  return undefined;
}

/** Why job `id`'s folder (or its record) is not to be read, if it is not: a link, not a folder, or another user's. */
export function jobFolderProblem(jobsDir: string, id: string, uid: number | undefined): string | undefined {
  if (!isJobId(id)) return "not a job id";
  let folder: Stats;
  let record: Stats;
  try {
    folder = lstatSync(path.join(jobsDir, id));
  } catch {
    return "its folder cannot be read";
  }
  if (folder.isSymbolicLink()) return "its folder is a symbolic link";
  if (!folder.isDirectory()) return "it is not a folder";
  if (uid !== undefined && folder.uid !== uid) return `its folder is owned by uid ${folder.uid}, not by this user`;
  try {
    record = lstatSync(path.join(jobsDir, id, "record.json"));
  } catch {
    return "no record.json";
  }
  if (record.isSymbolicLink()) return "record.json is a symbolic link";
  if (!record.isFile()) return "record.json is not a regular file";
  if (uid !== undefined && record.uid !== uid) return `record.json is owned by uid ${record.uid}, not by this user`;
  return undefined;
}
