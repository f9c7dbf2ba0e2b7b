/**
 * Remembers the descendants of every running agent, and kills a tree (§6).
 *
 * Why a process-group kill is not enough: Claude Code runs each Bash tool
 * call in a new session (setsid), so `kill(-pgid)` of the agent misses the
 * tool's shell and everything under it, which then keeps running under init.
 * We therefore remember every descendant (by parent pid, and by the process
 * groups and sessions that descendants lead) together with its start time,
 * and signal each one that is still the same process.
 */
import { sleep, type CancelTimer } from "../../../core/clock.js";
import type { KillReport, PosixPlatform, ProcessControlOptions, ProcessInfo, Signal } from "../types.js";
import { hasVariable } from "./marker.js";
import { indexProcesses, isSameLiveProcess, ownTree, startedBefore, type ProcessTable } from "./process-table.js";
import { absorb, TrackedTree } from "./tracked-tree.js";

const SHARED_SNAPSHOT_MS = 25;
/** See ProcessControlOptions.exitSweepMs. */
const EXIT_SWEEP_MS = 50;

/** Environments read from one table, by pid: the trees swept with it read each process once between them. */
const environmentsRead = new WeakMap<ProcessTable, Map<number, string | undefined>>();
/** The members of every tree when a table was first swept with (see adoptMarked). */
const trackedFor = new WeakMap<ProcessTable, Set<number>>();

/** What a read of the table must read now besides what the trees decide on: these pids, or every process. */
type AlsoRead = { fresh?: readonly number[]; full?: boolean };

/** One shared timer walks the process table for all trees at once, so cost does not grow per job. */
export class TreeTracker {
  private readonly trees = new Set<TrackedTree>();
  private shared: { at: number; table: Promise<ProcessTable | undefined> } | undefined;
  private cancelRefresh: CancelTimer | undefined;
  private refreshing = false;
  /** The table the exits and starts of the current burst wait for: read once its window closes (sweepSnapshot). */
  private sweep: Promise<ProcessTable | undefined> | undefined;

  constructor(
    private readonly platform: PosixPlatform,
    private readonly options: ProcessControlOptions,
  ) {}

  track(rootPid: number, marker: string, rootStartTime?: string): TrackedTree {
    const tree = new TrackedTree(rootPid, marker);
    // Known for an attached agent: a process with this pid but another start time is not it. For one
    // just spawned (still our child, so its pid cannot have been reused), read it at once where that is cheap.
    const readAtOnce = rootStartTime === undefined ? this.platform.readProcess?.(rootPid)?.startTime : undefined;
    tree.rootStartTime = rootStartTime ?? readAtOnce;
    this.trees.add(tree);
    // The first walk of the tree: a burst of agents starting together shares one read of the table, taken
    // after them all; without the start time, it is also what tells it (startTimeOf).
    if (readAtOnce !== undefined) void this.sweepSnapshot().catch(() => undefined);
    else void this.recentSnapshot(SHARED_SNAPSHOT_MS).catch(() => undefined);
    this.scheduleRefresh();
    return tree;
  }

  untrack(tree: TrackedTree): void {
    this.trees.delete(tree);
    if (this.trees.size === 0) {
      this.cancelRefresh?.();
      this.cancelRefresh = undefined;
    }
  }

  /**
   * The agent's start time. A shared snapshot may have been read just before
   * the spawn, so when it does not show the agent a fresh one is read.
   */
  async startTimeOf(tree: TrackedTree): Promise<string | undefined> {
    if (tree.rootStartTime === undefined) await this.recentSnapshot(SHARED_SNAPSHOT_MS);
    if (tree.rootStartTime === undefined && !tree.rootExited) await this.freshSnapshot();
    return tree.rootStartTime;
  }

  async findMarked(entry: string): Promise<{ pid: number; startTime: string } | null | undefined> {
    const read = this.platform.readEnvironment;
    // Any process may carry it: every one read now.
    const table = await this.freshSnapshot({ full: true });
    if (!read || !table) return undefined;
    const marked = [...table.byPid.values()].filter(
      (info) => !info.zombie && !table.protectedIds.has(info.pid) && hasVariable(read(info.pid) ?? "", entry),
    );
    const pids = new Set(marked.map((info) => info.pid));
    const root = marked.find((info) => !pids.has(info.ppid));
    return root ? { pid: root.pid, startTime: root.startTime } : null;
  }

