/**
 * The runtime seam: which agent CLI runs (PROTOCOL.md §7). A runtime is all of "which agent": its program and
 * the setting that names it, its flags, its permission modes in its own words, the environment it needs, the
 * shape of what it prints, how its end reads as an outcome, and what it can do beyond running (its sessions, its
 * permission prompts). Each lives in its folder under `runtimes/`; `runtimes/index.ts` lists them, and nothing
 * else in src/ knows one agent from another.
 */
import type { Transcript } from "../core/transcript.js";
import type { AgentOptions } from "./options.js";
import type { ChildExit } from "./host.js";
import type { AgentOutcome, AgentSession, AgentSpec, LiveSummary } from "./types.js";

/** The agent's output file, read again, and where a long result's text is written (§15.4). */
export interface OutputSource {
  read(offset: number, length: number): Buffer | undefined;
  /**
   * Starts the result file afresh; returns how to add text to it and close it.
   * Without it (a replay), a long result's text is skipped.
   */
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

/** An agent's program: the setting that names it, the name found on PATH without one, and how to install it (§7.5). */
export interface ProgramSetting {
  /** "CLAUDE_DISPATCH_CODEX_BIN". */
  setting: string;
  /** "codex". */
  defaultBin: string;
  /** "install Codex (@openai/codex)". */
  install: string;
}

/** The operator's settings of what a call may ask of one agent (§5.6, §11), by name. */
export interface PolicySettings {
  /** The permission modes a call may ask for; unset, all but the dangerous ones. */
  modes: string;
  /** The mode a call that names none gets; absent: this agent takes no default mode from the operator. */
  defaultMode?: string;
  /** The model a call that names none gets; absent: likewise. */
  defaultModel?: string;
}

/** A permission request as an agent CLI sends it to the approver's tool (§18). */
export interface PermissionRequest {
  toolName: string;
  input: unknown;
  toolUseId?: string;
}

/**
 * How an agent CLI asks a person's permission through an MCP tool of the approver (§18), and reads the answer.
 * A runtime without it is never asked anything: what would prompt is refused, as its CLI does headless.
 */
export interface PermissionPrompts {
  /** The approver's tool for this CLI, as tools/list gives it. */
  readonly tool: { readonly name: string; readonly description: string; readonly inputSchema: object };
  /** What a call of the tool must hold, for the refusal of one that does not: "{tool_name, input, tool_use_id}". */
  readonly expected: string;
  /** The call's arguments as a request; undefined when they are not one. */
  read(args: unknown): PermissionRequest | undefined;
  /** One line for a person deciding ("Bash · rm -rf build"), cleaned for reading (§10). */
  preview(request: PermissionRequest): string;
  /** The tool result's text the CLI reads its answer from. */
  answerText(decision: "allow" | "deny", input: unknown, message: string): string;
}

/**
 * What a runtime declares, known without loading its reader: the configuration, the policy, the tools and the
 * approver need it at startup (BENCHMARKS.md (a)).
 */
export interface RuntimeTraits {
  /** Named in every record (§15.2) and chosen by a call's `agent`: "claude", "codex", "gemini". */
  readonly name: string;
  /** How people are told of it: "Claude Code". */
  readonly label: string;
  readonly program: ProgramSetting;
  /** The agent options its CLI has a flag for (§5.6); a call naming another is refused, naming the agent. */
  readonly supportedOptions: readonly (keyof AgentOptions)[];
  /** The values `permission_mode` takes for this agent, in its CLI's own vocabulary. */
  readonly permissionModes: readonly string[];
  /** Those of permissionModes that drop the agent's own safety checks: refused unless the operator allows them. */
  readonly dangerousModes: readonly string[];
  readonly policySettings: PolicySettings;
  /** Its permission prompts, when it can forward them to the approver (§18). */
  readonly permissionPrompts?: PermissionPrompts;
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

/** An agent CLI's own store of conversations (§20): read, never written. */
export interface SessionStore {
  /** Whose conversations they are: the runtime's label, "Claude Code". */
  readonly label: string;
  /** The folder where it keeps a directory's conversations, named when it holds none. */
  folderOf(dir: string): string;
  /** The directory as the CLI files its conversations (links resolved), which jobs' worktrees are compared with. */
  realPath(dir: string): string;
  /** The directory's conversations, most recently active first, at most `limit`; throws when they cannot be read. */
  list(dir: string, limit: number): AgentSession[];
}

type Env = Readonly<Record<string, string | undefined>>;

export interface Runtime<Reader extends AgentOutputReader = AgentOutputReader> extends RuntimeTraits {
  /** The program and its argv; the prompt always goes to stdin, never argv (§10). */
  /** The command, its argv, and what it adds to the agent's environment (a secret, never argv). */
  invocation(spec: AgentSpec): { command: string; args: string[]; env?: Readonly<Record<string, string>> };
  /** The agent's environment, from the server's own and the variables it adds (§7.2). */
  environment(base: Env, extra: Readonly<Record<string, string>>): Record<string, string | undefined>;
  createReader(options: ReaderOptions): Reader;
  /** How the agent's end reads as an outcome (§7.3). */
  outcome(exit: ChildExit, reader: Reader, disk: StateDisk | undefined): AgentOutcome;
  /** What doctor checks of its login or key, given the environment, the home directory and what `--version` printed. */
  readiness?(env: Env, home: string, version: string): ReadinessProbe;
  /**
   * Its store of conversations, where the environment and home directory put it (§20); absent when it keeps none
   * this server can read. Throws INVALID_ARGUMENT, saying what to set, when it cannot tell where that is.
   */
  sessions?(env: Env, home: string | undefined): SessionStore;
}
