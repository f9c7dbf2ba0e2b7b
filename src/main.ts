#!/usr/bin/env node
/**
 * Wiring: the only file that touches process.* (argv, env, stdio, signals,
 * exit). It reads the configuration, builds the real dependencies, serves
 * stdio, and shuts down as PROTOCOL.md §3 describes.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import path from "node:path";

import { agentEnvironment, createClaudeLauncher } from "./claude.js";
import { systemClock } from "./clock.js";
import { DEPTH_VARIABLE, loadConfig } from "./config.js";
import { checkDirectory, resolveRoots } from "./directory.js";
import { createRequestHandler } from "./handler.js";
import { JobRegistry } from "./jobs.js";
import { createLogger } from "./log.js";
import type { ChildHandle, Platform, ProcessControl, SpawnRequest } from "./process.js";
import { createMessageWriter, serveStdio } from "./stdio.js";
import { SERVER_NAME, SERVER_VERSION } from "./version.js";

/** After the kill grace, this long for responses to be written before we exit anyway. */
const SHUTDOWN_SLACK_MS = 2000;
/** Transcript kept per job for claude_output, and across all finished jobs (§5.7). */
const FINISHED_TRANSCRIPT_CHARS = 32_000_000;
const TRANSCRIPT_CHARS = 2_000_000;

/**
 * The process layer and child_process load when the first job starts, not at
 * startup: `initialize` does not need them (BENCHMARKS.md (a)).
 */
async function loadProcessControl(options: Omit<Parameters<typeof import("./process.js").createProcessControl>[0], "platform">): Promise<ProcessControl> {
  const [{ execFile, spawn }, layer] = await Promise.all([import("node:child_process"), import("./process.js")]);
  const runFile = (file: string, args: readonly string[]): Promise<{ exitCode: number | null; stdout: string }> =>
    new Promise((resolve, reject) => {
      execFile(file, args, { windowsHide: true, maxBuffer: 64 * 1024 * 1024 }, (error, stdout) => {
        if (error && typeof error.code !== "number") return reject(error);
        resolve({ exitCode: error ? (error.code as number) : 0, stdout });
      });
    });
  let platform: Platform;
  if (process.platform === "win32") {
    platform = {
      kind: "windows",
      spawn,
      runFile,
      env: process.env,
      fileExists: (file) => {
        try {
          return statSync(file).isFile();
        } catch {
          return false;
        }
      },
      readTextFile: (file) => (existsSync(file) ? readFileSync(file, "utf8") : undefined),
      nodePath: process.execPath,
    };
  } else {
    const linux = process.platform === "linux";
    platform = {
      kind: "posix",
      spawn,
      // By absolute path, like every program we run ourselves: PATH is the caller's to change.
      listProcesses: linux ? () => layer.listLinuxProcesses() : async () => layer.parsePsOutput((await runFile("/bin/ps", layer.PS_ARGS)).stdout),
      signal: (pid, signal) => void process.kill(pid, signal),
      selfPid: process.pid,
      ...(linux ? { readEnvironment: (pid: number) => layer.readLinuxEnvironment(pid) } : {}),
    };
  }
  return layer.createProcessControl({ ...options, platform });
}

/** A child handle for a start that waits on the process layer to load. */
function deferredChild(pending: Promise<ChildHandle>): ChildHandle {
  return {
    pid: undefined,
    exited: pending.then((handle) => handle.exited),
    killTree: () => pending.then((handle) => handle.killTree()),
    settled: pending.then(
      (handle) => handle.settled,
      () => undefined,
    ),
  };
}

