/**
 * POSIX: spawning an agent as the leader of its own session, and following one an earlier server started (§6, §15.3).
 */
import type { ChildProcess } from "node:child_process";

import { outputFailure, spawnFailure } from "../failed-start.js";
import { followUntilGone } from "../follow.js";
import { closeStdio, collect, FileFollower, openStdio, stdioOf, type StdioFds } from "../output.js";
import type {
  AgentIdentity,
  AttachRequest,
  ChildHandle,
  KillReport,
  PosixPlatform,
  ProcessControlOptions,
  SpawnRequest,
} from "../types.js";
import { markerEntry, TREE_MARKER_VARIABLE } from "./marker.js";
import type { TrackedTree } from "./tracked-tree.js";
import type { TreeTracker } from "./tree-tracker.js";

/** Stands for a start time nobody recorded; equal to no real one. */
const UNKNOWN_START_TIME = "unknown";

export function startPosix(
  platform: PosixPlatform,
  tracker: TreeTracker,
  request: SpawnRequest,
  options: ProcessControlOptions,
): ChildHandle {
  // Every descendant inherits this variable unless it scrubs its environment,
  // which finds the ones that escaped the tree before a snapshot saw them.
  const markerValue = request.marker ?? options.newMarker();
  const spawned = spawnDetached(platform, request, markerValue);
  if ("failed" in spawned) return spawned.failed;
  const { child } = spawned;

  const pid = child.pid;
  const tree = pid === undefined ? undefined : tracker.track(pid, markerEntry(markerValue));
  let killing: Promise<KillReport> | undefined;
  const killTree = (): Promise<KillReport> => {
    if (!tree) return Promise.resolve({ signalled: 0, survivors: [] });
    killing ??= tracker.kill(tree);
    return killing;
  };

  const collected = collect(child, request, options, () => tree?.markRootExited());

  // After the agent exits, anything it left behind (a tool child in its own
  // session, a process holding stdout) is an orphan nobody can reach: stop it.
  const settled = collected.exited.then(async () => {
    if (!tree) return;
    // Let the job's outcome be answered first: this cleanup reads the process table.
    await new Promise<void>((resolve) => options.defer(resolve));
    await stopLeftovers(
      tracker,
      tree,
      () => killing,
      killTree,
      () => options.logger.info(`agent ${tree.rootPid} exited leaving processes behind; stopping them`),
    );
  });

  const identity = async (): Promise<AgentIdentity> => ({
    pid,
    ...(pid === undefined ? {} : { pgid: pid }),
    startTime: tree ? await tracker.startTimeOf(tree) : undefined,
    marker: markerValue,
  });
  return { pid, marker: markerValue, identity, exited: collected.exited, killTree, settled };
}

/** Opens the agent's files and spawns it detached, carrying its tree marker; a failed start is a finished handle. */
function spawnDetached(
  platform: PosixPlatform,
  request: SpawnRequest,
  markerValue: string,
): { child: ChildProcess } | { failed: ChildHandle } {
  let fds: StdioFds;
  try {
    fds = openStdio(request);
  } catch (error) {
    return { failed: outputFailure(error) };
  }
  try {
    // detached: the agent leads a new session and process group, so a group
    // signal never reaches this server.
    const child = platform.spawn(request.command, request.args, {
      cwd: request.cwd,
      env: { ...request.env, [TREE_MARKER_VARIABLE]: markerValue } as NodeJS.ProcessEnv,
      stdio: stdioOf(fds),
      detached: true,
      windowsHide: true,
    });
    return { child };
  } catch (error) {
    return { failed: spawnFailure(error, request.cwd) };
  } finally {
    closeStdio(fds);
  }
}

/** Once the agent is gone: waits for a kill under way, or stops what it left behind; then forgets the tree. */
async function stopLeftovers(
  tracker: TreeTracker,
  tree: TrackedTree,
  killing: () => Promise<KillReport> | undefined,
  killTree: () => Promise<KillReport>,
  onLeftovers: () => void = () => undefined,
): Promise<void> {
  try {
    const running = killing();
    if (running) {
      await running;
    } else if (await tracker.hasLiveMembers(tree)) {
      onLeftovers();
      await killTree();
    }
  } finally {
    tracker.untrack(tree);
  }
}

/**
 * Follows an agent an earlier server started: its output from the file, its
 * exit by polling the process table (it is not our child, so no exit event
 * comes), and its tree for kills, marker included.
 */
export function attachPosix(
  tracker: TreeTracker,
  request: AttachRequest & { pid: number },
  options: ProcessControlOptions,
): ChildHandle {
  // Without a recorded marker, one that no process carries.
  const marker = markerEntry(request.marker ?? `none-${options.newMarker()}`);
  // Without a recorded start time the pid itself is never taken into the tree (no start time
  // matches this one): only processes carrying the marker are, so a reused pid is never signalled.
  const tree = tracker.track(request.pid, marker, request.startTime ?? UNKNOWN_START_TIME);
  tree.attached = true;
  let killing: Promise<KillReport> | undefined;
  let killed: () => void = () => undefined;
  const killedSignal = new Promise<void>((resolve) => (killed = resolve));
  const killTree = (): Promise<KillReport> => {
    killing ??= tracker.kill(tree).then((report) => {
      // Undetermined: nothing was signalled, so a later kill tries again.
      if (report.undetermined) killing = undefined;
      else killed();
      return report;
    });
    return killing;
  };
  const follower = new FileFollower(request.output.stdoutPath, request.onStdout, options);
  const ready = follower.catchUp();
  // The first look reads the table afresh: a shared one may predate an agent spawned a moment ago
  // (another server's, just put on record), which would then be taken for gone and its tree stopped.
  let first = true;
  const isAlive = (): Promise<boolean | undefined> => {
    const fresh = first;
    first = false;
    return tracker.identify(request.pid, request.startTime, marker, fresh);
  };
  const exited = followUntilGone(request, options, follower, isAlive, killedSignal).then((exit) => {
    tree.markRootExited();
    return exit;
  });
  const settled = exited.then(() => stopLeftovers(tracker, tree, () => killing, killTree));
  return {
    pid: request.pid,
    marker: request.marker,
    identity: async () => ({ pid: request.pid, startTime: request.startTime, marker: request.marker }),
    exited,
    killTree,
    settled,
    ready,
  };
}
