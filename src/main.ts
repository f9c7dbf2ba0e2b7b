#!/usr/bin/env node
/**
 * Wiring: the only file that touches process.* (argv, env, stdio, signals,
 * exit). With arguments it is the human CLI (§17); without, it reads the
 * configuration, builds the real dependencies, takes over the jobs of dead
 * servers, serves stdio, and shuts down as PROTOCOL.md §3 describes.
 */
import { statfsSync } from "node:fs";
import { availableParallelism, homedir } from "node:os";
import path from "node:path";

import { createAgents } from "./agent/launcher.js";
import { claudeConfigDir, listClaudeSessions } from "./runtimes/claude/index.js";
import { AGENT_NAMES, runtimeFor } from "./runtimes/index.js";
import type { AgentSpec, AgentToAttach } from "./agent/types.js";
import { memoryPersistence } from "./jobs/memory.js";
import { OnDoneCommands } from "./jobs/on-done.js";
import { hasProcessTable, ownLinuxStartTime } from "./hosts/local/self.js";
import { systemClock } from "./core/clock.js";
import { DEPTH_VARIABLE, loadConfig, offeredAgents, programOf, type Config } from "./config.js";
import { checkDirectory, resolveRoots } from "./hosts/local/directory.js";
import { createRequestHandler } from "./server/handler.js";
import { JobRegistry } from "./jobs/registry.js";
import { createLogger, type Logger } from "./core/log.js";
import { admitAgent, type Policy } from "./agent/policy.js";
import type { AttachRequest, ChildHandle, ProcessControl, SpawnRequest } from "./hosts/local/index.js";
import { StateStore } from "./store/state-store.js";
import { StateError, type ProcessIdentity } from "./store/records.js";
import { createTextFile, readFileRange } from "./store/atomic.js";
import { createMessageWriter, serveStdio } from "./server/stdio.js";
import { GitWorktrees } from "./worktrees/git-worktrees.js";
import { retireWorktree } from "./worktrees/retire.js";
import { SERVER_NAME, SERVER_VERSION } from "./core/version.js";

/** After the kill grace, this long for responses to be written before we exit anyway. */
const SHUTDOWN_SLACK_MS = 2000;
/** Transcript kept per job for claude_output, and across all finished jobs (§5.7). */
const FINISHED_TRANSCRIPT_CHARS = 32_000_000;
const TRANSCRIPT_CHARS = 2_000_000;

/**
 * The process layer and child_process load when the first job starts, not at
 * startup: `initialize` does not need them (BENCHMARKS.md (a)).
 */
