/**
 * What the registry does to a job at each step of its life (PROTOCOL.md §8, §15.3, §18): the one interface its
 * collaborators (the takeover, the spawn, the kill, the observer, the shared queue, the approvals) are given, each
 * typed to the steps it takes, instead of a bag of callbacks of its own.
 */
import type { AgentOutcome, AgentRun } from "../agent/types.js";
import type { JobRecord } from "../store/records.js";
import type { JobEntry } from "./entry.js";
import type { KillReason, KillResult } from "./types.js";

export interface JobLife {
  /** Writes the job's record (its owner only): the bytes written, or undefined when none were. */
  save(job: JobEntry): number | undefined;
  /** Starts a job of this server's that holds a slot. */
  launch(job: JobEntry): void;
  /** Follows a running agent to its end. */
  follow(job: JobEntry, run: AgentRun): void;
  finish(job: JobEntry, outcome: AgentOutcome): void;
  armTimeout(job: JobEntry, timeoutMs: number | undefined): void;
  kill(id: string, reason: KillReason): Promise<KillResult>;
  /** The job served under this id, looked up in the state directory when it is not in memory. */
  find(id: string): Promise<JobEntry | undefined>;
  /** Takes a job over from its dead owner: the entry that now serves it, if this server got it. */
  takeOver(record: JobRecord): Promise<JobEntry | undefined>;
  /** A takeover is under way (starts wait for its end), or shutdown began. */
  busy(): boolean;
  /** Looks up the job folders this server does not know: other servers' queued jobs among them. */
  discover(): Promise<void>;
}
