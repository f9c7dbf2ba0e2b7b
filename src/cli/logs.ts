/**
 * `logs ID [-f] [--json]` (PROTOCOL.md §17): a job's transcript for people,
 * read from its stdout.jsonl through the runtime's reader, as the server
 * reads it. With -f the file is followed as it grows, on the injected clock,
 * until the record says the job finished; then the outcome is printed.
 * After the transcript, the job's permission requests (§18): each waiting one
 * with how to answer it, each answer; -f says each once, as it appears.
 * Everything is read from the state directory, which anything running as the
 * user can write: each entry, text or JSON, is cleaned as it is printed (§10).
 */
import { sleep } from "../core/clock.js";
import { valueForReading } from "../core/text.js";
import type { AnsweredBy, Approval } from "../store/approvals.js";
import { isFinishedStatus, type JobRecord } from "../store/records.js";
import type { StateStore } from "../store/state-store.js";
import {
  answerText,
  messageText,
  requestState,
  requestText,
  shownStatus,
  waitingForApproval,
  type RequestState,
} from "./approve.js";
import { INTERRUPTED_EXIT, loadProcessControl, notFound, type Context } from "./context.js";
import type { ProcessControl } from "../agent/host.js";
import { whyNotCarried } from "./carried.js";
import { clip, indent, oneLine, printable } from "./format.js";
import { OutputFollower } from "./job-output.js";

/** How often `logs -f` looks for more output and for the job's end. */
export const FOLLOW_POLL_MS = 200;
/** How often it checks that something carries the job, and how long a carrier may leave it alone (§15.8). */
const CARRIED_CHECK_MS = 1000;
const UNCARRIED_PATIENCE_MS = 10_000;

/** `logs -f` on a job nothing will end: said, exit 1, rather than a wait for ever. */
export class NotCarried extends Error {}
/** A tool call, a tool's output or a note, cut to one line of at most this many characters. */
const ONE_LINE_CHARS = 200;
/** As `show`: the whole result is in result.txt. */
const RESULT_SHOWN_CHARS = 2000;

export type EntryKind = "assistant" | "tool" | "tool_output" | "tool_error" | "note";

/** One transcript entry (docs/tool-results.md, "Transcript lines"), its prefix made a kind. */
export interface TranscriptEntry {
  kind: EntryKind;
  text: string;
}

const ENTRY_PREFIXES: readonly (readonly [string, EntryKind, string])[] = [
  ["assistant: ", "assistant", "assistant"],
  ["tool: ", "tool", "tool"],
  ["tool result: ", "tool_output", "tool result"],
  ["tool error: ", "tool_error", "tool error"],
];

/** Anything without a known prefix ([session …], [done: …], an event too long to show) is a note. */
export function entryOf(line: string): TranscriptEntry {
  for (const [prefix, kind] of ENTRY_PREFIXES)
    if (line.startsWith(prefix)) return { kind, text: line.slice(prefix.length) };
  return { kind: "note", text: line };
}

/** The agent's text whole, its later lines indented; anything else on one line, cut. */
export function entryText(entry: TranscriptEntry): string {
  if (entry.kind === "assistant") {
    const [first = "", ...rest] = printable(entry.text.trim()).split("\n");
    return rest.length === 0 ? `assistant: ${first}` : `assistant: ${first}\n${indent(rest.join("\n"))}`;
  }
  const label = ENTRY_PREFIXES.find(([, kind]) => kind === entry.kind)?.[2];
  const line = clip(oneLine(printable(entry.text)), ONE_LINE_CHARS);
  return label === undefined ? line : `${label}: ${line}`;
}

/**
 * A permission request as logs --json reports it: on first sight, and again once it is answered (or left unanswered).
 */
export interface ApprovalEntry {
  kind: "approval";
  request_id: string;
  tool_name: string;
  preview: string;
  state: "pending" | "allow" | "deny" | "unanswered" | "expired";
  by?: AnsweredBy;
  message?: string;
}

/**
 * What logs has said of each of a job's requests, so that each new request
 * and each answer is said once: one small state per request the job filed,
 * which its approver bounds.
 */
class ApprovalNews {
  /** What was said of each request: said again only when that changes, and never after an answer or the job's end. */
  private readonly told = new Map<string, RequestState>();

  constructor(
    private readonly store: StateStore,
    private readonly now: () => number,
    private readonly say: (entry: ApprovalEntry, text: string) => void,
  ) {}