  async startTimeOfPid(pid: number): Promise<string | undefined> {
    return (await this.freshSnapshot({ fresh: [pid] }))?.byPid.get(pid)?.startTime;
  }

  /**
   * Whether pid is still the process a record names. With a start time, it
   * must match. Without one, a pid alone may name any process by now: only
   * the tree marker in its environment (Linux) can vouch for it, and where
   * there is none to read, it is not taken for ours.
   */
  async identify(
    pid: number,
    startTime: string | undefined,
    marker?: string,
    fresh = false,
  ): Promise<boolean | undefined> {
    // Not fresh: the attached agent a tree follows, which every read takes afresh (snapshot).
    const table = await (fresh ? this.freshSnapshot({ fresh: [pid] }) : this.recentSnapshot(SHARED_SNAPSHOT_MS));
    // No process table this time: neither alive nor gone.
    if (!table) return undefined;
    const info = table.byPid.get(pid);
    if (info === undefined || info.zombie) return false;
    if (startTime !== undefined) {
      if (info.startTime !== startTime) return false;
      // A start time can be copied from any process into a record: where environments can be read (Linux),
      // only a process carrying the agent's tree marker is the agent (§15.3).
      const read = this.platform.readEnvironment;
      return marker === undefined || !read ? true : hasVariable(read(pid) ?? "", marker);
    }
    // A pid alone (an owner recorded where no start time could be read): it exists, but whose it is cannot be told.
    if (marker === undefined) return undefined;
    const environment = this.platform.readEnvironment?.(pid);
    return environment !== undefined && hasVariable(environment, marker);
  }

  /**
   * Whether pid, with this start time if one is given, is a process of this server's own tree (§15.3): never an
   * agent to adopt. Undefined when the process table cannot be read.
   */
  async isOwnTree(pid: number, startTime: string | undefined): Promise<boolean | undefined> {
    // The server's ancestors and group as they are now, not as first seen.
    const table = await this.freshSnapshot({ full: true });
    if (!table) return pid === this.platform.selfPid ? true : undefined;
    const info = table.byPid.get(pid);
    if (info === undefined || (startTime !== undefined && info.startTime !== startTime)) return false;
    return ownTree(table, this.platform.selfPid).has(pid);
  }

  async hasLiveMembers(tree: TrackedTree): Promise<boolean> {
    // Exits of a burst share one table read after them all.
    const table = await this.sweepSnapshot();
    if (!table) return false;
    this.adoptMarked(tree, table);
    return this.liveMembers(tree, table).length > 0;
  }

  /**
   * A table read after everything that asked for it so far: the first exit (or start) of a burst opens a
   * window of exitSweepMs, and every one until it closes shares the one read taken then. A read taken
   * before an exit is never used for it (it would show the agent alive).
   */
  private sweepSnapshot(): Promise<ProcessTable | undefined> {
    if (this.sweep) return this.sweep;
    const sweep = new Promise<ProcessTable | undefined>((resolve) => {
      this.options.clock.setTimer(() => {
        this.sweep = undefined;
        resolve(this.freshSnapshot());
      }, this.options.exitSweepMs ?? EXIT_SWEEP_MS);
    });
    this.sweep = sweep;
    return sweep;
  }

