/**
 * The operator's command run when a job ends (CLAUDE_DISPATCH_ON_DONE,
 * PROTOCOL.md §8): an argv started through the host like an agent (no shell,
 * its own process tree), with the job in its environment, killed whole after
 * a bound. Only the server that finishes a job runs it, so it runs once per
 * job however many servers watch the job. Its failure is logged; the job is
 * already final.
 */
import type { Host } from "../agent/host.js";
import type { CancelTimer, Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { sessionIdOf, type Job } from "./types.js";

/** Long enough for a notification or a webhook; a command that hangs is killed, tree and all. */
export const ON_DONE_TIMEOUT_MS = 30_000;
const STDERR_TAIL_BYTES = 2048;

export interface OnDoneOptions {
  argv: readonly string[];
  host: Pick<Host, "start">;
  /** The command's environment before the job's variables are added. */
  env: Readonly<Record<string, string | undefined>>;
  clock: Clock;
  logger: Logger;
  timeoutMs?: number;
}

export class OnDoneCommands {
  private readonly running = new Set<{ kill(): Promise<unknown> }>();

  constructor(private readonly options: OnDoneOptions) {}

  /** Starts the command for a job that just ended; resolves when it has exited or was killed. */
  async run(job: Job): Promise<void> {
    const { argv, host, env, clock, logger } = this.options;
    const [command, ...args] = argv;
    if (command === undefined) return;
    const child = host.start({
      command,
      args,
      cwd: job.cwd,
      env: {
        ...env,
        CLAUDE_DISPATCH_JOB_ID: job.id,
        CLAUDE_DISPATCH_JOB_STATUS: job.status,
        CLAUDE_DISPATCH_JOB_CWD: job.cwd,
        CLAUDE_DISPATCH_JOB_SESSION_ID: sessionIdOf(job) ?? "",
      },
      stdin: "",
      onStdout: () => undefined,
      stderrTailBytes: STDERR_TAIL_BYTES,
    });
    const entry = { kill: () => child.killTree() };
    this.running.add(entry);
    let timedOut = false;
    const cancel: CancelTimer = clock.setTimer(() => {
      timedOut = true;
      void child.killTree();
    }, this.options.timeoutMs ?? ON_DONE_TIMEOUT_MS);
    try {
      const exit = await child.exited;
      const what = `CLAUDE_DISPATCH_ON_DONE for job ${job.id}`;
      if (exit.spawnError) logger.warn(`${what} did not start: ${exit.spawnError.message}`);
      else if (timedOut) logger.warn(`${what} was killed after ${(this.options.timeoutMs ?? ON_DONE_TIMEOUT_MS) / 1000}s`);
      else if (exit.exitCode !== 0) {
        const tail = exit.stderrTail.trim().slice(-500);
        logger.warn(`${what} exited ${exit.exitCode ?? exit.signal}${tail ? `: ${tail}` : ""}`);
      }
      await child.settled;
    } finally {
      cancel();
      this.running.delete(entry);
    }
  }

  /** Shutdown: a command still running is killed with its tree, never left behind. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.running].map((entry) => entry.kill()));
  }
}
