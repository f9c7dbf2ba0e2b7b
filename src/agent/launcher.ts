/**
 * Puts a runtime and a host together: an agent started (or followed) by the
 * host, its output read by the runtime's reader, and its end read as an
 * outcome (PROTOCOL.md §7.3), cleaned for reading (§10). Neither half knows the other.
 */
import type { AgentHost, ChildHandle, OutputFiles } from "./host.js";
import { outcomeForReading } from "./reading.js";
import type { AgentOutputReader, Runtime, StateDisk } from "./runtime.js";
import type { AgentRun, AgentSpec, AgentToAttach } from "./types.js";

export interface AgentFiles {
  readRange(file: string, offset: number, length: number): Buffer | undefined;
  create(file: string): { write(text: string): void; close(): void };
  /**
   * Bytes free on the disk holding dir; undefined when unknown. Asked only when an agent ended without a result (§7.3).
   */
  freeBytes?(dir: string): number | undefined;
  /** The folder a file is in. */
  folderOf(file: string): string;
}

export interface LauncherOptions<Reader extends AgentOutputReader> {
  runtime: Runtime<Reader>;
  host: AgentHost;
  /** Reads the output files again, for a long result line (§15.4); without it, long lines are held in memory. */
  files?: AgentFiles;
  /** The agent's environment, as the runtime made it. */
  env: Readonly<Record<string, string | undefined>>;
  maxLineBytes: number;
  transcriptChars: number;
  stderrTailBytes: number;
  onMalformedLine?(line: string): void;
}

/** One runtime's agents on one host: the job layer's launcher picks these by the names a spec carries. */
export interface Agents {
  launch(spec: AgentSpec): AgentRun;
  attach(agent: Omit<AgentToAttach, "runtime" | "host" | "jobId"> & { jobId?: string }): AgentRun;
}

export function createAgents<Reader extends AgentOutputReader>(options: LauncherOptions<Reader>): Agents {
  const { runtime, host } = options;
  return {
    launch: (spec) => {
      const { command, args, env } = runtime.invocation(spec);
      return follow(options, spec.output, (onStdout) =>
        host.start({
          ...(spec.jobId ? { jobId: spec.jobId } : {}),
          ...(spec.worktree ? { worktree: spec.worktree } : {}),
          command,
          args,
          ...(spec.options?.addDirs ? { addDirs: spec.options.addDirs } : {}),
          cwd: spec.cwd,
          env: env ? { ...options.env, ...env } : options.env,
          // Never argv: no quoting, no shell, no length limit. From the prompt file
          // when there is one, so it arrives whole (§15.2).
          stdin: spec.promptFile ? { file: spec.promptFile } : spec.prompt,
          onStdout,
          stderrTailBytes: options.stderrTailBytes,
          ...(spec.output ? { output: spec.output } : {}),
          ...(spec.marker ? { marker: spec.marker } : {}),
        }),
      );
    },
    attach: (agent) =>
      follow(options, agent.output, (onStdout) =>
        host.attach({ ...agent, onStdout, stderrTailBytes: options.stderrTailBytes }),
      ),
  };
}

/** Reads one agent's output, whoever started it. */
function follow<Reader extends AgentOutputReader>(
  options: LauncherOptions<Reader>,
  output: OutputFiles | undefined,
  start: (onStdout: (chunk: Buffer) => void) => ChildHandle,
): AgentRun {
  const { runtime, files } = options;
  let handle: ChildHandle | undefined;
  const reader = runtime.createReader({
    maxLineBytes: options.maxLineBytes,
    transcriptChars: options.transcriptChars,
    // An agent printing a line this long is broken; stop it rather than buffer more.
    onOverflow: () => void handle?.killTree(),
    ...(options.onMalformedLine ? { onMalformedLine: options.onMalformedLine } : {}),
    ...(output?.resultPath && files
      ? {
          source: {
            read: (offset: number, length: number) => files.readRange(output.stdoutPath, offset, length),
            createResult: () => files.create(output.resultPath as string),
          },
        }
      : {}),
  });
  handle = start((chunk) => reader.push(chunk));
  const started = handle;
  return {
    pid: started.pid,
    marker: started.marker,
    identity: () => started.identity(),
    outcome: started.exited.then((exit) => {
      reader.end();
      // Asked only when there is no result to read: a full disk may be why (§7.3).
      const probe = files?.freeBytes;
      const noResult = !exit.spawnError && !reader.overflow && !reader.hasResult();
      const disk =
        output && files && probe && noResult ? measureDisk(probe, files.folderOf(output.stdoutPath)) : undefined;
      // A host that ran the agent elsewhere may know why it ended when its output cannot say (§21).
      const outcome = outcomeForReading(
        exit.failure && !reader.hasResult() && !reader.overflow
          ? { ok: false as const, ...exit.failure }
          : runtime.outcome(exit, reader, disk),
      );
      reader.forgetResult();
      // An attached agent was not our child: its exit status is unknown, not null; its end may be long past (§15.3).
      if (exit.unobserved) return exit.endedAt === undefined ? outcome : { ...outcome, endedAt: exit.endedAt };
      return exit.spawnError ? outcome : { ...outcome, exit: { code: exit.exitCode, signal: exit.signal } };
    }),
    ready: started.ready ?? Promise.resolve(),
    kill: () => started.killTree(),
    live: () => reader.live(),
    onActivity: (listener) => reader.onActivity(listener),
    transcript: reader.transcript,
  };
}

/** A probe that throws knows no more than one that answers undefined. */
function measureDisk(probe: (dir: string) => number | undefined, dir: string): StateDisk {
  try {
    return { dir, freeBytes: probe(dir) };
  } catch {
    return { dir, freeBytes: undefined };
  }
}
