/**
 * What a merge would do to files git does not track in the user's checkout
 * (PROTOCOL.md §19.2). git itself replaces an ignored file, such as a `.env`,
 * with a tracked one of the same name without asking, and removes an ignored
 * folder to put a file in its place: a merge of a job's work must never.
 */
import { lstatSync } from "node:fs";
import path from "node:path";

/** What is at this path in the checkout, without following a link: undefined if nothing. */
function entryAt(repo: string, file: string): "folder" | "other" | undefined {
  try {
    return lstatSync(path.join(repo, ...file.split("/"))).isDirectory() ? "folder" : "other";
  } catch {
    return undefined;
  }
}

/**
 * The paths in the checkout that the merge would overwrite or remove although git does not track them,
 * given every path the merge changes (git's name-status letter for each; the checkout's tracked files are
 * known to be unmodified). A path the merge adds must be free; each folder it writes into must be a real
 * folder or be tracked as a file the merge removes.
 */
export function untrackedInTheWay(repo: string, changes: ReadonlyMap<string, string>): string[] {
  const found = new Set<string>();
  const foldersSeen = new Set<string>();
  for (const [file, status] of changes) {
    if (status === "D") continue;
    const parts = file.split("/");
    for (let depth = 1; depth < parts.length; depth += 1) {
      const folder = parts.slice(0, depth).join("/");
      if (foldersSeen.has(folder)) continue;
      foldersSeen.add(folder);
      // A file the merge removes or retypes is tracked: git replaces it with the folder itself.
      if (changes.has(folder)) continue;
      if (entryAt(repo, folder) === "other") found.add(folder);
    }
    if (status !== "A") continue;
    const there = entryAt(repo, file);
    if (there !== undefined) found.add(there === "folder" ? `${file}/` : file);
  }
  return [...found].sort();
}
