/**
 * The modules the wiring loads only when first needed: main.ts holds their dynamic imports, the one place that
 * has any, so that `initialize` is answered before any of them loads (BENCHMARKS.md (a)).
 */
/** The modules loaded on first use; main.ts is the one place that imports them dynamically. */
export interface Loaders {
  /** This machine's process layer: the first job, or a liveness check. */
  processes(): Promise<typeof import("../hosts/local/index.js")>;
  /** git's runner, at the first worktree operation. */
  git(): Promise<typeof import("../hosts/local/git.js")>;
  /** The runtimes' readers and outcomes, once an agent is started or followed. */
  runtimes(): Promise<typeof import("../runtimes/all.js")>;
  /** The hosts of CLAUDE_DISPATCH_HOSTS, only when some are configured. */
  remoteHosts(): Promise<typeof import("./remote-hosts.js")>;
  /** The state directory's approval endpoint (node:http), from a process's first job on (§18). */
  approvalEndpoint(): Promise<typeof import("./approvals-endpoint.js")>;
  /** Starting the carrier, by a server as it leaves or by the command line. */
  detached(): Promise<typeof import("../hosts/local/detached.js")>;
}
