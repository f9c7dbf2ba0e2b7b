/**
 * What every command works with: the io main.ts hands the CLI (nothing here
 * touches process.* itself), the state directory opened and checked, and how
 * a command prints its one answer, as text or as a JSON document.
 */
import { sleep, type Clock } from "../core/clock.js";
import type { ThisMachine } from "../agent/machine.js";
import type { Hosts } from "../agent/host.js";
import { DispatchError } from "../core/errors.js";
import { createLogger, type Logger, type TextSink } from "../core/log.js";
import type { ProcessControl } from "../agent/host.js";
import type { ProcessIdentity } from "../store/records.js";
import { StateStore } from "../store/state-store.js";

/** What main.ts hands the CLI; nothing here touches process.* itself. */
export interface CliIo {
  env: Readonly<Record<string, string | undefined>>;
  /** This machine: where state lives, how programs are found, how a command line is quoted for a person. */
  machine: ThisMachine;
  stdout: TextSink;
  stderr: TextSink;
  clock: Clock;
  /** Loads the process layer (liveness checks, tree kills) only for commands that need it. */
  processControl(logger: Logger): Promise<ProcessControl>;
  /** The node binary and main.js of this install, for the host configuration `doctor` prints. */
  nodePath: string;
  mainPath: string;
  /** Runs a program directly (argv, no shell), bounded by timeoutMs. */
  runFile(file: string, args: string[], timeoutMs: number): Promise<RunFileResult>;
  /** This process as a claim file names it, when `kill` finishes the record of a dead server (§15.3). */
  identity(): ProcessIdentity;
  /** A fresh random name, for temporary files (injected: nothing here calls a random source itself). */
  randomName(): string;
  /** This user's uid, which the state directory must belong to; undefined on Windows (§15.1). */
  uid?: number | undefined;
  /**
   * This machine, over the process layer given, and the hosts of CLAUDE_DISPATCH_HOSTS (§21), for `kill` and
   * `doctor`; only this machine when those are unset or invalid. Absent: this command line reaches no host.
   */
  hosts?(processes: () => Promise<ProcessControl>): Promise<Hosts>;
  /** Whether stdout is a terminal: `jobs --watch` redraws only there. Absent: it is not. */
  stdoutIsTerminal?: boolean | undefined;
  /** The size of the terminal on stdout, read when drawn (it may change); a field it does not know is undefined. */
  terminalSize?: (() => { columns: number | undefined; rows: number | undefined }) | undefined;
  /** stdin: `jobs --watch` reads keys from it when it is a terminal, `prune` a person's answer. */
  stdin?: TerminalInput | undefined;
  /**
   * While `jobs --watch` has the screen: SIGINT, SIGTERM and SIGHUP call onInterrupt instead of ending the
   * process, so that the terminal is restored; the function returned gives them back.
   */
  trapInterrupts?: ((onInterrupt: () => void) => () => void) | undefined;
  /**
   * Starts the headless carrier on a state directory with this environment (§15.8) and returns its pid; throws
   * when it cannot. Absent: this command line starts none (tests that run the CLI in process).
   */
  startCarrier?(stateDir: string, env: Readonly<Record<string, string | undefined>>): Promise<number>;
  /**
   * Ends `jobs --watch` and `logs -f` early when aborted (tests). main.ts passes none: Ctrl-C ends `logs -f`
   * as it ends any process, and `jobs --watch` through trapInterrupts, which gives the terminal back first.
   */
  interrupted?: AbortSignal | undefined;
}

/** stdin as the command line reads it (process.stdin, or a test's fake): raw mode only on a terminal. */
export interface TerminalInput {
  readonly isTTY?: boolean | undefined;
  readonly readableEnded?: boolean | undefined;
  setRawMode?(raw: boolean): unknown;
  setEncoding(encoding: "utf8"): unknown;
  on(event: "data" | "end", listener: (chunk: string) => void): unknown;
  off(event: "data" | "end", listener: (chunk: string) => void): unknown;
  resume(): unknown;
  pause(): unknown;
}

export interface RunFileResult {
  ok: boolean;
  stdout: string;
  stderr: string;
  error?: string | undefined;
}

/** What every command but doctor works with. */
export interface Context {
  io: CliIo;
  store: StateStore;
  json: boolean;
  now: number;
}

/** What `jobs --watch` and `logs -f` return when io.interrupted stops them: what a shell reports for Ctrl-C. */
export const INTERRUPTED_EXIT = 130;

/** A terminal that does not say its width is taken to have this many columns. */
export const DEFAULT_TERMINAL_COLUMNS = 80;
/** Beyond any screen: a COLUMNS above it is a mistake, not a width. */
const MAX_COLUMNS = 10_000;

/**
 * The columns a command's tables and notes fit in (§17): COLUMNS when set, else the terminal's width on stdout
 * (80 when it does not say); undefined when stdout is not a terminal, where nothing is cut.
 */
export function outputWidth(io: CliIo): number | undefined {
  const columns = Number(io.env.COLUMNS);
  if (Number.isInteger(columns) && columns > 0 && columns <= MAX_COLUMNS) return columns;
  if (io.stdoutIsTerminal !== true) return undefined;
  return io.terminalSize?.().columns || DEFAULT_TERMINAL_COLUMNS;
}

/** A tree whose processes survived SIGKILL is never idle: wait this long at most. */
const IDLE_WAIT_MS = 5000;

/** The state directory, located and checked: only it is needed, so a bad unrelated variable must not stop a kill. */
export function openContext(io: CliIo, json: boolean): Context {
  // Either step throws a StateError, which is a STATE_ERROR (§15.1).
  const root = io.machine.stateDirectory(io.env);
  const store = new StateStore(root, { uid: io.uid, randomName: () => io.randomName() });
  // Never list, show or kill from a directory that is not ours: its records could name any process.
  store.check();
  return { io, store, json, now: io.clock.now() };
}

export function emit(context: Context, document: unknown, text: string): void {
  context.io.stdout.write(context.json ? toJson(document) : text);
}

export function toJson(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

export function notFound(context: Context, id: string): DispatchError {
  return new DispatchError("JOB_NOT_FOUND", `no job ${id} in ${context.store.root}`);
}

/** The process layer, for the commands that check liveness or kill: its warnings go to stderr. */
export function loadProcessControl(io: CliIo): Promise<ProcessControl> {
  return io.processControl(createLogger(io.stderr, "warn"));
}

/** Whether a host's files are this machine's (§21): a job that ran elsewhere is shown with where it ran. */
export async function filesHere(io: CliIo): Promise<(host: string) => boolean> {
  const hosts = await io.hosts?.(() => loadProcessControl(io));
  return (name) => hosts?.get(name)?.sharesFiles === true;
}

/** Waits for the process layer to stop following the killed tree, so no timer keeps this process alive. */
export async function settle(control: ProcessControl, clock: Clock): Promise<void> {
  const stop = new AbortController();
  await Promise.race([control.idle(), sleep(clock, IDLE_WAIT_MS, stop.signal)]);
  stop.abort();
}
