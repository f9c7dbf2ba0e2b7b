/**
 * The runtime seam: which agent CLI runs (PROTOCOL.md §7). A runtime knows
 * its CLI's flags, the environment it needs, the shape of what it prints, and
 * how its end reads as an outcome; nothing else in src/ does. `runtimes/claude/`
 * is Claude Code; Codex (`codex exec --json`) and Gemini (`gemini -p
 * --output-format stream-json`) print JSON lines too, and fit the same shape.
 */
import type { Transcript } from "../core/transcript.js";
import type { AgentOptions } from "./options.js";
import type { ChildExit } from "./host.js";
import type { AgentOutcome, AgentSpec, LiveSummary } from "./types.js";

/** The agent's output file, read again, and where a long result's text is written (§15.4). */
export interface OutputSource {
  read(offset: number, length: number): Buffer | undefined;
  /** Starts the result file afresh; returns how to add text to it and close it. Without it (a replay), a long result's text is skipped. */
  createResult?(): { write(text: string): void; close(): void };
}

export interface ReaderOptions {
  /** The longest single output line accepted; longer is OUTPUT_TOO_LARGE. */
  maxLineBytes: number;
  /** Transcript size kept for claude_output. */
  transcriptChars: number;
  onOverflow(): void;
  onMalformedLine?(line: string): void;
  /** The output as a file that can be read again (§15): then long lines are not held while they stream by. */
  source?: OutputSource;
  /** Hears each transcript entry as it is made (docs/tool-results.md, "Transcript lines"). */
  onTranscriptEntry?(entry: string): void;
}

/** Reads one agent's stdout as it arrives: a live summary, a bounded transcript, and its final result. */
export interface AgentOutputReader {
  readonly transcript: Transcript;
  /** An output line passed maxLineBytes: the agent was stopped. */
  readonly overflow: boolean;
  push(chunk: Buffer): void;
  /** The output ended: whatever is left is read, and the result found. */
  end(): void;
  /** Whether a final result was read (after end()). */
  hasResult(): boolean;
  live(): LiveSummary;
  /** Calls listener after each event that changed the summary; returns the unsubscribe. */
  onActivity(listener: () => void): () => void;
  /** Lets go of the result, which may be megabytes, once the outcome holds what is needed of it. */
  forgetResult(): void;
}

/** The free space of the disk holding an agent's stdout, measured after it ended without a result (§7.3). */
export interface StateDisk {
  /** The folder of the output file. */
  dir: string;
  /** Bytes available to this server; undefined when unknown. */
  freeBytes: number | undefined;
}

/** What a runtime's CLI accepts, known without loading its reader: the tools and the configuration need it at startup. */
export interface RuntimeTraits {
  /** Named in every record (§15.2) and chosen by a call's `agent`: "claude", "codex", "gemini". */
  readonly name: string;
  /** The agent options its CLI has a flag for (§5.6); a call naming another is refused, naming the agent. */
  readonly supportedOptions: readonly (keyof AgentOptions)[];
  /** The values `permission_mode` takes for this agent, in its CLI's own vocabulary. */
  readonly permissionModes: readonly string[];
  /** Those of permissionModes that drop the agent's own safety checks: refused unless the operator allows them. */
  readonly dangerousModes: readonly string[];
  /** Why a value its CLI would read as something else is refused (a comma it splits on); undefined when all is well. */
  optionProblem?(options: AgentOptions): string | undefined;
}

/**
 * What `doctor` (§17) may look at to tell, without spending tokens, whether an agent can sign in: the runtime
 * says what to ask and reads the answer; doctor runs the query (argv, no shell, bounded) and looks for the files.
 */
export interface ReadinessProbe {
  /** A status query its CLI answers offline, as arguments after the program; absent when it has none. */
  readonly args?: readonly string[];
  /** Files whose presence counts, such as a credentials file: doctor says which exist and never reads them. */
  readonly files?: readonly string[];
  read(seen: ReadinessSeen): Readiness;
}

export interface ReadinessSeen {
  /** The query's answer, when args were given: whether it exited 0, and what it printed. */
  run?: { ok: boolean; stdout: string; stderr: string };
  /** Those of files that exist. */
  present: readonly string[];
}

/** ok: it can sign in; fail: it cannot, and detail says what to run or set; warn: doctor cannot tell. */
export interface Readiness {
  status: "ok" | "warn" | "fail";
  detail: string;
}

export interface Runtime<Reader extends AgentOutputReader = AgentOutputReader> extends RuntimeTraits {
  /** The program and its argv; the prompt always goes to stdin, never argv (§10). */
  invocation(spec: AgentSpec): { command: string; args: string[] };
  /** The agent's environment, from the server's own and the variables it adds (§7.2). */
  environment(base: Readonly<Record<string, string | undefined>>, extra: Readonly<Record<string, string>>): Record<string, string | undefined>;
  createReader(options: ReaderOptions): Reader;
  /** How the agent's end reads as an outcome (§7.3). */
  outcome(exit: ChildExit, reader: Reader, disk: StateDisk | undefined): AgentOutcome;
  /** What doctor checks of its login or key, given the environment, the home directory and what `--version` printed. */
  readiness?(env: Readonly<Record<string, string | undefined>>, home: string, version: string): ReadinessProbe;
}
