/**
 * Permission requests an agent asks through its approver, and their answers
 * (PROTOCOL.md §18): files in the job's folder, so that a question survives
 * the server that saw it, and any server of the state directory, or the CLI,
 * can answer it. Each file is created exclusively and whole (claims.ts):
 *
 *   <state>/jobs/<id>/approval.N.json         request N, written by the approver, naming a random nonce
 *   <state>/jobs/<id>/approval.N.answer.json  its answer, naming that nonce; of two answers the first wins
 *   <state>/jobs/<id>/approval.N.told         empty: CLAUDE_DISPATCH_ON_INPUT ran for request N, or is running
 *
 * An answer counts only if it names its request's nonce: one written before the request existed
 * (planted, or left by an earlier request under that number) cannot, so it is never taken.
 */
import { lstatSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";

import { createExclusively, createWithoutLinks } from "./claims.js";
import { readTextFile } from "./files.js";
import { isRequestId } from "./records.js";

export { isRequestId };
import { isRecord } from "../core/values.js";

/**
 * Who answered: claude_respond, the client's elicitation form, the CLI, the approval
 * timeout, or the server for a caller that cannot be asked.
 */
export type AnsweredBy = "tool" | "elicitation" | "cli" | "timeout" | "server";
export type Decision = "allow" | "deny";

export interface ApprovalRequest {
  id: string;
  tool_name: string;
  /** The tool's input, whole, as the agent sent it. */
  input: unknown;
  tool_use_id?: string;
  /** One line saying what the tool would do (the command, the file), made by the approver. */
  preview: string;
  /** Milliseconds since the epoch. */
  asked_at: number;
  /** When the approver denies it unanswered. */
  expires_at: number;
  /** Unguessable, made when it is filed: an answer counts only if it names it. Absent on earlier versions' requests. */
  nonce?: string;
}

export interface ApprovalAnswer {
  decision: Decision;
  by: AnsweredBy;
  at: number;
  /** For a denial: what the agent is told. */
  message?: string;
}

export interface Approval {
  request: ApprovalRequest;
  answer?: ApprovalAnswer;
}

/** An answer as its file holds it: naming the nonce of the request it answers. */
type FiledAnswer = ApprovalAnswer & { nonce?: string };

/** A request looked up by number: there and readable, there but not (yet) readable, or not there. */
export type ApprovalLookup = Approval | "unreadable" | undefined;

const REQUEST_FILE = /^approval\.([1-9][0-9]{0,8})\.json$/;
const BY: readonly string[] = ["tool", "elicitation", "cli", "timeout", "server"];

/** Whether a name in a job's folder is a request or an answer: news for whoever waits on one (a mark is not). */
export function isApprovalFile(name: string): boolean {
  return name.startsWith("approval.") && name.endsWith(".json");
}

function requestFile(jobDir: string, id: string): string {
  return path.join(jobDir, `approval.${id}.json`);
}

function answerFile(jobDir: string, id: string): string {
  return path.join(jobDir, `approval.${id}.answer.json`);
}

export function parseRequest(text: string | undefined, id: string): ApprovalRequest | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (!isRecord(value) || value.id !== id || typeof value.tool_name !== "string" || typeof value.preview !== "string")
      return undefined;
    if (!Number.isFinite(value.asked_at) || !Number.isFinite(value.expires_at)) return undefined;
    if (value.nonce !== undefined && typeof value.nonce !== "string") return undefined;
    return value as unknown as ApprovalRequest;
  } catch {
    return undefined;
  }
}

function parseFiledAnswer(text: string | undefined): FiledAnswer | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (
      !isRecord(value) ||
      (value.decision !== "allow" && value.decision !== "deny") ||
      !BY.includes(value.by as string)
    )
      return undefined;
    if (!Number.isFinite(value.at) || (value.message !== undefined && typeof value.message !== "string"))
      return undefined;
    if (value.nonce !== undefined && typeof value.nonce !== "string") return undefined;
    return value as unknown as FiledAnswer;
  } catch {
    return undefined;
  }
}

/** An answer as a frame or a file holds it, without the nonce it names (which only its own request's check needs). */
export function parseAnswer(text: string | undefined): ApprovalAnswer | undefined {
  const filed = parseFiledAnswer(text);
  return filed && withoutNonce(filed);
}

function withoutNonce(filed: FiledAnswer): ApprovalAnswer {
  const { nonce: _nonce, ...answer } = filed;
  return answer;
}

/**
 * Whether a filed answer answers this request: it names its nonce (an earlier version's request has none: any will do).
 */
function answers(filed: FiledAnswer, request: ApprovalRequest): boolean {
  return request.nonce === undefined || filed.nonce === request.nonce;
}

/** The answer on file for this request, if one that names it is there. */
function answerTo(jobDir: string, request: ApprovalRequest): ApprovalAnswer | undefined {
  const filed = parseFiledAnswer(readTextFile(answerFile(jobDir, request.id)));
  return filed && answers(filed, request) ? withoutNonce(filed) : undefined;
}

/**
 * Every request of the job, oldest first, each with its answer if it has one.
 * A file that is not whole or not ours is skipped.
 */
export function readApprovals(jobDir: string): Approval[] {
  let names: string[];
  try {
    names = readdirSync(jobDir);
  } catch {
    return [];
  }
  const ids = names.flatMap((name) => REQUEST_FILE.exec(name)?.[1] ?? []).sort((a, b) => Number(a) - Number(b));
  return ids.flatMap((id) => readApproval(jobDir, id) ?? []);
}