  /**
   * Reads the request files again and says what is new; `record` tells whether a request without an answer still waits.
   */
  look(record: JobRecord): void {
    for (const approval of this.store.approvals(record.id)) {
      const { request, answer } = approval;
      const told = this.told.get(request.id);
      const state = requestState(record, approval, this.now());
      if (told === state || told === "answered" || told === "unanswered") continue;
      // Said to have run out of time already: the job's end without an answer adds nothing.
      if (told === "expired" && state === "unanswered") continue;
      this.told.set(request.id, state);
      const entry: ApprovalEntry = {
        kind: "approval",
        request_id: request.id,
        tool_name: request.tool_name,
        preview: request.preview,
        state: answer ? answer.decision : (state as Exclude<RequestState, "answered">),
        ...(answer ? { by: answer.by, ...(answer.message === undefined ? {} : { message: answer.message }) } : {}),
      };
      this.say(entry, printable(approvalText(record.id, approval, state, told !== undefined)));
    }
  }
}

/**
 * One line, bracketed as the transcript's notes are; a request said to be waiting before is named by its number alone.
 */
function approvalText(jobId: string, { request, answer }: Approval, state: RequestState, saidWaiting: boolean): string {
  const what = clip(requestText(request), ONE_LINE_CHARS);
  if (state === "pending") return `[${waitingForApproval(jobId, request.id, what)}]`;
  const outcome = answer
    ? `${answerText(answer)}${messageText(answer)}`
    : state === "expired"
      ? "went unanswered until its time ran out"
      : "went unanswered (the job finished first)";
  return saidWaiting ? `[request ${request.id} ${outcome}]` : `[request ${request.id} · ${what}: ${outcome}]`;
}

export async function showLogs(context: Context, id: string, follow: boolean): Promise<number> {
  const record = context.store.read(id);
  if (!record) throw notFound(context, id);
  if (follow) return followLogs(context, id);
  if (context.json) printLogsDocument(context, record);
  else printLogsText(context, record);
  return 0;
}

/** What the output holds now and the job's requests, then the outcome, or how to follow a job that has not finished. */
function printLogsText(context: Context, record: JobRecord): void {
  const { io, store } = context;
  let entries = 0;
  const print = (text: string): void => {
    entries += 1;
    io.stdout.write(`${text}\n`);
  };
  const follower = new OutputFollower(store, record.id, (line) => print(entryText(entryOf(line))));
  follower.end();
  new ApprovalNews(
    store,
    () => context.now,
    (_entry, text) => print(text),
  ).look(record);
  const separator = entries > 0 ? "\n" : "";
  if (isFinishedStatus(record.status))
    io.stdout.write(`${separator}${outcomeText(store, record, sessionOf(record, follower))}`);
  else {
    const status = shownStatus(record, store.approvals(record.id), context.now);
    io.stdout.write(
      `${separator}job ${record.id} is ${status}; \`claude-dispatch logs -f ${record.id}\` follows it to its end\n`,
    );
  }
}

/**
 * One JSON document, written as the output is read so that no transcript is held: {id, status, entries, outcome};
 * the entries end with the job's requests.
 */
function printLogsDocument(context: Context, record: JobRecord): void {
  const { io, store } = context;
  io.stdout.write(
    `{\n  "id": ${JSON.stringify(record.id)},\n  "status": ` +
      `${JSON.stringify(shownStatus(record, store.approvals(record.id), context.now))},\n  "entries": [`,
  );
  let entries = 0;
  const print = (entry: TranscriptEntry | ApprovalEntry): void => {
    io.stdout.write(`${entries === 0 ? "\n" : ",\n"}    ${JSON.stringify(valueForReading(entry))}`);
    entries += 1;
  };
  const follower = new OutputFollower(store, record.id, (line) => print(entryOf(line)));
  follower.end();
  new ApprovalNews(
    store,
    () => context.now,
    (entry) => print(entry),
  ).look(record);
  const outcome = isFinishedStatus(record.status)
    ? valueForReading(outcomeDocument(store, record, sessionOf(record, follower)))
    : null;
  const outcomeJson = JSON.stringify(outcome, null, 2).replaceAll("\n", "\n  ");
  io.stdout.write(`${entries > 0 ? "\n  " : ""}],\n  "outcome": ${outcomeJson}\n}\n`);
}

