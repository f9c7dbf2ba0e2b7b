/**
 * Permission requests an agent asks through its approver, and their answers
 * (PROTOCOL.md §18): files in the job's folder, so that a question survives
 * the server that saw it, and any server of the state directory, or the CLI,
 * can answer it. Each file is created exclusively and whole (claims.ts):
 *
 *   <state>/jobs/<id>/approval.N.json         request N, written by the approver
 *   <state>/jobs/<id>/approval.N.answer.json  its answer; of two answers the first wins
 */
import { readdirSync } from "node:fs";
import path from "node:path";

import { createExclusively } from "./claims.js";
import { readTextFile } from "./files.js";
import { isRequestId } from "./records.js";

export { isRequestId };
import { isRecord } from "../core/values.js";

/** Who answered: claude_respond, the client's elicitation form, the CLI, the approval timeout, or the server for a caller that cannot be asked. */
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

const REQUEST_FILE = /^approval\.([1-9][0-9]{0,8})\.json$/;
const BY: readonly string[] = ["tool", "elicitation", "cli", "timeout", "server"];

/** Whether a name in a job's folder is an approval file: news for whoever waits on one. */
export function isApprovalFile(name: string): boolean {
  return name.startsWith("approval.") && !name.endsWith(".tmp");
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
    if (!isRecord(value) || value.id !== id || typeof value.tool_name !== "string" || typeof value.preview !== "string") return undefined;
    if (!Number.isFinite(value.asked_at) || !Number.isFinite(value.expires_at)) return undefined;
    return value as unknown as ApprovalRequest;
  } catch {
    return undefined;
  }
}

export function parseAnswer(text: string | undefined): ApprovalAnswer | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (!isRecord(value) || (value.decision !== "allow" && value.decision !== "deny") || !BY.includes(value.by as string)) return undefined;
    if (!Number.isFinite(value.at) || (value.message !== undefined && typeof value.message !== "string")) return undefined;
    return value as unknown as ApprovalAnswer;
  } catch {
    return undefined;
  }
}

/** Every request of the job, oldest first, each with its answer if it has one. A file that is not whole or not ours is skipped. */
export function readApprovals(jobDir: string): Approval[] {
  let names: string[];
  try {
    names = readdirSync(jobDir);
  } catch {
    return [];
  }
  const ids = names.flatMap((name) => REQUEST_FILE.exec(name)?.[1] ?? []).sort((a, b) => Number(a) - Number(b));
  const approvals: Approval[] = [];
  for (const id of ids) {
    const request = parseRequest(readTextFile(requestFile(jobDir, id)), id);
    if (!request) continue;
    const answer = parseAnswer(readTextFile(answerFile(jobDir, id)));
    approvals.push(answer ? { request, answer } : { request });
  }
  return approvals;
}

/** One request and its answer, if it has one; undefined when there is no such request. */
export function readApproval(jobDir: string, id: string): Approval | undefined {
  if (!isRequestId(id)) return undefined;
  const request = parseRequest(readTextFile(requestFile(jobDir, id)), id);
  if (!request) return undefined;
  const answer = parseAnswer(readTextFile(answerFile(jobDir, id)));
  return answer ? { request, answer } : { request };
}

/** Files a new request under the next free number; returns it. */
export function fileRequest(jobDir: string, request: Omit<ApprovalRequest, "id">, randomName: () => string): ApprovalRequest {
  let next = 1;
  try {
    for (const name of readdirSync(jobDir)) next = Math.max(next, Number(REQUEST_FILE.exec(name)?.[1] ?? 0) + 1);
  } catch {
    // The folder is checked by the create below.
  }
  // Another approver of the same job (the agent restarted it) may take a number first: take the next.
  for (let id = next; ; id += 1) {
    const filed: ApprovalRequest = { id: String(id), ...request };
    if (createExclusively(requestFile(jobDir, filed.id), `${JSON.stringify(filed)}\n`, randomName)) return filed;
  }
}

/** Files a request under its own id, as another machine's approver filed it (§21.3); false when it is filed already. */
export function fileRequestAs(jobDir: string, request: ApprovalRequest, randomName: () => string): boolean {
  return isRequestId(request.id) && createExclusively(requestFile(jobDir, request.id), `${JSON.stringify(request)}\n`, randomName);
}

/**
 * Answers request `id` unless it has an answer already: the first answer
 * wins. Returns the answer that stands, and whether it is this one; undefined
 * when there is no such request.
 */
export function answerRequest(jobDir: string, id: string, answer: ApprovalAnswer, randomName: () => string): { answer: ApprovalAnswer; won: boolean } | undefined {
  if (!isRequestId(id) || !parseRequest(readTextFile(requestFile(jobDir, id)), id)) return undefined;
  if (createExclusively(answerFile(jobDir, id), `${JSON.stringify(answer)}\n`, randomName)) return { answer, won: true };
  const standing = parseAnswer(readTextFile(answerFile(jobDir, id)));
  // An answer file that cannot be read is no answer anyone acts on; the approver reads it the same way.
  return standing ? { answer: standing, won: false } : undefined;
}

/** The standing answer to request `id`, if any. */
export function readAnswer(jobDir: string, id: string): ApprovalAnswer | undefined {
  return parseAnswer(readTextFile(answerFile(jobDir, id)));
}
