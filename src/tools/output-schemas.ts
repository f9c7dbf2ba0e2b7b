/**
 * The tools' output schemas (PROTOCOL.md §5.5, §5.7, §18–§20): what each
 * tool's structuredContent holds, as tools/list gives it.
 */
import { ERROR_CODES } from "../core/errors.js";
import { OUTPUT_VIEWS, WORKTREE_ACTIONS } from "./validation.js";
import { LIST_STATUSES } from "./list-cursor.js";

export const JOB_STATUSES = [
  "queued",
  "running",
  "input_required",
  "completed",
  "failed",
  "killed",
  "lost",
  "error",
] as const;
export type ReportStatus = (typeof JOB_STATUSES)[number];

const ERROR_SCHEMA = {
  type: "object",
  properties: { code: { type: "string", enum: [...ERROR_CODES] }, detail: { type: "string" } },
  required: ["code", "detail"],
} as const;

/** Claude Code gives its model only structuredContent, so the text's "call this next" lives here too. */
const NEXT = {
  type: "string",
  // ASCII (and Latin-1) only in what tools/list sends: one character beyond Latin-1 makes V8 hold the whole
  // listing as UTF-16, and every write of it slower (BENCHMARKS.md (c)).
  description:
    'What to do next, naming the tool and its arguments, such as: Call claude_wait again with job_id "<id>" to keep ' +
    "waiting. Absent when nothing is left to do.",
} as const;

/** Requests waiting for an answer (§18), as the job report and claude_respond name them. */
const PENDING_APPROVALS = {
  type: "array",
  description:
    "While input_required: the permission requests waiting for an answer, the oldest 5. " +
    "Ask the user, then answer each with claude_respond.",
  items: {
    type: "object",
    properties: {
      request_id: { type: "string" },
      tool_name: { type: "string", description: "The tool the agent wants to use, such as Bash or Write." },
      preview: {
        type: "string",
        description: 'One line of what it would do; claude_output view "approvals" has the whole input.',
      },
      waited_s: { type: "integer" },
      expires_in_s: { type: "integer", description: "Seconds until it is denied unanswered." },
    },
    required: ["request_id", "tool_name", "preview"],
  },
} as const;

/** How many wait in all, when pending_approvals lists only the oldest 5 (§5.5). */
const PENDING_TOTAL = {
  type: "integer",
  description:
    "How many permission requests wait, when pending_approvals lists only the first 5: " +
    'claude_output view "approvals" has them all.',
} as const;

/** A job's worktree and what it changed (§19). */
const WORKTREE_REPORT = {
  type: "object",
  description:
    "The job's own git worktree: where, on which branch, from which commit, and what it changed (committed or not).",
  properties: {
    path: { type: "string" },
    branch: { type: "string" },
    base: { type: "string", description: "The commit the worktree was made from." },
    state: { type: "string", enum: ["active", "merged", "discarded"] },
    changed_files: { type: "array", items: { type: "string" } },
    commits: {
      type: "array",
      items: {
        type: "object",
        properties: { sha: { type: "string" }, subject: { type: "string" } },
        required: ["sha", "subject"],
      },
    },
    uncommitted: {
      type: "boolean",
      description: "Some changes are not committed in the worktree (a merge commits them first).",
    },
    left_behind: {
      type: "boolean",
      description: "The user's checkout had uncommitted changes, which the worktree does not have.",
    },
  },
  required: ["path", "branch", "base", "state"],
} as const;

/** The job report: the output of claude_run, claude_start, claude_wait and claude_kill (§5.5). */
export const JOB_REPORT_SCHEMA = {
  type: "object",
  properties: {
    status: {
      type: "string",
      enum: [...JOB_STATUSES],
      description:
        "queued, running, input_required (running, and waiting for a permission answer: see pending_approvals), " +
        "completed, failed, killed or lost (its agent ended without a result while a restart was under way) " +
        "describe the job; error means this call itself failed.",
    },
    pending_approvals: PENDING_APPROVALS,
    pending_total: PENDING_TOTAL,
    worktree: WORKTREE_REPORT,
    queue_position: { type: "integer", description: "While queued: 1 for the next job to start." },
    job_id: { type: "string" },
    session_id: { type: "string", description: "Pass as session_id to continue this conversation." },
    result: {
      type: "string",
      description: "The agent's final answer, cut at the inline limit when truncated is true.",
    },
    truncated: {
      type: "boolean",
      description: "The result was longer than the inline limit: page the rest with claude_output.",
    },
    result_chars: { type: "integer", description: "Length of the whole result, when truncated." },
    cost_usd: { type: "number" },
    num_turns: { type: "integer", description: "Model turns: so far while running, in all once finished." },
    duration_ms: { type: "integer", description: "Agent-reported run time." },
    elapsed_s: { type: "integer", description: "Seconds since the job started, frozen when it finished." },
    last_activity: {
      type: "string",
      description: 'While running: the latest tool call or text, such as "Edit · src/app.ts".',
    },
    recent_text: { type: "string", description: "While running: the tail of the agent's latest text." },
    already_finished: { type: "boolean", description: "claude_kill only: the job had finished before the kill." },
    permission_denials: {
      type: "array",
      items: { type: "object", properties: { tool_name: { type: "string" }, tool_input: {} }, required: ["tool_name"] },
    },
    api_error_status: { type: "integer", description: "HTTP status of the Anthropic API error behind an AGENT_ERROR." },
    error: ERROR_SCHEMA,
    next: NEXT,
  },
  required: ["status"],
} as const;

