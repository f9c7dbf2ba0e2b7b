#!/usr/bin/env node
/**
 * Wiring: the only file that touches process.* (argv, env, stdio, signals,
 * exit). With arguments it is the human CLI (§17); without, it reads the
 * configuration, builds the real dependencies, takes over the jobs of dead
 * servers, serves stdio, and shuts down as PROTOCOL.md §3 describes.
 */
import { readFileSync, realpathSync } from "node:fs";
import { availableParallelism, homedir } from "node:os";
import path from "node:path";

import { systemClock } from "./core/clock.js";
import { agentsAtStart, checkConfig, hostOffers, loadConfig, offeredAgents, programOf, type Config } from "./config.js";
import { thisMachine } from "./hosts/local/machine.js";
import type { ThisMachine } from "./agent/machine.js";
import type { JobRegistry } from "./jobs/registry.js";
import { createLogger, type Logger } from "./core/log.js";
import type { StateStore } from "./store/state-store.js";
import { StateError } from "./store/records.js";
import { openFolders, stateFolders } from "./store/ownership.js";
import { createMessageWriter, serveStdio } from "./server/stdio.js";
import { SERVER_NAME, SERVER_VERSION } from "./core/version.js";
import type { HostSet } from "./wiring/hosts.js";
import type { Loaders } from "./wiring/loaders.js";
import type { Machine } from "./wiring/machine.js";
import type { Carrying } from "./wiring/carrying.js";
import type { HeldEndpoint } from "./wiring/approvals-endpoint.js";
import type { Policy } from "./agent/policy.js";
import { frontDoor, type OpeningFacts } from "./server/opening.js";

/** After the kill grace, this long for responses to be written before we exit anyway. */
const SHUTDOWN_SLACK_MS = 2000;

/**
 * This program's main.js, links resolved: run through npx or a package manager's bin link, the path a host
 * configuration or a carrier is given is the installed file itself, not the link in a cache.
 */
function entryPoint(): string {
  const named = path.resolve(process.argv[1] ?? "dist/main.js");
  try {
    return realpathSync(named);
  } catch {
    return named;
  }
}

/** The process, as the wiring needs it. */
function machine(): Machine {
  return {
    env: process.env,
    platform: process.platform,
    pid: process.pid,
    execPath: process.execPath,
    mainPath: entryPoint(),
    kill: (pid, signal) => void process.kill(pid, signal),
  };
}

/** Everything past the opening: loaded while the front door answers `initialize` (BENCHMARKS.md (a)). */
const serving = () => import("./wiring/serving.js");
type Serving = Awaited<ReturnType<typeof serving>>;

/** The modules loaded on first use: the one place that imports them dynamically (BENCHMARKS.md (a)). */
const loaders: Loaders = {
  processes: () => import("./hosts/local/index.js"),
  git: () => import("./hosts/local/git.js"),
  runtimes: () => import("./runtimes/all.js"),
  remoteHosts: () => import("./wiring/remote-hosts.js"),
};

/** The command line reads the kill grace like the server, but an invalid configuration must not stop a kill. */
function cliKillGraceMs(): number {
  try {
    return loadConfig(process.env, here()).killGraceMs;
  } catch {
    return 3000;
  }
}

/** This machine, as the configuration and the command line know it. */
function here(): ThisMachine {
  return thisMachine({
    platform: process.platform,
    home: homedir(),
    pathDelimiter: path.delimiter,
    cpus: availableParallelism(),
    readTextFile: (file) => readFileSync(file, "utf8"),
  });
}

/** Makes the state directory's folders, or checks that they are ours (§15.1); if it cannot, says why and exits 2. */
function openStateFolders(stateDir: string): void {
  try {
    openFolders(stateDir, stateFolders(stateDir), process.getuid?.());
  } catch (error) {
    if (!(error instanceof StateError)) throw error;
    process.stderr.write(`claude-dispatch: ${error.message}\n`);
    process.exit(2);
  }
}

/** The state directory's store, its folders opened first; the module loads only here, after the opening. */
async function openState(stateDir: string): Promise<StateStore> {
  openStateFolders(stateDir);
  const { StateStore } = await import("./store/state-store.js");
  return new StateStore(stateDir, { uid: process.getuid?.(), randomName: () => crypto.randomUUID() });
}

