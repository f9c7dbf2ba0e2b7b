/**
 * What the two ends of an SSH host say on the channel (PROTOCOL.md §21.3): one JSON request line from the local
 * server, then JSON frame lines from `claude-dispatch remote`. Both ends are this program; each checks what it
 * reads all the same, since the other end may be another version, or not this program at all.
 */
import { ERROR_CODES, type ErrorCode } from "../../core/errors.js";
import type { WorktreeRecord } from "../../agent/worktree.js";
import {
  isRequestId,
  parseAnswer,
  parseRequest as parseApprovalRequest,
  type Approval,
  type ApprovalAnswer,
} from "../../store/approvals.js";

/** A request line may carry a prompt: this bounds it. */
export const MAX_REQUEST_BYTES = 64 * 1024 * 1024;
/** Output travels in chunks of at most this many bytes, base64 in a frame. */
export const OUTPUT_CHUNK_BYTES = 48 * 1024;
export const MAX_FRAME_BYTES = 1024 * 1024;

export interface StartRequest {
  op: "start";
  job_id: string;
  /** The runtime that reads its output there: "claude", "codex", "gemini". */
  agent: string;
  cwd: string;
  /** The host's roots as the operator named them: the cwd is checked against them there, links resolved. */
  roots: string[];
  /** The host's `programs` entry for the agent; absent, that machine's own setting or PATH says (§21.3). */
  command?: string;
  args: string[];
  /** The agent's add_dirs, as they are in args: that machine checks each as it checks cwd. */
  add_dirs?: string[];
  /** What the runtime adds to that machine's own environment. */
  env: Record<string, string>;
  prompt: string;
  /** Output already received: a start sent again after a dropped connection follows on from here. */
  offset: number;
  /** The job's own worktree there, made by a `worktree` create (§19): cwd lies in it, not in the roots. */
  worktree?: WorktreeRecord;
}

export const WORKTREE_ACTIONS = ["create", "changes", "diff", "merge", "discard"] as const;
export type WorktreeAction = (typeof WORKTREE_ACTIONS)[number];

/** A worktree operation there (§19, §21.3): create takes cwd and roots; the others the job's worktree record. */
export interface WorktreeRequest {
  op: "worktree";
  action: WorktreeAction;
  job_id: string;
  cwd?: string;
  roots?: string[];
  worktree?: WorktreeRecord;
  /** A merge's commit message. */
  message?: string;
}

export type RemoteRequest =
  | StartRequest
  | { op: "follow"; job_id: string; offset: number }
  | { op: "kill"; job_id: string }
  | { op: "answer"; job_id: string; request_id: string; answer: ApprovalAnswer }
  | WorktreeRequest
  | { op: "check"; agents: string[]; programs: Record<string, string> };

export interface EndFrame {
  type: "end";
  outcome: { ok: boolean; code?: ErrorCode; detail?: string };
  exit?: { code: number | null; signal: string | null };
  stderr_tail: string;
  /** The output's whole length: what the local side must have received. */
  size: number;
  /** How long ago its agent ended there, when that machine did not see it exit (§15.3): an age, as clocks differ. */
  ended_ms_ago?: number;
}

export type RemoteFrame =
  | { type: "accepted"; pid?: number }
  | { type: "output"; data: string }
  | EndFrame
  | { type: "killed"; killed: boolean; survivors: number[] }
  /** The job's permission requests there, with their answers (§18), whenever they change. */
  | { type: "approvals"; approvals: Approval[] }
  | { type: "answered"; won: boolean; answer: ApprovalAnswer }
  /** A worktree operation's result, as the Worktrees interface returns it (agent/worktree.ts). */
  | { type: "worktree"; result: unknown }
  | { type: "error"; code: ErrorCode; message: string }
  | { type: "check"; version: string; state_dir: string; programs: Record<string, string | null> };

