/**
 * The command line for humans: `jobs`, `show`, `kill`, `prune` and
 * `doctor`. It reads the state directory through state.ts, as the server
 * does, and gets everything else (environment, streams, clock, the process
 * layer, running a program) from main.ts.
 *
 * Exit codes: 0 ok, 1 failure (no such job, a kill that left survivors, a
 * failed doctor check), 2 usage error. `--json` prints one JSON document on
 * stdout instead of text.
 */
import { accessSync, constants as fsConstants, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

import { ClaudeStream, DEFAULT_CLAUDE_BIN, type AgentOptions } from "../runtimes/claude/claude.js";
import { sleep, type Clock } from "../core/clock.js";
import { DEPTH_VARIABLE, loadConfig, type Config, type Host } from "../config.js";
import { resolveRoots } from "../hosts/local/directory.js";
import { DispatchError, quoted, toDispatchError } from "../core/errors.js";
import { KILL_REASON_TEXT } from "../jobs/registry.js";
import { createLogger, type Logger, type TextSink } from "../core/log.js";
import type { KillReport, ProcessControl } from "../hosts/local/process.js";
import {
  choosePrunable,
  isFinishedStatus,
  isJobId,
  readFileRange,
  stateDirectory,
  StateError,
  StateStore,
  type JobRecord,
  type ProcessIdentity,
  type StoredOutcome,
} from "../store/state-store.js";
import { SERVER_NAME, SERVER_VERSION } from "../core/version.js";

/** What main.ts hands the CLI; nothing here touches process.* itself. */
export interface CliIo {
  env: Readonly<Record<string, string | undefined>>;
  host: Partial<Host> | undefined;
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
  /** This user's uid, which the state directory must belong to; undefined on Windows (§15.1). */
  uid?: number | undefined;
}

export interface RunFileResult {
  ok: boolean;
  stdout: string;
  stderr: string;
  error?: string | undefined;
}

const COMMANDS = ["jobs", "show", "kill", "prune", "doctor", "help"] as const;
type Command = (typeof COMMANDS)[number];

/** `jobs` without --all: every unfinished job and this many of the most recently finished. */
const RECENT_FINISHED = 20;
const PREVIEW_COLUMN_CHARS = 60;
const RESULT_SHOWN_CHARS = 2000;
const TRANSCRIPT_TAIL_LINES = 20;
const STDERR_TAIL_LINES = 10;
const STDERR_TAIL_BYTES = 16 * 1024;
/** Transcript kept while replaying stdout.jsonl for `show`: plenty for its last lines. */
const SHOW_TRANSCRIPT_CHARS = 256 * 1024;
/** The server's default line bound: a longer line ended the job anyway (§7.3). */
const MAX_OUTPUT_LINE_BYTES = 64 * 1024 * 1024;
const VERSION_TIMEOUT_MS = 10_000;
/** A tree whose processes survived SIGKILL is never idle: wait this long at most. */
const IDLE_WAIT_MS = 5000;
/** The shortest id prefix `show` and `kill` take, in hex digits: as git's, short to type yet rarely ambiguous. */
const MIN_ID_PREFIX_HEX = 4;
/**
 * Set per process, never by an operator: the depth a server gives its agents
 * (§7.4) and the marker on each agent's tree (process.ts's TREE_MARKER_VARIABLE).
 * Pasted into a host's configuration they would gate or mislabel every server.
 */
const PER_PROCESS_VARIABLES: ReadonlySet<string> = new Set([DEPTH_VARIABLE, "CLAUDE_DISPATCH_TREE"]);

const USAGE = `Usage: claude-dispatch [COMMAND] [--json]

Without a command, claude-dispatch is an MCP server on stdio, started by an MCP host.

Commands:
  jobs [--all]                  unfinished jobs and the ${RECENT_FINISHED} most recently finished (--all: every job)
  show ID                       one job: its record, prompt, result and the tail of its output
  kill ID                       kill a job's whole process tree
                                (ID: a job id, or a unique prefix of one, at least ${MIN_ID_PREFIX_HEX} hex digits)
  prune [--older-than AGE]      delete finished jobs (all, or those finished more than AGE ago: 30m, 12h, 7d)
  doctor                        check claude, the state directory and the configuration; print the host config
  help, --help, -h              this text
  --version, -V                 the version

Every command takes --json: one JSON document on stdout instead of text.
Jobs are read from CLAUDE_DISPATCH_STATE_DIR, else $XDG_STATE_HOME/claude-dispatch,
else ~/.local/state/claude-dispatch (%LOCALAPPDATA%\\claude-dispatch on Windows).
`;

const SHORT_USAGE = "Usage: claude-dispatch jobs|show ID|kill ID|prune|doctor [--json]; see claude-dispatch --help\n";

/** A command line we cannot act on: exit 2. */
class UsageError extends Error {}

interface Invocation {
  command: Command;
  json: boolean;
  help: boolean;
  all: boolean;
  olderThanMs: number | undefined;
  id: string | undefined;
}

export async function runCli(args: string[], io: CliIo): Promise<number> {
  const [first] = args;
  if (first === "--version" || first === "-V") {
    const json = args.slice(1).includes("--json");
    if (args.slice(1).some((arg) => arg !== "--json")) return usageError(io, `${first} takes no arguments but --json`);
    io.stdout.write(json ? toJson({ name: SERVER_NAME, version: SERVER_VERSION }) : `${SERVER_NAME} ${SERVER_VERSION}\n`);
    return 0;
  }
  if (first === "--help" || first === "-h") {
    io.stdout.write(USAGE);
    return 0;
  }
  let invocation: Invocation;
  try {
    invocation = parseInvocation(args);
  } catch (error) {
    if (error instanceof UsageError) return usageError(io, error.message);
    throw error;
  }
  if (invocation.help || invocation.command === "help") {
    io.stdout.write(USAGE);
    return 0;
  }
  try {
    return await runCommand(invocation, io);
  } catch (error) {
    const failure = toDispatchError(error);
    const matches = failure instanceof AmbiguousJobId ? failure.matches : undefined;
    if (invocation.json) io.stdout.write(toJson({ error: { code: failure.code, message: failure.message, ...(matches ? { matches } : {}) } }));
    else if (failure instanceof AmbiguousJobId) io.stderr.write(`claude-dispatch: ${failure.summary}:\n${indent(matchTable(failure.matches).join("\n"))}\n`);
    else io.stderr.write(`claude-dispatch: ${failure.message}\n`);
    return 1;
  }
}

function usageError(io: CliIo, message: string): number {
  io.stderr.write(`claude-dispatch: ${message}\n${SHORT_USAGE}`);
  return 2;
}

function parseInvocation(args: readonly string[]): Invocation {
  const [name = "help", ...rest] = args;
  if (!(COMMANDS as readonly string[]).includes(name)) {
    throw new UsageError(name.startsWith("-") ? `unknown option ${echo(name)}` : `unknown command ${echo(name)}`);
  }
  const command = name as Command;
  const invocation: Invocation = { command, json: false, help: false, all: false, olderThanMs: undefined, id: undefined };
  const positional: string[] = [];
  for (let i = 0; i < rest.length; i += 1) {
    const arg = rest[i] as string;
    const equals = arg.startsWith("--") ? arg.indexOf("=") : -1;
    const flag = equals > 0 ? arg.slice(0, equals) : arg;
    const inline = equals > 0 ? arg.slice(equals + 1) : undefined;
    if (flag === "--older-than" && command === "prune") {
      i += inline === undefined ? 1 : 0;
      const value = inline ?? rest[i];
      if (value === undefined) throw new UsageError("--older-than needs an age such as 30m, 12h or 7d");
      invocation.olderThanMs = parseDuration(value);
      continue;
    }
    if (inline !== undefined) throw new UsageError(`${echo(flag)} takes no value`);
    if (flag === "--json") invocation.json = true;
    else if (flag === "--help" || flag === "-h") invocation.help = true;
    else if (flag === "--all" && command === "jobs") invocation.all = true;
    else if (flag.startsWith("-") && flag !== "-") throw new UsageError(`unknown option ${echo(flag)} for ${command}`);
    else positional.push(arg);
  }
  if (invocation.help) return invocation;
  const takesId = command === "show" || command === "kill";
  if (!takesId && positional.length > 0) throw new UsageError(`${command} takes no arguments, got ${echo(positional[0] as string)}`);
  if (takesId) {
    if (positional.length !== 1) throw new UsageError(`${command} needs exactly one job id`);
    const id = positional[0] as string;
    // Ids become folder names: nothing but hex and dashes gets further, and a prefix is only compared with names read from the folder.
    if (!isIdOrPrefix(id)) {
      throw new UsageError(
        `not a job id: ${echo(id)} (ids are UUIDs, as \`claude-dispatch jobs\` lists them, or a unique prefix of one, at least ${MIN_ID_PREFIX_HEX} hex digits)`,
      );
    }
    invocation.id = id;
  }
  return invocation;
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "30m", "12h", "7d" (also "45s") to milliseconds. */
function parseDuration(text: string): number {
  const match = /^(\d{1,6})([smhd])$/.exec(text.trim());
  if (!match) throw new UsageError(`not an age: ${echo(text)}; use a number and s, m, h or d, such as 30m, 12h or 7d`);
  return Number(match[1]) * (DURATION_UNITS_MS[match[2] as string] as number);
}

/** What every command works with. */
interface Context {
  io: CliIo;
  store: StateStore;
  json: boolean;
  now: number;
}

async function runCommand(invocation: Invocation, io: CliIo): Promise<number> {
  if (invocation.command === "doctor") return doctor(io, invocation.json);
  // Only the state directory is needed: a bad unrelated variable must not stop a kill.
  let root: string;
  try {
    root = stateDirectory(io.env, io.host?.platform ?? "linux", io.host?.home ?? "");
  } catch (error) {
    if (error instanceof StateError) throw new DispatchError("STATE_ERROR", error.message);
    throw error;
  }
  const store = new StateStore(root, { uid: io.uid });
  try {
    // Never list, show or kill from a directory that is not ours: its records could name any process.
    store.check();
  } catch (error) {
    if (error instanceof StateError) throw new DispatchError("STATE_ERROR", error.message);
    throw error;
  }
  const context: Context = { io, store, json: invocation.json, now: io.clock.now() };
  switch (invocation.command) {
    case "jobs":
      return listJobs(context, invocation.all);
    case "show":
      return showJob(context, resolveJobId(context, invocation.id as string));
    case "kill":
      return killJob(context, resolveJobId(context, invocation.id as string));
    case "prune":
      return prune(context, invocation.olderThanMs);
    default:
      throw new Error(`unhandled command ${invocation.command}`);
  }
}

function emit(context: Context, document: unknown, text: string): void {
  context.io.stdout.write(context.json ? toJson(document) : text);
}

function toJson(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

function notFound(context: Context, id: string): DispatchError {
  return new DispatchError("JOB_NOT_FOUND", `no job ${id} in ${context.store.root}`);
}

/* ------------------------------------------------------------------ *
 * Job ids and their prefixes
 * ------------------------------------------------------------------ */

const ID_CHARACTERS = /^[0-9a-f-]{1,36}$/i;

function isIdOrPrefix(text: string): boolean {
  return ID_CHARACTERS.test(text) && text.replaceAll("-", "").length >= MIN_ID_PREFIX_HEX;
}

interface JobMatch {
  id: string;
  /** Null for a folder without a readable record (one being created, or torn). */
  status: JobRecord["status"] | null;
  prompt_preview: string | null;
}

/** A prefix that fits several jobs: the user picks one of them. */
class AmbiguousJobId extends DispatchError {
  constructor(
    readonly summary: string,
    readonly matches: readonly JobMatch[],
  ) {
    super("INVALID_ARGUMENT", `${summary}: ${matches.map((match) => match.id).join(", ")}`);
  }
}

/** A whole id as it is; a prefix to the one job whose folder name starts with it. */
function resolveJobId(context: Context, typed: string): string {
  const prefix = typed.toLowerCase();
  if (isJobId(prefix)) return prefix;
  const { store } = context;
  const matches = jobFolderNames(store).filter((name) => name.startsWith(prefix));
  if (matches.length === 1) return matches[0] as string;
  if (matches.length === 0) throw new DispatchError("JOB_NOT_FOUND", `no job id starts with ${echo(typed)} in ${store.root}`);
  throw new AmbiguousJobId(
    `${echo(typed)} matches ${matches.length} jobs in ${store.root}; give more of the id`,
    matches.map((id) => {
      const record = store.read(id);
      return { id, status: record?.status ?? null, prompt_preview: record?.prompt_preview ?? null };
    }),
  );
}

/** The names of the job folders (only UUIDs), oldest name first so that a listing is stable. */
function jobFolderNames(store: StateStore): string[] {
  let names: string[];
  try {
    names = readdirSync(store.jobsDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw new DispatchError("STATE_ERROR", `cannot list ${store.jobsDir}: ${(error as Error).message}`);
  }
  return names.filter(isJobId).sort();
}

function matchTable(matches: readonly JobMatch[]): string[] {
  const cells = matches.map((match) => [match.id, match.status ?? "-", printable(clip(match.prompt_preview ?? "(no record)", PREVIEW_COLUMN_CHARS))]);
  return table(["ID", "STATUS", "PROMPT"], cells, new Set());
}

/* ------------------------------------------------------------------ *
 * jobs
 * ------------------------------------------------------------------ */

interface JobRow {
  id: string;
  kind: JobRecord["kind"];
  status: JobRecord["status"];
  cwd: string;
  submitted_at: number;
  started_at?: number;
  finished_at?: number;
  age_s: number;
  turns: number;
  cost_usd?: number;
  prompt_preview: string;
}

function listJobs(context: Context, all: boolean): number {
  const { records, skipped } = context.store.loadAll();
  const shown = all ? records : unfinishedAndRecent(records);
  const rows = shown.map((record) => jobRow(context, record));
  const hidden = records.length - shown.length;
  const document = { state_dir: context.store.root, jobs: rows, hidden_finished: hidden, skipped };
  const home = context.io.host?.home;
  const lines: string[] = [];
  if (rows.length === 0) lines.push(`No jobs in ${context.store.root}.`);
  else {
    const cells = rows.map((row) => [
      row.id,
      row.status,
      formatAge(row.age_s * 1000),
      printable(shortenHome(row.cwd, home)),
      String(row.turns),
      row.cost_usd === undefined ? "-" : formatCost(row.cost_usd),
      printable(clip(row.prompt_preview, PREVIEW_COLUMN_CHARS)),
    ]);
    lines.push(...table(["ID", "STATUS", "AGE", "CWD", "TURNS", "COST", "PROMPT"], cells, new Set([4, 5])));
  }
  if (hidden > 0) lines.push(`(${hidden} older finished job${hidden === 1 ? "" : "s"} not shown; --all lists every job)`);
  for (const { id, reason } of skipped) lines.push(`(skipped ${id}: ${reason})`);
  emit(context, document, `${lines.join("\n")}\n`);
  return 0;
}

/** Every queued or running job, and the most recently finished ones; oldest first, as loadAll sorts them. */
function unfinishedAndRecent(records: readonly JobRecord[]): JobRecord[] {
  const recent = new Set(
    records
      .filter((record) => isFinishedStatus(record.status))
      .sort((a, b) => (b.finished_at ?? b.submitted_at) - (a.finished_at ?? a.submitted_at))
      .slice(0, RECENT_FINISHED),
  );
  return records.filter((record) => !isFinishedStatus(record.status) || recent.has(record));
}

function jobRow(context: Context, record: JobRecord): JobRow {
  const { turns, costUsd } = progressOf(context.store, record);
  const row: JobRow = {
    id: record.id,
    kind: record.kind,
    status: record.status,
    cwd: record.cwd,
    submitted_at: record.submitted_at,
    age_s: Math.max(0, Math.round((context.now - record.submitted_at) / 1000)),
    turns,
    prompt_preview: record.prompt_preview,
  };
  if (record.started_at !== undefined) row.started_at = record.started_at;
  if (record.finished_at !== undefined) row.finished_at = record.finished_at;
  if (costUsd !== undefined) row.cost_usd = costUsd;
  return row;
}

/** Turns and cost: from the record once finished; while running, from what the agent has printed so far. */
function progressOf(store: StateStore, record: JobRecord): { turns: number; costUsd: number | undefined } {
  if (record.status === "running") {
    const live = replayOutput(store, record.id, 1).live();
    return { turns: live.turns, costUsd: live.costUsd ?? record.cost_usd };
  }
  const result = record.outcome?.result;
  return { turns: Math.round(record.turns ?? result?.numTurns ?? 0), costUsd: record.cost_usd ?? result?.costUsd };
}

/** Reads a job's stdout.jsonl through the same parser the server uses. */
function replayOutput(store: StateStore, id: string, transcriptChars: number): ClaudeStream {
  return store.replay(id, { maxLineBytes: MAX_OUTPUT_LINE_BYTES, transcriptChars });
}

/* ------------------------------------------------------------------ *
 * show
 * ------------------------------------------------------------------ */

async function showJob(context: Context, id: string): Promise<number> {
  const { store, io } = context;
  const record = store.read(id);
  if (!record) throw notFound(context, id);
  const output = replayOutput(store, id, SHOW_TRANSCRIPT_CHARS);
  const live = output.live();
  const control = await io.processControl(createLogger(io.stderr, "warn"));
  const ownerAlive = await control.isAlive(record.owner.pid, record.owner.start_time);
  // A finished job's agent pid may name another process by now: only a running job's is checked.
  const agentAlive =
    record.status === "running" && record.agent?.pid !== undefined ? await control.isAlive(record.agent.pid, record.agent.start_time, record.agent.tree_marker) : undefined;
  await settle(control, io.clock);

  const prompt = store.readPrompt(id);
  const result = store.readResult(id);
  const transcriptTail = lastLines(output.transcript.page(output.transcript.start, Number.POSITIVE_INFINITY).text, TRANSCRIPT_TAIL_LINES);
  const stderrTail = lastLines(readTail(store, id), STDERR_TAIL_LINES);
  const { turns, costUsd } = progressOf(store, record);
  const sessionId = record.outcome?.result?.sessionId ?? live.sessionId;
  const document = {
    state_dir: store.root,
    record,
    owner_alive: ownerAlive,
    ...(agentAlive === undefined ? {} : { agent_alive: agentAlive }),
    ...(sessionId === undefined ? {} : { session_id: sessionId }),
    turns,
    ...(costUsd === undefined ? {} : { cost_usd: costUsd }),
    ...(record.status === "running" && live.lastTool ? { last_tool: live.lastTool } : {}),
    prompt: prompt ?? null,
    result: result ?? null,
    result_path: result === undefined ? null : store.file(id, "result.txt"),
    transcript_tail: transcriptTail,
    stderr_tail: stderrTail,
  };

  const home = io.host?.home;
  const facts: [string, string][] = [
    ["status", record.status],
    ["kind", record.kind],
    ["cwd", printable(shortenHome(record.cwd, home))],
    ["submitted", `${isoTime(record.submitted_at)} (${formatAge(context.now - record.submitted_at)} ago)`],
  ];
  if (record.started_at !== undefined) facts.push(["started", isoTime(record.started_at)]);
  if (record.finished_at !== undefined) {
    facts.push(["finished", `${isoTime(record.finished_at)} (took ${formatAge(record.finished_at - (record.started_at ?? record.submitted_at))})`]);
  }
  const unknown = "cannot be told: the process table could not be read, or no start time was recorded";
  facts.push(["owner", `server pid ${record.owner.pid} (${ownerAlive === undefined ? unknown : ownerAlive ? "running" : ownerText(record)})`]);
  if (record.agent) {
    const alive = record.status !== "running" ? "" : agentAlive === undefined ? ` (${unknown})` : agentAlive ? " (running)" : " (not running)";
    facts.push(["agent", `pid ${record.agent.pid}${record.agent.start_time ? `, start time ${record.agent.start_time}` : ""}${alive}`]);
  }
  if (sessionId !== undefined) facts.push(["session", printable(sessionId)]);
  if (record.resume_session_id !== undefined) facts.push(["resumed", record.resume_session_id]);
  facts.push(["turns", String(turns)]);
  if (costUsd !== undefined) facts.push(["cost", formatCost(costUsd)]);
  if (record.status === "running" && live.lastTool) facts.push(["last tool", printable(live.lastTool)]);
  if (record.timeout_ms !== undefined) facts.push(["timeout", formatAge(record.timeout_ms)]);
  const options = optionsText(record.options);
  if (options) facts.push(["options", printable(options)]);
  if (record.kill_reason !== undefined) facts.push(["killed by", printable(record.kill_reason)]);
  const error = errorText(record.outcome);
  if (error) facts.push(["error", printable(error)]);

  const width = Math.max(...facts.map(([name]) => name.length));
  const sections = [`job ${record.id}`, ...facts.map(([name, value]) => `  ${name.padEnd(width)}  ${value}`)];
  sections.push("", "prompt:", indent(printable(prompt ?? `${record.prompt_preview} (prompt.txt is missing: this is the preview)`)));
  if (result !== undefined) {
    const clipped = result.length > RESULT_SHOWN_CHARS;
    sections.push("", `result (${result.length} characters):`, indent(printable(clipped ? result.slice(0, RESULT_SHOWN_CHARS) : result)));
    if (clipped) sections.push(`  […${result.length - RESULT_SHOWN_CHARS} more characters; the whole result is in ${store.file(id, "result.txt")}]`);
  }
  if (transcriptTail.length > 0) sections.push("", `transcript (last ${transcriptTail.length} lines):`, indent(printable(transcriptTail.join("\n"))));
  if (stderrTail.length > 0) sections.push("", `stderr (last ${stderrTail.length} lines):`, indent(printable(stderrTail.join("\n"))));
  emit(context, document, `${sections.join("\n")}\n`);
  return 0;
}

function ownerText(record: JobRecord): string {
  if (isFinishedStatus(record.status)) return "not running";
  return "not running: the next server to start adopts this job";
}

function optionsText(options: AgentOptions): string {
  return Object.entries(options)
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => `${name}=${clip(Array.isArray(value) ? value.join(",") : String(value), 80)}`)
    .join(" ");
}

function errorText(outcome: StoredOutcome | undefined): string | undefined {
  if (!outcome || outcome.ok) return undefined;
  return `${outcome.code ?? "?"}: ${outcome.detail ?? ""}`;
}

/** The last bytes of stderr.log; a first line cut in the middle is dropped. */
function readTail(store: StateStore, id: string): string {
  let size: number;
  try {
    size = statSync(store.file(id, "stderr.log")).size;
  } catch {
    return "";
  }
  const from = Math.max(0, size - STDERR_TAIL_BYTES);
  const text = readFileRange(store.file(id, "stderr.log"), from, STDERR_TAIL_BYTES)?.toString("utf8") ?? "";
  return from > 0 ? text.slice(text.indexOf("\n") + 1) : text;
}

function lastLines(text: string, count: number): string[] {
  const lines = text.split("\n");
  while (lines.length > 0 && lines.at(-1)?.trim() === "") lines.pop();
  return lines.slice(-count).map((line) => clip(line, 400));
}

/* ------------------------------------------------------------------ *
 * kill
 * ------------------------------------------------------------------ */

type FinishedBy = "server" | "cli" | "adopting server";

async function killJob(context: Context, id: string): Promise<number> {
  const { store, io } = context;
  const before = store.read(id);
  if (!before) throw notFound(context, id);
  if (isFinishedStatus(before.status)) {
    emit(
      context,
      { id, status: before.status, already_finished: true, kill_requested: false, survivors: [] },
      `Job ${id} had already finished (${before.status}); nothing was killed.\n`,
    );
    return 0;
  }
  // The marker first: the owning server reads it, so a queued job never starts
  // and a running one that exits is recorded as killed by "cli".
  store.requestKill(id, "cli", io.clock.now());
  // The server may have started (or finished) the job meanwhile.
  const record = store.read(id) ?? before;
  const control = await io.processControl(createLogger(io.stderr, "warn"));
  let tree: KillReport | undefined;
  let finishedBy: FinishedBy;
  let status = record.status;
  try {
    tree = await killAgent(control, store, record);
    // A server that may be alive (unknown counts) finishes its own record.
    if ((await control.isAlive(record.owner.pid, record.owner.start_time)) !== false) {
      finishedBy = "server";
    } else {
      // Nobody else will finish this record: unless a live server is adopting the job right now.
      const finished = await finishRecord(context, control, record, tree?.survivors ?? []);
      finishedBy = finished ? "cli" : "adopting server";
      if (finished) status = finished.status;
    }
  } finally {
    await settle(control, io.clock);
  }
  const survivors = tree?.survivors ?? [];
  const lines: string[] = [];
  if (record.status === "queued") lines.push(`Job ${id} was queued: it will not start.`);
  else if (!tree) lines.push(`Job ${id}'s agent is not running${record.agent ? ` (pid ${record.agent.pid})` : ""}: there was nothing to signal.`);
  else if (survivors.length === 0) lines.push(`Killed job ${id}'s process tree: ${tree.signalled} process${tree.signalled === 1 ? "" : "es"} signalled, none left.`);
  else lines.push(`KILL_FAILED: job ${id}: processes ${survivors.join(", ")} survived SIGKILL.`);
  if (finishedBy === "cli") lines.push(`Its server (pid ${record.owner.pid}) is gone, so the record was finished here: ${status}.`);
  else if (finishedBy === "server" && record.status === "queued") lines.push(`Its server (pid ${record.owner.pid}) records it as killed when the job's turn comes.`);
  else if (finishedBy === "server") lines.push(`Its server (pid ${record.owner.pid}) records it as killed.`);
  else lines.push("A server that is adopting the job records it as killed.");
  emit(
    context,
    { id, status, already_finished: false, kill_requested: true, signalled: tree?.signalled ?? 0, survivors, finished_by: finishedBy },
    `${lines.join("\n")}\n`,
  );
  return survivors.length > 0 ? 1 : 0;
}

/** Kills a running job's whole tree, if its agent (the same process: pid and start time) is alive. */
async function killAgent(control: ProcessControl, store: StateStore, record: JobRecord): Promise<KillReport | undefined> {
  const agent = record.agent;
  if (record.status !== "running" || !agent) return undefined;
  let pid = agent.pid;
  let startTime = agent.start_time;
  if (pid === undefined) {
    // Recorded just before the spawn, with the marker alone: the agent is the process carrying it (§15.2).
    const found = agent.tree_marker === undefined ? undefined : await control.findMarked(agent.tree_marker);
    if (!found) return undefined;
    ({ pid, startTime } = found);
  } else if ((await control.isAlive(pid, startTime, agent.tree_marker)) !== true) {
    // Signalled only when it is certainly the agent: same start time, or its tree marker.
    return undefined;
  }
  const handle = control.attach({
    pid,
    startTime,
    marker: agent.tree_marker,
    output: store.outputFiles(record.id),
    onStdout: () => undefined,
    stderrTailBytes: 0,
  });
  return handle.killTree();
}

/**
 * The owner is gone: claim the job as a restarting server would (§15.3) and
 * write its final record. A claim held by a live process is a server adopting
 * the job right now; that server reads the kill marker and finishes it.
 * Returns the record written, or undefined when another process finishes it.
 */
async function finishRecord(context: Context, control: ProcessControl, record: JobRecord, survivors: readonly number[]): Promise<JobRecord | undefined> {
  const { store, io } = context;
  const generation = record.generation + 1;
  const self = io.identity();
  if (!(await store.claimJob(record.id, generation, self, (holder) => control.isAlive(holder.pid, holder.start_time)))) return undefined;
  const current = store.read(record.id) ?? record;
  if (isFinishedStatus(current.status)) return current;
  const live = replayOutput(store, record.id, 1).live();
  const outcome: StoredOutcome =
    survivors.length > 0
      ? { ok: false, code: "KILL_FAILED", detail: `processes ${survivors.join(", ")} survived SIGKILL` }
      : { ok: false, code: "KILLED", detail: `killed ${KILL_REASON_TEXT.cli}` };
  const final: JobRecord = { ...current, status: "killed", kill_reason: "cli", finished_at: io.clock.now(), generation, outcome };
  if (live.turns > 0) final.turns = live.turns;
  if (live.costUsd !== undefined) final.cost_usd = live.costUsd;
  store.write(final);
  return final;
}

/** Waits for the process layer to stop following the killed tree, so no timer keeps this process alive. */
async function settle(control: ProcessControl, clock: Clock): Promise<void> {
  const stop = new AbortController();
  await Promise.race([control.idle(), sleep(clock, IDLE_WAIT_MS, stop.signal)]);
  stop.abort();
}

/* ------------------------------------------------------------------ *
 * prune
 * ------------------------------------------------------------------ */

function prune(context: Context, olderThanMs: number | undefined): number {
  const { store } = context;
  const { records } = store.loadAll();
  const sizes = records.map((record) => ({
    id: record.id,
    status: record.status,
    finished_at: record.finished_at,
    // Unfinished jobs are never chosen, and no disk cap applies here: their size does not matter.
    bytes: isFinishedStatus(record.status) ? store.size(record.id) : 0,
  }));
  const chosen = choosePrunable(sizes, context.now, olderThanMs ?? 0, Number.POSITIVE_INFINITY);
  const removed: string[] = [];
  const failed: { id: string; reason: string }[] = [];
  let bytesFreed = 0;
  for (const id of chosen) {
    try {
      store.remove(id);
      removed.push(id);
      bytesFreed += sizes.find((job) => job.id === id)?.bytes ?? 0;
    } catch (error) {
      failed.push({ id, reason: (error as Error).message });
    }
  }
  const unfinished = records.filter((record) => !isFinishedStatus(record.status)).length;
  const kept = records.length - removed.length;
  const lines = [
    `Removed ${removed.length} finished job${removed.length === 1 ? "" : "s"} from ${store.root}, freeing ${formatBytes(bytesFreed)}.`,
    `Kept ${kept} (${unfinished} queued or running${olderThanMs === undefined ? "" : `, and those finished within ${formatAge(olderThanMs)}`}).`,
    ...failed.map(({ id, reason }) => `Could not remove ${id}: ${reason}`),
  ];
  emit(context, { state_dir: store.root, removed, bytes_freed: bytesFreed, kept, failed }, `${lines.join("\n")}\n`);
  return failed.length > 0 ? 1 : 0;
}

/* ------------------------------------------------------------------ *
 * doctor
 * ------------------------------------------------------------------ */

type CheckStatus = "ok" | "warn" | "fail";

interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
}

async function doctor(io: CliIo, json: boolean): Promise<number> {
  const checks: Check[] = [];
  let config: Config | undefined;
  try {
    config = loadConfig(io.env, io.host);
    checks.push({ name: "configuration", status: "ok", detail: "every CLAUDE_DISPATCH_* variable is valid" });
  } catch (error) {
    // The server would refuse to start: say why, and check what can still be checked.
    checks.push({ name: "configuration", status: "fail", detail: `${(error as Error).message}; the server will not start` });
  }
  checks.push(await checkClaude(io, config?.claudeBin ?? DEFAULT_CLAUDE_BIN));
  checks.push(...checkStateDirectory(io, config));
  if (config) checks.push(...(await policyChecks(config)));

  const ok = checks.every((check) => check.status !== "fail");
  const install: Install = { nodePath: io.nodePath, mainPath: io.mainPath, platform: io.host?.platform };
  const hostConfig = { mcpServers: { [SERVER_NAME]: { command: io.nodePath, args: [io.mainPath], env: hostEnvironment(io.env) } } };
  const mcpAdd = claudeMcpAddLine(install, io.env);
  if (json) {
    io.stdout.write(toJson({ ok, checks, host_config: hostConfig, claude_mcp_add: mcpAdd }));
  } else {
    const lines = checks.map((check) => `${check.status.padEnd(4)}  ${check.name}: ${printable(check.detail)}`);
    lines.push(
      "",
      "Host configuration for this install (Claude Desktop, Cursor: mcpServers in their JSON config):",
      indent(printable(JSON.stringify(hostConfig, null, 2))),
      "",
      "Claude Code (every project: user scope):",
      indent(printable(mcpAdd)),
    );
    io.stdout.write(`${lines.join("\n")}\n`);
  }
  return ok ? 0 : 1;
}

async function checkClaude(io: CliIo, bin: string): Promise<Check> {
  const name = "claude";
  const program = findProgram(bin, io);
  if (program === undefined) {
    const where = hasDirectory(bin) ? `${bin} is not an executable file` : `${bin} not found on PATH`;
    return { name, status: "fail", detail: `${where}; set CLAUDE_DISPATCH_CLAUDE_BIN to the output of \`which claude\`` };
  }
  // execFile cannot run a .cmd or .bat without a shell, and a shell is what we never start.
  if (io.host?.platform === "win32" && /\.(cmd|bat)$/i.test(program)) {
    return { name, status: "warn", detail: `${program} (an npm shim; its version was not checked)` };
  }
  const run = await io.runFile(program, ["--version"], VERSION_TIMEOUT_MS);
  if (!run.ok) {
    const why = firstLine(run.stderr) || run.error || "it failed";
    return { name, status: "fail", detail: `${program} --version: ${why}` };
  }
  return { name, status: "ok", detail: `${program} (${firstLine(run.stdout) || "no version printed"})` };
}

function hasDirectory(bin: string): boolean {
  return bin.includes("/") || bin.includes("\\");
}

/** Like execvp, but only absolute PATH entries: the path of the program the server would run, or undefined. */
function findProgram(bin: string, io: CliIo): string | undefined {
  const windows = io.host?.platform === "win32";
  const pathApi = windows ? path.win32 : path.posix;
  if (hasDirectory(bin)) return isProgram(bin, windows) ? bin : undefined;
  const directories = (io.env.PATH ?? io.env.Path ?? "").split(io.host?.pathDelimiter ?? (windows ? ";" : ":"));
  const extensions = windows ? ["", ...(io.env.PATHEXT ?? ".COM;.EXE;.BAT;.CMD").split(";").filter(Boolean)] : [""];
  for (const directory of directories) {
    if (!pathApi.isAbsolute(directory)) continue;
    for (const extension of extensions) {
      const candidate = pathApi.join(directory, bin + extension);
      if (isProgram(candidate, windows)) return candidate;
    }
  }
  return undefined;
}

function isProgram(file: string, windows: boolean): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    if (!windows) accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function checkStateDirectory(io: CliIo, config: Config | undefined): Check[] {
  const name = "state directory";
  let root: string;
  try {
    root = config?.stateDir ?? stateDirectory(io.env, io.host?.platform ?? "linux", io.host?.home ?? "");
  } catch (error) {
    return [{ name, status: "fail", detail: (error as Error).message }];
  }
  const store = new StateStore(root, { uid: io.uid });
  try {
    store.check();
  } catch (error) {
    return [{ name, status: "fail", detail: `${(error as Error).message}; the server will not start` }];
  }
  let info;
  try {
    info = statSync(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return [{ name, status: "warn", detail: `${root} does not exist yet; the server creates it (mode 0700) when it starts` }];
    }
    return [{ name, status: "fail", detail: `${root}: ${(error as Error).message}` }];
  }
  if (!info.isDirectory()) return [{ name, status: "fail", detail: `${root} is not a directory` }];
  const probe = path.join(root, `.doctor-${crypto.randomUUID()}.tmp`);
  try {
    writeFileSync(probe, "", { flag: "wx", mode: 0o600 });
    rmSync(probe, { force: true });
  } catch (error) {
    return [{ name, status: "fail", detail: `${root} is not writable: ${(error as Error).message}` }];
  }
  const checks: Check[] = [];
  const mode = info.mode & 0o777;
  if (io.host?.platform !== "win32" && mode !== 0o700) {
    checks.push({ name, status: "warn", detail: `${root} is writable but has mode 0${mode.toString(8)}; the server makes it 0700 when it starts` });
  } else {
    checks.push({ name, status: "ok", detail: `${root} (writable${io.host?.platform === "win32" ? "" : ", mode 0700"})` });
  }
  const { records, skipped } = store.loadAll();
  const bytes = records.reduce((sum, record) => sum + store.size(record.id), 0);
  const count = (status: JobRecord["status"]): number => records.filter((record) => record.status === status).length;
  checks.push({
    name: "jobs",
    status: skipped.length > 0 ? "warn" : "ok",
    detail:
      `${records.length} (${count("running")} running, ${count("queued")} queued), ${formatBytes(bytes)}` +
      (skipped.length > 0 ? `; ${skipped.length} folder${skipped.length === 1 ? "" : "s"} without a readable record` : ""),
  });
  return checks;
}

async function policyChecks(config: Config): Promise<Check[]> {
  const { policy } = config;
  const checks: Check[] = [];
  const bypass = policy.permissionModes.includes("bypassPermissions");
  checks.push({
    name: "permission modes",
    status: bypass ? "warn" : "ok",
    detail: `${policy.permissionModes.join(", ") || "none"}${bypass ? " (bypassPermissions lets an agent do anything without asking)" : ""}; default: ${policy.defaultPermissionMode ?? "none (the user's Claude Code settings)"}`,
  });
  checks.push({
    name: "agent defaults",
    status: "ok",
    detail: [
      `model ${policy.defaultModel ?? "Claude Code's default"}`,
      `max turns ${policy.maxTurns ?? "no cap"}`,
      `max budget ${policy.maxBudgetUsd === undefined ? "no cap" : `$${policy.maxBudgetUsd}`}`,
      `claude_run timeout ${formatAge(policy.defaultTimeoutMs)}`,
    ].join(", "),
  });
  if (config.roots === undefined) {
    checks.push({ name: "roots", status: "warn", detail: "CLAUDE_DISPATCH_ROOTS is unset: agents may work in any directory" });
  } else {
    try {
      checks.push({ name: "roots", status: "ok", detail: (await resolveRoots(config.roots)).join(", ") });
    } catch (error) {
      checks.push({ name: "roots", status: "fail", detail: `${(error as Error).message}; the server will not start` });
    }
  }
  checks.push(
    config.depth >= config.maxDepth
      ? {
          name: "depth",
          status: "warn",
          detail: `CLAUDE_DISPATCH_DEPTH ${config.depth} reaches CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: a server started here offers no tools`,
        }
      : { name: "depth", status: "ok", detail: `${config.depth}, below CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: tools are offered` },
  );
  checks.push({
    name: "on exit",
    status: "ok",
    detail:
      (config.onExit === "keep" ? "keep (agents outlive the server; the next server follows them)" : "kill (the server kills its agents when it stops)") +
      `; finished jobs kept ${formatAge(config.jobRetentionMs)}, at most ${formatBytes(config.stateMaxBytes)}`,
  });
  return checks;
}

/** Where this install is: what a host runs. */
export interface Install {
  nodePath: string;
  mainPath: string;
  platform?: string | undefined;
}

/**
 * The CLAUDE_DISPATCH_* variables of `env` a host must pass for its server to
 * be configured as this process is, by name; the per-process ones left out.
 */
export function hostEnvironment(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const entries = Object.entries(env).filter(
    (entry): entry is [string, string] => entry[0].startsWith("CLAUDE_DISPATCH_") && entry[1] !== undefined && !PER_PROCESS_VARIABLES.has(entry[0]),
  );
  return Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * The `claude mcp add` line for this install and the CLAUDE_DISPATCH_* variables of `env`.
 * User scope: the default (local) scope is the current project only. The --env options
 * come after the name: --env takes several values, and before the name (Claude Code
 * 2.1.332) it takes the name too and the command fails; `--` ends them.
 */
export function claudeMcpAddLine(install: Install, env: Readonly<Record<string, string | undefined>>): string {
  const quote = install.platform === "win32" ? quoteForWindows : quoteForPosix;
  const variables = Object.entries(hostEnvironment(env)).map(([name, value]) => ` --env ${quote(`${name}=${value}`)}`);
  return `claude mcp add -s user ${SERVER_NAME}${variables.join("")} -- ${quote(install.nodePath)} ${quote(install.mainPath)}`;
}

/** The one line on stderr when the server is started from a terminal: it is meant for a host, and how to add it to one. */
export function terminalHint(install: Install, env: Readonly<Record<string, string | undefined>>): string {
  // Absolute paths, as doctor prints them: from a clone, `claude-dispatch` is not on PATH.
  const line = `${SERVER_NAME} is an MCP server on stdio, started by an MCP host. Add it to one, e.g. \`${claudeMcpAddLine(install, env)}\`; run it with --help or doctor for more.`;
  return `${printable(line).replace(/[\n\t]/g, " ")}\n`;
}

/** Single quotes unless the word is plainly safe for a POSIX shell. */
function quoteForPosix(word: string): string {
  return /^[\w./:=@%+-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

function quoteForWindows(word: string): string {
  return /^[\w.\\/:=@%+-]+$/.test(word) ? word : `"${word}"`;
}

/* ------------------------------------------------------------------ *
 * Formatting
 * ------------------------------------------------------------------ */

/** Columns as wide as their content; numbers right-aligned; no trailing spaces. */
function table(header: readonly string[], rows: readonly string[][], rightAligned: ReadonlySet<number>): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, column) => Math.max(...all.map((row) => (row[column] ?? "").length)));
  return all.map((row) =>
    row
      .map((cell, column) => (rightAligned.has(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0)))
      .join("  ")
      .trimEnd(),
  );
}

/** "45s", "3m", "2h", "5d": the largest whole unit. */
function formatAge(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

function formatCost(usd: number): string {
  return `$${usd.toFixed(usd < 0.1 ? 4 : 2)}`;
}

function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

function shortenHome(dir: string, home: string | undefined): string {
  if (!home || home === "/" || home === "\\") return dir;
  if (dir === home) return "~";
  return dir.startsWith(home + path.sep) ? `~${dir.slice(home.length)}` : dir;
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** What the user typed, as a message quotes it: the server's one echo rule (errors.ts quoted, PROTOCOL.md §10), never a terminal escape. */
function echo(text: string): string {
  return printable(quoted(text));
}

function firstLine(text: string): string {
  return text.trim().split("\n")[0]?.trim() ?? "";
}

function indent(text: string): string {
  return text
    .split("\n")
    .map((line) => (line === "" ? "" : `  ${line}`))
    .join("\n");
}

/** Prompts, results and agent output may hold terminal escapes: they are shown, never obeyed. */
function printable(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, "\uFFFD");
}
