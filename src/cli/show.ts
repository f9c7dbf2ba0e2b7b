/**
 * `show ID` (PROTOCOL.md §17): every field of a job's record, whether its
 * server and its agent are alive, its permission requests and their answers,
 * its whole prompt, its result and the last lines of its transcript and stderr.
 */
import { statSync } from "node:fs";

import type { Approval } from "../store/approvals.js";
import { valueForReading } from "../core/text.js";
import { isFinishedStatus, type JobRecord, type StoredOutcome } from "../store/records.js";
import { type StateStore } from "../store/state-store.js";
import { readFileRange } from "../store/atomic.js";
import {
  answerText,
  approvalFromSummary,
  messageText,
  requestState,
  requestText,
  shownStatus,
  type ShownStatus,
} from "./approve.js";
import { emit, loadProcessControl, notFound, settle, type Context } from "./context.js";
import { clip, formatAge, formatCost, indent, isoTime, printable, shortenHome } from "./format.js";
import { progressOf, replayOutput } from "./job-output.js";

const RESULT_SHOWN_CHARS = 2000;
const TRANSCRIPT_TAIL_LINES = 20;
const STDERR_TAIL_LINES = 10;
const STDERR_TAIL_BYTES = 16 * 1024;
/** Transcript kept while replaying stdout.jsonl for `show`: plenty for its last lines. */
const SHOW_TRANSCRIPT_CHARS = 256 * 1024;
/** A pending request's input, as text: enough to decide on; --json has it whole. */
const INPUT_SHOWN_CHARS = 1000;

/** Everything `show` prints, gathered once for the text and the JSON document alike. */
interface Shown {
  id: string;
  record: JobRecord;
  status: ShownStatus;
  /** From the request files; from the record when those are gone (then without the tools' input). */
  approvals: Approval[];
  ownerAlive: boolean | undefined;
  /** Checked only for a running job. */
  agentAlive: boolean | undefined;
  sessionId: string | undefined;
  turns: number;
  costUsd: number | undefined;
  /** Only while the job runs. */
  lastTool: string | undefined;
  prompt: string | undefined;
  result: string | undefined;
  transcriptTail: string[];
  stderrTail: string[];
}

export async function showJob(context: Context, id: string): Promise<number> {
  const shown = await gather(context, id);
  // Everything shown came from the state directory, which anything running as
  // the user can write: cleaned once, here (§10).
  emit(context, valueForReading(showDocument(context, shown)), printable(showText(context, shown)));
  return 0;
}

async function gather(context: Context, id: string): Promise<Shown> {
  const { store, io } = context;
  const record = store.read(id);
  if (!record) throw notFound(context, id);
  const output = replayOutput(store, id, SHOW_TRANSCRIPT_CHARS);
  const live = output.live();
  const control = await loadProcessControl(io);
  const ownerAlive = await control.isAlive(record.owner.pid, record.owner.start_time);
  // A finished job's agent pid may name another process by now: only a running job's is checked.
  const agentAlive =
    record.status === "running" && record.agent?.pid !== undefined
      ? await control.isAlive(record.agent.pid, record.agent.start_time, record.agent.tree_marker)
      : undefined;
  await settle(control, io.clock);

  const prompt = store.readPrompt(id);
  const result = store.readResult(id);
  const transcriptTail = lastLines(
    output.transcript.page(output.transcript.start, Number.POSITIVE_INFINITY).text,
    TRANSCRIPT_TAIL_LINES,
  );
  const stderrTail = lastLines(readTail(store, id), STDERR_TAIL_LINES);
  const { turns, costUsd } = progressOf(store, record);
  const filed = store.approvals(id);
  const approvals = filed.length > 0 ? filed : (record.approvals ?? []).map(approvalFromSummary);
  const status = shownStatus(record, approvals, context.now);
  const sessionId = record.outcome?.result?.sessionId ?? live.sessionId;
  const lastTool = record.status === "running" && live.lastTool ? live.lastTool : undefined;
  return {
    id,
    record,
    status,
    approvals,
    ownerAlive,
    agentAlive,
    sessionId,
    turns,
    costUsd,
    lastTool,
    prompt,
    result,
    transcriptTail,
    stderrTail,
  };
}

function showDocument(context: Context, shown: Shown): unknown {
  const { store } = context;
  const { record, agentAlive, sessionId, costUsd, lastTool, prompt, result } = shown;
  return {
    state_dir: store.root,
    record,
    status: shown.status,
    approvals: shown.approvals.map((approval) => ({
      state: requestState(record, approval, context.now),
      request: approval.request,
      answer: approval.answer ?? null,
    })),
    owner_alive: shown.ownerAlive,
    ...(agentAlive === undefined ? {} : { agent_alive: agentAlive }),
    ...(sessionId === undefined ? {} : { session_id: sessionId }),
    turns: shown.turns,
    ...(costUsd === undefined ? {} : { cost_usd: costUsd }),
    ...(lastTool ? { last_tool: lastTool } : {}),
    prompt: prompt ?? null,
    result: result ?? null,
    result_path: result === undefined ? null : store.file(shown.id, "result.txt"),
    transcript_tail: shown.transcriptTail,
    stderr_tail: shown.stderrTail,
  };
}