const JOB_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** The request, or why it is refused. */
export function parseRequest(line: string): RemoteRequest | string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return "the request is not JSON";
  }
  if (!isObject(value)) return "the request is not an object";
  switch (value.op) {
    case "start":
      return parseStart(value);
    case "follow":
      return isJobId(value.job_id) && isOffset(value.offset)
        ? { op: "follow", job_id: value.job_id, offset: value.offset }
        : "a follow needs job_id and offset";
    case "kill":
      return isJobId(value.job_id) ? { op: "kill", job_id: value.job_id } : "a kill needs job_id";
    case "worktree":
      return parseWorktreeRequest(value);
    case "answer": {
      const answer = parseAnswer(JSON.stringify(value.answer));
      if (!isJobId(value.job_id) || typeof value.request_id !== "string" || !isRequestId(value.request_id) || !answer)
        return "an answer needs job_id, request_id and answer";
      return { op: "answer", job_id: value.job_id, request_id: value.request_id, answer };
    }
    case "check":
      return isStrings(value.agents, 8) && isStringMap(value.programs)
        ? { op: "check", agents: value.agents, programs: value.programs }
        : "a check needs agents and programs";
    default:
      return "the request names no known op";
  }
}

function parseStart(value: Record<string, unknown>): StartRequest | string {
  const { job_id, agent, cwd, roots, command, args, add_dirs, env, prompt, offset, worktree } = value;
  if (!isJobId(job_id)) return "a start needs a job_id";
  if (typeof agent !== "string" || !/^[a-z]{1,32}$/.test(agent)) return "a start needs an agent";
  if (!isAbsolute(cwd) || !isStrings(roots, 64) || !roots.every(isAbsolute))
    return "a start needs an absolute cwd and roots";
  const usable = typeof command === "string" && command !== "" && !hasNul(command);
  const program = command === undefined ? undefined : usable ? command : null;
  if (program === null || !isStrings(args, 4096)) return "a start needs args, and a command if any";
  const dirs =
    add_dirs === undefined ? undefined : isStrings(add_dirs, 4096) && add_dirs.every(isAbsolute) ? add_dirs : null;
  if (dirs === null) return "a start's add_dirs must be absolute paths";
  if (!isStringMap(env) || !Object.keys(env).every((name) => ENV_NAME.test(name)))
    return "a start's env must map variable names to strings";
  if (typeof prompt !== "string" || !isOffset(offset)) return "a start needs a prompt and an offset";
  if (worktree !== undefined && !isWorktreeRecord(worktree)) return "a start's worktree is not a worktree record";
  return {
    op: "start",
    job_id,
    agent,
    cwd,
    roots,
    ...(program !== undefined ? { command: program } : {}),
    args,
    ...(dirs !== undefined ? { add_dirs: dirs } : {}),
    env,
    prompt,
    offset,
    ...(worktree ? { worktree } : {}),
  };
}

function parseWorktreeRequest(value: Record<string, unknown>): WorktreeRequest | string {
  const { action, job_id, cwd, roots, worktree, message } = value;
  if (typeof action !== "string" || !(WORKTREE_ACTIONS as readonly string[]).includes(action) || !isJobId(job_id))
    return "a worktree request needs an action and a job_id";
  if (action === "create") {
    return isAbsolute(cwd) && isStrings(roots, 64) && roots.every(isAbsolute)
      ? { op: "worktree", action, job_id, cwd, roots }
      : "a worktree create needs an absolute cwd and roots";
  }
  if (!isWorktreeRecord(worktree)) return "a worktree request needs the job's worktree record";
  if (message !== undefined && (typeof message !== "string" || message.length > 4096 || hasNul(message)))
    return "a merge's message must be text";
  return {
    op: "worktree",
    action: action as WorktreeAction,
    job_id,
    worktree,
    ...(message !== undefined ? { message } : {}),
  };
}

function isWorktreeRecord(value: unknown): value is WorktreeRecord {
  return (
    isObject(value) &&
    isAbsolute(value.repo) &&
    isAbsolute(value.path) &&
    typeof value.branch === "string" &&
    typeof value.base === "string" &&
    /^[0-9a-f]{7,64}$/.test(value.base) &&
    typeof value.subdir === "string" &&
    !value.subdir.split("/").includes("..") &&
    !value.subdir.startsWith("/") &&
    typeof value.left_behind === "boolean" &&
    (value.state === undefined || value.state === "merged" || value.state === "discarded")
  );
}