async function loadProcessControl(
  options: Omit<Parameters<typeof import("./hosts/local/index.js").createProcessControl>[0], "platform" | "newMarker" | "defer">,
): Promise<ProcessControl> {
  const layer = await import("./hosts/local/index.js");
  const platform = await layer.createLocalPlatform({
    platform: process.platform,
    pid: process.pid,
    env: process.env,
    execPath: process.execPath,
    kill: (pid, signal) => void process.kill(pid, signal),
  });
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

/** The command line reads the kill grace like the server, but an invalid configuration must not stop a kill. */
function cliKillGraceMs(): number {
  try {
    return loadConfig(process.env, hostFacts()).killGraceMs;
  } catch {
    return 3000;
  }
}

/** The host as loadConfig needs it. */
function hostFacts(): Parameters<typeof loadConfig>[1] {
  return { pathDelimiter: path.delimiter, cpus: availableParallelism(), platform: process.platform, home: homedir() };
}

/**
 * This server as its records name it, with its start time so that a later
 * server can tell it from a process that reused its pid: from /proc on Linux,
 * from the process table (ps) elsewhere on POSIX, none on Windows.
 */
async function ownIdentity(processControl: () => Promise<ProcessControl>): Promise<ProcessIdentity> {
  if (!hasProcessTable(process.platform)) return { pid: process.pid };
  const startTime = ownLinuxStartTime(process.platform) ?? (await (await processControl()).startTimeOf(process.pid));
  return startTime ? { pid: process.pid, start_time: startTime } : { pid: process.pid };
}


function openState(config: Config): StateStore {
  const store = new StateStore(config.stateDir, { uid: process.getuid?.(), randomName: () => crypto.randomUUID() });
  try {
    store.open();
  } catch (error) {
    if (!(error instanceof StateError)) throw error;
    process.stderr.write(`claude-dispatch: ${error.message}\n`);
    process.exit(2);
  }
  return store;
}

/**
 * `claude-dispatch approver`: the MCP server a job's agent asks for permission (§18). Not a command for
 * people: the server names it in each agent's MCP configuration. It ends with its stdin or a signal.
 */
async function serveApprover(args: string[]): Promise<void> {
  const { approvalFilesOf, createApprover, parseApproverArgs } = await import("./approver/approver.js");
  const parsed = parseApproverArgs(args);
  if (!parsed) {
    process.stderr.write("claude-dispatch: usage: claude-dispatch approver --state-dir=DIR --wait-ms=N JOB_ID (started by the server for each agent)\n");
    process.exit(2);
  }
  const { jobId } = parsed;
  const logger = createLogger(process.stderr, "warn");
  const store = new StateStore(parsed.stateDir, { uid: process.getuid?.(), randomName: () => crypto.randomUUID() });
  const handle = createApprover({
    jobId,
    clock: systemClock,
    logger,
    waitMs: parsed.waitMs,
    files: approvalFilesOf(store, jobId),
  });
  const server = serveStdio({ input: process.stdin, writer: createMessageWriter(process.stdout, logger), handle, logger });
  // The agent closes our stdin, or sends SIGINT, when it ends; a request still open stays on file, unanswered.
  void server.ended.then(() => process.exit(0));
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(signal, () => process.exit(0));
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === "approver") return serveApprover(args.slice(1));
  if (args.length > 0) {
    const { runCli } = await import("./cli/index.js");
    process.exitCode = await runCli(args, {
      env: process.env,
      host: hostFacts(),
      stdout: process.stdout,
      stderr: process.stderr,
      stdoutIsTerminal: process.stdout.isTTY === true,
      // What `sessions` lists without a DIR.
      cwd: process.cwd(),
      clock: systemClock,
      processControl: (logger) => loadProcessControl({ clock: systemClock, logger, killGraceMs: cliKillGraceMs() }),
      // For the host configuration snippet `doctor` prints.
      nodePath: process.execPath,
      mainPath: path.resolve(process.argv[1] ?? "dist/main.js"),
      runFile: async (file, fileArgs, timeoutMs) => {
        const { execFile } = await import("node:child_process");
        return new Promise((resolve) => {
          execFile(file, fileArgs, { timeout: timeoutMs, windowsHide: true, maxBuffer: 1024 * 1024 }, (error, stdout, stderr) =>
            resolve({ ok: !error, stdout, stderr, error: error?.message }),
          );
        });
      },
      // Names the CLI in a claim file when `kill` finishes the record of a dead server.
      uid: process.getuid?.(),
      randomName: () => crypto.randomUUID(),
      identity: () => {
        const startTime = ownLinuxStartTime(process.platform);
        return startTime ? { pid: process.pid, start_time: startTime } : { pid: process.pid };
      },
    });
    // A command is done when it returns, even if processes that survived a kill are still being watched.
    setTimeout(() => process.exit(), 1000).unref();
    return;
  }
  if (process.stdin.isTTY) {
    // The same absolute `claude mcp add` line as doctor's; cli.js is loaded only here, so a host's start is no slower.
    const { terminalHint } = await import("./cli/index.js");
    process.stderr.write(terminalHint({ nodePath: process.execPath, mainPath: path.resolve(process.argv[1] ?? "dist/main.js"), platform: process.platform }, process.env));
  }
  await serve();
}

/** The configuration and the resolved roots, or exit 2 with the reason (§11). */
async function readConfig(): Promise<{ config: Config; roots: string[] | undefined }> {
  try {
    const config = loadConfig(process.env, hostFacts());
    return { config, roots: config.roots ? await resolveRoots(config.roots) : undefined };
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    process.stderr.write(`claude-dispatch: ${error.message}\n`);
    process.exit(2);
  }
}

