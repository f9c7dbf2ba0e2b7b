/**
 * This machine as the configuration and the command line see it (agent/machine.ts), built from what main.ts
 * reads of the process: the one place those two learn anything that depends on the platform.
 */
import type { PersonsShell, ThisMachine } from "../../agent/machine.js";
import { findProgram, isRegularFile } from "./find-program.js";
import { resolveRoots } from "./directory.js";
import { isWindowsPlatform } from "./self.js";
import { stateDirectory } from "./state-location.js";

/** What the process says of itself; a test names what it needs and takes the rest as a Linux box's. */
export interface MachineFacts {
  platform: string;
  home: string;
  pathDelimiter?: string | undefined;
  cpus?: number | undefined;
  readTextFile?: ((file: string) => string) | undefined;
}

export function thisMachine(facts: MachineFacts): ThisMachine {
  const { platform, home } = facts;
  const windows = isWindowsPlatform(platform);
  return {
    pathDelimiter: facts.pathDelimiter ?? (windows ? ";" : ":"),
    cpus: facts.cpus ?? 2,
    home,
    readTextFile:
      facts.readTextFile ??
      (() => {
        throw new Error("no file can be read here");
      }),
    stateDirectory: (env) => stateDirectory(env, platform, home),
    findProgram: (program, env) => findProgram(program, env, { platform }),
    isRegularFile,
    // execFile cannot run a .cmd or .bat without a shell.
    needsShell: (program) => windows && /\.(cmd|bat)$/i.test(program),
    fileModes: !windows,
    resolveRoots,
    shell: windows ? WINDOWS_SHELL : POSIX_SHELL,
  };
}

const POSIX_SHELL: PersonsShell = {
  // Single quotes unless the word is plainly safe.
  quote: (word) => (/^[\w./:=@%+-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`),
  continuation: " \\",
};

// Neither cmd nor PowerShell reads a backslash at the end of a line as going on.
const WINDOWS_SHELL: PersonsShell = {
  quote: (word) => (/^[\w.\\/:=@%+-]+$/.test(word) ? word : `"${word}"`),
  continuation: undefined,
};
