/**
 * A server past its opening (server.ts): the job layer takes over the state directory's jobs and the whole request
 * handler is made; once the stdio loop has it, the server says it is ready and shuts down as §3 describes. Loaded
 * as the front door answers `initialize` (BENCHMARKS.md (a)).
 */
import { homedir } from "node:os";

import { agentsAtStart, type Config } from "../config.js";
import { systemClock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { SERVER_NAME, SERVER_VERSION } from "../core/version.js";
import type { JobRegistry } from "../jobs/registry.js";
import { createRequestHandler } from "../server/handler.js";
import type { createMessageWriter, serveStdio } from "../server/stdio.js";
import type { Carrying } from "./carrying.js";
import { keepHeapSmall } from "./heap.js";
import type { HostSet } from "./hosts.js";
import type { Opened } from "./job-layer.js";
import { restoreJobs, startJobs, type LazyEndpoint } from "./job-start.js";
import { worktreeHolds } from "./jobs.js";
import type { Loaders } from "./loaders.js";
import type { ProcessParts } from "./machine.js";

/** After the kill grace, this long for responses to be written before we exit anyway. */
const SHUTDOWN_SLACK_MS = 2000;

/**
 * The server past its opening: the job layer takes over the state directory's jobs and the whole handler is made.
 * Requests other than the first `initialize` wait for it, so claude_wait on an old job id finds it (§15.3). Then
 * `serving`, given the stdio loop, says the server is ready and installs its shutdown.
 */
export async function serveJobs(
  parts: ProcessParts,
  loaders: Loaders,
  opened: Opened,
  writer: ReturnType<typeof createMessageWriter>,
) {
  const { config, logger } = opened;
  const env = parts.env;
  keepHeapSmall();
  const started = await startJobs(parts, loaders, opened, env);
  const { store, hosts, runtimes, jobs, policy, carrying, endpoint } = started;
  if (store) await restoreJobs(store, jobs, logger, endpoint);
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
            hold: worktreeHolds(store, parts, hosts),
            readPrompt: (id: string) => store.readPrompt(id),
          },
        }
      : {}),
    // The store of sessions of the agent that keeps one, where the agents this server starts keep theirs (§20).
    sessions: async (cwd: string, limit: number) => (await loaders.runtimes()).listSessions(env, homedir(), cwd, limit),
    // Before the first job call: an agent it starts asks the endpoint, not an approver process of its own (§18).
    ready: async () => {
      await runtimes.load();
      await endpoint?.ensure();
    },
  });
  // Present before any request but the first initialize is answered: a server leaving now leaves its work to us.
  carrying?.join("server");
  const serving = (server: ReturnType<typeof serveStdio>): void => {
    const agents = agentsAtStart(policy.agents, config);
    logger[agents.level](`${SERVER_NAME} ${SERVER_VERSION} ready (${agents.text})`);
    const stateDir = store?.root;
    installShutdown(parts, loaders, { config, jobs, hosts, server, writer, logger, carrying, endpoint, stateDir });
  };
  return { handle, serving };
}

/** Shutdown as §3 describes: on end of stdin, a signal, or an internal error. */
function installShutdown(
  parts: ProcessParts,
  loaders: Loaders,
  served: {
    config: Config;
    jobs: JobRegistry;
    hosts: HostSet;
    server: ReturnType<typeof serveStdio>;
    writer: ReturnType<typeof createMessageWriter>;
    logger: Logger;
    carrying: Carrying | undefined;
    endpoint: LazyEndpoint | undefined;
    stateDir: string | undefined;
  },
): void {
  const { config, jobs, hosts, server, writer, logger, carrying } = served;
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
        parts.exit(1);
      },
      config.killGraceMs + SHUTDOWN_SLACK_MS + 1000,
    ).unref();
    parts.stdin.pause();
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
    await served.endpoint?.close();
    await hosts.close();
    // Runs and waits on the killed jobs now answer; give their responses a moment to be written.
    let cancelSlack = (): void => undefined;
    await Promise.race([
      server.idle(),
      new Promise<void>((resolve) => (cancelSlack = systemClock.setTimer(resolve, SHUTDOWN_SLACK_MS))),
    ]);
    cancelSlack();
    await writer.flush();
    if (config.onExit === "keep") await handOver(parts, loaders, carrying, served.stateDir, logger);
    parts.exit(finalExitCode);
  };
  void server.ended.then(() => shutdown("stdin closed"));
  parts.onSignals(["SIGTERM", "SIGINT", "SIGHUP"], (signal) => void shutdown(signal));
  // A bug ends this server, not the agents: with ON_EXIT=keep the next server follows them, else they are killed.
  parts.onCrash((error) => {
    logger.error(`internal error: ${(error as Error)?.stack ?? String(error)}`);
    void shutdown("internal error", 1);
  });
}

/** The last server to leave work in its state directory starts the carrier, just before it exits (§15.8). */
async function handOver(
  parts: ProcessParts,
  loaders: Loaders,
  carrying: Carrying | undefined,
  stateDir: string | undefined,
  logger: Logger,
): Promise<void> {
  if (!carrying || stateDir === undefined) return;
  try {
    if (!(await carrying.needsCarrier())) return;
    const { startCarrierProcess } = await loaders.detached();
    const pid = startCarrierProcess({ execPath: parts.execPath, mainPath: parts.mainPath, stateDir, env: parts.env });
    logger.info(`the work left in ${stateDir} goes on in carrier ${pid}`);
  } catch (error) {
    logger.error(
      `cannot start the carrier; the next server or command takes the work over: ${(error as Error).message}`,
    );
  }
}
