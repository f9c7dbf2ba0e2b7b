/**
 * Tool definitions and their JSON Schemas (PROTOCOL.md §5), as tools/list
 * gives them; validation of what a call sends is in validation.ts.
 */
import { JOB_REPORT_SCHEMA, LIST_SCHEMA, OUTPUT_PAGE_SCHEMA, RESPOND_SCHEMA, SESSIONS_SCHEMA, WORKTREE_SCHEMA } from "./output-schemas.js";
import { LIMITS, MODEL_NAME, OUTPUT_VIEWS, WORKTREE_ACTIONS, offeredAgents, type ToolSettings } from "./validation.js";

export const TOOL_NAMES = ["claude_run", "claude_start", "claude_wait", "claude_kill", "claude_list", "claude_output", "claude_respond", "claude_worktree", "claude_sessions"] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

export function isToolName(name: string): name is ToolName {
  return (TOOL_NAMES as readonly string[]).includes(name);
}

export { LIMITS, type ToolSettings };

/* ------------------------------------------------------------------ *
 * Definitions, as listed by tools/list
 * ------------------------------------------------------------------ */

const PROMPT = { type: "string", minLength: 1, description: "The task or question for Claude Code, in plain language." };
const CWD = {
  type: "string",
  minLength: 1,
  description: "Absolute path of the project directory Claude Code works in. It must exist.",
};
const SESSION_ID = {
  type: "string",
  pattern: "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
  description: "session_id from an earlier result, to continue that conversation with its context. Omit to start fresh.",
};
const JOB_ID = { type: "string", minLength: 1, description: "job_id returned by claude_start or claude_run." };

function agentOptionSchemas(settings: ToolSettings): Record<string, unknown> {
  const rules = (what: string): Record<string, unknown> => ({
    type: "array",
    items: { type: "string", minLength: 1, maxLength: LIMITS.maxToolRuleChars },
    minItems: 1,
    maxItems: LIMITS.maxToolRules,
    description: `Tool rules ${what}, such as "Edit" or "Bash(git log:*)".`,
  });
  const agents = offeredAgents(settings);
  const others = agents.filter((agent) => agent.name !== "claude");
  const modes = [...new Set(agents.flatMap((agent) => (agent.name === "claude" ? settings.permissionModes : agent.allowedModes)))];
  return {
    ...(others.length > 0
      ? {
          agent: {
            type: "string",
            enum: agents.map((agent) => agent.name),
            description: `Which coding agent runs the job: ${agents.map((agent) => agent.name).join(", ")} (default claude). The other agents take fewer options; each refuses what it cannot do.`,
          },
        }
      : {}),
    ...(settings.hosts && settings.hosts.length > 0
      ? {
          host: {
            type: "string",
            enum: settings.hosts.map((host) => host.name),
            description: `Run the job on another machine the operator named: ${settings.hosts.map((host) => `${host.name} (cwd inside ${host.roots.join(", ")})`).join("; ")}. cwd is then a path on that machine. Omit for this machine.`,
          },
        }
      : {}),
    model: { type: "string", pattern: MODEL_NAME.source, description: "Model alias or name, such as \"sonnet\" or \"opus\". Omit for the configured default." },
    permission_mode: {
      type: "string",
      enum: modes,
      description:
        "How the agent may act without asking: acceptEdits lets it edit files, plan only plans. Omit for the configured default." +
        others.map((agent) => ` For ${agent.name}: ${agent.allowedModes.join(", ")}.`).join(""),
    },
    allowed_tools: rules("the agent may use without asking"),
    disallowed_tools: rules("the agent may not use at all"),
    max_turns: { type: "integer", minimum: 1, maximum: LIMITS.maxTurns, description: "Stop after this many model turns." },
    max_budget_usd: { type: "number", exclusiveMinimum: 0, maximum: LIMITS.maxBudgetUsd, description: "Stop once this many dollars are spent." },
    append_system_prompt: { type: "string", minLength: 1, maxLength: LIMITS.maxSystemPromptChars, description: "Text added to the agent's system prompt." },
    add_dirs: {
      type: "array",
      items: { type: "string", minLength: 1 },
      minItems: 1,
      maxItems: LIMITS.maxAddDirs,
      description: "More absolute directories the agent may work in besides cwd.",
    },
    worktree: {
      type: "boolean",
      description:
        "Run in a git worktree of its own, on a new branch from the repository's HEAD, so parallel jobs never overwrite each other's files. cwd must be inside a git repository. Then use claude_worktree to see, merge or discard the changes.",
    },
  };
}