  /** SIGTERM everything, re-walk during the grace period, SIGKILL what is left, verify. */
  async kill(tree: TrackedTree): Promise<KillReport> {
    const table = await this.tableForKill(tree);
    if (!table && tree.attached) return { signalled: 0, survivors: [tree.rootPid], undetermined: true };
    // This server's own pid, group or session is never signalled: a kill of a tree
    // rooted there cannot succeed, and says so at once.
    if (table?.protectedIds.has(tree.rootPid) && !tree.rootExited && table.byPid.has(tree.rootPid)) {
      this.options.logger.error(
        `kill of agent ${tree.rootPid}: that is this server's own process, group or session; nothing was signalled`,
      );
      return { signalled: 0, survivors: [tree.rootPid] };
    }
    if (!table) return this.killGroupOnly(tree);
    const signalled = new Set<number>();
    this.adoptMarked(tree, table);
    this.signalTree(tree, table, "SIGTERM", signalled);
    const afterGrace = await this.terminateThroughGrace(tree, table, signalled);
    const pids = await this.killSurvivors(tree, afterGrace, signalled);
    if (pids.length > 0) this.options.logger.error(`kill of agent ${tree.rootPid}: still alive: ${pids.join(", ")}`);
    return { signalled: signalled.size, survivors: pids };
  }

  private get killPollMs(): number {
    return this.options.killPollMs ?? 100;
  }

  /**
   * A fresh table. An agent an earlier server started cannot be told from a process that reused its pid without
   * it: read it again through the grace period, and signal nothing if it never comes.
   */
  private async tableForKill(tree: TrackedTree): Promise<ProcessTable | undefined> {
    const { clock, killGraceMs } = this.options;
    let table = await this.snapshot();
    for (const deadline = clock.now() + killGraceMs; !table && tree.attached && clock.now() < deadline;) {
      await sleep(clock, this.killPollMs);
      table = await this.snapshot();
    }
    return table;
  }

  /** No process table: the group signal is the best we can do, and only the agent can be checked. */
  private async killGroupOnly(tree: TrackedTree): Promise<KillReport> {
    const { clock, killGraceMs } = this.options;
    this.trySignal(-tree.rootPid, "SIGTERM");
    await sleep(clock, killGraceMs);
    this.trySignal(-tree.rootPid, "SIGKILL");
    await sleep(clock, this.killPollMs);
    return { signalled: 1, survivors: tree.rootExited ? [] : [tree.rootPid] };
  }

  /** The grace period after SIGTERM: re-walks until the tree is gone; newly seen children get their SIGTERM too. */
  private async terminateThroughGrace(
    tree: TrackedTree,
    table: ProcessTable,
    signalled: Set<number>,
  ): Promise<ProcessTable> {
    const { clock, killGraceMs } = this.options;
    const deadline = clock.now() + killGraceMs;
    while (clock.now() < deadline) {
      await sleep(clock, Math.min(this.killPollMs, Math.max(0, deadline - clock.now())));
      table = (await this.snapshot()) ?? table;
      if (this.liveMembers(tree, table).length === 0) break;
      this.signalTree(tree, table, "SIGTERM", signalled, true);
    }
    return table;
  }

  /** SIGKILL what is left, verified after each round; the pids still alive after ten. */
  private async killSurvivors(tree: TrackedTree, table: ProcessTable, signalled: Set<number>): Promise<number[]> {
    let survivors = this.liveMembers(tree, table);
    for (let attempt = 0; survivors.length > 0 && attempt < 10; attempt += 1) {
      this.signalTree(tree, table, "SIGKILL", signalled);
      await sleep(this.options.clock, this.killPollMs);
      table = (await this.snapshot()) ?? table;
      survivors = this.liveMembers(tree, table);
    }
    return survivors.map((info) => info.pid);
  }

  /**
   * Adopts processes that carry this agent's marker but were never seen in its
   * tree: a tool child whose shell exited within one refresh, or a double fork.
   * Only processes started no earlier than the agent are read.
   */
  private adoptMarked(tree: TrackedTree, table: ProcessTable): void {
    const read = this.platform.readEnvironment;
    if (!read) return;
    // Members of other agents' trees carry their own markers: no need to read them. Gathered once per table
    // for the trees swept with it, again after an adoption.
    let tracked = trackedFor.get(table);
    if (!tracked) {
      tracked = new Set<number>();
      for (const other of this.trees) for (const pid of other.members.keys()) tracked.add(pid);
      trackedFor.set(table, tracked);
    }
    // Trees swept with the same table (a burst of exits) read each process's environment once between them.
    let environments = environmentsRead.get(table);
    if (!environments) environmentsRead.set(table, (environments = new Map()));
    let adopted = false;
    for (const info of table.byPid.values()) {
      if (info.zombie || table.protectedIds.has(info.pid) || tree.members.has(info.pid) || tracked.has(info.pid))
        continue;
      if (tree.rootStartTime !== undefined && startedBefore(info.startTime, tree.rootStartTime)) continue;
      let environment = environments.get(info.pid);
      if (environment === undefined && !environments.has(info.pid))
        environments.set(info.pid, (environment = read(info.pid)));
      if (environment !== undefined && hasVariable(environment, tree.marker)) {
        tree.members.set(info.pid, info);
        adopted = true;
      }
    }
    // Their own children, groups and sessions come along.
    if (adopted) {
      absorb(tree, table, this.platform.readEnvironment);
      trackedFor.delete(table);
    }
  }

