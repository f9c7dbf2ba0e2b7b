/**
 * The operator's commands: CLAUDE_DISPATCH_ON_DONE when a job ends (PROTOCOL.md §8), CLAUDE_DISPATCH_ON_INPUT
 * when a permission request comes (§18). Each is an argv started through the host like an agent (no shell,
 * its own process tree), in the job's cwd, with what happened in its environment, killed whole after a
 * bound. Who runs it makes it run once: the server that finishes a job, the process that marks a request
 * told (jobs/approvals.ts). A failure is logged; the job is unchanged.
 */
import type { AgentHost } from "../agent/host.js";
import type { CancelTimer, Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { clip, forReadingOnOneLine } from "../core/text.js";
import { sessionIdOf, type InputRequest, type Job, type OperatorCommand } from "./types.js";

/** Long enough for a notification or a webhook; a command that hangs is killed, tree and all. */
export const OPERATOR_COMMAND_TIMEOUT_MS = 30_000;
const STDERR_TAIL_BYTES = 2048;
/** The agent's words an ON_INPUT command is given are cut here: a notification's worth, never a page. */
export const INPUT_TEXT_CHARS = 200;

export interface OperatorCommandOptions {
  argv: readonly string[];
  host: Pick<AgentHost, "start">;
  /** The command's environment before the subject's variables are added. */
  env: Readonly<Record<string, string | undefined>>;
  clock: Clock;
  logger: Logger;
  timeoutMs?: number;
}

/** How one subject is run: where, with which variables, and how the log names it. */
interface Invocation {
  cwd: string;
  variables: Record<string, string>;
  about: string;
}

class OperatorCommands<Subject> implements OperatorCommand<Subject> {
  private readonly running = new Set<{ kill(): Promise<unknown> }>();
  private closing = false;

  constructor(
    /** The setting the command comes from, which its log lines name. */
    private readonly setting: string,
    private readonly invocation: (subject: Subject) => Invocation,
    private readonly options: OperatorCommandOptions,
  ) {}

  get closed(): boolean {
    return this.closing;
  }

  busy(): boolean {
    return this.running.size > 0;
  }

  async run(subject: Subject): Promise<void> {
    const { argv, host, env, clock, logger } = this.options;
    const [command, ...args] = argv;
    if (command === undefined || this.closing) return;
    const { cwd, variables, about } = this.invocation(subject);
    const child = host.start({
      command,
      args,
      cwd,
      env: { ...env, ...variables },
      stdin: "",
      onStdout: () => undefined,
      stderrTailBytes: STDERR_TAIL_BYTES,
    });
    const entry = { kill: () => child.killTree() };
    this.running.add(entry);
    const timeoutMs = this.options.timeoutMs ?? OPERATOR_COMMAND_TIMEOUT_MS;
    let timedOut = false;
    const cancel: CancelTimer = clock.setTimer(() => {
      timedOut = true;
      void child.killTree();
    }, timeoutMs);
    try {
      const exit = await child.exited;
      const what = `${this.setting} for ${about}`;
      if (exit.spawnError) logger.warn(`${what} did not start: ${exit.spawnError.message}`);
      else if (timedOut) logger.warn(`${what} was killed after ${timeoutMs / 1000}s`);
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

  /** Shutdown: a command still running is killed with its tree, never left behind; none starts after. */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.running].map((entry) => entry.kill()));
  }
}

/** CLAUDE_DISPATCH_ON_DONE (§8): the job's id, status, cwd and session. */
export function onDoneCommands(options: OperatorCommandOptions): OperatorCommand<Job> {
  return new OperatorCommands<Job>(
    "CLAUDE_DISPATCH_ON_DONE",
    (job) => ({
      cwd: job.cwd,
      about: `job ${job.id}`,
      variables: {
        CLAUDE_DISPATCH_JOB_ID: job.id,
        CLAUDE_DISPATCH_JOB_STATUS: job.status,
        CLAUDE_DISPATCH_JOB_CWD: job.cwd,
        CLAUDE_DISPATCH_JOB_SESSION_ID: sessionIdOf(job) ?? "",
      },
    }),
    options,
  );
}

/** CLAUDE_DISPATCH_ON_INPUT (§18): the job, the request, and the agent's words cleaned onto one line and cut. */
export function onInputCommands(options: OperatorCommandOptions): OperatorCommand<InputRequest> {
  return new OperatorCommands<InputRequest>(
    "CLAUDE_DISPATCH_ON_INPUT",
    ({ job, request }) => ({
      cwd: job.cwd,
      about: `request ${request.id} of job ${job.id}`,
      variables: {
        CLAUDE_DISPATCH_JOB_ID: job.id,
        CLAUDE_DISPATCH_REQUEST_ID: request.id,
        CLAUDE_DISPATCH_TOOL_NAME: clip(forReadingOnOneLine(request.tool_name), INPUT_TEXT_CHARS),
        CLAUDE_DISPATCH_PREVIEW: clip(forReadingOnOneLine(request.preview), INPUT_TEXT_CHARS),
        CLAUDE_DISPATCH_JOB_CWD: job.cwd,
      },
    }),
    options,
  );
}