export {
  JOB_REPORT_SCHEMA,
  JOB_STATUSES,
  LIST_SCHEMA,
  OUTPUT_PAGE_SCHEMA,
  RESPOND_SCHEMA,
  SESSIONS_SCHEMA,
  WORKTREE_SCHEMA,
  type ReportStatus,
} from "./output-schemas.js";

export interface ToolDefinition {
  name: ToolName;
  title: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema: Record<string, unknown>;
  annotations: Record<string, boolean | string>;
  /** MCP 2025-11-25 Tasks (§14): never "required", which plain callTool clients refuse. */
  execution?: { taskSupport: "optional" };
}

export function toolDefinitions(settings: ToolSettings): ToolDefinition[] {
  const options = agentOptionSchemas(settings);
  const agents = offeredAgents(settings).map((agent) => agent.name);
  // Hosts keep the tool names in their configurations; the description says which agents run behind them.
  const offered = agents.length > 1 ? ` This server also runs ${agents.filter((name) => name !== "claude").join(" and ")} instead of Claude Code when agent names it.` : "";
  return [
    {
      name: "claude_run",
      title: "Run Claude Code and wait",
      description:
        "Run Claude Code headless in a project directory and wait for its answer. Use for short tasks " +
        "(questions about the code, small edits) that finish within a couple of minutes. Returns the result " +
        "and a session_id: pass it back as session_id to continue the same conversation. For anything " +
        `longer, use claude_start and claude_wait instead: this call is killed at timeout_ms.${offered}`,
      inputSchema: {
        type: "object",
        properties: {
          prompt: PROMPT,
          cwd: CWD,
          session_id: SESSION_ID,
          timeout_ms: {
            type: "integer",
            minimum: LIMITS.minTimeoutMs,
            maximum: LIMITS.maxTimeoutMs,
            description: `Kill the run after this many milliseconds (default ${settings.defaultTimeoutMs}).`,
          },
          ...options,
        },
        required: ["prompt", "cwd"],
        additionalProperties: false,
      },
      outputSchema: JOB_REPORT_SCHEMA,
      annotations: { title: "Run Claude Code and wait", readOnlyHint: false, openWorldHint: true },
      execution: { taskSupport: "optional" },
    },
    {
      name: "claude_start",
      title: "Start a Claude Code job",
      description:
        "Start Claude Code headless in the background and return a job_id at once. Use for long tasks " +
        "(features, refactors, test fixing). Then call claude_wait with the job_id until it is no longer " +
        `queued or running, and claude_kill to stop it. Pass session_id to continue an earlier conversation.${offered}`,
      inputSchema: {
        type: "object",
        properties: { prompt: PROMPT, cwd: CWD, session_id: SESSION_ID, ...options },
        required: ["prompt", "cwd"],
        additionalProperties: false,
      },
      outputSchema: JOB_REPORT_SCHEMA,
      annotations: { title: "Start a Claude Code job", readOnlyHint: false, openWorldHint: true },
      execution: { taskSupport: "optional" },
    },
    {
      name: "claude_wait",
      title: "Wait for a Claude Code job",
      description:
        "Wait up to hold_ms for a job started by claude_start, then report it: still running (with elapsed " +
        "seconds, turns and the latest activity: call claude_wait again), completed (with the result and " +
        "session_id), failed or lost (with the error), or killed. It returns at once with input_required when the " +
        "agent waits for permission to use a tool: ask the user, then answer with claude_respond. Jobs survive a restart of this server. Safe to call repeatedly.",
      inputSchema: {
        type: "object",
        properties: {
          job_id: JOB_ID,
          hold_ms: {
            type: "integer",
            minimum: 0,
            description: `How long to wait for the job to finish before reporting anyway (default ${LIMITS.defaultHoldMs}; values above ${LIMITS.maxHoldMs} are capped).`,
          },
        },
        required: ["job_id"],
        additionalProperties: false,
      },
      outputSchema: JOB_REPORT_SCHEMA,
      annotations: { title: "Wait for a Claude Code job", readOnlyHint: true, openWorldHint: false },
    },
    {
      name: "claude_kill",
      title: "Stop a Claude Code job",
      description:
        "Stop a running job and every process it started. Use when a job is stuck or no longer needed. " +
        "Killing a job that already finished changes nothing and says so.",
      inputSchema: {
        type: "object",
        properties: { job_id: JOB_ID },
        required: ["job_id"],
        additionalProperties: false,
      },
      outputSchema: JOB_REPORT_SCHEMA,
      annotations: {
        title: "Stop a Claude Code job",
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    {
      name: "claude_list",
      title: "List Claude Code jobs",
      description:
        "List every job this server knows: running ones and those finished recently, with status, directory, " +
        "age, turns and the start of the prompt. Use to find a job_id again.",
      inputSchema: { type: "object", properties: {}, additionalProperties: false },
      outputSchema: LIST_SCHEMA,
      annotations: { title: "List Claude Code jobs", readOnlyHint: true, openWorldHint: false },
    },
    {
      name: "claude_output",
      title: "Read a job's result or transcript",
      description:
        `Read a job's full result (view "result"), what it has done so far (view "transcript": its text, ` +
        `tool calls and tool results), or its permission requests with their whole inputs (view "approvals"), in pages of up to ${settings.maxResultChars} characters. Use when a ` +
        "result was truncated: pass the next_offset it gave as offset.",
      inputSchema: {
        type: "object",
        properties: {
          job_id: JOB_ID,
          view: { type: "string", enum: [...OUTPUT_VIEWS], description: 'What to read (default "result").' },
          offset: { type: "integer", minimum: 0, description: "Character offset to start at (default 0)." },
          limit: {
            type: "integer",
            minimum: 1,
            maximum: settings.maxResultChars,
            description: `Characters to return at most (default ${settings.maxResultChars}).`,
          },
        },
        required: ["job_id"],
        additionalProperties: false,
      },
      outputSchema: OUTPUT_PAGE_SCHEMA,
      annotations: { title: "Read a job's result or transcript", readOnlyHint: true, openWorldHint: false },
    },
    {
      name: "claude_respond",
      title: "Answer a job's permission request",
      description:
        "Allow or deny a tool call a job's agent asked permission for (the job is input_required, and claude_wait named the " +
        "request_id). Ask the user first and pass on their decision: allow lets the agent run exactly what the request shows. " +
        "deny may carry a message the agent reads, such as what to do instead. The first answer to a request counts.",
      inputSchema: {
        type: "object",
        properties: {
          job_id: JOB_ID,
          request_id: { type: "string", pattern: "^[1-9][0-9]{0,8}$", description: "request_id from pending_approvals." },
          decision: { type: "string", enum: ["allow", "deny"] },
          message: { type: "string", maxLength: LIMITS.maxRespondMessageChars, description: "With deny: what the agent is told." },
        },
        required: ["job_id", "request_id", "decision"],
        additionalProperties: false,
      },
      outputSchema: RESPOND_SCHEMA,
      annotations: { title: "Answer a job's permission request", readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    {
      name: "claude_worktree",
      title: "Diff, merge or discard a job's worktree",
      description:
        "For a job started with worktree: true. diff: the unified diff of everything it changed against the commit it started from, " +
        `committed or not, in pages of up to ${settings.maxResultChars} characters. merge: bring its changes into the branch checked out in the repository, ` +
        "only if that checkout is clean and the merge has no conflict; otherwise nothing changes and the conflicting files are listed. " +
        "discard: remove the worktree and its branch. merge and discard wait until the job has finished.",
      inputSchema: {
        type: "object",
        properties: {
          job_id: JOB_ID,
          action: { type: "string", enum: [...WORKTREE_ACTIONS] },
          offset: { type: "integer", minimum: 0, description: "diff: character offset to start at (default 0)." },
          limit: { type: "integer", minimum: 1, maximum: settings.maxResultChars, description: `diff: characters to return at most (default ${settings.maxResultChars}).` },
        },
        required: ["job_id", "action"],
        additionalProperties: false,
      },
      outputSchema: WORKTREE_SCHEMA,
      annotations: { title: "Diff, merge or discard a job's worktree", readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    {
      name: "claude_sessions",
      title: "List Claude Code sessions of a directory",
      description:
        "List the Claude Code sessions of a project directory from Claude Code's own store, most recently active first, " +
        "including those started by hand and those of this server's jobs (in their worktrees too): when each started and was last active, " +
        "its first prompt, how many prompts it has had, and the jobs that used it. Use to continue earlier work: pass a session_id to claude_start with the same cwd.",
      inputSchema: {
        type: "object",
        properties: {
          cwd: { ...CWD, description: "Absolute path of the project directory whose sessions to list." },
          limit: { type: "integer", minimum: 1, maximum: LIMITS.maxSessions, description: `How many sessions at most (default ${LIMITS.defaultSessions}).` },
        },
        required: ["cwd"],
        additionalProperties: false,
      },
      outputSchema: SESSIONS_SCHEMA,
      annotations: { title: "List Claude Code sessions of a directory", readOnlyHint: true, openWorldHint: false },
    },
  ];
}
