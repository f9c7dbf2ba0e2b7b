/**
 * The job registry as main builds it, for the server, the carrier and `claude-dispatch remote` (§21.3): one
 * launcher per runtime and host, and the persistence on the state directory. main.ts alone reads the process;
 * what is needed of it comes in as a Machine, and the modules loaded on first use as Loaders.
 */
import { statfsSync } from "node:fs";
import path from "node:path";

import { createAgents, type Agents } from "../agent/launcher.js";
import { admitAgent, type Policy } from "../agent/policy.js";
import type { Host } from "../agent/host.js";
import type { Runtime } from "../agent/runtime.js";
import type { WorktreeHold } from "../agent/worktree.js";
import type {
  AgentAttacher,
  AgentLauncher,
  AgentOutcome,
  AgentSpec,
  AgentToAttach,
  NamedSpec,
} from "../agent/types.js";
import { systemClock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { DEPTH_VARIABLE, programOf, type Config } from "../config.js";
import { memoryPersistence } from "../jobs/memory.js";
import { onDoneCommands, onInputCommands } from "../jobs/operator-commands.js";
import { JobRegistry } from "../jobs/registry.js";
import type { Persistence } from "../jobs/types.js";
import { AGENT_NAMES, AGENT_PROGRAMS, HOME_AGENT, isAgentName } from "../runtimes/index.js";
import { createTextFile, readFileRange } from "../store/atomic.js";
import type { ProcessIdentity } from "../store/records.js";
import type { StateStore } from "../store/state-store.js";
import { lockWorktree, lockWorktreeNow } from "../store/worktree-lock.js";
import { retireWorktree } from "../worktrees/retire.js";
import { ownIdentity, type HostSet } from "./hosts.js";
import type { Loaders } from "./loaders.js";
import type { Machine } from "./machine.js";

/** Transcript kept per job for claude_output, and across all finished jobs (§5.7). */
const FINISHED_TRANSCRIPT_CHARS = 32_000_000;
export const TRANSCRIPT_CHARS = 2_000_000;

/** Bytes free on the disk holding dir, for telling a full disk from a broken agent (§7.3). */
function freeBytesOf(dir: string): number | undefined {
  try {
    const disk = statfsSync(dir);
    return disk.bavail * disk.bsize;
  } catch {
    return undefined;
  }
}

/** The runtimes, loaded once something needs them: answering `initialize` does not (BENCHMARKS.md (a)). */
export interface Runtimes {
  load(): Promise<void>;
  /** A loaded runtime; throws before load() resolved. */
  get(name: string, bin?: string): Runtime;
}

export function lazyRuntimes(loaders: Pick<Loaders, "runtimes">): Runtimes {
  let loaded: Awaited<ReturnType<Loaders["runtimes"]>> | undefined;
  let loading: Promise<void> | undefined;
  return {
    load: () => (loading ??= loaders.runtimes().then((module) => void (loaded = module))),
    get: (name, bin) => {
      if (!loaded) throw new Error("the runtimes are used before they were loaded");
      return loaded.runtimeFor(name, bin);
    },
  };
}

/** Holds a job's worktree for a merge or discard (§19.1), in this process's name, as the server does. */
export function worktreeHolds(
  store: StateStore,
  machine: Machine,
  hosts: HostSet,
): (jobId: string) => Promise<WorktreeHold> {
  let identity: Promise<ProcessIdentity> | undefined;
  const processes = () => hosts.home.processes();
  return async (jobId) => {
    identity ??= ownIdentity(machine, processes);
    const isAlive = async (named: ProcessIdentity) => (await processes()).isAlive(named.pid, named.start_time);
    const randomName = () => crypto.randomUUID();
    const held = await lockWorktree(store.jobDir(jobId), jobId, await identity, isAlive, randomName, systemClock);
    return { state: store.read(jobId)?.worktree?.state, release: held.release };
  };
}

export interface JobsParts {
  machine: Machine;
  config: Config;
  policy: Policy;
  store: StateStore | undefined;
  hosts: HostSet;
  runtimes: Runtimes;
  logger: Logger;
  /**
   * The remote end's one start (§21.3): its runtime's arguments and environment, as the local server made them, and
   * the program when the host's configuration names one.
   */
  remoteStart?: { jobId: string; command?: string; args: readonly string[]; env: Readonly<Record<string, string>> };
}

/** The job registry on the state directory, or in memory for a server at the depth limit (§7.4). */
export async function createJobs(parts: JobsParts): Promise<JobRegistry> {
  const { machine, config, store, hosts, logger } = parts;
  const agents = launchers(parts);
  const owner = store ? await ownIdentity(machine, () => hosts.home.processes()) : undefined;
  // The operator's commands (ON_DONE, ON_INPUT) run on this machine, with the server's environment.
  const operatorCommand = { host: hosts.home, env: machine.env, clock: systemClock, logger };
  const onDisk = store && owner ? persistenceOnDisk(parts, store, owner) : undefined;
  return new JobRegistry({
    launch: agents.launch,
    attach: agents.attach,
    ready: parts.runtimes.load,
    // Any agent's job is followed with its own runtime, offered or not (a queued one is admitted again, §15.3).
    agents: { home: HOME_AGENT, known: AGENT_NAMES },
    hosts,
    admit: (spec: AgentSpec) => admit(parts, spec),
    // Agents at once across every server on the state directory (§15.7).
    ...(onDisk && owner ? { slots: onDisk.store.slotPool(config.maxJobs, owner, onDisk.isAlive) } : {}),
    // Each agent asks this same program, in its approver mode, whenever it would have prompted (§18).
    ...(onDisk && config.approvals === "forward" ? { approvals: { waitMs: config.approvalTimeoutMs } } : {}),
    ...(config.onDone ? { onDone: onDoneCommands({ argv: config.onDone, ...operatorCommand }) } : {}),
    ...(config.onInput ? { onInput: onInputCommands({ argv: config.onInput, ...operatorCommand }) } : {}),
    clock: systemClock,
    // The global Web Crypto: node:crypto is not loaded before a job needs an id.
    newId: () => crypto.randomUUID(),
    logger,
    retentionMs: config.jobRetentionMs,
    maxFinishedJobs: 1000,
    finishedTranscriptChars: FINISHED_TRANSCRIPT_CHARS,
    maxRunning: config.maxJobs,
    persistence: onDisk ?? memoryPersistence(),
  });
}

/** The persistence on the state directory (§15): records, and retention. */
function persistenceOnDisk(
  parts: JobsParts,
  store: StateStore,
  owner: ProcessIdentity,
): Persistence & { store: StateStore } {
  const { config, hosts, logger, runtimes } = parts;
  // The process layer loads on first use: only unfinished records need it (BENCHMARKS.md (a)).
  const isAlive = async (named: ProcessIdentity & { tree_marker?: string }) =>
    (await hosts.home.processes()).isAlive(named.pid, named.start_time, named.tree_marker);
  const replayReader = (id: string, runtime: string) =>
    runtimes.get(runtime).createReader({
      maxLineBytes: config.maxOutputBytes,
      transcriptChars: TRANSCRIPT_CHARS,
      onOverflow: () => undefined,
      source: store.outputSource(id),
    });
  return {
    store,
    owner,
    replayTranscript: (id, runtime) => store.replay(id, replayReader(id, runtime)).transcript,
    maxBytes: config.stateMaxBytes,
    newMarker: () => crypto.randomUUID(),
    isAlive,
    // A pruned job's worktree goes with it unless it holds changes nobody merged or discarded (§19).
    beforeRemove: (id) => {
      const record = store.read(id);
      const worktree = record?.worktree;
      if (!worktree) return undefined;
      // Not while a merge or discard of it runs (§19.1): the job is left for a
      // later round. Its folder's removal ends the hold.
      const hold = lockWorktreeNow(store.jobDir(id), owner, () => crypto.randomUUID());
      if (!hold) throw new Error("a merge or discard of its worktree is under way");
      // One on another machine is that machine's retention's to look after (§21.3).
      const host = hosts.get(record.host);
      if (host?.sharesFiles) {
        retireWorktree(host.worktrees, worktree)
          .then((fate) =>
            logger.info(
              `job ${id} pruned; its worktree ${worktree.path} was ` +
                `${fate === "kept" ? "kept: it has unmerged changes" : "removed"}`,
            ),
          )
          .catch((error: unknown) =>
            logger.warn(`job ${id} pruned; its worktree ${worktree.path}: ${(error as Error).message}`),
          );
      }
      // Undone only if the folder could not be removed; otherwise the hold went with it.
      return hold.release;
    },
  };
}

/** A queued job taken over is checked as a new call would be, on the host it runs on (§15.3). */
async function admit(parts: JobsParts, spec: AgentSpec): Promise<AgentSpec> {
  await parts.runtimes.load();
  const host = spec.host === undefined ? parts.hosts.home : parts.hosts.get(spec.host);
  if (!host) throw new Error(`host ${spec.host} is not configured (CLAUDE_DISPATCH_HOSTS)`);
  // A job in its own worktree runs outside the roots: the directory checked is the one the call named (§19).
  const asked = spec.worktree ? host.joinPath(spec.worktree.repo, spec.worktree.subdir) : spec.cwd;
  const admitted = await admitAgent(
    asked,
    spec.options ?? {},
    parts.policy,
    (dir) => host.checkDirectory(dir),
    spec.agent,
    spec.host,
  );
  return { ...spec, ...admitted, cwd: spec.worktree ? spec.cwd : admitted.cwd };
}

/**
 * One launcher per runtime and host, made when first needed: a job taken over may name an agent no longer offered (§7).
 */
function launchers(parts: JobsParts): { launch: AgentLauncher; attach: AgentAttacher } {
  const { machine, config, hosts, logger, remoteStart, runtimes } = parts;
  const made = new Map<string, Agents>();
  const make = (
    runtime: Runtime,
    on: ReturnType<Host["forAgent"]>,
    env: Readonly<Record<string, string | undefined>>,
  ): Agents =>
    createAgents({
      runtime,
      host: on,
      files: {
        readRange: readFileRange,
        create: createTextFile,
        freeBytes: freeBytesOf,
        folderOf: (file) => path.dirname(file),
      },
      env,
      maxLineBytes: config.maxOutputBytes,
      transcriptChars: TRANSCRIPT_CHARS,
      stderrTailBytes: 64 * 1024,
      onMalformedLine: (line) => logger.warn(`skipped a line of agent output that is not JSON: ${line.slice(0, 200)}`),
    });
  // Each agent sees one more level of dispatch, so a copy of this server inside it knows (§7.4).
  const depth = { [DEPTH_VARIABLE]: String(config.depth + 1) };
  const launcherFor = (agent: string, hostName: string): Agents => {
    const key = `${agent}@${hostName}`;
    let launcher = made.get(key);
    if (launcher) return launcher;
    const host = hosts.get(hostName);
    if (!host) throw new Error(`host ${hostName} is not configured (CLAUDE_DISPATCH_HOSTS)`);
    const runtime = runtimes.get(agent, host.programOf(agent));
    launcher = make(runtime, host.forAgent(agent), runtime.environment(host.agentEnvironment, depth));
    made.set(key, launcher);
    return launcher;
  };
  // The remote end runs what the local server's runtime asked for, and reads it with the same runtime (§21.3): the
  // program the host's configuration names, else this machine's own.
  const remoteLauncher = ({ agent }: NamedSpec): Agents => {
    const fixed = remoteStart as NonNullable<typeof remoteStart>;
    const program = fixed.command ?? programOf(config, agent);
    const base = runtimes.get(agent, program);
    const outcome: Runtime["outcome"] =
      fixed.command === undefined ? base.outcome : (...end) => namedByHost(base.outcome(...end), agent);
    const runtime = { ...base, invocation: () => ({ command: program, args: [...fixed.args] }), outcome };
    return make(runtime, hosts.home, base.environment(machine.env, fixed.env));
  };
  return {
    launch: (spec: NamedSpec) =>
      (remoteStart && spec.jobId === remoteStart.jobId
        ? remoteLauncher(spec)
        : launcherFor(spec.agent, spec.host)
      ).launch(spec),
    attach: (agent: AgentToAttach) => launcherFor(agent.runtime, agent.host).attach(agent),
  };
}

/**
 * A program the other end's host configuration named: its SPAWN_FAILED says to fix that, not this machine's setting.
 */
function namedByHost(outcome: AgentOutcome, agent: string): AgentOutcome {
  if (outcome.ok || outcome.code !== "SPAWN_FAILED" || !isAgentName(agent)) return outcome;
  const named = `the host's "programs" in CLAUDE_DISPATCH_HOSTS`;
  return { ...outcome, detail: outcome.detail.replace(AGENT_PROGRAMS[agent].setting, named) };
}
