/**
 * What a job's agent has printed so far, read back from its stdout.jsonl
 * through the same parser the server uses: for `jobs`, `show`, `kill` and
 * `logs`, which follows the file as it grows.
 */
import type { AgentOutputReader, OutputSource } from "../agent/runtime.js";
import type { LiveSummary } from "../agent/types.js";
import { DispatchError } from "../core/errors.js";
import { runtimeFor } from "../runtimes/all.js";
import type { JobRecord } from "../store/records.js";
import type { StateStore } from "../store/state-store.js";

/** The server's default line bound: a longer line ended the job anyway (§7.3). */
const MAX_OUTPUT_LINE_BYTES = 64 * 1024 * 1024;

/** Reads a job's stdout.jsonl through the same parser the server uses. */
export function replayOutput(store: StateStore, id: string, transcriptChars: number): AgentOutputReader {
  return store.replay(id, outputReader(store, id, transcriptChars));
}

function outputReader(
  store: StateStore,
  id: string,
  transcriptChars: number,
  onEntry?: (entry: string) => void,
): AgentOutputReader {
  // The runtime that wrote the output reads it back (§15.2).
  const record = store.read(id);
  if (!record) throw new DispatchError("STATE_ERROR", `job ${id} has no readable record`);
  return runtimeFor(record.runtime).createReader({
    maxLineBytes: MAX_OUTPUT_LINE_BYTES,
    transcriptChars,
    onOverflow: () => undefined,
    source: store.outputSource(id),
    ...(onEntry ? { onTranscriptEntry: onEntry } : {}),
  });
}

/**
 * How much of a finished job's output `jobs` reads at most for its session
 * when it has no result: the init line comes first.
 */
const SESSION_HEAD_BYTES = 256 * 1024;
/** Read in pieces of this size, stopping at the first line that names the session. */
const SESSION_PIECE_BYTES = 16 * 1024;

export interface Progress {
  turns: number;
  costUsd: number | undefined;
  /** The conversation to resume: the result's, else the latest the agent printed. */
  sessionId: string | undefined;
}

/** Turns, cost and session: from the record once finished; while running, from what the agent has printed so far. */
export function progressOf(store: StateStore, record: JobRecord): Progress {
  if (record.status === "running") {
    const live = replayOutput(store, record.id, 1).live();
    return { turns: live.turns, costUsd: live.costUsd ?? record.cost_usd, sessionId: live.sessionId };
  }
  const result = record.outcome?.result;
  return {
    turns: Math.round(record.turns ?? result?.numTurns ?? 0),
    costUsd: record.cost_usd ?? result?.costUsd,
    sessionId: result?.sessionId ?? (record.status === "queued" ? undefined : sessionFromHead(store, record.id)),
  };
}

/** A killed or lost job has no result: its session is in the output's first lines. */
function sessionFromHead(store: StateStore, id: string): string | undefined {
  const source = store.outputSource(id);
  const reader = outputReader(store, id, 1);
  for (
    let offset = 0;
    offset < SESSION_HEAD_BYTES && reader.live().sessionId === undefined;
    offset += SESSION_PIECE_BYTES
  ) {
    const piece = source.read(offset, SESSION_PIECE_BYTES);
    if (!piece || piece.length === 0) break;
    reader.push(piece);
  }
  return reader.live().sessionId;
}

/** Bytes handed to the reader at a time while following: the reader holds no more than one line of them. */
const FOLLOW_CHUNK_BYTES = 256 * 1024;

/**
 * A job's stdout.jsonl read as it grows, through the runtime's reader: each
 * readNew() reads only what was appended since the last, and every transcript
 * entry it yields goes to onEntry at once, so nothing accumulates here.
 */
export class OutputFollower {
  private readonly reader: AgentOutputReader;
  private readonly source: OutputSource;
  private offset = 0;

  constructor(store: StateStore, id: string, onEntry: (entry: string) => void) {
    this.source = store.outputSource(id);
    // The transcript keeps no entry boundaries (an entry may span lines): each
    // is handed on as it is made, and none is kept.
    this.reader = outputReader(store, id, 1, onEntry);
  }

  /** Hands what the agent printed since the last call to the reader. */
  readNew(): void {
    for (;;) {
      const chunk = this.source.read(this.offset, FOLLOW_CHUNK_BYTES);
      if (!chunk || chunk.length === 0) return;
      this.offset += chunk.length;
      this.reader.push(chunk);
      if (chunk.length < FOLLOW_CHUNK_BYTES) return;
    }
  }

  /** The output is complete: reads the rest, and a last line without a newline. */
  end(): void {
    this.readNew();
    this.reader.end();
  }

  live(): LiveSummary {
    return this.reader.live();
  }
}