  private liveMembers(tree: TrackedTree, table: ProcessTable): ProcessInfo[] {
    return [...tree.members.values()].filter((info) => isSameLiveProcess(table, info));
  }

  private signalTree(
    tree: TrackedTree,
    table: ProcessTable,
    signal: Signal,
    signalled: Set<number>,
    onlyNew = false,
  ): void {
    const groups = new Set<number>();
    for (const info of this.liveMembers(tree, table)) {
      if (onlyNew && signalled.has(info.pid)) continue;
      if (this.trySignal(info.pid, signal)) signalled.add(info.pid);
      if (info.pgid !== undefined && !table.protectedIds.has(info.pgid)) groups.add(info.pgid);
    }
    // A group id is only used while a verified member of it is alive, so it cannot be a reused pid.
    for (const group of groups) this.trySignal(-group, signal);
  }

  private trySignal(pid: number, signal: Signal): boolean {
    try {
      this.platform.signal(pid, signal);
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ESRCH") this.options.logger.warn(`${signal} ${pid}: ${code ?? String(error)}`);
      return false;
    }
  }

  /**
   * A snapshot at most maxAgeMs old: a burst of agents starting or exiting
   * together shares one read of the table instead of one each. The kill
   * sequence always takes fresh ones.
   */
  private recentSnapshot(maxAgeMs: number): Promise<ProcessTable | undefined> {
    const now = this.options.clock.now();
    if (!this.shared || now - this.shared.at > maxAgeMs) this.shared = { at: now, table: this.snapshot() };
    return this.shared.table;
  }

  private freshSnapshot(also: AlsoRead = {}): Promise<ProcessTable | undefined> {
    this.shared = { at: this.options.clock.now(), table: this.snapshot(also) };
    return this.shared.table;
  }

  /**
   * Reads the process table once and grows every tracked tree from it. What the walk decides on is read now: the
   * server, each agent and each member (a member's parent, group or state may have changed); so is every process
   * started since the last read, and any pid in `also`. Others may be as first read (PosixPlatform.listProcesses).
   */
  private async snapshot(also: AlsoRead = {}): Promise<ProcessTable | undefined> {
    const fresh = new Set<number>([this.platform.selfPid, ...(also.fresh ?? [])]);
    for (const tree of this.trees) {
      fresh.add(tree.rootPid);
      for (const pid of tree.members.keys()) fresh.add(pid);
    }
    let list: ProcessInfo[];
    try {
      list = await this.platform.listProcesses({ fresh, ...(also.full ? { full: true } : {}) });
    } catch (error) {
      this.options.logger.warn(`cannot read the process table: ${(error as Error).message}`);
      return undefined;
    }
    const table = indexProcesses(list, this.platform.selfPid);
    for (const tree of this.trees) absorb(tree, table, this.platform.readEnvironment);
    return table;
  }

  private scheduleRefresh(): void {
    if (this.cancelRefresh) return;
    const every = this.options.treeRefreshMs ?? 1000;
    const tick = (): void => {
      this.cancelRefresh = undefined;
      if (this.trees.size === 0) return;
      if (!this.refreshing) {
        this.refreshing = true;
        void this.snapshot()
          .catch(() => undefined)
          .finally(() => {
            this.refreshing = false;
          });
      }
      this.scheduleRefresh();
    };
    this.cancelRefresh = this.options.clock.setTimer(tick, every);
  }
}
