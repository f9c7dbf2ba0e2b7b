/**
 * What the server and the carrier both build, and the far end and the approver in part: the configuration read or
 * an exit 2 (§11), the state directory opened as ours (§15.1), the job registry on it, and this process's part in
 * carrying the directory's work (§15.8).
 */
import type { Policy } from "../agent/policy.js";
import { hostOffers, loadConfig, offeredAgents, type Config } from "../config.js";
import { systemClock } from "../core/clock.js";
import { createLogger, type Logger } from "../core/log.js";
import type { JobRegistry } from "../jobs/registry.js";
import { openFolders, stateFolders } from "../store/ownership.js";
import { StateError } from "../store/records.js";
import type { StateStore } from "../store/state-store.js";
import type { HeldEndpoint } from "./approvals-endpoint.js";
import type { Carrying } from "./carrying.js";
import type { HostSet } from "./hosts.js";
import type { ModeLoaders } from "./mode-loaders.js";
import { exitForUsage, type ProcessParts } from "./machine.js";

type Serving = Awaited<ReturnType<ModeLoaders["serving"]>>;

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
function openStateFolders(parts: ProcessParts, stateDir: string): void {
  try {
    openFolders(stateDir, stateFolders(stateDir), parts.uid);
  } catch (error) {
    if (!(error instanceof StateError)) throw error;
    exitForUsage(parts, error.message);
  }
}

/** The state directory's store, its folders opened first; the store's module loads only after the opening. */
export function openState(parts: ProcessParts, serving: Serving, stateDir: string): StateStore {
  openStateFolders(parts, stateDir);
  return new serving.StateStore(stateDir, { uid: parts.uid, randomName: () => crypto.randomUUID() });
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

/** What agents and hosts are offered: found on PATH after the server has answered what waited (§7.4). */
function policyOf(parts: ProcessParts, opened: Opened, env: NodeJS.ProcessEnv): Policy {
  const { config, roots } = opened;
  const offers = hostOffers(config);
  return {
    ...config.policy,
    roots,
    agents: offeredAgents(config, env, parts.here),
    ...(offers.length > 0 ? { hosts: offers } : {}),
  };
}

/** What a server and the carrier both run: the job registry on the state directory, and everything it needs. */
export async function startJobs(
  parts: ProcessParts,
  loaders: ModeLoaders,
  serving: Serving,
  opened: Opened,
  env: NodeJS.ProcessEnv,
) {
  const { config, roots, gated, logger } = opened;
  const policy = policyOf(parts, opened, env);
  const store = gated ? undefined : openState(parts, serving, config.stateDir);
  // Settled once the process knows whether others share the directory (holdEndpoint).
  let endpoint: HeldEndpoint | undefined;
  const hosts = await serving.createHosts({
    machine: parts,
    config,
    roots,
    loaders,
    logger,
    store,
    uid: parts.uid,
    approvalEndpoint: (jobId) => endpoint?.addressOf(jobId),
  });
  const runtimes = serving.lazyRuntimes(loaders);
  const jobs = await serving.createJobs({ machine: parts, config, policy, store, hosts, logger, runtimes });
  /** The state directory's approval endpoint (§18), held or stood by for; with no forwarding, none. */
  const holdEndpoint = async (carrying: Carrying): Promise<HeldEndpoint | undefined> => {
    if (!store || config.approvals !== "forward") return undefined;
    endpoint = await serving.holdApprovalEndpoint({
      store,
      clock: systemClock,
      logger,
      waitMs: config.approvalTimeoutMs,
      othersPresent: async () => (await carrying.liveOthers()).length > 0,
    });
    return endpoint;
  };
  return { store, hosts, runtimes, jobs, holdEndpoint, policy };
}

/** This process's part in carrying the state directory's work (§15.8). */
export async function carryingOf(
  parts: ProcessParts,
  serving: Serving,
  joined: { store: StateStore; jobs: JobRegistry; hosts: HostSet; env: NodeJS.ProcessEnv; logger: Logger },
): Promise<Carrying> {
  const { store, jobs, hosts, env, logger } = joined;
  const processes = () => hosts.home.processes();
  return new serving.Carrying({
    presence: new serving.PresenceFiles(store.root, () => crypto.randomUUID()),
    jobs,
    self: await serving.ownIdentity(parts, processes),
    settings: serving.settingsOf(env),
    isAlive: async (named) => (await processes()).isAlive(named.pid, named.start_time),
    clock: systemClock,
    logger,
  });
}

/**
 * Takes over what servers that are gone left in the state directory (§15.3),
 * before the first request is read: claude_wait on an old job id must find it.
 */
export async function restoreJobs(store: StateStore, jobs: JobRegistry, logger: Logger): Promise<void> {
  // Finished jobs come from the index: their records are read when asked for, not at startup (§15.5).
  const { records, skipped, finished } = store.loadForStartup();
  for (const { id, reason } of skipped) logger.warn(`state: job ${id} skipped: ${reason}`);
  jobs.rememberFinished(finished);
  await jobs.restore(records);
}