/**
 * `claude-dispatch approver`: the MCP server a job's agent asks for permission (§18). Not a command for
 * people: the server names it in each agent's MCP configuration. It ends with its stdin or a signal.
 */
async function serveApprover(args: string[]): Promise<void> {
  const { approvalFilesOf, createApprover, parseApproverArgs } = await import("./approver/approver.js");
  const parsed = parseApproverArgs(args);
  if (!parsed) {
    process.stderr.write(
      "claude-dispatch: usage: claude-dispatch approver [--state-dir=DIR] --wait-ms=N JOB_ID (started by the server " +
        "for each agent)\n",
    );
    process.exit(2);
  }
  const { jobId } = parsed;
  const logger = createLogger(process.stderr, "warn");
  const stateDir = parsed.stateDir ?? here().stateDirectory(process.env);
  const { StateStore } = await import("./store/state-store.js");
  const store = new StateStore(stateDir, { uid: process.getuid?.(), randomName: () => crypto.randomUUID() });
  const approver = createApprover({
    jobId,
    clock: systemClock,
    logger,
    waitMs: parsed.waitMs,
    files: approvalFilesOf(store, jobId),
  });
  const server = serveStdio({
    input: process.stdin,
    writer: createMessageWriter(process.stdout, logger),
    handle: (message) => approver.handle(message),
    logger,
  });
  // The agent closes our stdin, or sends SIGINT, when it ends; a request still open stays on file, unanswered.
  void server.ended.then(() => process.exit(0));
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(signal, () => process.exit(0));
}

/**
 * `claude-dispatch remote [--state-dir=DIR]`: the far end of an SSH host (§21.3), run by ssh for one request on
 * its channel. Not a command for people. Its jobs are this machine's, in its state directory.
 */
