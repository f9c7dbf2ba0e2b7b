/**
 * A job and its record (PROTOCOL.md §8, §15.2): the record written for a job,
 * a finished job rebuilt from its record, and how the way an agent ended
 * becomes the job's final status and outcome.
 */
import type { AgentOptions } from "../agent/options.js";
import type { AgentOutcome, NamedSpec } from "../agent/types.js";
import type { JobRecord } from "../store/records.js";
import type { Logger } from "../core/log.js";
import { forReadingOnOneLine } from "../core/text.js";
import { JobEntry, previewOf, RESULT_CHARS_IN_MEMORY } from "./entry.js";
import { outcomeFrom, storedOutcome } from "./outcomes.js";
import { KILL_REASON_TEXT, type JobStatus, type JobStore, type KillReason, type Persistence } from "./types.js";

/**
 * A running job's record lists only its latest permission requests, so that the write each request causes
 * costs the same however many came before; the final record lists them all, once (§18).
 */
const RUNNING_RECORD_APPROVALS = 20;

/** The record that says where the job is now. */
export function recordOf(job: JobEntry, persistence: Pick<Persistence, "owner">): JobRecord {
  const live = job.live();
  const turns = job.outcome?.result?.numTurns ?? live.turns;
  const cost = job.outcome?.result?.costUsd ?? live.costUsd;
  const record: JobRecord = {
    format: 1,
    id: job.id,
    kind: job.kind,
    cwd: job.cwd,
    prompt_preview: job.promptPreview,
    options: job.spec.options ?? ({} as AgentOptions),
    status: job.status,
    submitted_at: job.submittedAt,
    runtime: job.agentName,
    host: job.hostName,
    owner: persistence.owner,
    generation: job.generation,
  };
  if (job.resumeSessionId !== undefined) record.resume_session_id = job.resumeSessionId;
  if (job.timeoutMs !== undefined) record.timeout_ms = job.timeoutMs;
  if (job.status !== "queued" && job.launched) record.started_at = job.startedAt;
  if (job.finishedAt !== undefined) record.finished_at = job.finishedAt;
  if (job.agent) record.agent = { ...job.agent };
  if (job.killReason) record.kill_reason = job.killReason;
  if (job.outcome) record.outcome = storedOutcome(job.outcome, job.resultFile !== undefined);
  if (job.approvals.length > 0) {
    const running = job.finishedAt === undefined;
    record.approvals = running ? job.approvals.slice(-RUNNING_RECORD_APPROVALS) : job.approvals.slice();
  }
  if (job.spec.worktree) record.worktree = { ...job.spec.worktree };
  if (turns > 0) record.turns = turns;
  if (cost !== undefined) record.cost_usd = cost;
  return record;
}

/**
 * What a record says its job asked for; the prompt stays in prompt.txt, the
 * agent's stdin. Names are shown: cleaned (§10).
 */
export function specFromRecord(record: JobRecord): NamedSpec {
  return {
    agent: forReadingOnOneLine(record.runtime),
    host: forReadingOnOneLine(record.host),
    prompt: "",
    cwd: record.cwd,
    options: record.options,
    ...(record.resume_session_id ? { resumeSessionId: record.resume_session_id } : {}),
    ...(record.worktree ? { worktree: record.worktree } : {}),
  };
}

/** An entry for a job read from its record: its id, kind, spec, times and preview; the caller sets the rest. */
export function entryFromRecord(
  record: JobRecord,
  spec = specFromRecord(record),
  positionOf: (job: JobEntry) => number | undefined = () => undefined,
): JobEntry {
  const job = new JobEntry(
    record.id,
    record.kind,
    spec,
    record.started_at ?? record.submitted_at,
    record.timeout_ms,
    positionOf,
    previewOf(record.prompt_preview),
  );
  job.submittedAt = record.submitted_at;
  return job;
}

