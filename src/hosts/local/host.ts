/**
 * This machine as a host (PROTOCOL.md §6): agents started and followed through the process layer, which loads
 * with the first job (BENCHMARKS.md (a)); recorded agents found in the process table; directories checked against
 * the operator's roots; worktrees made here; the approver this same program runs.
 */
import path from "node:path";

import type {
  AgentHost,
  ApproverLaunch,
  AttachRequest,
  ChildHandle,
  EndpointAddress,
  Host,
  HostCheck,
  KillReport,
  LocatedAgent,
  NamedProcess,
  OutputFiles,
  RecordedAgent,
  SpawnRequest,
} from "../../agent/host.js";
import type { DirectoryCheck } from "../../agent/policy.js";
import type { Worktrees } from "../../agent/worktree.js";
import { checkDirectory } from "./directory.js";
import { findProgram } from "./find-program.js";
import { locateInTable, type Self } from "./locate.js";
import type { ProcessControl } from "./types.js";

export interface LocalHostOptions {
  /** Named in records (§15.2). */
  name: string;
  /** Loads the process layer; called once, at the first use. */
  loadProcesses(): Promise<ProcessControl>;
  /** This process as its records name it, once the process table could say its start time. */
  self(): Promise<Self>;
  /** The roots jobs may run under (§4), resolved; undefined: anywhere. */
  roots: readonly string[] | undefined;
  worktrees: Worktrees;
  /** This program, as the agents run it in its approver mode (§18). */
  approverCommand: { command: string; args: readonly string[] };
  /** The state directory's approval endpoint, where agents that can reach it ask instead (§18). */
  approvalEndpoint?(jobId: string): EndpointAddress | undefined;
  /** An agent CLI's program here (§7): the operator's setting, else its own name. */
  programOf(agent: string): string;
  /** The agents offered here, whose programs doctor looks for (§17). */
  agents(): readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  platform: string;
  version: string;
  stateDir: string;
}

export class LocalHost implements Host, AgentHost {
  readonly name: string;
  readonly sharesFiles = true;
  readonly worktrees: Worktrees;
  private loaded: ProcessControl | undefined;
  private loading: Promise<ProcessControl> | undefined;

  constructor(private readonly options: LocalHostOptions) {
    this.name = options.name;
    this.worktrees = options.worktrees;
  }

  /** The process layer, loaded on first use: this machine's liveness checks and tree kills. */
  processes(): Promise<ProcessControl> {
    this.loading ??= this.options.loadProcesses().then((loaded) => (this.loaded = loaded));
    return this.loading;
  }

  programOf(agent: string): string {
    return this.options.programOf(agent);
  }

  /** Agents here start from this process's own environment (§7.2). */
  get agentEnvironment(): Readonly<Record<string, string | undefined>> {
    return this.options.env;
  }

  /** Every program runs under the one process layer here. */
  forAgent(): AgentHost {
    return this;
  }

  start(request: SpawnRequest): ChildHandle {
    return this.loaded?.start(request) ?? deferredChild(this.processes().then((loaded) => loaded.start(request)));
  }

  attach(request: AttachRequest): ChildHandle {
    return this.loaded?.attach(request) ?? deferredChild(this.processes().then((loaded) => loaded.attach(request)));
  }

  async locate(recorded: RecordedAgent, othersAgent: (agent: NamedProcess) => boolean): Promise<LocatedAgent> {
    return locateInTable(recorded, await this.processes(), await this.options.self(), othersAgent);
  }

  /** Without a pid it would be taken for gone: it is followed once its pid is on record (§15.2). */
  canFollow(recorded: RecordedAgent): boolean {
    return recorded.agent?.pid !== undefined;
  }

  /** Signalled only when it is certainly the agent: the same start time, or its tree marker (§15.3). */
  async killRecorded(
    recorded: RecordedAgent,
    output: OutputFiles | undefined,
    othersAgent: (agent: NamedProcess) => boolean = () => false,
  ): Promise<KillReport | undefined> {
    const located = await this.locate(recorded, othersAgent);
    if (located.state !== "alive" || located.pid === undefined || !output) return undefined;
    const processes = await this.processes();
    const marker = recorded.agent?.tree_marker;
    if ((await processes.isAlive(located.pid, located.startTime, marker)) !== true) return undefined;
    const handle = processes.attach({
      pid: located.pid,
      startTime: located.startTime,
      marker,
      output,
      onStdout: () => undefined,
      stderrTailBytes: 0,
    });
    return handle.killTree();
  }

  checkDirectory(dir: string): Promise<DirectoryCheck> {
    return checkDirectory(dir, this.options.roots);
  }

  joinPath(repo: string, subdir: string): string {
    return path.join(repo, subdir);
  }

  approver(jobId: string, waitMs: number): ApproverLaunch {
    const { command, args } = this.options.approverCommand;
    const endpoint = this.options.approvalEndpoint?.(jobId);
    return {
      command,
      args: [...args, "approver", `--state-dir=${this.options.stateDir}`, `--wait-ms=${waitMs}`, jobId],
      waitMs,
      ...(endpoint ? { endpoint } : {}),
    };
  }

  async check(): Promise<HostCheck> {
    const { env, platform, version, stateDir } = this.options;
    const programs = Object.fromEntries(
      this.options
        .agents()
        .map((agent) => [agent, findProgram(this.options.programOf(agent), env, { platform }) ?? null]),
    );
    return { ok: true, version, stateDir, programs, ms: 0 };
  }

  /** Nothing to close here: agents run on, and followers end with this process. */
  async close(): Promise<void> {}

  /** Once the process layer, if it was ever loaded, has dealt with every child: after a shutdown's kills (§3). */
  async idle(): Promise<void> {
    const processes = await this.loading?.catch(() => undefined);
    await processes?.idle();
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
