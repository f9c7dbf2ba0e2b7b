/**
 * `claude-dispatch carrier --state-dir=DIR`: the headless carrier (§15.8), started by the last server to leave a
 * state directory with work in it, or by the command line in place of one that died. Not a command for people. It
 * takes over the directory's jobs, carries them as a server would, and exits once idle; a second one exits at once.
 */
import { createLogger } from "../core/log.js";
import { CarrierSlot } from "../store/presence.js";
import { keepHeapSmall } from "./heap.js";
import { localHost, ownIdentity } from "./hosts.js";
import { openServer, readConfig } from "./job-layer.js";
import { restoreJobs, startJobs } from "./job-start.js";
import type { Loaders } from "./loaders.js";
import { exitForUsage, type ProcessParts } from "./machine.js";

export async function serveCarrier(parts: ProcessParts, loaders: Loaders, args: string[]): Promise<void> {
  const stateDir =
    args.length === 1 && args[0]?.startsWith("--state-dir=") ? args[0].slice("--state-dir=".length) : undefined;
  if (stateDir === undefined) {
    exitForUsage(parts, "usage: claude-dispatch carrier --state-dir=DIR (started by a server as it leaves)");
  }
  const env = { ...parts.env, CLAUDE_DISPATCH_STATE_DIR: stateDir };
  const { config, roots } = await readConfig(parts, env);
  if (config.depth >= config.maxDepth) parts.exit(0);
  const early = createLogger(parts.stderr, config.logLevel);
  keepHeapSmall();
  const here = localHost({ machine: parts, config, roots, loaders, logger: early });
  const processes = () => here.processes();
  const slot = new CarrierSlot(config.stateDir, await ownIdentity(parts, processes));
  if (!(await slot.take(async (named) => (await processes()).isAlive(named.pid, named.start_time)))) {
    early.info("another carrier carries this state directory; exiting");
    parts.exit(0);
  }
  const opened = openServer(parts, config, roots);
  const { logger } = opened;
  const { store, jobs, hosts, carrying, endpoint } = await startJobs(parts, loaders, opened, env);
  if (!store || !carrying) parts.exit(0);
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
    parts.exit(code);
  };
  parts.onSignals(["SIGTERM", "SIGINT"], (signal) => void leave(signal, 0));
  // Detached, it has no terminal to lose; a hangup meant for whoever started it is not its end.
  parts.onSignals(["SIGHUP"], () => undefined);
  parts.onCrash((error) => {
    logger.error(`internal error: ${(error as Error)?.stack ?? String(error)}`);
    void leave("internal error", 1);
  });
  await restoreJobs(store, jobs, logger, endpoint);
  logger.info(`carrier ${parts.pid} carries ${store.root}`);
  carrying.join("carrier", present);
  await carrying.carry(slot);
  await leave("idle", 0);
}