/** A finished job from its record, reachable again; its transcript is rebuilt from its output on first use. */
export function finishedFromRecord(
  record: JobRecord,
  persistence: Pick<Persistence, "store" | "replayTranscript">,
  now: number,
): JobEntry {
  const job = entryFromRecord(record);
  job.status = record.status;
  // A finish time in the future (the clock was set back since) counts as
  // now, so retention is not stretched by the jump.
  job.finishedAt = Math.min(record.finished_at ?? record.submitted_at, now);
  job.killReason = record.kill_reason as KillReason | undefined;
  job.agent = record.agent;
  job.generation = record.generation;
  job.outcome = outcomeFrom(record.outcome);
  if (Array.isArray(record.approvals)) job.approvals = record.approvals;
  job.approvalFiles = persistence.store;
  if (record.outcome?.result_chars !== undefined) job.resultFile = persistence.store;
  job.replayTranscript = () => persistence.replayTranscript(job.id, record.runtime);
  job.markDone();
  return job;
}

/**
 * The job's final status and outcome (§8): a timeout is TIMEOUT, any other
 * kill is KILLED (KILL_FAILED when processes survived), whatever the agent's
 * end looked like from here; otherwise the agent's own outcome decides.
 */
export function finalState(
  job: Pick<JobEntry, "killReason" | "timeoutMs" | "launched">,
  outcome: AgentOutcome,
): { status: JobStatus; outcome: AgentOutcome } {
  const reason = job.killReason;
  if (reason === "timeout") {
    const seconds = Math.round((job.timeoutMs ?? 0) / 1000);
    // A kill that failed says so: survivors, or a host out of reach (§21.3).
    const failedKill = !outcome.ok && outcome.code === "KILL_FAILED" ? outcome.detail : undefined;
    const where = !job.launched
      ? "it was still queued and never started"
      : (failedKill ?? "the agent's process tree was killed");
    const result = outcome.ok || outcome.result ? { result: outcome.result } : {};
    return {
      status: "failed",
      outcome: { ok: false, code: "TIMEOUT", detail: `no result within ${seconds}s; ${where}`, ...result },
    };
  }
  // Processes survived SIGKILL: the record keeps which.
  if (reason && !outcome.ok && outcome.code === "KILL_FAILED") return { status: "killed", outcome };
  if (reason) {
    // Killed is killed, however the agent's end looked from here (an adopted agent's is unobserved: AGENT_LOST).
    const detail = !outcome.ok && outcome.code === "KILLED" ? outcome.detail : `killed ${KILL_REASON_TEXT[reason]}`;
    const kept = {
      ...(outcome.result ? { result: outcome.result } : {}),
      ...(outcome.exit ? { exit: outcome.exit } : {}),
    };
    return { status: "killed", outcome: { ok: false, code: "KILLED", detail, ...kept } };
  }
  return { status: outcome.ok ? "completed" : outcome.code === "AGENT_LOST" ? "lost" : "failed", outcome };
}

/**
 * A long result text goes to the job's result file (if the agent's reader
 * did not put it there already) and leaves memory.
 */
export function storeResult(
  job: JobEntry,
  store: Pick<JobStore, "writeResult" | "readResult" | "readResultHead">,
  logger: Logger,
): void {
  const result = job.outcome?.result;
  if (!job.outcome || !result) return;
  if (result.text === undefined) {
    // Streamed there by the agent's reader.
    if (result.textChars !== undefined) job.resultFile = store;
    return;
  }
  const text = result.text;
  try {
    store.writeResult(job.id, text);
  } catch (error) {
    logger.error(`job ${job.id}: cannot write its result file; keeping it in memory: ${(error as Error).message}`);
    return;
  }
  job.resultFile = store;
  if (text.length > RESULT_CHARS_IN_MEMORY) {
    const { text: _inFile, ...rest } = result;
    job.outcome = { ...job.outcome, result: { ...rest, textChars: text.length } };
  }
}
