/**
 * The hosts of CLAUDE_DISPATCH_HOSTS as this server reaches them (§21): each a remote host over its kind's transport.
 */
import { systemClock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import type { Config } from "../config.js";
import type { HostEntry } from "../hosts/kinds.js";
import type { LocalApprovals } from "../hosts/remote/remote-agent.js";
import { RemoteHost } from "../hosts/remote/remote-host.js";
import type { Transport } from "../hosts/remote/transport.js";
import { socketFolder, SshTransport } from "../hosts/ssh/transport.js";
import { ContainerTransport } from "../hosts/container/transport.js";
import { PodTransport } from "../hosts/pod/transport.js";
import { SandboxHost } from "../hosts/sandbox/sandbox-host.js";
import { checkDirectory, resolveRoots } from "../hosts/local/directory.js";
import type { Host } from "../agent/host.js";
import type { Worktrees } from "../agent/worktree.js";
import { fileRequestAs } from "../store/approvals.js";
import type { StateStore } from "../store/state-store.js";
import type { Machine } from "./machine.js";

/** share: a long-lived server shares one connection per host; a command that makes one call does not. */
export function createRemoteHosts(
  config: Config,
  machine: Machine,
  uid: number | undefined,
  logger: Logger,
  share = true,
  store?: StateStore,
  localWorktrees?: Worktrees,
): Map<string, Host> {
  const hosts = new Map<string, Host>();
  if (!config.hosts) return hosts;
  // Made once, when the first ssh host needs it.
  let controlDir: { path: string | undefined } | undefined;
  const sshControlDir = (): string | undefined =>
    (controlDir ??= { path: share ? socketFolder(config.stateDir, uid, logger) : undefined }).path;
  const transportOf = (entry: Exclude<HostEntry, { kind: "sandbox" }>): Transport => {
    switch (entry.kind) {
      case "ssh":
        return new SshTransport({
          config: entry,
          sshBin: config.sshBin,
          controlDir: sshControlDir(),
          env: machine.env,
          timeoutMs: config.sshTimeoutMs,
        });
      case "container":
        return new ContainerTransport(entry, machine.env);
      case "pod":
        return new PodTransport(entry, machine.env);
    }
  };
  for (const entry of config.hosts) {
    if (entry.kind === "sandbox") {
      if (!localWorktrees) throw new Error("a sandbox host needs this machine's worktrees");
      hosts.set(entry.name, sandboxHost(entry, config, machine, logger, localWorktrees));
      continue;
    }
    hosts.set(
      entry.name,
      new RemoteHost({
        config: entry,
        transport: transportOf(entry),
        timeoutMs: config.sshTimeoutMs,
        clock: systemClock,
        logger,
        ...(store && config.approvals === "forward"
          ? { approvalsOf: (jobId: string) => localApprovals(store, jobId) }
          : {}),
      }),
    );
  }
  return hosts;
}

/** A fresh container per job, of this machine's directories: checked here against the entry's roots, resolved. */
function sandboxHost(
  entry: Extract<HostEntry, { kind: "sandbox" }>,
  config: Config,
  machine: Machine,
  logger: Logger,
  worktrees: Worktrees,
): SandboxHost {
  let roots: Promise<string[] | undefined> | undefined;
  return new SandboxHost({
    config: entry,
    env: machine.env,
    timeoutMs: config.sshTimeoutMs,
    clock: systemClock,
    logger,
    worktrees,
    stateDir: config.stateDir,
    checkDirectory: async (dir) => {
      roots ??= resolveRoots(entry.roots).catch((error: unknown) => {
        logger.warn(`host ${entry.name}: ${(error as Error).message}`);
        return undefined;
      });
      const resolved = await roots;
      if (!resolved)
        return { ok: false, code: "POLICY_DENIED", problem: `is not usable: host ${entry.name}'s roots are not` };
      return checkDirectory(dir, resolved);
    },
  });
}

/** A job's approval files in this state directory, where another machine's requests are mirrored (§21.3). */
function localApprovals(store: StateStore, jobId: string): LocalApprovals {
  return {
    fileAs: (request) => fileRequestAs(store.jobDir(jobId), request, () => crypto.randomUUID()),
    read: (requestId) => store.approval(jobId, requestId),
    answer: (requestId, answer) => void store.answerApproval(jobId, requestId, answer),
    watch: (onChange) => store.watchApprovals(jobId, onChange),
  };
}
