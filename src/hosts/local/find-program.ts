/**
 * The one PATH resolver: the program the server would run for a bare name, for the server and for `doctor`.
 * On Windows it is the lookup the spawn itself uses (PATH and PATHEXT); on POSIX, like execvp, but only
 * absolute PATH entries and only executable regular files.
 */
import { accessSync, constants as fsConstants, statSync } from "node:fs";
import path from "node:path";

import { findOnWindowsPath } from "./windows/resolve.js";
import { isWindowsPlatform } from "./self.js";

/** What the lookup needs to know of the host: `process.platform`'s value. */
export interface ProgramHost {
  platform: string;
}

/** The path of the program bin names, or undefined when there is none. */
export function findProgram(
  bin: string,
  env: Readonly<Record<string, string | undefined>>,
  host: ProgramHost,
): string | undefined {
  if (isWindowsPlatform(host.platform)) return findOnWindowsPath(bin, { env, fileExists: isRegularFile });
  if (bin.includes("/") || bin.includes("\\")) return isExecutableFile(bin) ? bin : undefined;
  for (const directory of (env.PATH ?? env.Path ?? "").split(":")) {
    if (!path.posix.isAbsolute(directory)) continue;
    const candidate = path.posix.join(directory, bin);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** Whether file is a regular file (not a directory, and not a broken link). */
export function isRegularFile(file: string): boolean {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function isExecutableFile(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}
