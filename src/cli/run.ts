/**
 * The command line for humans: `jobs`, `show`, `logs`, `kill`, `approve`
 * and `deny` (one file), `diff`, `merge` and `discard` (one file), `prune`,
 * `sessions` and `doctor`, one file each beside this one.
 * Here: the usage, parsing the arguments, dispatching to a command, and
 * reporting its failure. Commands read the state directory through store/,
 * as the server does, and get everything else (environment, streams, clock,
 * the process layer, running a program) from main.ts.
 *
 * Exit codes: 0 ok, 1 failure (no such job, a kill that left survivors, a
 * request that is not pending, a failed doctor check, a job `logs -f`
 * followed that did not complete), 2 usage error; main.ts exits 141 when
 * the reader of stdout or stderr has gone (§17). `--json` prints one JSON
 * document on stdout instead of text; `logs -f --json` prints JSON Lines.
 */
import path from "node:path";

import { DispatchError, describeThrown, toDispatchError } from "../core/errors.js";
import { SERVER_NAME, SERVER_VERSION } from "../core/version.js";
import { isRequestId } from "../store/records.js";
import { LIMITS } from "../tools/validation.js";
import { answerJob } from "./approve.js";
import { openContext, outputWidth, toJson, type CliIo } from "./context.js";
import { carry } from "./carried.js";
import { doctor } from "./doctor.js";
import { echo, indent } from "./format.js";
import { AmbiguousJobId, isIdOrPrefix, matchTable, MIN_ID_PREFIX_HEX, resolveJobId } from "./job-ids.js";
import { listJobs, RECENT_FINISHED, watchJobs } from "./jobs.js";
import { killJob } from "./kill.js";
import { showLogs } from "./logs.js";
import { prune } from "./prune.js";
import { listSessions } from "./sessions.js";
import { showJob } from "./show.js";
import { worktreeCommand } from "./worktree.js";

const COMMANDS = [
  "jobs",
  "show",
  "logs",
  "kill",
  "approve",
  "deny",
  "diff",
  "merge",
  "discard",
  "prune",
  "sessions",
  "doctor",
  "help",
] as const;
type Command = (typeof COMMANDS)[number];

/** At most 80 columns a line, as every line the command line prints for a person on a terminal of unknown width. */
const USAGE = `Usage: claude-dispatch [COMMAND] [--json]

Without a command, claude-dispatch is an MCP server on stdio, for an MCP host.

Commands:
  jobs [--all] [--watch]   unfinished jobs and the ${RECENT_FINISHED} most recently finished
                           (--all: every job), with the session of each;
                           --watch: redraw every second (q or Ctrl-C quits)
  show ID                  one job: record, requests, prompt, result, output
  logs ID [-f|--follow]    a job's transcript: text, tool calls and results
                           (-f: follow it to its end, then its outcome;
                           exit 1 unless it completed)
  kill ID                  kill a job's whole process tree
  approve ID [REQUEST]     let the agent use the tool it asks permission for
                           (REQUEST: its number, when several are pending)
  deny ID [REQUEST] [--message M]
                           refuse it instead; M is what the agent is told
  diff ID                  a worktree job's changes against its first commit
  merge ID                 bring them into the repository's checked-out branch
                           (only if clean and nothing conflicts; otherwise
                           nothing changes and the conflicts are listed)
  discard ID               remove the job's worktree and its branch
  prune --all              delete every finished job (prune alone asks first,
                           on a terminal)
  prune --older-than AGE   delete the jobs finished more than AGE ago
                           (30m, 12h, 7d)
  sessions [DIR] [--limit N]
                           Claude Code's sessions of DIR (default: here), the
                           most recently active first, with the jobs of each;
                           resume one with its id as claude_start's session_id
                           (N: 1 to ${LIMITS.maxSessions}, default ${LIMITS.defaultSessions}); read from
                           CLAUDE_CONFIG_DIR, else ~/.claude
  doctor                   check the agents, the state directory and the
                           settings; print the host configuration
  help, --help, -h         this text
  --version, -V            the version

ID: a job id, or a unique prefix of one (at least ${MIN_ID_PREFIX_HEX} hex digits).
Every command takes --json: one JSON document on stdout instead of text
(logs -f --json: one JSON object per line, the last the outcome; jobs --watch
takes none). Tables fit COLUMNS, else the terminal; piped, nothing is cut.
Jobs are read from CLAUDE_DISPATCH_STATE_DIR, else
$XDG_STATE_HOME/claude-dispatch, else ~/.local/state/claude-dispatch
(%LOCALAPPDATA%\\claude-dispatch on Windows).
`;