/** A frame, or undefined for a line that is not one (skipped, and said in the log). */
export function parseFrame(line: string): RemoteFrame | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!isObject(value)) return undefined;
  switch (value.type) {
    case "accepted":
      return { type: "accepted" };
    case "output":
      return typeof value.data === "string" ? { type: "output", data: value.data } : undefined;
    case "end":
      return parseEnd(value);
    case "killed":
      return typeof value.killed === "boolean" &&
        Array.isArray(value.survivors) &&
        value.survivors.every((pid) => Number.isSafeInteger(pid))
        ? { type: "killed", killed: value.killed, survivors: value.survivors as number[] }
        : undefined;
    case "approvals":
      return parseApprovalsFrame(value.approvals);
    case "worktree":
      return { type: "worktree", result: value.result };
    case "answered": {
      const answer = parseAnswer(JSON.stringify(value.answer));
      return typeof value.won === "boolean" && answer ? { type: "answered", won: value.won, answer } : undefined;
    }
    case "error":
      return isCode(value.code) && typeof value.message === "string"
        ? { type: "error", code: value.code, message: value.message }
        : undefined;
    case "check":
      return typeof value.version === "string" && typeof value.state_dir === "string" && isObject(value.programs)
        ? {
            type: "check",
            version: value.version,
            state_dir: value.state_dir,
            programs: value.programs as Record<string, string | null>,
          }
        : undefined;
    default:
      return undefined;
  }
}

/** Each entry checked as the approval files are (store/approvals.ts); a frame with one that is not is skipped whole. */
function parseApprovalsFrame(value: unknown): RemoteFrame | undefined {
  if (!Array.isArray(value) || value.length > 10_000) return undefined;
  const approvals: Approval[] = [];
  for (const entry of value) {
    if (
      !isObject(entry) ||
      !isObject(entry.request) ||
      typeof entry.request.id !== "string" ||
      !isRequestId(entry.request.id)
    )
      return undefined;
    const request = parseApprovalRequest(JSON.stringify(entry.request), entry.request.id);
    const answer = entry.answer === undefined ? undefined : parseAnswer(JSON.stringify(entry.answer));
    if (!request || (entry.answer !== undefined && !answer)) return undefined;
    approvals.push(answer ? { request, answer } : { request });
  }
  return { type: "approvals", approvals };
}

function parseEnd(value: Record<string, unknown>): EndFrame | undefined {
  const { outcome, exit, stderr_tail, size, ended_ms_ago } = value;
  if (!isObject(outcome) || typeof outcome.ok !== "boolean" || typeof stderr_tail !== "string" || !isOffset(size))
    return undefined;
  if (outcome.code !== undefined && !isCode(outcome.code)) return undefined;
  const frame: EndFrame = {
    type: "end",
    outcome: {
      ok: outcome.ok,
      ...(outcome.code ? { code: outcome.code } : {}),
      ...(typeof outcome.detail === "string" ? { detail: outcome.detail } : {}),
    },
    stderr_tail,
    size,
  };
  if (
    isObject(exit) &&
    (exit.code === null || Number.isSafeInteger(exit.code)) &&
    (exit.signal === null || typeof exit.signal === "string")
  ) {
    frame.exit = { code: exit.code as number | null, signal: exit.signal as string | null };
  }
  if (isOffset(ended_ms_ago)) frame.ended_ms_ago = ended_ms_ago;
  return frame;
}

function isCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && (ERROR_CODES as readonly string[]).includes(value);
}

function isJobId(value: unknown): value is string {
  return typeof value === "string" && JOB_ID.test(value);
}

function isOffset(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function isAbsolute(value: unknown): value is string {
  return typeof value === "string" && value.startsWith("/") && !hasNul(value);
}

function isStrings(value: unknown, max: number): value is string[] {
  return (
    Array.isArray(value) && value.length <= max && value.every((item) => typeof item === "string" && !hasNul(item))
  );
}

function isStringMap(value: unknown): value is Record<string, string> {
  return isObject(value) && Object.values(value).every((item) => typeof item === "string" && !hasNul(item));
}

function hasNul(text: string): boolean {
  return text.includes("\0");
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
