/**
 * The job layer as a server and the carrier start it, past the opening (job-layer.ts): the job registry on the
 * state directory, the hosts and runtimes it drives, this process's part in carrying the directory's work (§15.8),
 * and the approval endpoint from its first job on (§18). A server loads it as the front door answers.
 */
import type { Policy } from "../agent/policy.js";
import { hostOffers, offeredAgents } from "../config.js";
import { systemClock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import type { JobRegistry } from "../jobs/registry.js";
import { PresenceFiles, settingsOf } from "../store/presence.js";
import { StateStore } from "../store/state-store.js";
import type { EndpointParts, HeldEndpoint } from "./approvals-endpoint.js";
import { Carrying } from "./carrying.js";
import { createHosts, ownIdentity } from "./hosts.js";
import { openStateFolders, type Opened } from "./job-layer.js";
import { createJobs, lazyRuntimes } from "./jobs.js";
import type { Loaders } from "./loaders.js";
import type { ProcessParts } from "./machine.js";

/** The store of a state directory whose folders are open. */
function storeAt(parts: ProcessParts, stateDir: string): StateStore {
  return new StateStore(stateDir, { uid: parts.uid, randomName: () => crypto.randomUUID() });
}

/** The state directory's store, its folders opened first. */
export function openState(parts: ProcessParts, stateDir: string): StateStore {
  openStateFolders(parts, stateDir);
  return storeAt(parts, stateDir);
}

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
export async function startJobs(parts: ProcessParts, loaders: Loaders, opened: Opened, env: NodeJS.ProcessEnv) {
  const { config, roots, gated, logger } = opened;
  const policy = policyOf(parts, opened, env);
  // openServer opened the folders.
  const store = gated ? undefined : storeAt(parts, config.stateDir);
  // Made once the carrying is, whose knowledge of the others it needs.
  let endpoint: LazyEndpoint | undefined;
  const hosts = await createHosts({
    machine: parts,
    config,
    roots,
    loaders,
    logger,
    store,
    uid: parts.uid,
    approvalEndpoint: (jobId) => endpoint?.addressOf(jobId),
  });
  const runtimes = lazyRuntimes(loaders);
  const jobs = await createJobs({ machine: parts, config, policy, store, hosts, logger, runtimes });
  if (!store) return { store, hosts, runtimes, jobs, policy, carrying: undefined, endpoint };
  const processes = () => hosts.home.processes();
  const carrying = new Carrying({
    presence: new PresenceFiles(store.root, () => crypto.randomUUID()),
    jobs,
    self: await ownIdentity(parts, processes),
    settings: settingsOf(env),
    isAlive: async (named) => (await processes()).isAlive(named.pid, named.start_time),
    beforeCarrying: async () => endpoint?.ensure(),
    clock: systemClock,
    logger,
  });
  if (config.approvals === "forward") {
    endpoint = lazyEndpoint(loaders, {
      store,
      clock: systemClock,
      logger,
      waitMs: config.approvalTimeoutMs,
      othersPresent: async () => (await carrying.liveOthers()).length > 0,
    });
  }
  return { store, hosts, runtimes, jobs, policy, carrying, endpoint };
}

/** The state directory's approval endpoint (§18), held or stood by for from this process's first job on. */
export interface LazyEndpoint extends HeldEndpoint {
  /** Holds the endpoint or stands by for it, the first time; resolves once either is settled. */
  ensure(): Promise<void>;
}

/**
 * A server that starts no job opens no port and loads no HTTP server (BENCHMARKS.md (d)): the endpoint is held
 * once this process is about to have agents that may ask, before the first job call it serves and before it takes
 * jobs over. Agents started meanwhile by another process ask that one.
 */
function lazyEndpoint(loaders: Loaders, endpointParts: EndpointParts): LazyEndpoint {
  let held: HeldEndpoint | undefined;
  let holding: Promise<void> | undefined;
  let closed = false;
  const ensure = (): Promise<void> =>
    (holding ??= loaders
      .approvalEndpoint()
      .then(async ({ holdApprovalEndpoint }) => {
        if (!closed) held = await holdApprovalEndpoint(endpointParts);
      })
      .catch((error: unknown) =>
        endpointParts.logger.warn(
          `approval endpoint: ${(error as Error).message}; agents started meanwhile run their own approver`,
        ),
      ));
  return {
    ensure,
    addressOf: (jobId) => {
      // An agent started on a path that did not ensure it runs its own approver; the next ones ask here.
      if (!holding) void ensure();
      return held?.addressOf(jobId);
    },
    close: async () => {
      closed = true;
      await holding;
      await held?.close();
    },
  };
}

/**
 * Takes over what servers that are gone left in the state directory (§15.3),
 * before the first request is read: claude_wait on an old job id must find it.
 */
export async function restoreJobs(
  store: StateStore,
  jobs: JobRegistry,
  logger: Logger,
  endpoint: LazyEndpoint | undefined,
): Promise<void> {
  // Finished jobs come from the index: their records are read when asked for, not at startup (§15.5).
  const { records, skipped, finished } = store.loadForStartup();
  for (const { id, reason } of skipped) logger.warn(`state: job ${id} skipped: ${reason}`);
  jobs.rememberFinished(finished);
  // Agents of the jobs taken over, and of queued ones started now, ask this process from now on.
  if (records.length > 0) await endpoint?.ensure();
  await jobs.restore(records);
}