const SHORT_USAGE = `Usage: claude-dispatch jobs|show ID|logs ID [-f]|kill ID|diff|merge|discard ID
         |approve ID [REQUEST]|deny ID [REQUEST] [--message M]|sessions [DIR]
         |prune --all|prune --older-than AGE|doctor [--json]
See claude-dispatch --help.
`;

/** A command line we cannot act on: exit 2. */
class UsageError extends Error {}

/**
 * What main.ts hands runCli: the CliIo, and the directory the command was run
 * in, which `sessions` lists when given no DIR. Without it, `sessions` needs
 * an absolute DIR.
 */
export type RunIo = CliIo & { cwd?: string | undefined };

interface Invocation {
  command: Command;
  json: boolean;
  help: boolean;
  all: boolean;
  watch: boolean;
  follow: boolean;
  olderThanMs: number | undefined;
  id: string | undefined;
  /** approve and deny: the request named, if one was. */
  requestId: string | undefined;
  /** deny --message. */
  message: string | undefined;
  /** sessions: DIR as given, and --limit. */
  dir: string | undefined;
  limit: number;
}

export async function runCli(args: string[], io: RunIo): Promise<number> {
  const [first] = args;
  if (first === "--version" || first === "-V") {
    const json = args.slice(1).includes("--json");
    if (args.slice(1).some((arg) => arg !== "--json")) return usageError(io, `${first} takes no arguments but --json`);
    io.stdout.write(
      json ? toJson({ name: SERVER_NAME, version: SERVER_VERSION }) : `${SERVER_NAME} ${SERVER_VERSION}\n`,
    );
    return 0;
  }
  if (first === "--help" || first === "-h") {
    io.stdout.write(USAGE);
    return 0;
  }
  let invocation: Invocation;
  let sessionsDir: string | undefined;
  try {
    invocation = parseInvocation(args);
    checkWatch(invocation, io);
    checkPrune(invocation, io);
    if (invocation.command === "sessions" && !invocation.help) sessionsDir = resolveSessionsDir(invocation.dir, io.cwd);
  } catch (error) {
    if (error instanceof UsageError) return usageError(io, error.message);
    throw error;
  }
  if (invocation.help || invocation.command === "help") {
    io.stdout.write(USAGE);
    return 0;
  }
  try {
    return await runCommand(invocation, io, sessionsDir);
  } catch (error) {
    return reportFailure(io, invocation.json, error, invocation.follow);
  }
}

/** A redrawn screen is for a person at a terminal: piped or as JSON it would be a stream of escapes. */
function checkWatch(invocation: Invocation, io: CliIo): void {
  if (!invocation.watch || invocation.help) return;
  if (invocation.json) throw new UsageError("jobs --watch redraws a table for a terminal and takes no --json");
  if (io.stdoutIsTerminal !== true)
    throw new UsageError("jobs --watch needs a terminal on stdout; without --watch, jobs prints the table once");
}

/** Deleting every finished job is said, with --all, or agreed to at a terminal: never the default of a script. */
function checkPrune(invocation: Invocation, io: CliIo): void {
  if (invocation.command !== "prune" || invocation.help) return;
  const { all, olderThanMs } = invocation;
  if (all && olderThanMs !== undefined) throw new UsageError("prune takes --all or --older-than, not both");
  if (all || olderThanMs !== undefined || io.stdin?.isTTY === true) return;
  const needs = "--all (every finished job) or --older-than AGE (30m, 12h, 7d)";
  throw new UsageError(`without a terminal to ask on, prune needs ${needs}`);
}

/** DIR made absolute against the command's directory; without one, only an absolute DIR will do. */
function resolveSessionsDir(dir: string | undefined, cwd: string | undefined): string {
  if (cwd !== undefined && path.isAbsolute(cwd)) return path.resolve(cwd, dir ?? ".");
  if (dir === undefined)
    throw new UsageError(
      "sessions needs a directory here (the current one is not known): claude-dispatch sessions /path/to/project",
    );
  if (!path.isAbsolute(dir))
    throw new UsageError(`sessions needs an absolute directory here (the current one is not known), got ${echo(dir)}`);
  return path.resolve(dir);
}

