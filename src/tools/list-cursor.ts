/**
 * claude_list's order and cursor (PROTOCOL.md §5.7): the active jobs by submission, then the finished ones newest
 * first. A cursor names the last job a page showed, by its place in that order, so the next page starts after it
 * even when jobs came or went meanwhile; it also carries the page's filter and limit.
 */

export const LIST_STATUSES = ["queued", "running", "input_required", "completed", "failed", "killed", "lost"] as const;
export type ListStatus = (typeof LIST_STATUSES)[number];

export const LISTED = { default: 20, max: 100 } as const;

/** A job's place in the order: active or not, then when it was submitted (active) or finished, then its id. */
export interface ListPosition {
  active: boolean;
  at: number;
  id: string;
}

export interface ListInput {
  /** Undefined: every status. */
  statuses: readonly ListStatus[] | undefined;
  limit: number;
  /** The page starts after this place. */
  after: ListPosition | undefined;
}

export function comparePositions(a: ListPosition, b: ListPosition): number {
  if (a.active !== b.active) return a.active ? -1 : 1;
  if (a.at !== b.at) return a.active ? a.at - b.at : b.at - a.at;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** One letter per status, in LIST_STATUSES' order. */
const STATUS_LETTERS = "qricfkl";
/** Job ids are UUIDs (§8); a cursor holds only characters that need no escaping in `next`. */
const CURSOR = /^([af])(\d{1,16})\.([A-Za-z0-9-]{1,64})\.([qricfkl]{0,7})\.([1-9]\d{0,2})$/;

export function encodeCursor(after: ListPosition, statuses: readonly ListStatus[] | undefined, limit: number): string {
  const letters = (statuses ?? []).map((status) => STATUS_LETTERS[LIST_STATUSES.indexOf(status)]).join("");
  return `${after.active ? "a" : "f"}${after.at}.${after.id}.${letters}.${limit}`;
}

/** What a cursor this server made says; undefined for anything else. */
export function decodeCursor(cursor: string): ListInput | undefined {
  const [, group, at, id, letters, limit] = CURSOR.exec(cursor) ?? [];
  if (group === undefined || at === undefined || id === undefined || letters === undefined) return undefined;
  if (Number(limit) > LISTED.max) return undefined;
  const statuses = [...new Set(letters)].map((letter) => LIST_STATUSES[STATUS_LETTERS.indexOf(letter)] as ListStatus);
  const after = { active: group === "a", at: Number(at), id };
  return { statuses: statuses.length > 0 ? statuses : undefined, limit: Number(limit), after };
}