function showText(context: Context, shown: Shown): string {
  const { record, prompt, result } = shown;
  const facts = showFacts(context, shown);
  const width = Math.max(...facts.map(([name]) => name.length));
  const sections = [`job ${record.id}`, ...facts.map(([name, value]) => `  ${name.padEnd(width)}  ${value}`)];
  if (shown.approvals.length > 0) sections.push("", "permission requests:", ...approvalsText(context, shown));
  sections.push(
    "",
    "prompt:",
    indent(prompt ?? `${record.prompt_preview} (prompt.txt is missing: this is the preview)`),
  );
  if (result !== undefined) {
    const clipped = result.length > RESULT_SHOWN_CHARS;
    sections.push(
      "",
      `result (${result.length} characters):`,
      indent(clipped ? result.slice(0, RESULT_SHOWN_CHARS) : result),
    );
    if (clipped)
      sections.push(
        `  […${result.length - RESULT_SHOWN_CHARS} more characters; the whole result is in ` +
          `${context.store.file(shown.id, "result.txt")}]`,
      );
  }
  const { transcriptTail, stderrTail } = shown;
  if (transcriptTail.length > 0)
    sections.push("", `transcript (last ${transcriptTail.length} lines):`, indent(transcriptTail.join("\n")));
  if (stderrTail.length > 0)
    sections.push("", `stderr (last ${stderrTail.length} lines):`, indent(stderrTail.join("\n")));
  return `${sections.join("\n")}\n`;
}

/** The record's fields as name and value, in the order `show` lists them. */
function showFacts(context: Context, shown: Shown): [string, string][] {
  const { record, ownerAlive, agentAlive } = shown;
  const facts: [string, string][] = [
    [
      "status",
      shown.status === "input_required" ? "input_required (running, waiting for a permission answer)" : record.status,
    ],
    ["kind", record.kind],
    ["cwd", shortenHome(record.cwd, context.io.machine.home)],
    ["submitted", `${isoTime(record.submitted_at)} (${formatAge(context.now - record.submitted_at)} ago)`],
  ];
  if (record.started_at !== undefined) facts.push(["started", isoTime(record.started_at)]);
  if (record.finished_at !== undefined) {
    facts.push([
      "finished",
      `${isoTime(record.finished_at)} (took ` +
        `${formatAge(record.finished_at - (record.started_at ?? record.submitted_at))})`,
    ]);
  }
  const unknown = "cannot be told: the process table could not be read, or no start time was recorded";
  facts.push([
    "owner",
    `server pid ${record.owner.pid} ` +
      `(${ownerAlive === undefined ? unknown : ownerAlive ? "running" : ownerText(record)})`,
  ]);
  if (record.agent) {
    const alive =
      record.status !== "running"
        ? ""
        : agentAlive === undefined
          ? ` (${unknown})`
          : agentAlive
            ? " (running)"
            : " (not running)";
    facts.push([
      "agent",
      `pid ${record.agent.pid}${record.agent.start_time ? `, start time ${record.agent.start_time}` : ""}${alive}`,
    ]);
  }
  if (shown.sessionId !== undefined) facts.push(["session", shown.sessionId]);
  if (record.resume_session_id !== undefined) facts.push(["resumed", record.resume_session_id]);
  facts.push(["turns", String(shown.turns)]);
  if (shown.costUsd !== undefined) facts.push(["cost", formatCost(shown.costUsd)]);
  if (shown.lastTool) facts.push(["last tool", shown.lastTool]);
  if (record.timeout_ms !== undefined) facts.push(["timeout", formatAge(record.timeout_ms)]);
  const options = optionsText(record.options);
  if (options) facts.push(["options", options]);
  if (record.kill_reason !== undefined) facts.push(["killed by", record.kill_reason]);
  const error = errorText(record.outcome);
  if (error) facts.push(["error", error]);
  return facts;
}

/** Each request: its number and what it asks, when, and its answer, or how to give one. */
function approvalsText(context: Context, shown: Shown): string[] {
  const { record } = shown;
  const lines: string[] = [];
  const width = Math.max(...shown.approvals.map(({ request }) => request.id.length));
  for (const approval of shown.approvals) {
    const { request, answer } = approval;
    const state = requestState(record, approval, context.now);
    const asked = `asked ${isoTime(request.asked_at)} (${formatAge(context.now - request.asked_at)} ago)`;
    const margin = " ".repeat(width + 4);
    lines.push(`  ${request.id.padStart(width)}  ${requestText(request)}`);
    if (answer) lines.push(`${margin}${asked}; ${answerText(answer)} at ${isoTime(answer.at)}${messageText(answer)}`);
    else if (state === "unanswered") lines.push(`${margin}${asked}; unanswered: the job finished first`);
    else if (state === "expired")
      lines.push(`${margin}${asked}; unanswered: its time ran out at ${isoTime(request.expires_at)}`);
    else {
      lines.push(`${margin}${asked}; pending: denied at ${isoTime(request.expires_at)} unless answered`);
      if (request.input !== undefined)
        lines.push(`${margin}input: ${clip(JSON.stringify(valueForReading(request.input)), INPUT_SHOWN_CHARS)}`);
      lines.push(
        `${margin}answer: claude-dispatch approve ${record.id} ${request.id}, or claude-dispatch deny ${record.id} ` +
          `${request.id} --message "…"`,
      );
    }
  }
  return lines;
}

function ownerText(record: JobRecord): string {
  if (isFinishedStatus(record.status)) return "not running";
  return "not running: the next server to start adopts this job";
}

function optionsText(options: JobRecord["options"]): string {
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