/** One request and its answer, if it has one; undefined when there is no such request. */
export function readApproval(jobDir: string, id: string): Approval | undefined {
  const found = lookUpApproval(jobDir, id);
  return found === "unreadable" ? undefined : found;
}

/**
 * Request `id` and its answer. With `known`, the request as read before: only its answer is read, and it
 * must name that request's nonce (§18). "unreadable" when a file is there that is not a request of ours.
 */
export function lookUpApproval(jobDir: string, id: string, known?: ApprovalRequest): ApprovalLookup {
  if (!isRequestId(id)) return undefined;
  let request = known;
  if (!request) {
    const file = requestFile(jobDir, id);
    const text = readNewFile(file);
    request = parseRequest(text, id);
    if (!request) return text !== undefined || kindOf(file) !== undefined ? "unreadable" : undefined;
  }
  const answer = answerTo(jobDir, request);
  return answer ? { request, answer } : { request };
}

/** What stands at file: a regular file, something else (a link, a FIFO, …), or nothing. */
function kindOf(file: string): "regular" | "other" | undefined {
  try {
    return lstatSync(file).isFile() ? "regular" : "other";
  } catch {
    return undefined;
  }
}

/** The file's text, read again if it was created between the open that missed it and the look that finds it. */
function readNewFile(file: string): string | undefined {
  return readTextFile(file) ?? (kindOf(file) === "regular" ? readTextFile(file) : undefined);
}

/**
 * Files a new request under the first free number from `from` (an approver passes the one after its last), with a
 * fresh nonce; returns it. Each number taken already (by another approver of the job, or by a planted file) is
 * one failed exclusive create, so the numbers have no gaps and a reader can follow them in order.
 */
export function fileRequest(
  jobDir: string,
  request: Omit<ApprovalRequest, "id" | "nonce">,
  randomName: () => string,
  from = 1,
): ApprovalRequest {
  for (let id = Math.max(1, from); isRequestId(String(id)); id += 1) {
    const filed: ApprovalRequest = { id: String(id), ...request, nonce: randomName() };
    if (createExclusively(requestFile(jobDir, filed.id), `${JSON.stringify(filed)}\n`, randomName)) return filed;
  }
  throw new Error("every request number is taken");
}

/** Files a request under its own id, as another machine's approver filed it (§21.3); false when it is filed already. */
export function fileRequestAs(jobDir: string, request: ApprovalRequest, randomName: () => string): boolean {
  return (
    isRequestId(request.id) &&
    createExclusively(requestFile(jobDir, request.id), `${JSON.stringify(request)}\n`, randomName)
  );
}

/**
 * Marks request `id` told of (CLAUDE_DISPATCH_ON_INPUT, §18); true only for the one caller that made the mark,
 * of every process. Created exclusively, never through a link; whatever stands there already, planted or not,
 * is a mark: the worst it does is keep the command from running, as the agent's own answer would.
 */
export function markTold(jobDir: string, id: string): boolean {
  return isRequestId(id) && createWithoutLinks(path.join(jobDir, `approval.${id}.told`), "");
}

/**
 * Answers request `id` unless it has an answer already: the first answer
 * wins. The answer file names the request's nonce, read from the request
 * file. Returns the answer that stands, and whether it is this one; undefined
 * when there is no such request, or when a file that does not answer it is in
 * its answer's place (its approver removes such a file, ApprovalFiles.answerTo).
 */
export function answerRequest(
  jobDir: string,
  id: string,
  answer: ApprovalAnswer,
  randomName: () => string,
): { answer: ApprovalAnswer; won: boolean } | undefined {
  const request = isRequestId(id) ? parseRequest(readTextFile(requestFile(jobDir, id)), id) : undefined;
  if (!request) return undefined;
  // Whatever nonce a caller's answer names, the file names its request's.
  const given = withoutNonce(answer);
  const filed: FiledAnswer = request.nonce === undefined ? given : { ...given, nonce: request.nonce };
  const file = answerFile(jobDir, id);
  if (createExclusively(file, `${JSON.stringify(filed)}\n`, randomName)) return { answer: given, won: true };
  const standing = answerTo(jobDir, request);
  return standing ? { answer: standing, won: false } : undefined;
}

/**
 * For the approver that filed `request`: the answer to it, if one that names its nonce is there. Any other
 * file in the answer's place (planted before the request was filed, left by an earlier request of that
 * number, or a link, FIFO or other file that is not a regular one) is removed, so that the request can
 * still be answered. A regular file that cannot be parsed is left alone: on a file system without hard
 * links it may be an answer being written (claims.ts).
 */
export function answerToOwnRequest(jobDir: string, request: ApprovalRequest): OwnAnswer {
  const file = answerFile(jobDir, request.id);
  const text = readNewFile(file);
  if (text === undefined) return kindOf(file) === "other" && remove(file) ? { removed: true } : {};
  const filed = parseFiledAnswer(text);
  if (!filed) return {};
  if (!answers(filed, request)) return remove(file) ? { removed: true } : {};
  return { answer: withoutNonce(filed) };
}

/** What the approver finds where its request's answer goes: the answer, or that something else was removed. */
export interface OwnAnswer {
  answer?: ApprovalAnswer;
  removed?: true;
}

function remove(file: string): boolean {
  try {
    rmSync(file, { force: true });
    return true;
  } catch {
    return false;
  }
}
