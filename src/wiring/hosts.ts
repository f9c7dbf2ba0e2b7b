/**
 * The hosts as main builds them (PROTOCOL.md §6, §21): this machine, whose process layer loads with the first job,
 * and those of CLAUDE_DISPATCH_HOSTS, whose code loads only when some are configured. The one place that names
 * this machine's host and decides which kind of host each entry is; everything else asks a Host.
 */
import type { EndpointAddress, Host, Hosts } from "../agent/host.js";
import { systemClock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { SERVER_VERSION } from "../core/version.js";
import { programOf, worktreeRootOf, type Config } from "../config.js";
import { LocalHost } from "../hosts/local/host.js";
import type { ProcessControl } from "../hosts/local/index.js";
import { ownIdentity } from "../hosts/local/self.js";
import type { ProcessIdentity } from "../store/records.js";

export { ownIdentity };
import type { StateStore } from "../store/state-store.js";
import { GitWorktrees } from "../worktrees/git-worktrees.js";
import type { Loaders } from "./loaders.js";
import type { Machine } from "./machine.js";

/** This machine's host, as every record of a job run here names it (§15.2). */
export const HOME_HOST = "local";

/** This machine and the hosts of CLAUDE_DISPATCH_HOSTS, by name. */
export class HostSet implements Hosts {
  constructor(
    readonly home: LocalHost,
    private readonly others: ReadonlyMap<string, Host> = new Map(),
  ) {}

  get(name: string): Host | undefined {
    return name === this.home.name ? this.home : this.others.get(name);
  }

  all(): readonly Host[] {
    return [this.home, ...this.others.values()];
  }

  /** Followers stop (agents run on), connections close, this machine's process layer settles. */
  async close(): Promise<void> {
    await Promise.all(this.all().map((host) => host.close().catch(() => undefined)));
  }
}

export interface HostParts {
  machine: Machine;
  config: Config;
  /** The operator's roots (§4), resolved; undefined: anywhere. */
  roots: readonly string[] | undefined;
  loaders: Loaders;
  logger: Logger;
  /** The state directory: another host's permission requests are mirrored into its job folders (§21.3). */
  store?: StateStore | undefined;
  /** A long-lived server shares one ssh connection per host; a command that makes one call does not (§21.4). */
  shareConnections?: boolean;
  uid?: number | undefined;
  /** This machine's process layer when the caller has one loaded already (the command line's). */
  processes?: () => Promise<ProcessControl>;
  /** Where this machine's agents ask for permission (§18), once the state directory's endpoint is settled. */
  approvalEndpoint?: (jobId: string) => EndpointAddress | undefined;
}

export async function createHosts(parts: HostParts): Promise<HostSet> {
  const home = localHost(parts);
  if (!parts.config.hosts) return new HostSet(home);
  const { createRemoteHosts } = await parts.loaders.remoteHosts();
  const { config, machine, uid, logger, shareConnections = true, store } = parts;
  return new HostSet(home, createRemoteHosts(config, machine, uid, logger, shareConnections, store, home.worktrees));
}

/** This machine: agents, liveness and tree kills through the process layer, loaded at the first use. */
export function localHost({
  machine,
  config,
  roots,
  loaders,
  logger,
  processes,
  approvalEndpoint,
}: HostParts): LocalHost {
  let self: Promise<ProcessIdentity> | undefined;
  const host: LocalHost = new LocalHost({
    name: HOME_HOST,
    loadProcesses:
      processes ??
      (() => loadProcessControl(machine, loaders, { clock: systemClock, logger, killGraceMs: config.killGraceMs })),
    self: () => (self ??= ownIdentity(machine, () => host.processes())),
    roots,
    worktrees: localWorktrees(machine, config, loaders),
    approverCommand: { command: machine.execPath, args: [machine.mainPath] },
    ...(approvalEndpoint ? { approvalEndpoint } : {}),
    programOf: (agent) => programOf(config, agent),
    agents: () => config.agents ?? [],
    env: machine.env,
    platform: machine.platform,
    version: SERVER_VERSION,
    stateDir: config.stateDir,
  });
  return host;
}

/**
 * The process layer and child_process load when the first job starts, not at
 * startup: `initialize` does not need them (BENCHMARKS.md (a)).
 */
export async function loadProcessControl(
  machine: Machine,
  loaders: Pick<Loaders, "processes">,
  options: Omit<
    Parameters<typeof import("../hosts/local/index.js").createProcessControl>[0],
    "platform" | "newMarker" | "defer"
  >,
): Promise<ProcessControl> {
  const layer = await loaders.processes();
  const platform = await layer.createLocalPlatform({
    platform: machine.platform,
    pid: machine.pid,
    env: machine.env,
    execPath: machine.execPath,
    kill: machine.kill,
  });
  return layer.createProcessControl({
    ...options,
    platform,
    // The global Web Crypto, like the job ids.
    newMarker: () => crypto.randomUUID(),
    defer: (fn) => void setImmediate(fn),
  });
}

/** Worktrees on this machine (§19); git's runner, and child_process with it, load at the first git call. */
function localWorktrees(machine: Machine, config: Config, loaders: Pick<Loaders, "git">): GitWorktrees {
  let runner: ReturnType<Awaited<ReturnType<Loaders["git"]>>["createGitRunner"]> | undefined;
  return new GitWorktrees({
    git: async (args, env) => {
      runner ??= (await loaders.git()).createGitRunner(machine);
      return runner(args, env);
    },
    root: worktreeRootOf(config),
    branchPrefix: "dispatch/",
  });
}