function usageError(io: CliIo, message: string): number {
  io.stderr.write(`claude-dispatch: ${message}\n${SHORT_USAGE}`);
  return 2;
}

/** A command that failed: its code and message, and for an ambiguous id prefix the jobs it matches. Exit 1. */
function reportFailure(io: CliIo, json: boolean, error: unknown, jsonLines: boolean): number {
  const failure = toDispatchError(error);
  // Its details are for the person at the terminal, on stderr, never in the JSON a program (or a model) reads (§9).
  if (!(error instanceof DispatchError)) io.stderr.write(`claude-dispatch: ${describeThrown(error)}\n`);
  const matches = failure instanceof AmbiguousJobId ? failure.matches : undefined;
  const document = { error: { code: failure.code, message: failure.message, ...(matches ? { matches } : {}) } };
  // After JSON Lines (logs -f --json) the error is one more line.
  if (json) io.stdout.write(jsonLines ? `${JSON.stringify(document)}\n` : toJson(document));
  else if (failure instanceof AmbiguousJobId) {
    // Indented by two columns under the message.
    const width = outputWidth(io);
    const matches = matchTable(failure.matches, width === undefined ? undefined : width - 2);
    io.stderr.write(`claude-dispatch: ${failure.summary}:\n${indent(matches.join("\n"))}\n`);
  } else io.stderr.write(`claude-dispatch: ${failure.message}\n`);
  return 1;
}

function parseInvocation(args: readonly string[]): Invocation {
  const [name = "help", ...rest] = args;
  if (!(COMMANDS as readonly string[]).includes(name)) {
    throw new UsageError(name.startsWith("-") ? `unknown option ${echo(name)}` : `unknown command ${echo(name)}`);
  }
  const command = name as Command;
  const invocation: Invocation = {
    command,
    json: false,
    help: false,
    all: false,
    watch: false,
    follow: false,
    olderThanMs: undefined,
    id: undefined,
    requestId: undefined,
    message: undefined,
    dir: undefined,
    limit: LIMITS.defaultSessions,
  };
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
    if (flag === "--limit" && command === "sessions") {
      i += inline === undefined ? 1 : 0;
      invocation.limit = parseLimit(inline ?? rest[i]);
      continue;
    }
    if (flag === "--message" && (command === "approve" || command === "deny")) {
      i += inline === undefined ? 1 : 0;
      invocation.message = parseMessage(command, inline ?? rest[i]);
      continue;
    }
    if (inline !== undefined) throw new UsageError(`${echo(flag)} takes no value`);
    if (flag === "--json") invocation.json = true;
    else if (flag === "--help" || flag === "-h") invocation.help = true;
    else if (flag === "--all" && (command === "jobs" || command === "prune")) invocation.all = true;
    else if (flag === "--watch" && command === "jobs") invocation.watch = true;
    else if ((flag === "-f" || flag === "--follow") && command === "logs") invocation.follow = true;
    else if (flag.startsWith("-") && flag !== "-") throw new UsageError(`unknown option ${echo(flag)} for ${command}`);
    else positional.push(arg);
  }
  if (invocation.help) return invocation;
  if (command === "approve" || command === "deny") {
    const [id, requestId, extra] = positional;
    if (id === undefined || extra !== undefined)
      throw new UsageError(`${command} needs a job id, and a request number when the job has several pending`);
    invocation.id = parseId(command, [id]);
    invocation.requestId = requestId === undefined ? undefined : parseRequestId(requestId);
    return invocation;
  }
  if (command === "sessions") {
    if (positional.length > 1)
      throw new UsageError(`sessions takes one directory at most, got ${echo(positional[1] as string)}`);
    invocation.dir = positional[0];
    return invocation;
  }
  invocation.id = parseId(command, positional);
  return invocation;
}

