/**
 * `claude-dispatch remote [--state-dir=DIR]`: the far end of an SSH host (§21.3), run by ssh for one request on
 * its channel. Not a command for people. Its jobs are this machine's, in its state directory.
 */
import { loadConfig, offeredAgents, programOf, worktreeRootOf, type Config } from "../config.js";
import { systemClock } from "../core/clock.js";
import { createLogger } from "../core/log.js";
import { serveRemote } from "../hosts/remote/far-end.js";
import { openState } from "./job-start.js";
import type { Loaders } from "./loaders.js";
import { exitForUsage, type ProcessParts } from "./machine.js";
import { remoteSide } from "./remote.js";
import { HostSet, localHost } from "./hosts.js";
import { createJobs, lazyRuntimes } from "./jobs.js";

export async function serveRemoteEnd(parts: ProcessParts, loaders: Loaders, args: string[]): Promise<void> {
  const stateDir =
    args.length === 1 && args[0]?.startsWith("--state-dir=") ? args[0].slice("--state-dir=".length) : undefined;
  if (args.length > (stateDir === undefined ? 0 : 1)) {
    exitForUsage(
      parts,
      "usage: claude-dispatch remote [--state-dir=DIR] (run over ssh by a server with CLAUDE_DISPATCH_HOSTS)",
    );
  }
  // The state directory is the one named, whatever this machine's environment says; agents stay when we go.
  const env = {
    ...parts.env,
    ...(stateDir ? { CLAUDE_DISPATCH_STATE_DIR: stateDir } : {}),
    CLAUDE_DISPATCH_ON_EXIT: "keep",
  };
  let config: Config;
  try {
    config = { ...loadConfig(env, parts.here), approvals: "deny" };
  } catch (error) {
    const message = `claude-dispatch there: ${(error as Error).message}`;
    parts.stdout.write(`${JSON.stringify({ type: "error", code: "HOST_FAILED", message })}\n`);
    parts.exit(2);
  }
  const store = openState(parts, config.stateDir);
  const logger = createLogger(parts.stderr, "warn");
  // This machine only, anywhere: the roots are the ones each request names (§21.3).
  const hosts = new HostSet(localHost({ machine: parts, config, roots: undefined, loaders, logger }));
  const runtimes = lazyRuntimes(loaders);
  await runtimes.load();
  const side = remoteSide({
    store,
    git: hosts.home.worktrees,
    worktreeRoot: worktreeRootOf(config),
    env: parts.env,
    platform: parts.platform,
    programOf: (agent) => programOf(config, agent),
    jobs: async (start) => {
      const jobs = await createJobs({
        machine: parts,
        config,
        policy: { ...config.policy, roots: undefined, agents: offeredAgents(config, parts.env, parts.here) },
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
  const write = (line: string) =>
    new Promise<void>(
      (resolve, reject) => void parts.stdout.write(line, (error) => (error ? reject(error) : resolve())),
    );
  const code = await serveRemote({ input: parts.stdin, write, clock: systemClock, logger }, side);
  parts.exit(code);
}
