/**
 * The job registry as main builds it, for the server and for `claude-dispatch remote` (§21.3): this machine's host
 * (loaded on first use), the hosts reached over ssh, one launcher per runtime and host, and the persistence on the
 * state directory. main.ts alone reads the process; what is needed of it comes in as a Machine.
 */
import { statfsSync } from "node:fs";
import path from "node:path";

import { createAgents, type Agents } from "../agent/launcher.js";
import { checkRemoteDirectory, admitAgent, type Policy } from "../agent/policy.js";
import type { AttachRequest, ChildHandle, SpawnRequest } from "../agent/host.js";
import type { Runtime } from "../agent/runtime.js";
import type { WorktreeHold } from "../agent/worktree.js";
import type { AgentOutcome, AgentSpec, AgentToAttach } from "../agent/types.js";
import { systemClock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { DEPTH_VARIABLE, programOf, type Config } from "../config.js";
import { checkDirectory } from "../hosts/local/directory.js";
import type { ProcessControl } from "../hosts/local/index.js";
import { hasProcessTable, ownLinuxStartTime } from "../hosts/local/self.js";
import type { SshHost } from "../hosts/ssh/ssh-host.js";
import { memoryPersistence } from "../jobs/memory.js";
import { onDoneCommands, onInputCommands } from "../jobs/operator-commands.js";
import { JobRegistry } from "../jobs/registry.js";
import { AGENT_NAMES, AGENT_PROGRAMS, isAgentName } from "../runtimes/index.js";
import { createTextFile, readFileRange } from "../store/atomic.js";
import type { ProcessIdentity } from "../store/records.js";
import type { StateStore } from "../store/state-store.js";
import { lockWorktree, lockWorktreeNow } from "../store/worktree-lock.js";
import { GitWorktrees } from "../worktrees/git-worktrees.js";
import { retireWorktree } from "../worktrees/retire.js";

/** Transcript kept per job for claude_output, and across all finished jobs (§5.7). */
const FINISHED_TRANSCRIPT_CHARS = 32_000_000;
export const TRANSCRIPT_CHARS = 2_000_000;

/** What the wiring needs of the process it runs in (main.ts reads it). */
export interface Machine {
  env: Readonly<Record<string, string | undefined>>;
  platform: string;
  pid: number;
  execPath: string;
  /** This program's entry point, for the approver's command line. */
  mainPath: string;
  kill(pid: number, signal: "SIGTERM" | "SIGKILL"): void;
}

/**
 * The process layer and child_process load when the first job starts, not at
 * startup: `initialize` does not need them (BENCHMARKS.md (a)).
 */
export async function loadProcessControl(
  machine: Machine,
  options: Omit<Parameters<typeof import("../hosts/local/index.js").createProcessControl>[0], "platform" | "newMarker" | "defer">,
): Promise<ProcessControl> {
  const layer = await import("../hosts/local/index.js");
  const platform = await layer.createLocalPlatform({ platform: machine.platform, pid: machine.pid, env: machine.env, execPath: machine.execPath, kill: machine.kill });
  return layer.createProcessControl({
    ...options,
    platform,
    // The global Web Crypto, like the job ids.
    newMarker: () => crypto.randomUUID(),
    defer: (fn) => void setImmediate(fn),
  });
}

/** Bytes free on the disk holding dir, for telling a full disk from a broken agent (§7.3). */
function freeBytesOf(dir: string): number | undefined {
  try {
    const disk = statfsSync(dir);
    return disk.bavail * disk.bsize;
  } catch {
    return undefined;
  }
}

/** A child handle for a start that waits on the process layer to load. */
function deferredChild(pending: Promise<ChildHandle>): ChildHandle {
  return {
    pid: undefined,
    marker: undefined,
    identity: () => pending.then((handle) => handle.identity()),
    exited: pending.then((handle) => handle.exited),
    killTree: () => pending.then((handle) => handle.killTree()),
    settled: pending.then(
      (handle) => handle.settled,
      () => undefined,
    ),
    ready: pending.then(
      (handle) => handle.ready,
      () => undefined,
    ),
  };
}

/** This machine as the host agents run on; the process layer loads with the first job (BENCHMARKS.md (a)). */
export function lazyLocalHost(machine: Machine, config: Config, logger: Logger) {
  let processes: ProcessControl | undefined;
  let loading: Promise<ProcessControl> | undefined;
  const processControl = (): Promise<ProcessControl> => {
    loading ??= loadProcessControl(machine, { clock: systemClock, logger, killGraceMs: config.killGraceMs }).then((loaded) => (processes = loaded));
    return loading;
  };
  return {
    processControl,
    /** The process layer if it was ever loaded, for shutdown to wait on. */
    loaded: (): Promise<ProcessControl | undefined> => loading?.catch(() => undefined) ?? Promise.resolve(undefined),
    start: (request: SpawnRequest): ChildHandle => processes?.start(request) ?? deferredChild(processControl().then((loaded) => loaded.start(request))),
    attach: (request: AttachRequest): ChildHandle => processes?.attach(request) ?? deferredChild(processControl().then((loaded) => loaded.attach(request))),
  };
}

export type LocalHost = ReturnType<typeof lazyLocalHost>;

/** The runtimes, loaded once something needs them: answering `initialize` does not (BENCHMARKS.md (a)). */
export interface Runtimes {
  load(): Promise<void>;
  /** A loaded runtime; throws before load() resolved. */
  get(name: string | undefined, bin?: string): Runtime;
}

export function lazyRuntimes(): Runtimes {
  let loaded: typeof import("../runtimes/all.js") | undefined;
  let loading: Promise<void> | undefined;
  return {
    load: () => (loading ??= import("../runtimes/all.js").then((module) => void (loaded = module))),
    get: (name, bin) => {
      if (!loaded) throw new Error("the runtimes are used before they were loaded");
      return loaded.runtimeFor(name, bin);
    },
  };
}

/** Worktrees on this machine (§19); git's runner, and child_process with it, load at the first git call. */
export function localWorktrees(machine: Machine, config: Config): GitWorktrees {
  let runner: ReturnType<typeof import("../hosts/local/git.js").createGitRunner> | undefined;
  return new GitWorktrees({
    git: async (args, env) => {
      runner ??= (await import("../hosts/local/git.js")).createGitRunner(machine.env, machine.platform);
      return runner(args, env);
    },
    root: config.worktreeDir ?? path.join(config.stateDir, "worktrees"),
    branchPrefix: "dispatch/",
  });
}

/**
 * This server as its records name it, with its start time so that a later
 * server can tell it from a process that reused its pid: from /proc on Linux,
 * from the process table (ps) elsewhere on POSIX, none on Windows.
 */
export async function ownIdentity(machine: Machine, processControl: () => Promise<ProcessControl>): Promise<ProcessIdentity> {
  if (!hasProcessTable(machine.platform)) return { pid: machine.pid };
  const startTime = ownLinuxStartTime(machine.platform) ?? (await (await processControl()).startTimeOf(machine.pid));
  return startTime ? { pid: machine.pid, start_time: startTime } : { pid: machine.pid };
}

/** Holds a job's worktree for a merge or discard (§19.1), in this process's name, as the server does. */
export function worktreeHolds(store: StateStore, machine: Machine, host: LocalHost): (jobId: string) => Promise<WorktreeHold> {
  let identity: Promise<ProcessIdentity> | undefined;
  return async (jobId) => {
    identity ??= ownIdentity(machine, host.processControl);
    const isAlive = async (named: ProcessIdentity) => (await host.processControl()).isAlive(named.pid, named.start_time);
    const held = await lockWorktree(store.jobDir(jobId), jobId, await identity, isAlive, () => crypto.randomUUID());
    return { state: store.read(jobId)?.worktree?.state, release: held.release };
  };
}

export interface JobsParts {
  machine: Machine;
  config: Config;
  policy: Policy;
  roots: string[] | undefined;
  store: StateStore | undefined;
  host: LocalHost;
  /** The hosts reached over ssh, by name (§21). */
  sshHosts: ReadonlyMap<string, SshHost>;
  runtimes: Runtimes;
  worktrees: GitWorktrees;
  logger: Logger;
  /**
   * The remote end's one start (§21.3): its runtime's arguments and environment, as the local server made them, and
   * the program when the host's configuration names one.
   */
  remoteStart?: { jobId: string; command?: string; args: readonly string[]; env: Readonly<Record<string, string>> };
}

/** The job registry on the state directory, or in memory for a server at the depth limit (§7.4). */
export async function createJobs(parts: JobsParts): Promise<JobRegistry> {
  const { machine, config, policy, roots, store, host, worktrees, logger, runtimes } = parts;
  const agents = launchers(parts);
  const owner = store ? await ownIdentity(machine, host.processControl) : undefined;
  // Both load the process layer on first use: only unfinished records need them (BENCHMARKS.md (a)).
  const isAlive = async (named: ProcessIdentity & { tree_marker?: string }) => (await host.processControl()).isAlive(named.pid, named.start_time, named.tree_marker);
  const replayReader = (id: string, from: StateStore, runtime: string | undefined) =>
    runtimes.get(runtime, programOf(config, runtime ?? "claude")).createReader({
      maxLineBytes: config.maxOutputBytes,
      transcriptChars: TRANSCRIPT_CHARS,
      onOverflow: () => undefined,
      source: from.outputSource(id),
    });
  const checkHere = (dir: string) => checkDirectory(dir, roots);
  // The operator's commands (ON_DONE, ON_INPUT) run on this machine, with the server's environment.
  const operatorCommand = { host, env: machine.env, clock: systemClock, logger };
  return new JobRegistry({
    launch: agents.launch,
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
    persistence: !store || !owner
      ? memoryPersistence()
      : {
          store,
          owner,
          // Agents at once across every server on the state directory (§15.7).
          slots: store.slotPool(config.maxJobs, owner, isAlive),
          attach: agents.attach,
          replayTranscript: (id, runtime) => store.replay(id, replayReader(id, store, runtime)).transcript,
          maxBytes: config.stateMaxBytes,
          newMarker: () => crypto.randomUUID(),
          ready: runtimes.load,
          isAlive,
          findMarked: async (marker) => (await host.processControl()).findMarked(marker),
          isOwnTree: async (pid, startTime) => (await host.processControl()).isOwnTree?.(pid, startTime),
          admit: async (spec) => {
            await runtimes.load();
            const there = spec.host === undefined ? undefined : parts.sshHosts.get(spec.host);
            const check = there ? async (dir: string) => checkRemoteDirectory(dir, there.config.roots) : checkHere;
            // A job in its own worktree runs outside the roots: the directory checked is the one the call named (§19).
            const asked = spec.worktree ? (there ? path.posix : path).join(spec.worktree.repo, spec.worktree.subdir) : spec.cwd;
            const admitted = await admitAgent(asked, spec.options ?? {}, policy, check, spec.agent);
            return { ...spec, ...admitted, cwd: spec.worktree ? spec.cwd : admitted.cwd };
          },
          // Any agent's job is followed with its own runtime, offered or not (a queued one is admitted again, §15.3).
          runtimes: AGENT_NAMES,
          hosts: ["local", ...parts.sshHosts.keys()],
          // A pruned job's worktree goes with it unless it holds changes nobody merged or discarded (§19).
          // One on another machine is that machine's retention's to look after (§21.3).
          beforeRemove: (id) => {
            const record = store.read(id);
            const worktree = record?.worktree;
            if (!worktree) return undefined;
            // Not while a merge or discard of it runs (§19.1): the job is left for a later round. Its folder's removal ends the hold.
            const hold = lockWorktreeNow(store.jobDir(id), owner, () => crypto.randomUUID());
            if (!hold) throw new Error("a merge or discard of its worktree is under way");
            if (record.host === undefined || record.host === "local") {
              retireWorktree(worktrees, worktree)
                .then((fate) => logger.info(`job ${id} pruned; its worktree ${worktree.path} was ${fate === "kept" ? "kept: it has unmerged changes" : "removed"}`))
                .catch((error: unknown) => logger.warn(`job ${id} pruned; its worktree ${worktree.path}: ${(error as Error).message}`));
            }
            // Undone only if the folder could not be removed; otherwise the hold went with it.
            return hold.release;
          },
          // Each agent asks this same program, in its approver mode, whenever it would have prompted (§18).
          approvals: config.approvals === "forward",
          // On another machine, claude-dispatch there in its approver mode; its requests are mirrored here (§21.3).
          approver: (jobId, hostName) => {
            if (config.approvals !== "forward") return undefined;
            if (hostName !== undefined) return parts.sshHosts.get(hostName)?.approverLaunch(jobId, config.approvalTimeoutMs);
            return {
              command: machine.execPath,
              args: [machine.mainPath, "approver", `--state-dir=${store.root}`, `--wait-ms=${config.approvalTimeoutMs}`, jobId],
              waitMs: config.approvalTimeoutMs,
            };
          },
        },
  });
}

/** One launcher per runtime and host, made when first needed: a job taken over may name an agent no longer offered (§7). */
function launchers(parts: JobsParts): Agents {
  const { machine, config, host, logger, remoteStart, runtimes } = parts;
  const made = new Map<string, Agents>();
  const make = (runtime: Runtime, on: Parameters<typeof createAgents>[0]["host"], env: Readonly<Record<string, string | undefined>>): Agents =>
    createAgents({
      runtime,
      host: on,
      files: { readRange: readFileRange, create: createTextFile, freeBytes: freeBytesOf, folderOf: (file) => path.dirname(file) },
      env,
      maxLineBytes: config.maxOutputBytes,
      transcriptChars: TRANSCRIPT_CHARS,
      stderrTailBytes: 64 * 1024,
      onMalformedLine: (line) => logger.warn(`skipped a line of agent output that is not JSON: ${line.slice(0, 200)}`),
    });
  // Each agent sees one more level of dispatch, so a copy of this server inside it knows (§7.4).
  const depth = { [DEPTH_VARIABLE]: String(config.depth + 1) };
  const launcherFor = (agent: string | undefined, hostName: string | undefined): Agents => {
    const key = `${agent ?? "claude"}@${hostName ?? "local"}`;
    let launcher = made.get(key);
    if (launcher) return launcher;
    const there = hostName === undefined ? undefined : parts.sshHosts.get(hostName);
    if (hostName !== undefined && !there) throw new Error(`host ${hostName} is not configured (CLAUDE_DISPATCH_HOSTS)`);
    if (there) {
      // Its program there, and only what the runtime adds: the agent gets that machine's own environment (§21.3).
      const runtime = runtimes.get(agent, there.config.programs[agent ?? "claude"]);
      launcher = make(runtime, there.forAgent(agent ?? "claude"), runtime.environment({}, depth));
    } else {
      const runtime = runtimes.get(agent, programOf(config, agent ?? "claude"));
      launcher = make(runtime, host, runtime.environment(machine.env, depth));
    }
    made.set(key, launcher);
    return launcher;
  };
  // The remote end runs what the local server's runtime asked for, and reads it with the same runtime (§21.3): the
  // program the host's configuration names, else this machine's own.
  const remoteLauncher = (spec: AgentSpec): Agents => {
    const fixed = remoteStart as NonNullable<typeof remoteStart>;
    const agent = spec.agent ?? "claude";
    const program = fixed.command ?? programOf(config, agent);
    const base = runtimes.get(spec.agent, program);
    const outcome: Runtime["outcome"] = fixed.command === undefined ? base.outcome : (...end) => namedByHost(base.outcome(...end), agent);
    const runtime = { ...base, invocation: () => ({ command: program, args: [...fixed.args] }), outcome };
    return make(runtime, host, base.environment(machine.env, fixed.env));
  };
  return {
    launch: (spec: AgentSpec) => (remoteStart && spec.jobId === remoteStart.jobId ? remoteLauncher(spec) : launcherFor(spec.agent, spec.host)).launch(spec),
    attach: (agent: AgentToAttach) => launcherFor(agent.runtime, agent.host).attach(agent),
  };
}

/** A program the other end's host configuration named: its SPAWN_FAILED says to fix that, not this machine's setting. */
function namedByHost(outcome: AgentOutcome, agent: string): AgentOutcome {
  if (outcome.ok || outcome.code !== "SPAWN_FAILED" || !isAgentName(agent)) return outcome;
  const named = `the host's "programs" in CLAUDE_DISPATCH_HOSTS`;
  return { ...outcome, detail: outcome.detail.replace(AGENT_PROGRAMS[agent].setting, named) };
}
