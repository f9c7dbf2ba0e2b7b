/**
 * What the request handler is made from (handler.ts): the job layer, the checks and the process's parts, all
 * injected. In a file of its own so that the tool calls (tool-calls.ts) can name it without importing the handler.
 */
import type { Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import type { DirectoryCheck, Policy } from "../agent/policy.js";
import type { AgentSession } from "../agent/types.js";
import type { Hosts } from "../agent/host.js";
import type { WorktreeHold } from "../agent/worktree.js";
import type { JobRegistry } from "../jobs/registry.js";
import type { JsonRpcNotification, JsonRpcRequest } from "./jsonrpc.js";

export interface HandlerDeps {
  jobs: Pick<
    JobRegistry,
    | "start"
    | "get"
    | "kill"
    | "list"
    | "recover"
    | "discover"
    | "approvals"
    | "running"
    | "newJobId"
    | "setWorktreeState"
    | "idsStartingWith"
  >;
  /** Checks a cwd or add_dirs entry (§5) on this machine: absolute, existing, inside the operator's roots. */
  checkDirectory(dir: string): Promise<DirectoryCheck>;
  /**
   * Where jobs run (§21): a call naming a host is checked, and its worktrees made, there. Absent: this machine only.
   */
  hosts?: Pick<Hosts, "home" | "get">;
  /** Sends a notification (or, for elicitation, a request) frame through the one serialized writer. */
  notify(frame: JsonRpcNotification | JsonRpcRequest): void;
  policy: Policy;
  /** Inline result text is cut here (§5.7). */
  maxResultChars: number;
  /** Longest quiet spell between progress notifications (§5.8). */
  heartbeatMs: number;
  clock: Clock;
  logger: Logger;
  server: { name: string; version: string };
  /** Recursion guard (§7.4): at or above max, no tool is listed or runs. */
  depth: { current: number; max: number };
  /** Only for the JOB_NOT_FOUND message. */
  jobRetentionMs: number;
  /** Resolves once jobs can be started and followed: what that takes loads after `initialize` (BENCHMARKS.md (a)). */
  ready?(): Promise<void>;
  /** The agent CLI's own sessions of a directory, newest first (§20): its store is read, never written. */
  sessions?(cwd: string, limit: number): Promise<AgentSession[]>;
  /** Worktrees (§19): the operator's policy, made on each job's host; without them, "worktree" is refused. */
  /** `hold` takes a job's worktree for a merge or discard (§19.1); it throws JOB_NOT_FOUND or INVALID_ARGUMENT. */
  /** `readPrompt` is the job's whole prompt, for its merge commit's subject; undefined when its prompt.txt is gone. */
  worktrees?: {
    policy: "off" | "on" | "required";
    hold(jobId: string): Promise<WorktreeHold>;
    readPrompt(jobId: string): string | undefined;
  };
}
