/**
 * The hosts of CLAUDE_DISPATCH_HOSTS as this server reaches them (§21): each a remote host over its kind's transport,
 * and the private folder ssh's shared connections' sockets live in (§21.4): a socket there lets anyone who can reach
 * it use our login on that machine.
 */
import { chmodSync, lstatSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { systemClock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import type { Config } from "../config.js";
import type { HostEntry } from "../hosts/kinds.js";
import type { LocalApprovals } from "../hosts/remote/remote-agent.js";
import { RemoteHost } from "../hosts/remote/remote-host.js";
import type { Transport } from "../hosts/remote/transport.js";
import { SshTransport } from "../hosts/ssh/transport.js";
import { ContainerTransport } from "../hosts/container/transport.js";
import { PodTransport } from "../hosts/pod/transport.js";
import { fileRequestAs } from "../store/approvals.js";
import type { StateStore } from "../store/state-store.js";
import type { Machine } from "./machine.js";

/** A Unix socket's path is at most 104–108 bytes; ssh adds the 40 of %C and 17 of a temporary suffix. */
const SOCKET_FOLDER_MAX = 104 - 58;

/** share: a long-lived server shares one connection per host; a command that makes one call does not. */
export function createRemoteHosts(
  config: Config,
  machine: Machine,
  uid: number | undefined,
  logger: Logger,
  share = true,
  store?: StateStore,
): Map<string, RemoteHost> {
  const hosts = new Map<string, RemoteHost>();
  if (!config.hosts) return hosts;
  // Made once, when the first ssh host needs it.
  let controlDir: { path: string | undefined } | undefined;
  const sshControlDir = (): string | undefined =>
    (controlDir ??= { path: share ? socketFolder(config.stateDir, uid, logger) : undefined }).path;
  const transportOf = (entry: HostEntry): Transport => {
    switch (entry.kind) {
      case "ssh":
        return new SshTransport({
          config: entry,
          sshBin: config.sshBin,
          controlDir: sshControlDir(),
          env: sshEnvironment(machine.env),
          timeoutMs: config.sshTimeoutMs,
        });
      case "container":
        return new ContainerTransport(entry, machine.env);
      case "pod":
        return new PodTransport(entry, machine.env);
    }
  };
  for (const entry of config.hosts) {
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

/** A job's approval files in this state directory, where another machine's requests are mirrored (§21.3). */
function localApprovals(store: StateStore, jobId: string): LocalApprovals {
  return {
    fileAs: (request) => fileRequestAs(store.jobDir(jobId), request, () => crypto.randomUUID()),
    read: (requestId) => store.approval(jobId, requestId),
    answer: (requestId, answer) => void store.answerApproval(jobId, requestId, answer),
    watch: (onChange) => store.watchApprovals(jobId, onChange),
  };
}

/** ssh's environment: what it needs to find keys, the agent and its config; nothing else of ours goes to it. */
function sshEnvironment(env: Readonly<Record<string, string | undefined>>): Record<string, string | undefined> {
  const names = ["PATH", "HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT"];
  return Object.fromEntries(names.filter((name) => env[name] !== undefined).map((name) => [name, env[name]]));
}

/** The state directory's ssh folder, else a short one of ours in the temporary folder; undefined: no sharing. */
function socketFolder(stateDir: string, uid: number | undefined, logger: Logger): string | undefined {
  const preferred = path.join(stateDir, "ssh");
  const folder =
    preferred.length <= SOCKET_FOLDER_MAX ? preferred : path.join(tmpdir(), `claude-dispatch-ssh-${uid ?? "user"}`);
  try {
    mkdirSync(folder, { recursive: true, mode: 0o700 });
    const info = lstatSync(folder);
    if (info.isSymbolicLink() || !info.isDirectory() || (uid !== undefined && info.uid !== uid))
      throw new Error("it is not a folder of this user's");
    chmodSync(folder, 0o700);
    if (folder.length > SOCKET_FOLDER_MAX) throw new Error("its path is too long for a socket");
    return folder;
  } catch (error) {
    logger.warn(`ssh connections are not shared: cannot use ${folder} for their sockets: ${(error as Error).message}`);
    return undefined;
  }
}
