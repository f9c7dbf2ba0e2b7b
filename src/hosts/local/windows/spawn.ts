/**
 * Windows: spawning an agent, following one an earlier server started, and killing a tree with taskkill (§6, §15.3).
 */
import type { ChildProcess } from "node:child_process";
import path from "node:path";

import { sleep } from "../../../core/clock.js";
import { outputFailure, spawnFailure } from "../failed-start.js";
import { followUntilGone } from "../follow.js";
import { closeStdio, collect, FileFollower, openStdio, stdioOf, type Collected, type StdioFds } from "../output.js";
import type {
  AttachRequest,
  ChildHandle,
  KillReport,
  ProcessControlOptions,
  SpawnRequest,
  WindowsPlatform,
} from "../types.js";
import { resolveWindowsInvocation, systemRoot } from "./resolve.js";

export function startWindows(
  platform: WindowsPlatform,
  request: SpawnRequest,
  options: ProcessControlOptions,
): ChildHandle {
  let child: ChildProcess;
  let fds: StdioFds | undefined;
  try {
    const invocation = resolveWindowsInvocation(request.command, request.args, platform);
    try {
      fds = openStdio(request);
    } catch (error) {
      return outputFailure(error);
    }
    child = platform.spawn(invocation.command, invocation.args, {
      cwd: request.cwd,
      env: request.env as NodeJS.ProcessEnv,
      stdio: stdioOf(fds),
      windowsHide: true,
      windowsVerbatimArguments: invocation.verbatim,
    });
  } catch (error) {
    return spawnFailure(error, request.cwd);
  } finally {
    closeStdio(fds);
  }

  const pid = child.pid;
  let killing: Promise<KillReport> | undefined;
  let collected: Collected | undefined;
  const killTree = (): Promise<KillReport> => {
    killing ??= killWindowsTree(platform, pid, () => collected?.hasExited() ?? true, options);
    return killing;
  };
  collected = collect(child, request, options, () => undefined);
  const settled = collected.exited.then(async () => {
    if (killing) await killing;
  });
  return {
    pid,
    marker: undefined,
    identity: async () => ({ pid, startTime: undefined, marker: undefined }),
    exited: collected.exited,
    killTree,
    settled,
  };
}

export function attachWindows(
  platform: WindowsPlatform,
  request: AttachRequest & { pid: number },
  options: ProcessControlOptions,
): ChildHandle {
  let killing: Promise<KillReport> | undefined;
  let gone = false;
  let killed: () => void = () => undefined;
  const killedSignal = new Promise<void>((resolve) => (killed = resolve));
  const killTree = (): Promise<KillReport> => {
    killing ??= killWindowsTree(platform, request.pid, () => gone, options).finally(killed);
    return killing;
  };
  const follower = new FileFollower(request.output.stdoutPath, request.onStdout, options);
  const ready = follower.catchUp();
  const exited = followUntilGone(
    request,
    options,
    follower,
    async () => platform.isRunning(request.pid),
    killedSignal,
  ).then((exit) => {
    gone = true;
    return exit;
  });
  const settled = exited.then(async () => {
    if (killing) await killing;
  });
  return {
    pid: request.pid,
    marker: undefined,
    identity: async () => ({ pid: request.pid, startTime: undefined, marker: undefined }),
    exited,
    killTree,
    settled,
    ready,
  };
}

/** taskkill /T walks the tree by parent pid; /F because console agents ignore a polite close. */
export async function killWindowsTree(
  platform: WindowsPlatform,
  pid: number | undefined,
  hasExited: () => boolean,
  options: ProcessControlOptions,
): Promise<KillReport> {
  if (pid === undefined) return { signalled: 0, survivors: [] };
  const taskkill = path.win32.join(systemRoot(platform.env), "System32", "taskkill.exe");
  let exitCode: number | null = null;
  try {
    ({ exitCode } = await platform.runFile(taskkill, ["/pid", String(pid), "/T", "/F"]));
  } catch (error) {
    options.logger.warn(`taskkill failed: ${(error as Error).message}`);
  }
  // 128: no such process, which is what we wanted.
  if (exitCode === 0 || exitCode === 128) return { signalled: 1, survivors: [] };
  await sleep(options.clock, options.killPollMs ?? 100);
  return { signalled: 1, survivors: hasExited() ? [] : [pid] };
}