/** This machine as the host agents run on; the process layer loads with the first job (BENCHMARKS.md (a)). */
function lazyLocalHost(config: Config, logger: Logger) {
  let processes: ProcessControl | undefined;
  let loading: Promise<ProcessControl> | undefined;
  const processControl = (): Promise<ProcessControl> => {
    loading ??= loadProcessControl({ clock: systemClock, logger, killGraceMs: config.killGraceMs }).then((loaded) => (processes = loaded));
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

type LocalHost = ReturnType<typeof lazyLocalHost>;

/** Worktrees on this machine (§19); git's runner, and child_process with it, load at the first git call. */
function localWorktrees(config: Config): GitWorktrees {
  let runner: ReturnType<typeof import("./hosts/local/git.js").createGitRunner> | undefined;
  return new GitWorktrees({
    git: async (args, env) => {
      runner ??= (await import("./hosts/local/git.js")).createGitRunner(process.env, process.platform);
      return runner(args, env);
    },
    root: config.worktreeDir ?? path.join(config.stateDir, "worktrees"),
    branchPrefix: "dispatch/",
  });
}

/** The job registry on the state directory, or in memory for a server at the depth limit (§7.4). */
async function createJobs(
  config: Config,
  policy: Policy,
  roots: string[] | undefined,
  store: StateStore | undefined,
  host: LocalHost,
  worktrees: GitWorktrees,
  logger: Logger,
): Promise<JobRegistry> {
  // One launcher per runtime, made when first needed: a job taken over may name an agent no longer offered (§7).
  const launchers = new Map<string, ReturnType<typeof createAgents>>();
  const launcherFor = (name: string | undefined): ReturnType<typeof createAgents> => {
    const key = name ?? "claude";
    let launcher = launchers.get(key);
    if (!launcher) {
      const runtime = runtimeFor(key, programOf(config, key));
      launcher = createAgents({
        runtime,
        host,
        files: { readRange: readFileRange, create: createTextFile, freeBytes: freeBytesOf, folderOf: (file) => path.dirname(file) },
        // Each agent sees one more level of dispatch, so a copy of this server inside it knows (§7.4).
        env: runtime.environment(process.env, { [DEPTH_VARIABLE]: String(config.depth + 1) }),
        maxLineBytes: config.maxOutputBytes,
        transcriptChars: TRANSCRIPT_CHARS,
        stderrTailBytes: 64 * 1024,
        onMalformedLine: (line) => logger.warn(`skipped a line of agent output that is not JSON: ${line.slice(0, 200)}`),
      });
      launchers.set(key, launcher);
    }
    return launcher;
  };
  const agents = { launch: (spec: AgentSpec) => launcherFor(spec.agent).launch(spec), attach: (agent: AgentToAttach) => launcherFor(agent.runtime).attach(agent) };
  const owner = store ? await ownIdentity(host.processControl) : undefined;
  // Both load the process layer on first use: only unfinished records need them (BENCHMARKS.md (a)).
  const isAlive = async (named: ProcessIdentity & { tree_marker?: string }) => (await host.processControl()).isAlive(named.pid, named.start_time, named.tree_marker);
  const replayReader = (id: string, from: StateStore, runtime: string | undefined) =>
    runtimeFor(runtime, programOf(config, runtime ?? "claude")).createReader({
      maxLineBytes: config.maxOutputBytes,
      transcriptChars: TRANSCRIPT_CHARS,
      onOverflow: () => undefined,
      source: from.outputSource(id),
    });
  return new JobRegistry({
    launch: agents.launch,
    ...(config.onDone ? { onDone: new OnDoneCommands({ argv: config.onDone, host, env: process.env, clock: systemClock, logger }) } : {}),
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
          isAlive,
          findMarked: async (marker) => (await host.processControl()).findMarked(marker),
          admit: async (spec) => ({ ...spec, ...(await admitAgent(spec.cwd, spec.options ?? {}, policy, (dir) => checkDirectory(dir, roots), spec.agent)) }),
          // Any agent's job is followed with its own runtime, offered or not (a queued one is admitted again, §15.3).
          runtimes: AGENT_NAMES,
          // A pruned job's worktree goes with it unless it holds changes nobody merged or discarded (§19).
          beforeRemove: (id) => {
            const worktree = store.read(id)?.worktree;
            if (!worktree) return;
            retireWorktree(worktrees, worktree)
              .then((fate) => logger.info(`job ${id} pruned; its worktree ${worktree.path} was ${fate === "kept" ? "kept: it has unmerged changes" : "removed"}`))
              .catch((error: unknown) => logger.warn(`job ${id} pruned; its worktree ${worktree.path}: ${(error as Error).message}`));
          },
          // Each agent asks this same program, in its approver mode, whenever it would have prompted (§18).
          approvals: config.approvals === "forward",
          approver: (jobId) =>
            config.approvals === "forward"
              ? {
                  command: process.execPath,
                  args: [path.resolve(process.argv[1] ?? "dist/main.js"), "approver", `--state-dir=${store.root}`, `--wait-ms=${config.approvalTimeoutMs}`, jobId],
                  waitMs: config.approvalTimeoutMs,
                }
              : undefined,
        },
  });
}

async function serve(): Promise<void> {
  const { config, roots } = await readConfig();
  const policy = { ...config.policy, roots, agents: offeredAgents(config, process.env, process.platform) };
  // At or above the depth limit no tool runs (§7.4), so the state directory is not touched at all: a copy of
  // this server inside a dispatched agent must never restore, adopt, claim or write its parent's jobs.
  const gated = config.depth >= config.maxDepth;
  const store = gated ? undefined : openState(config);
  const logger = createLogger(process.stderr, config.logLevel);
  const host = lazyLocalHost(config, logger);
  const worktrees = localWorktrees(config);
  const jobs = await createJobs(config, policy, roots, store, host, worktrees, logger);
  if (store) await restoreJobs(store, jobs, logger);
  const writer = createMessageWriter(process.stdout, logger);
  const handle = createRequestHandler({
    jobs,
    checkDirectory: (dir) => checkDirectory(dir, roots),
    notify: (notification) => void writer.write(notification),
    policy,
    maxResultChars: config.maxResultChars,
    heartbeatMs: config.heartbeatMs,
    clock: systemClock,
    logger,
    server: { name: SERVER_NAME, version: SERVER_VERSION },
    depth: { current: config.depth, max: config.maxDepth },
    jobRetentionMs: config.jobRetentionMs,
    ...(store ? { worktrees: { policy: config.worktree, git: worktrees } } : {}),
    // Claude Code's own store of sessions, where the agents this server starts keep theirs (§20).
    sessions: (cwd: string, limit: number) => listClaudeSessions({ configDir: claudeConfigDir(process.env, homedir()), cwd, limit }),
  });
  const server = serveStdio({ input: process.stdin, writer, handle, logger, maxLineBytes: config.maxLineBytes });
  if (gated) logger.warn(`depth ${config.depth} reaches CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: no tools are offered`);
  logger.info(`${SERVER_NAME} ${SERVER_VERSION} ready (agents: ${policy.agents.map((agent) => agent.name).join(", ")})`);
  installShutdown({ config, jobs, host, server, writer, logger });
}

/** Shutdown as §3 describes: on end of stdin, a signal, or an internal error. */
function installShutdown(parts: {
  config: Config;
  jobs: JobRegistry;
  host: LocalHost;
  server: ReturnType<typeof serveStdio>;
  writer: ReturnType<typeof createMessageWriter>;
  logger: Logger;
}): void {
  const { config, jobs, host, server, writer, logger } = parts;
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
    // keep: agents run on and the next server follows them (§15.3); kill: stop them all now.
    if (config.onExit === "keep") {
      await jobs.leave();
    } else {
      await jobs.shutdown();
      await (await host.loaded())?.idle();
    }
    // Runs and waits on the killed jobs now answer; give their responses a moment to be written.
    let cancelSlack = (): void => undefined;
    await Promise.race([server.idle(), new Promise<void>((resolve) => (cancelSlack = systemClock.setTimer(resolve, SHUTDOWN_SLACK_MS)))]);
    cancelSlack();
    await writer.flush();
    process.exit(finalExitCode);
  };
  void server.ended.then(() => shutdown("stdin closed"));
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    process.on(signal, () => void shutdown(signal));
  }
  // A bug ends this server, not the agents: with ON_EXIT=keep the next server follows them, else they are killed.
  const crash = (error: unknown): void => {
    logger.error(`internal error: ${(error as Error)?.stack ?? String(error)}`);
    void shutdown("internal error", 1);
  };
  process.on("uncaughtException", crash);
  process.on("unhandledRejection", crash);
}

/**
 * Takes over what servers that are gone left in the state directory (§15.3),
 * before the first request is read: claude_wait on an old job id must find it.
 */
async function restoreJobs(store: StateStore, jobs: JobRegistry, logger: Logger): Promise<void> {
  // Finished jobs come from the index: their records are read when asked for, not at startup (§15.5).
  const { records, skipped, finished } = store.loadForStartup();
  for (const { id, reason } of skipped) logger.warn(`state: job ${id} skipped: ${reason}`);
  jobs.rememberFinished(finished);
  await jobs.restore(records);
}

main().catch((error: unknown) => {
  // Before the handlers of serve() exist (say, the takeover at startup failed): say why, exit 1.
  process.stderr.write(`claude-dispatch: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exit(1);
});
