/**
 * The platform switch: the one place that tells Windows from POSIX, and Linux (/proc) from the other POSIX
 * systems (ps). It builds the Platform the process layer is given from plain facts about this process, which
 * the wiring reads; nothing here reads them itself.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";

import { isRegularFile } from "./find-program.js";
import { LinuxProcessLister, readLinuxEnvironment, readLinuxProcess } from "./posix/proc.js";
import { parsePsOutput, PS_ARGS } from "./posix/ps.js";
import type { Platform, Signal } from "./types.js";
import { isWindowsPlatform } from "./self.js";

/** This process as the platform needs it, read by the wiring. */
export interface LocalFacts {
  /** `process.platform`. */
  platform: string;
  /** This server's own pid: its group and session are never signalled. */
  pid: number;
  env: Readonly<Record<string, string | undefined>>;
  /** The node binary running this server, for npm shims that wrap a script. */
  execPath: string;
  /** `process.kill`: signal 0 only asks whether the process exists. May throw (ESRCH, EPERM). */
  kill(pid: number, signal: Signal | 0): void;
}

export async function createLocalPlatform(facts: LocalFacts): Promise<Platform> {
  if (isWindowsPlatform(facts.platform)) {
    return {
      kind: "windows",
      spawn,
      runFile,
      env: facts.env,
      fileExists: isRegularFile,
      readTextFile: (file) => (existsSync(file) ? readFileSync(file, "utf8") : undefined),
      nodePath: facts.execPath,
      isRunning: (pid) => {
        try {
          facts.kill(pid, 0);
          return true;
        } catch (error) {
          // EPERM: it exists, it is just not ours to signal.
          return (error as NodeJS.ErrnoException).code === "EPERM";
        }
      },
    };
  }
  const linux = facts.platform === "linux";
  const lister = linux ? new LinuxProcessLister("/proc", facts.pid) : undefined;
  return {
    kind: "posix",
    spawn,
    // By absolute path, like every program we run ourselves: PATH is the caller's to change.
    listProcesses: lister
      ? (request) => lister.list(request)
      : async () => parsePsOutput((await runFile("/bin/ps", PS_ARGS)).stdout),
    signal: (pid, signal) => facts.kill(pid, signal),
    selfPid: facts.pid,
    ...(linux
      ? {
          readEnvironment: (pid: number) => readLinuxEnvironment(pid),
          readProcess: (pid: number) => readLinuxProcess(pid),
        }
      : {}),
  };
}

/** Runs a program directly (argv, no shell); a non-zero exit is an answer, not an error. */
function runFile(file: string, args: readonly string[]): Promise<{ exitCode: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { windowsHide: true, maxBuffer: 64 * 1024 * 1024 }, (error, stdout) => {
      if (error && typeof error.code !== "number") return reject(error);
      resolve({ exitCode: error ? (error.code as number) : 0, stdout });
    });
  });
}
