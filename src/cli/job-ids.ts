/**
 * Job ids as `show` and `kill` take them (PROTOCOL.md §17): a whole id, or,
 * as with git, a unique prefix of one. A prefix is only compared with the
 * names read from the jobs folder; it never becomes part of a path itself.
 */
import { readdirSync } from "node:fs";

import { DispatchError } from "../core/errors.js";
import { isJobId, type JobRecord } from "../store/records.js";
import type { StateStore } from "../store/state-store.js";
import type { Context } from "./context.js";
import { clip, echo, PREVIEW_COLUMN_CHARS, printable, table } from "./format.js";

/** The shortest id prefix `show` and `kill` take, in hex digits: as git's, short to type yet rarely ambiguous. */
export const MIN_ID_PREFIX_HEX = 4;

const ID_CHARACTERS = /^[0-9a-f-]{1,36}$/i;

export function isIdOrPrefix(text: string): boolean {
  return ID_CHARACTERS.test(text) && text.replaceAll("-", "").length >= MIN_ID_PREFIX_HEX;
}

export interface JobMatch {
  id: string;
  /** Null for a folder without a readable record (one being created, or torn). */
  status: JobRecord["status"] | null;
  prompt_preview: string | null;
}

/** A prefix that fits several jobs: the user picks one of them. */
export class AmbiguousJobId extends DispatchError {
  constructor(
    readonly summary: string,
    readonly matches: readonly JobMatch[],
  ) {
    super("INVALID_ARGUMENT", `${summary}: ${matches.map((match) => match.id).join(", ")}`);
  }
}

/** A whole id as it is; a prefix to the one job whose folder name starts with it. */
export function resolveJobId(context: Context, typed: string): string {
  const prefix = typed.toLowerCase();
  if (isJobId(prefix)) return prefix;
  const { store } = context;
  const matches = jobFolderNames(store).filter((name) => name.startsWith(prefix));
  if (matches.length === 1) return matches[0] as string;
  if (matches.length === 0)
    throw new DispatchError("JOB_NOT_FOUND", `no job id starts with ${echo(typed)} in ${store.root}`);
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

/** The jobs a prefix matches, within `width` columns when given: the prompt is cut, never an id (§17). */
export function matchTable(matches: readonly JobMatch[], width?: number): string[] {
  const cells = matches.map((match) => [
    match.id,
    match.status ?? "-",
    clip(printable(match.prompt_preview ?? "(no record)"), PREVIEW_COLUMN_CHARS),
  ]);
  return table(["ID", "STATUS", "PROMPT"], cells, new Set(), { width, elide: { PROMPT: "end" } });
}