async function main(): Promise<void> {
  let config;
  let roots: string[] | undefined;
  try {
    config = loadConfig(process.env, path.delimiter, availableParallelism());
    roots = config.roots ? await resolveRoots(config.roots) : undefined;
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    process.stderr.write(`claude-dispatch: ${error.message}\n`);
    process.exit(2);
  }
  const policy = { ...config.policy, roots };

  const logger = createLogger(process.stderr, config.logLevel);
  const clock = systemClock;
  let processes: ProcessControl | undefined;
  let loadingProcesses: Promise<ProcessControl> | undefined;
  const startChild = (request: SpawnRequest): ChildHandle => {
    if (processes) return processes.start(request);
    loadingProcesses ??= loadProcessControl({ clock, logger, killGraceMs: config.killGraceMs }).then((loaded) => (processes = loaded));
    return deferredChild(loadingProcesses.then((loaded) => loaded.start(request)));
  };
  const launch = createClaudeLauncher({
    start: startChild,
    bin: config.claudeBin,
    // Each agent sees one more level of dispatch, so a copy of this server inside it knows (§7.4).
    env: agentEnvironment(process.env, { [DEPTH_VARIABLE]: String(config.depth + 1) }),
    maxLineBytes: config.maxOutputBytes,
    transcriptChars: TRANSCRIPT_CHARS,
    stderrTailBytes: 64 * 1024,
    onMalformedLine: (line) => logger.warn(`skipped a line of agent output that is not JSON: ${line.slice(0, 200)}`),
  });
  const jobs = new JobRegistry({
    launch,
    clock,
    // The global Web Crypto: node:crypto is not loaded before a job needs an id.
    newId: () => crypto.randomUUID(),
    logger,
    retentionMs: config.jobRetentionMs,
    maxFinishedJobs: 1000,
    finishedTranscriptChars: FINISHED_TRANSCRIPT_CHARS,
    maxRunning: config.maxJobs,
  });
  const writer = createMessageWriter(process.stdout, logger);
  const handle = createRequestHandler({
    jobs,
    checkDirectory: (dir) => checkDirectory(dir, roots),
    notify: (notification) => void writer.write(notification),
    policy,
    maxResultChars: config.maxResultChars,
    heartbeatMs: config.heartbeatMs,
    clock,
    logger,
    server: { name: SERVER_NAME, version: SERVER_VERSION },
    depth: { current: config.depth, max: config.maxDepth },
    jobRetentionMs: config.jobRetentionMs,
  });
  const server = serveStdio({ input: process.stdin, writer, handle, logger, maxLineBytes: config.maxLineBytes });

  if (config.depth >= config.maxDepth) {
    logger.warn(`depth ${config.depth} reaches CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: no tools are offered`);
  }
  logger.info(`${SERVER_NAME} ${SERVER_VERSION} ready (claude: ${config.claudeBin})`);

  let shuttingDown = false;
  let finalExitCode = 0;
  const shutdown = async (reason: string, exitCode = 0): Promise<void> => {
    // A crash during a shutdown already under way still makes the exit code 1.
    finalExitCode = Math.max(finalExitCode, exitCode);
    if (shuttingDown) return;
    shuttingDown = true;
    logger.info(`shutting down: ${reason}`);
    // A backstop only: every step below is bounded, but the exit must be.
    setTimeout(() => {
      logger.error("shutdown took too long; exiting");
      process.exit(1);
    }, config.killGraceMs + SHUTDOWN_SLACK_MS + 1000).unref();
    process.stdin.pause();
    await jobs.shutdown();
    await (await loadingProcesses?.catch(() => undefined))?.idle();
    // Runs and waits on the killed jobs now answer; give their responses a moment to be written.
    let cancelSlack = (): void => undefined;
    await Promise.race([server.idle(), new Promise<void>((resolve) => (cancelSlack = clock.setTimer(resolve, SHUTDOWN_SLACK_MS)))]);
    cancelSlack();
    await writer.flush();
    process.exit(finalExitCode);
  };

  void server.ended.then(() => shutdown("stdin closed"));
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    process.on(signal, () => void shutdown(signal));
  }
  // A bug must not leave detached agents running with nobody to stop them: kill them, then exit.
  const crash = (error: unknown): void => {
    logger.error(`internal error: ${(error as Error)?.stack ?? String(error)}`);
    void shutdown("internal error", 1);
  };
  process.on("uncaughtException", crash);
  process.on("unhandledRejection", crash);
}

void main();
