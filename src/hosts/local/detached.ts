/**
 * The headless carrier (PROTOCOL.md §15.8) started as a process of its own: detached from whoever starts it (its
 * own session on POSIX, no console on Windows), so that a host closing a server, or a terminal closing the command
 * line, takes nothing of it along. It reads nothing and prints no protocol; its log goes to the state directory.
 */
import { spawn } from "node:child_process";
import { closeSync, lstatSync, renameSync } from "node:fs";
import path from "node:path";

import { openForAppending } from "../../store/files.js";

/** The log is started afresh past this size; the one before is kept as carrier.log.1. */
const LOG_ROTATE_BYTES = 1024 * 1024;

export interface CarrierLaunch {
  /** node, and this program's entry point. */
  execPath: string;
  mainPath: string;
  stateDir: string;
  env: Readonly<Record<string, string | undefined>>;
}

/** Starts `claude-dispatch carrier` on the state directory; its pid, or throws when it could not be started. */
export function startCarrierProcess(launch: CarrierLaunch): number {
  const log = path.join(launch.stateDir, "carrier.log");
  try {
    if (lstatSync(log).size > LOG_ROTATE_BYTES) renameSync(log, `${log}.1`);
  } catch {
    // No log yet.
  }
  const fd = openForAppending(log);
  try {
    const child = spawn(launch.execPath, [launch.mainPath, "carrier", `--state-dir=${launch.stateDir}`], {
      detached: true,
      stdio: ["ignore", "ignore", fd],
      env: launch.env,
      windowsHide: true,
    });
    // A spawn that fails reports it later, as an event: nothing more to do than not crash on it.
    child.on("error", () => undefined);
    child.unref();
    if (child.pid === undefined) throw new Error(`could not start ${launch.execPath}`);
    return child.pid;
  } finally {
    closeSync(fd);
  }
}
