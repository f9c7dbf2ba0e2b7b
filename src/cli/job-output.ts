/**
 * What a job's agent has printed so far, read back from its stdout.jsonl
 * through the same parser the server uses: for `jobs`, `show` and `kill`.
 */
import type { AgentOutputReader } from "../agent/runtime.js";
import { DEFAULT_CLAUDE_BIN, claudeRuntime } from "../runtimes/claude/index.js";
import type { JobRecord } from "../store/records.js";
import type { StateStore } from "../store/state-store.js";

/** The server's default line bound: a longer line ended the job anyway (§7.3). */
const MAX_OUTPUT_LINE_BYTES = 64 * 1024 * 1024;

/** Reads a job's stdout.jsonl through the same parser the server uses. */
export function replayOutput(store: StateStore, id: string, transcriptChars: number): AgentOutputReader {
  // Every record names Claude Code today (§15.2): the runtime that wrote the output reads it back.
  const reader = claudeRuntime(DEFAULT_CLAUDE_BIN).createReader({
    maxLineBytes: MAX_OUTPUT_LINE_BYTES,
    transcriptChars,
    onOverflow: () => undefined,
    source: store.outputSource(id),
  });
  return store.replay(id, reader);
}

/** Turns and cost: from the record once finished; while running, from what the agent has printed so far. */
export function progressOf(store: StateStore, record: JobRecord): { turns: number; costUsd: number | undefined } {
  if (record.status === "running") {
    const live = replayOutput(store, record.id, 1).live();
    return { turns: live.turns, costUsd: live.costUsd ?? record.cost_usd };
  }
  const result = record.outcome?.result;
  return { turns: Math.round(record.turns ?? result?.numTurns ?? 0), costUsd: record.cost_usd ?? result?.costUsd };
}