async function serveRemoteEnd(args: string[]): Promise<void> {
  const stateDir =
    args.length === 1 && args[0]?.startsWith("--state-dir=") ? args[0].slice("--state-dir=".length) : undefined;
  if (args.length > (stateDir === undefined ? 0 : 1)) {
    process.stderr.write(
      "claude-dispatch: usage: claude-dispatch remote [--state-dir=DIR] (run over ssh by a server with " +
        "CLAUDE_DISPATCH_HOSTS)\n",
    );
    process.exit(2);
  }
  // The state directory is the one named, whatever this machine's environment says; agents stay when we go.
  const env = {
    ...process.env,
    ...(stateDir ? { CLAUDE_DISPATCH_STATE_DIR: stateDir } : {}),
    CLAUDE_DISPATCH_ON_EXIT: "keep",
  };
  let config: Config;
  try {
    config = { ...loadConfig(env, here()), approvals: "deny" };
  } catch (error) {
    const message = `claude-dispatch there: ${(error as Error).message}`;
    process.stdout.write(`${JSON.stringify({ type: "error", code: "HOST_FAILED", message })}\n`);
    process.exit(2);
  }
  const store = await openState(config.stateDir);
  const logger = createLogger(process.stderr, "warn");
  const [{ serveRemote }, { remoteSide }, { HostSet, localHost, lazyRuntimes, createJobs }] = await Promise.all([
    import("./hosts/remote/far-end.js"),
    import("./wiring/remote.js"),
    serving(),
  ]);
  // This machine only, anywhere: the roots are the ones each request names (§21.3).
  const hosts = new HostSet(localHost({ machine: machine(), config, roots: undefined, loaders, logger }));
  const runtimes = lazyRuntimes(loaders);
  await runtimes.load();
  const side = remoteSide({
    store,
    git: hosts.home.worktrees,
    worktreeRoot: config.worktreeDir ?? path.join(config.stateDir, "worktrees"),
    env: process.env,
    platform: process.platform,
    programOf: (agent) => programOf(config, agent),
    jobs: async (start) => {
      const jobs = await createJobs({
        machine: machine(),
        config,
        policy: { ...config.policy, roots: undefined, agents: offeredAgents(config, process.env, here()) },
        store,
        hosts,
        logger,
        runtimes,
        ...(start
          ? { remoteStart: { jobId: start.job_id, command: start.command, args: start.args, env: start.env } }
          : {}),
      });
      // Finished jobs are looked up by id when asked for; nothing else of the directory is taken over here.
      jobs.rememberFinished(store.loadForStartup().finished);
      return jobs;
    },
  });
  const code = await serveRemote(
    {
      input: process.stdin,
      write: (line) =>
        new Promise<void>(
          (resolve, reject) => void process.stdout.write(line, (error) => (error ? reject(error) : resolve())),
        ),
      clock: systemClock,
      logger,
    },
    side,
  );
  process.exit(code);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === "approver") return serveApprover(args.slice(1));
  if (args[0] === "remote") return serveRemoteEnd(args.slice(1));
  if (args[0] === "carrier") return serveCarrier(args.slice(1));
  if (args.length > 0) {
    const [{ runCli }, { loadProcessControl, createHosts, ownLinuxStartTime }] = await Promise.all([
      import("./cli/index.js"),
      serving(),
    ]);
    // A reader gone (`| head`) ends the command at once and quietly, as SIGPIPE ends other tools: 141 (§17).
    for (const stream of [process.stdout, process.stderr]) {
      stream.on("error", (error: NodeJS.ErrnoException) => process.exit(error.code === "EPIPE" ? 141 : 1));
    }
    const cliSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
    process.exitCode = await runCli(args, {
      env: process.env,
      machine: here(),
      stdout: process.stdout,
      stderr: process.stderr,
      stdoutIsTerminal: process.stdout.isTTY === true,
      terminalSize: () => ({ columns: process.stdout.columns, rows: process.stdout.rows }),
      // Read only by `jobs --watch` and `prune`: stdin is not opened for the other commands.
      get stdin() {
        return process.stdin;
      },
      trapInterrupts: (onInterrupt) => {
        for (const signal of cliSignals) process.on(signal, onInterrupt);
        return () => cliSignals.forEach((signal) => process.off(signal, onInterrupt));
      },
      // What `sessions` lists without a DIR.
      cwd: process.cwd(),
      clock: systemClock,
      processControl: (logger) =>
        loadProcessControl(machine(), loaders, { clock: systemClock, logger, killGraceMs: cliKillGraceMs() }),
      // For the host configuration snippet `doctor` prints.
      nodePath: process.execPath,
      mainPath: entryPoint(),
      runFile: async (file, fileArgs, timeoutMs) => {
        const { execFile } = await import("node:child_process");
        return new Promise((resolve) => {
          execFile(
            file,
            fileArgs,
            { timeout: timeoutMs, windowsHide: true, maxBuffer: 1024 * 1024 },
            (error, stdout, stderr) => resolve({ ok: !error, stdout, stderr, error: error?.message }),
          );
        });
      },
      hosts: async (processes) => {
        // The valid settings, as doctor checks them: another invalid one must not hide the hosts (§21.5).
        const { config } = checkConfig(process.env, here());
        const logger = createLogger(process.stderr, "warn");
        const roots = config.roots
          ? await here()
              .resolveRoots(config.roots)
              .catch(() => undefined)
          : undefined;
        return createHosts({
          machine: machine(),
          config,
          roots,
          loaders,
          logger,
          shareConnections: false,
          uid: process.getuid?.(),
          processes,
        });
      },
      startCarrier: async (stateDir, env) =>
        (await import("./hosts/local/detached.js")).startCarrierProcess({ ...machine(), stateDir, env }),
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
    process.stderr.write(
      terminalHint({ nodePath: process.execPath, mainPath: entryPoint(), shell: here().shell }, process.env),
    );
  }
  await serve();
}

/** The configuration and the resolved roots, or exit 2 with the reason (§11). */
async function readConfig(
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ config: Config; roots: string[] | undefined }> {
  try {
    const machine = here();
    const config = loadConfig(env, machine);
    return { config, roots: config.roots ? await machine.resolveRoots(config.roots) : undefined };
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    process.stderr.write(`claude-dispatch: ${error.message}\n`);
    process.exit(2);
  }
}

/**
 * V8 sizes a heap for throughput, not memory: under a steady load it grows the young generation to 32 MiB and keeps
 * it while busy, and lets the old one fill with garbage to several times what is live before collecting it. A
 * server's live heap is about 10 MiB and its work I/O, so both cost memory and buy nothing: RSS climbed 37% over
 * 1200 jobs with the defaults, 17% with these (BENCHMARKS.md (q)); (i) moved less than its noise. The node command
 * is the host's choice, so they are set here, for the server and the carrier; V8 reads both each time it sizes the
 * heap.
 */
async function keepHeapSmall(): Promise<void> {
  const v8 = await import("node:v8");
  v8.setFlagsFromString("--semi-space-growth-factor=1");
  v8.setFlagsFromString("--heap-growing-percent=20");
}

/** What a server and the carrier open before anything else loads: the state directory and the log. */
function openServer(config: Config, roots: string[] | undefined) {
  // At or above the depth limit no tool runs (§7.4), so the state directory is not touched at all: a copy of
  // this server inside a dispatched agent must never restore, adopt, claim or write its parent's jobs.
  const gated = config.depth >= config.maxDepth;
  if (!gated) openStateFolders(config.stateDir);
  const logger = createLogger(process.stderr, config.logLevel);
  return { config, roots, gated, logger };
}

/** What agents and hosts are offered: found on PATH after the server has answered what waited (§7.4). */
function policyOf(config: Config, roots: string[] | undefined, env: NodeJS.ProcessEnv): Policy {
  const offers = hostOffers(config);
  return {
    ...config.policy,
    roots,
    agents: offeredAgents(config, env, here()),
    ...(offers.length > 0 ? { hosts: offers } : {}),
  };
}
type Opened = ReturnType<typeof openServer>;

/** What a server and the carrier both run: the job registry on the state directory, and everything it needs. */
async function startJobs(parts: Serving, opened: Opened, env: NodeJS.ProcessEnv) {
  const { config, roots, gated, logger } = opened;
  const policy = policyOf(config, roots, env);
  const store = gated ? undefined : await openState(config.stateDir);
  // Settled once the process knows whether others share the directory (holdEndpoint).
  let endpoint: HeldEndpoint | undefined;
  const hosts = await parts.createHosts({
    machine: machine(),
    config,
    roots,
    loaders,
    logger,
    store,
    uid: process.getuid?.(),
    approvalEndpoint: (jobId) => endpoint?.addressOf(jobId),
  });
  const runtimes = parts.lazyRuntimes(loaders);
  const jobs = await parts.createJobs({ machine: machine(), config, policy, store, hosts, logger, runtimes });
  /** The state directory's approval endpoint (§18), held or stood by for; with no forwarding, none. */
  const holdEndpoint = async (carrying: Carrying): Promise<HeldEndpoint | undefined> => {
    if (!store || config.approvals !== "forward") return undefined;
    endpoint = await parts.holdApprovalEndpoint({
      store,
      clock: systemClock,
      logger,
      waitMs: config.approvalTimeoutMs,
      othersPresent: async () => (await carrying.liveOthers()).length > 0,
    });
    return endpoint;
  };
  return { store, hosts, runtimes, jobs, holdEndpoint, policy };
}

/** This process's part in carrying the state directory's work (§15.8). */
async function carryingOf(
  parts: Serving,
  store: StateStore,
  jobs: JobRegistry,
  hosts: HostSet,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): Promise<Carrying> {
  const processes = () => hosts.home.processes();
  return new parts.Carrying({
    presence: new parts.PresenceFiles(store.root, () => crypto.randomUUID()),
    jobs,
    self: await parts.ownIdentity(machine(), processes),
    settings: parts.settingsOf(env),
    isAlive: async (named) => (await processes()).isAlive(named.pid, named.start_time),
    clock: systemClock,
    logger,
  });
}

/**
 * The server past its opening: the job layer takes over the state directory's jobs and the whole handler is made.
 * Requests other than the first `initialize` wait for it, so claude_wait on an old job id finds it (§15.3).
 */
async function serveJobs(opened: Opened, writer: ReturnType<typeof createMessageWriter>) {
  const { config, logger } = opened;
  const [parts, { createRequestHandler }] = await Promise.all([
    serving(),
    import("./server/handler.js"),
    keepHeapSmall(),
  ]);
  const { store, hosts, runtimes, jobs, holdEndpoint, policy } = await startJobs(parts, opened, process.env);
  const carrying = store ? await carryingOf(parts, store, jobs, hosts, process.env, logger) : undefined;
  // Before the takeover, so that jobs it starts from the queue ask the endpoint, not an approver of their own.
  const endpoint = carrying ? await holdEndpoint(carrying) : undefined;
  if (store) await restoreJobs(store, jobs, logger);
  const handle = createRequestHandler({
    jobs,
    checkDirectory: (dir) => hosts.home.checkDirectory(dir),
    notify: (notification) => void writer.write(notification),
    policy,
    maxResultChars: config.maxResultChars,
    heartbeatMs: config.heartbeatMs,
    clock: systemClock,
    logger,
    server: { name: SERVER_NAME, version: SERVER_VERSION },
    depth: { current: config.depth, max: config.maxDepth },
    jobRetentionMs: config.jobRetentionMs,
    hosts,
    ...(store
      ? {
          worktrees: {
            policy: config.worktree,
            hold: parts.worktreeHolds(store, machine(), hosts),
            readPrompt: (id: string) => store.readPrompt(id),
          },
        }
      : {}),
    // The store of sessions of the agent that keeps one, where the agents this server starts keep theirs (§20).
    sessions: async (cwd: string, limit: number) =>
      (await loaders.runtimes()).listSessions(process.env, homedir(), cwd, limit),
    ready: runtimes.load,
  });
  // Present before any request but the first initialize is answered: a server leaving now leaves its work to us.
  carrying?.join("server");
  return { handle, store, jobs, hosts, carrying, endpoint, policy };
}

async function serve(): Promise<void> {
  const { config, roots } = await readConfig();
  const opened = openServer(config, roots);
  const { gated, logger } = opened;
  const writer = createMessageWriter(process.stdout, logger);
  const facts: OpeningFacts = {
    server: { name: SERVER_NAME, version: SERVER_VERSION },
    depth: { current: config.depth, max: config.maxDepth },
  };
  // What the host sent at once, its `initialize`, is answered before the job layer loads: loading compiles most of
  // the program, and the host waits on that answer (BENCHMARKS.md (a)). Two turns: one poll of stdin comes between.
  const whole = new Promise((resolve) => setImmediate(() => setImmediate(resolve))).then(() =>
    serveJobs(opened, writer),
  );
  const handle = frontDoor(
    facts,
    whole.then((served) => served.handle),
  );
  const server = serveStdio({ input: process.stdin, writer, handle, logger, maxLineBytes: config.maxLineBytes });
  if (gated)
    logger.warn(`depth ${config.depth} reaches CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: no tools are offered`);
  const { store, jobs, hosts, carrying, endpoint, policy } = await whole;
  const agents = agentsAtStart(policy.agents, config);
  logger[agents.level](`${SERVER_NAME} ${SERVER_VERSION} ready (${agents.text})`);
  installShutdown({ config, jobs, hosts, server, writer, logger, carrying, endpoint, stateDir: store?.root });
}

/**
 * `claude-dispatch carrier --state-dir=DIR`: the headless carrier (§15.8), started by the last server to leave a
 * state directory with work in it, or by the command line in place of one that died. Not a command for people. It
 * takes over the directory's jobs, carries them as a server would, and exits once idle; a second one exits at once.
 */
async function serveCarrier(args: string[]): Promise<void> {
  const stateDir =
    args.length === 1 && args[0]?.startsWith("--state-dir=") ? args[0].slice("--state-dir=".length) : undefined;
  if (stateDir === undefined) {
    process.stderr.write(
      "claude-dispatch: usage: claude-dispatch carrier --state-dir=DIR (started by a server as it leaves)\n",
    );
    process.exit(2);
  }
  const env = { ...process.env, CLAUDE_DISPATCH_STATE_DIR: stateDir };
  const { config, roots } = await readConfig(env);
  if (config.depth >= config.maxDepth) process.exit(0);
  const early = createLogger(process.stderr, config.logLevel);
  const [parts] = await Promise.all([serving(), keepHeapSmall()]);
  const here = parts.localHost({ machine: machine(), config, roots, loaders, logger: early });
  const processes = () => here.processes();
  const slot = new parts.CarrierSlot(config.stateDir, await parts.ownIdentity(machine(), processes));
  if (!(await slot.take(async (named) => (await processes()).isAlive(named.pid, named.start_time)))) {
    early.info("another carrier carries this state directory; exiting");
    process.exit(0);
  }
  const opened = openServer(config, roots);
  const { logger } = opened;
  const { store, jobs, hosts, holdEndpoint } = await startJobs(parts, opened, env);
  if (!store) process.exit(0);
  const carrying = await carryingOf(parts, store, jobs, hosts, env, logger);
  const endpoint = await holdEndpoint(carrying);
  // Present before it takes anything over: killed at any point after this, it is replaced (§15.8).
  const present = carrying.present("carrier");
  let leaving = false;
  const leave = async (reason: string, code: number): Promise<void> => {
    if (leaving) return;
    leaving = true;
    logger.info(`carrier leaving: ${reason}`);
    present();
    carrying.leave();
    slot.release();
    // Whatever still runs is left on disk, to the next server or carrier (§15.3).
    await jobs.leave();
    await endpoint?.close();
    await hosts.close();
    process.exit(code);
  };
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => void leave(signal, 0));
  // Detached, it has no terminal to lose; a hangup meant for whoever started it is not its end.
  process.on("SIGHUP", () => undefined);
  const crash = (error: unknown): void => {
    logger.error(`internal error: ${(error as Error)?.stack ?? String(error)}`);
    void leave("internal error", 1);
  };
  process.on("uncaughtException", crash);
  process.on("unhandledRejection", crash);
  await restoreJobs(store, jobs, logger);
  logger.info(`carrier ${process.pid} carries ${store.root}`);
  carrying.join("carrier", present);
  await carrying.carry(slot);
  await leave("idle", 0);
}