function parseLimit(value: string | undefined): number {
  const limit = value !== undefined && /^\d{1,4}$/.test(value) ? Number(value) : Number.NaN;
  if (!(limit >= 1 && limit <= LIMITS.maxSessions)) {
    throw new UsageError(
      `--limit needs a number of sessions from 1 to ` +
        `${LIMITS.maxSessions}${value === undefined ? "" : `, got ${echo(value)}`}`,
    );
  }
  return limit;
}

/** A denial's reason, trimmed as claude_respond trims it: an empty one is none. */
function parseMessage(command: "approve" | "deny", value: string | undefined): string | undefined {
  if (command === "approve") throw new UsageError("approve takes no --message: only a denial tells the agent why");
  if (value === undefined)
    throw new UsageError('--message needs the text the agent is told, such as --message "use the test database"');
  if (value.length > LIMITS.maxRespondMessageChars)
    throw new UsageError(`--message takes at most ${LIMITS.maxRespondMessageChars} characters, got ${value.length}`);
  return value.trim() || undefined;
}

function parseRequestId(text: string): string {
  if (!isRequestId(text))
    throw new UsageError(
      `not a request number: ${echo(text)} (requests are numbered 1, 2, …, as \`claude-dispatch show ID\` lists them)`,
    );
  return text;
}

/** The job id of `show`, `logs`, `kill`, `approve` and `deny`, checked; the other commands take no arguments. */
function parseId(command: Command, positional: readonly string[]): string | undefined {
  const takesId = ["show", "logs", "kill", "approve", "deny", "diff", "merge", "discard"].includes(command);
  if (!takesId && positional.length > 0)
    throw new UsageError(`${command} takes no arguments, got ${echo(positional[0] as string)}`);
  if (!takesId) return undefined;
  if (positional.length !== 1) throw new UsageError(`${command} needs exactly one job id`);
  const id = positional[0] as string;
  // Ids become folder names: nothing but hex and dashes gets further, and a prefix
  // is only compared with names read from the folder.
  if (!isIdOrPrefix(id)) {
    throw new UsageError(
      `not a job id: ${echo(id)} (ids are UUIDs, as \`claude-dispatch jobs\` lists them, or a unique prefix of one, ` +
        `at least ${MIN_ID_PREFIX_HEX} hex digits)`,
    );
  }
  return id;
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "30m", "12h", "7d" (also "45s") to milliseconds. */
function parseDuration(text: string): number {
  const match = /^(\d{1,6})([smhd])$/.exec(text.trim());
  if (!match) throw new UsageError(`not an age: ${echo(text)}; use a number and s, m, h or d, such as 30m, 12h or 7d`);
  return Number(match[1]) * (DURATION_UNITS_MS[match[2] as string] as number);
}

/** The commands that read jobs, and so first see that they are carried. */
const CARRIED_COMMANDS: ReadonlySet<string> = new Set(["jobs", "show", "logs", "kill"]);

async function runCommand(invocation: Invocation, io: CliIo, sessionsDir: string | undefined): Promise<number> {
  if (invocation.command === "doctor") return doctor(io, invocation.json);
  const context = openContext(io, invocation.json);
  // The carrier first, in place of one that died: what follows then reads how each job really ended (§15.8).
  const carriers = CARRIED_COMMANDS.has(invocation.command) ? await carry(context) : undefined;
  switch (invocation.command) {
    case "jobs":
      return invocation.watch ? watchJobs(context, invocation.all) : listJobs(context, invocation.all, carriers);
    case "show":
      return showJob(context, resolveJobId(context, invocation.id as string));
    case "logs":
      return showLogs(context, resolveJobId(context, invocation.id as string), invocation.follow);
    case "kill":
      return killJob(context, resolveJobId(context, invocation.id as string));
    case "approve":
    case "deny":
      return answerJob(context, resolveJobId(context, invocation.id as string), {
        decision: invocation.command === "approve" ? "allow" : "deny",
        requestId: invocation.requestId,
        message: invocation.message,
      });
    case "diff":
    case "merge":
    case "discard":
      return worktreeCommand(context, invocation.command, resolveJobId(context, invocation.id as string));
    case "prune":
      return prune(context, invocation.olderThanMs, !invocation.all && invocation.olderThanMs === undefined);
    case "sessions":
      return listSessions(context, { dir: sessionsDir as string, limit: invocation.limit });
    default:
      throw new Error(`unhandled command ${invocation.command}`);
  }
}