/** A page of claude_list (§5.7). */
export const LIST_SCHEMA = {
  type: "object",
  properties: {
    status: { type: "string", enum: ["listed", "error"] },
    jobs: {
      type: "array",
      description: "The active jobs first, oldest first, then the finished ones, newest first.",
      items: {
        type: "object",
        properties: {
          job_id: { type: "string" },
          kind: { type: "string", enum: ["run", "start"] },
          agent: { type: "string", description: "The coding agent that runs it: claude, codex or gemini." },
          host: {
            type: "string",
            description: "The other machine it runs on, as the operator named it; absent for this machine.",
          },
          status: { type: "string", enum: [...LIST_STATUSES] },
          cwd: { type: "string", description: "Cut in its middle only when its job alone would not fit in a page." },
          elapsed_s: { type: "integer" },
          num_turns: { type: "integer" },
          prompt_preview: { type: "string" },
          session_id: {
            type: "string",
            description: "Pass to claude_run or claude_start to continue this conversation.",
          },
          other_server: {
            type: "boolean",
            description: "Started by another live server on the same state directory, which follows it.",
          },
        },
        required: ["job_id", "kind", "status", "cwd", "elapsed_s", "num_turns", "prompt_preview"],
      },
    },
    total: { type: "integer", description: "How many jobs match the status filter, on this page and others." },
    next_cursor: { type: "string", description: "Pass as cursor for the next page; absent on the last." },
    error: ERROR_SCHEMA,
    next: NEXT,
  },
  required: ["status"],
} as const;

export const OUTPUT_PAGE_SCHEMA = {
  type: "object",
  properties: {
    status: {
      type: "string",
      enum: [...JOB_STATUSES],
      description: "The job's status, or error when this call failed.",
    },
    job_id: { type: "string" },
    view: { type: "string", enum: [...OUTPUT_VIEWS] },
    offset: { type: "integer", description: "Offset of the first character returned." },
    text: { type: "string" },
    total_chars: { type: "integer", description: "Length of the whole result or transcript so far." },
    next_offset: { type: "integer", description: "Pass as offset to read on; absent at the end." },
    dropped_chars: {
      type: "integer",
      description: "Transcript only: characters dropped from its start to respect the size limit.",
    },
    error: ERROR_SCHEMA,
    next: NEXT,
  },
  required: ["status"],
} as const;

export const RESPOND_SCHEMA = {
  type: "object",
  properties: {
    status: { type: "string", enum: ["answered", "error"] },
    job_id: { type: "string" },
    request_id: { type: "string" },
    decision: { type: "string", enum: ["allow", "deny"] },
    tool_name: { type: "string" },
    preview: { type: "string" },
    job_status: { type: "string", enum: [...JOB_STATUSES], description: "The job's status after the answer." },
    pending_approvals: PENDING_APPROVALS,
    pending_total: PENDING_TOTAL,
    error: ERROR_SCHEMA,
    next: NEXT,
  },
  required: ["status"],
} as const;

export const WORKTREE_SCHEMA = {
  type: "object",
  properties: {
    status: { type: "string", enum: ["diff", "merged", "not_merged", "discarded", "error"] },
    job_id: { type: "string" },
    action: { type: "string", enum: [...WORKTREE_ACTIONS] },
    worktree: WORKTREE_REPORT,
    text: { type: "string", description: "diff: a page of the unified diff." },
    offset: { type: "integer" },
    total_chars: { type: "integer" },
    next_offset: { type: "integer", description: "diff: pass as offset to read on; absent at the end." },
    into: { type: "string", description: "merge: the branch the changes went into." },
    commit: { type: "string", description: "merge: the repository's HEAD after the merge." },
    branch: {
      type: "string",
      description: "merge: the job's branch, kept until the job is pruned; its worktree is removed.",
    },
    reason: { type: "string", description: "not_merged: why nothing changed." },
    conflicts: {
      type: "array",
      items: { type: "string" },
      description: "not_merged: the first 20 files that would conflict, or that are not clean.",
    },
    conflicts_total: {
      type: "integer",
      description: "not_merged: how many in all, when conflicts lists only the first 20.",
    },
    operations: {
      type: "array",
      items: { type: "string" },
      description: "merge: the git commands that ran, in order.",
    },
    error: ERROR_SCHEMA,
    next: NEXT,
  },
  required: ["status"],
} as const;

export const SESSIONS_SCHEMA = {
  type: "object",
  properties: {
    status: { type: "string", enum: ["listed", "error"] },
    cwd: { type: "string" },
    sessions: {
      type: "array",
      items: {
        type: "object",
        properties: {
          session_id: {
            type: "string",
            description: "Pass as session_id to claude_run or claude_start, with the same cwd, to continue it.",
          },
          started_at: { type: "string", description: "ISO 8601." },
          last_active_at: { type: "string", description: "ISO 8601." },
          first_prompt: { type: "string" },
          prompts: { type: "integer", description: "Prompts given in the session (not model turns)." },
          prompts_exact: {
            type: "boolean",
            description: "false: at least this many (only the ends of a long session are read).",
          },
          worktree: { type: "string", description: "The job worktree the session ran in, when it was one." },
          job_ids: {
            type: "array",
            items: { type: "string" },
            description: "Jobs of this server's state directory that ran in this session.",
          },
        },
        required: ["session_id", "started_at", "last_active_at", "first_prompt", "prompts", "prompts_exact", "job_ids"],
      },
    },
    error: ERROR_SCHEMA,
    next: NEXT,
  },
  required: ["status"],
} as const;
