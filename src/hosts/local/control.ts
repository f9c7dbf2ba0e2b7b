/**
 * The process layer as the rest of the server sees it (§6, §15.4): start, attach, liveness and idle, over
 * the POSIX or Windows branch of the injected platform.
 */
import { outputOnly } from "./follow.js";
import { markerEntry } from "./posix/marker.js";
import { attachPosix, startPosix } from "./posix/spawn.js";
import { TreeTracker } from "./posix/tree-tracker.js";
import type {
  AttachRequest,
  ChildHandle,
  ProcessControl,
  ProcessControlOptions,
  SpawnRequest,
  WindowsPlatform,
} from "./types.js";
import { attachWindows, startWindows } from "./windows/spawn.js";

export function createProcessControl(options: ProcessControlOptions): ProcessControl {
  const { platform } = options;
  const pending = new Set<Promise<void>>();
  const tracker = platform.kind === "posix" ? new TreeTracker(platform, options) : undefined;

  function remember(handle: ChildHandle): ChildHandle {
    const settled = handle.settled.finally(() => pending.delete(settled));
    pending.add(settled);
    return handle;
  }

  function start(request: SpawnRequest): ChildHandle {
    return remember(
      platform.kind === "posix" && tracker
        ? startPosix(platform, tracker, request, options)
        : startWindows(platform as WindowsPlatform, request, options),
    );
  }

  function attach(request: AttachRequest): ChildHandle {
    const pid = request.pid;
    return remember(
      pid === undefined
        ? outputOnly(request, options)
        : platform.kind === "posix" && tracker
          ? attachPosix(tracker, { ...request, pid }, options)
          : attachWindows(platform as WindowsPlatform, { ...request, pid }, options),
    );
  }

  async function isAlive(pid: number, startTime: string | undefined, marker?: string): Promise<boolean | undefined> {
    if (platform.kind === "windows") return platform.isRunning(pid);
    // A fresh read: these answers decide takeovers, and a table read before a process died would keep it alive.
    return tracker?.identify(pid, startTime, marker === undefined ? undefined : markerEntry(marker), true);
  }

  async function idle(): Promise<void> {
    while (pending.size > 0) await Promise.allSettled([...pending]);
  }

  async function startTimeOf(pid: number): Promise<string | undefined> {
    return platform.kind === "posix" ? tracker?.startTimeOfPid(pid) : undefined;
  }

  async function findMarked(marker: string): Promise<{ pid: number; startTime: string } | null | undefined> {
    if (platform.kind === "windows") return undefined;
    return tracker?.findMarked(markerEntry(marker));
  }

  async function isOwnTree(pid: number, startTime: string | undefined): Promise<boolean | undefined> {
    return tracker?.isOwnTree(pid, startTime);
  }

  return { start, attach, isAlive, startTimeOf, findMarked, isOwnTree, idle };
}