/** Shutdown as §3 describes: on end of stdin, a signal, or an internal error. */
function installShutdown(parts: {
  config: Config;
  jobs: JobRegistry;
  hosts: HostSet;
  server: ReturnType<typeof serveStdio>;
  writer: ReturnType<typeof createMessageWriter>;
  logger: Logger;
  carrying: Carrying | undefined;
  endpoint: HeldEndpoint | undefined;
  stateDir: string | undefined;
}): void {
  const { config, jobs, hosts, server, writer, logger, carrying } = parts;
  let shuttingDown = false;
  let finalExitCode = 0;
  const shutdown = async (reason: string, exitCode = 0): Promise<void> => {
    // A crash during a shutdown already under way still makes the exit code 1.
    finalExitCode = Math.max(finalExitCode, exitCode);
    if (shuttingDown) return;
    shuttingDown = true;
    logger.info(`shutting down: ${reason}`);
    // A backstop only: every step below is bounded, but the exit must be.
    setTimeout(
      () => {
        logger.error("shutdown took too long; exiting");
        process.exit(1);
      },
      config.killGraceMs + SHUTDOWN_SLACK_MS + 1000,
    ).unref();
    process.stdin.pause();
    // Gone from servers/ first, so that a carrier exiting meanwhile sees this server's work as left (§15.8).
    carrying?.leave();
    // keep: agents run on and the next server follows them (§15.3); kill: stop them all now.
    if (config.onExit === "keep") {
      await jobs.leave();
    } else {
      await jobs.shutdown();
      await hosts.home.idle();
    }
    // Agents asking through this endpoint reconnect to the next holder (§18); then, agents elsewhere run on (or
    // were killed above), and this server's sessions and shared connections end (§21.4).
    await parts.endpoint?.close();
    await hosts.close();
    // Runs and waits on the killed jobs now answer; give their responses a moment to be written.
    let cancelSlack = (): void => undefined;
    await Promise.race([
      server.idle(),
      new Promise<void>((resolve) => (cancelSlack = systemClock.setTimer(resolve, SHUTDOWN_SLACK_MS))),
    ]);
    cancelSlack();
    await writer.flush();
    if (config.onExit === "keep") await handOver(carrying, parts.stateDir, logger);
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

/** The last server to leave work in its state directory starts the carrier, just before it exits (§15.8). */
async function handOver(carrying: Carrying | undefined, stateDir: string | undefined, logger: Logger): Promise<void> {
  if (!carrying || stateDir === undefined) return;
  try {
    if (!(await carrying.needsCarrier())) return;
    const { startCarrierProcess } = await import("./hosts/local/detached.js");
    const pid = startCarrierProcess({ ...machine(), stateDir, env: process.env });
    logger.info(`the work left in ${stateDir} goes on in carrier ${pid}`);
  } catch (error) {
    logger.error(
      `cannot start the carrier; the next server or command takes the work over: ${(error as Error).message}`,
    );
  }
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
