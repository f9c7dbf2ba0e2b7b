/** The command line (§17): `runCli` on this process's streams, signals and machine, for a person at a terminal. */
import { execFile } from "node:child_process";

import { runCli } from "../cli/index.js";
import { checkConfig, DEFAULT_KILL_GRACE_MS, loadConfig } from "../config.js";
import { systemClock } from "../core/clock.js";
import { createLogger } from "../core/log.js";
import { startCarrierProcess } from "../hosts/local/detached.js";
import type { Loaders } from "./loaders.js";
import type { ProcessParts } from "./machine.js";
import { ownIdentityAtOnce } from "../hosts/local/self.js";
import { createHosts, loadProcessControl } from "./hosts.js";

/** The command line reads the kill grace like the server, but an invalid configuration must not stop a kill. */
function killGraceMs(parts: ProcessParts): number {
  try {
    return loadConfig(parts.env, parts.here).killGraceMs;
  } catch {
    return DEFAULT_KILL_GRACE_MS;
  }
}

/** Runs one command; its exit code. */
export async function runCommandLine(parts: ProcessParts, loaders: Loaders, args: string[]): Promise<number> {
  // A reader gone (`| head`) ends the command at once and quietly, as SIGPIPE ends other tools: 141 (§17).
  for (const stream of [parts.stdout, parts.stderr]) {
    stream.on("error", (error: NodeJS.ErrnoException) => parts.exit(error.code === "EPIPE" ? 141 : 1));
  }
  return runCli(args, {
    env: parts.env,
    machine: parts.here,
    stdout: parts.stdout,
    stderr: parts.stderr,
    stdoutIsTerminal: parts.stdout.isTTY === true,
    terminalSize: () => ({ columns: parts.stdout.columns, rows: parts.stdout.rows }),
    // Read only by `jobs --watch` and `prune`: stdin is not opened for the other commands.
    get stdin() {
      return parts.stdin;
    },
    trapInterrupts: (onInterrupt) => parts.onSignals(["SIGINT", "SIGTERM", "SIGHUP"], onInterrupt),
    // What `sessions` lists without a DIR.
    cwd: parts.cwd(),
    clock: systemClock,
    processControl: (logger) =>
      loadProcessControl(parts, loaders, { clock: systemClock, logger, killGraceMs: killGraceMs(parts) }),
    // For the host configuration snippet `doctor` prints.
    nodePath: parts.execPath,
    mainPath: parts.mainPath,
    runFile: async (file, fileArgs, timeoutMs) => {
      return new Promise((resolve) => {
        execFile(
          file,
          fileArgs,
          { timeout: timeoutMs, windowsHide: true, maxBuffer: 1024 * 1024 },
          (error, stdout, stderr) => resolve({ ok: !error, stdout, stderr, error: error?.message }),
        );
      });
    },
    hosts: async (processes) => {
      // The valid settings, as doctor checks them: another invalid one must not hide the hosts (§21.5).
      const { config } = checkConfig(parts.env, parts.here);
      const logger = createLogger(parts.stderr, "warn");
      const roots = config.roots ? await parts.here.resolveRoots(config.roots).catch(() => undefined) : undefined;
      return createHosts({
        machine: parts,
        config,
        roots,
        loaders,
        logger,
        shareConnections: false,
        uid: parts.uid,
        processes,
      });
    },
    startCarrier: async (stateDir, env) =>
      startCarrierProcess({ execPath: parts.execPath, mainPath: parts.mainPath, stateDir, env }),
    // Names the CLI in a claim file when `kill` finishes the record of a dead server.
    uid: parts.uid,
    randomName: () => crypto.randomUUID(),
    identity: () => ownIdentityAtOnce(parts),
  });
}