/** Entries and requests as they appear, then the outcome: exit 0 if the job completed, 1 if it did not. */
async function followLogs(context: Context, id: string): Promise<number> {
  const { io, store, json } = context;
  let entries = 0;
  const print = (entry: TranscriptEntry | ApprovalEntry, text: string): void => {
    entries += 1;
    io.stdout.write(json ? `${JSON.stringify(valueForReading(entry))}\n` : `${text}\n`);
  };
  const follower = new OutputFollower(store, id, (line) => {
    const entry = entryOf(line);
    print(entry, entryText(entry));
  });
  const news = new ApprovalNews(store, () => io.clock.now(), print);
  let record: JobRecord | undefined;
  try {
    record = await untilFinished(context, id, follower, news);
  } catch (error) {
    if (!(error instanceof NotCarried)) throw error;
    io.stderr.write(`claude-dispatch: ${printable(error.message)}\n`);
    return 1;
  }
  if (!record) return INTERRUPTED_EXIT;
  const sessionId = sessionOf(record, follower);
  if (json)
    io.stdout.write(
      `${JSON.stringify(valueForReading({ kind: "outcome", ...outcomeDocument(store, record, sessionId) }))}\n`,
    );
  else io.stdout.write(`${entries > 0 ? "\n" : ""}${outcomeText(store, record, sessionId)}`);
  return record.status === "completed" ? 0 : 1;
}

/** The result's session, else the latest the agent printed. */
function sessionOf(record: JobRecord, follower: OutputFollower): string | undefined {
  return record.outcome?.result?.sessionId ?? follower.live().sessionId;
}

/**
 * Reads new output and requests every FOLLOW_POLL_MS until the job's record says it finished; undefined if
 * interrupted first. Every CARRIED_CHECK_MS it checks that something will end the job (§15.8), and throws
 * NOT_CARRIED saying why when nothing will.
 */
async function untilFinished(
  context: Context,
  id: string,
  follower: OutputFollower,
  news: ApprovalNews,
): Promise<JobRecord | undefined> {
  const { io, store } = context;
  let control: ProcessControl | null | undefined;
  let checkAt = io.clock.now() + CARRIED_CHECK_MS;
  const goneSince: { at?: number } = {};
  for (;;) {
    // The record before the output: once it says finished, the agent is gone and the output read after it is whole.
    const record = store.read(id);
    if (!record) throw notFound(context, id);
    if (isFinishedStatus(record.status)) {
      follower.end();
      // Last: the answers written as the job ended, and the requests it left unanswered.
      news.look(record);
      return record;
    }
    follower.readNew();
    news.look(record);
    if (io.clock.now() >= checkAt) {
      checkAt = io.clock.now() + CARRIED_CHECK_MS;
      // Without a process table nothing can be told gone: the job is followed as before.
      control ??= await loadProcessControl(io).catch(() => null);
      const why = control ? await whyNotCarried(context, record, control, goneSince, UNCARRIED_PATIENCE_MS) : undefined;
      if (why !== undefined)
        throw new NotCarried(`job ${id} is ${record.status} on record, but nothing will end it: ${why}`);
    }
    if (io.interrupted?.aborted) return undefined;
    await sleep(io.clock, FOLLOW_POLL_MS, io.interrupted);
    if (io.interrupted?.aborted) return undefined;
  }
}

/** status, session_id when known, error {code, detail} when it failed, and the whole result with its path. */
function outcomeDocument(store: StateStore, record: JobRecord, sessionId: string | undefined): Record<string, unknown> {
  const { outcome } = record;
  const result = store.readResult(record.id);
  return {
    status: record.status,
    ...(sessionId === undefined ? {} : { session_id: sessionId }),
    ...(outcome && !outcome.ok ? { error: { code: outcome.code ?? null, detail: outcome.detail ?? null } } : {}),
    result: result ?? null,
    result_path: result === undefined ? null : store.file(record.id, "result.txt"),
  };
}

function outcomeText(store: StateStore, record: JobRecord, sessionId: string | undefined): string {
  const { outcome } = record;
  const lines = [`job ${record.id} ${record.status}${sessionId === undefined ? "" : ` · session ${sessionId}`}`];
  if (outcome && !outcome.ok) lines.push(`error: ${outcome.code ?? "?"}: ${outcome.detail ?? ""}`);
  const head = store.readResultHead(record.id, RESULT_SHOWN_CHARS);
  if (head !== undefined && head.trim() !== "") {
    const total = outcome?.result_chars ?? head.length;
    lines.push(`result (${total} characters):`, indent(head.trimEnd()));
    if (total > head.length)
      lines.push(
        `  […${total - head.length} more characters; the whole result is in ${store.file(record.id, "result.txt")}]`,
      );
  }
  return printable(`${lines.join("\n")}\n`);
}
