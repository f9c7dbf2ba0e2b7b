/**
 * What a server and the carrier do before anything else loads, and the far end in part: the configuration read or
 * an exit 2 (§11), the state directory's folders opened as ours (§15.1), the log. A server does it before it
 * answers `initialize`, so it is kept small; the job layer itself is in job-start.ts (BENCHMARKS.md (a)).
 */
import { loadConfig, type Config } from "../config.js";
import { createLogger } from "../core/log.js";
import { openFolders, stateFolders } from "../store/ownership.js";
import { StateError } from "../store/records.js";
import { exitForUsage, type ProcessParts } from "./machine.js";

/** The configuration and the resolved roots, or exit 2 with the reason (§11). */
export async function readConfig(
  parts: ProcessParts,
  env: NodeJS.ProcessEnv = parts.env,
): Promise<{ config: Config; roots: string[] | undefined }> {
  try {
    const config = loadConfig(env, parts.here);
    return { config, roots: config.roots ? await parts.here.resolveRoots(config.roots) : undefined };
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    return exitForUsage(parts, error.message);
  }
}

/** Makes the state directory's folders, or checks that they are ours (§15.1); if it cannot, says why and exits 2. */
export function openStateFolders(parts: ProcessParts, stateDir: string): void {
  try {
    openFolders(stateDir, stateFolders(stateDir), parts.uid);
  } catch (error) {
    if (!(error instanceof StateError)) throw error;
    exitForUsage(parts, error.message);
  }
}

/** What a server and the carrier open before anything else loads: the state directory and the log. */
export function openServer(parts: ProcessParts, config: Config, roots: string[] | undefined) {
  // At or above the depth limit no tool runs (§7.4), so the state directory is not touched at all: a copy of
  // this server inside a dispatched agent must never restore, adopt, claim or write its parent's jobs.
  const gated = config.depth >= config.maxDepth;
  if (!gated) openStateFolders(parts, config.stateDir);
  const logger = createLogger(parts.stderr, config.logLevel);
  return { config, roots, gated, logger };
}
export type Opened = ReturnType<typeof openServer>;
