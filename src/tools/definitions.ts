/**
 * Tool definitions and their JSON Schemas (PROTOCOL.md §5), as tools/list
 * gives them; validation of what a call sends is in validation.ts.
 */
import {
  JOB_REPORT_SCHEMA,
  LIST_SCHEMA,
  OUTPUT_PAGE_SCHEMA,
  RESPOND_SCHEMA,
  SESSIONS_SCHEMA,
  WORKTREE_SCHEMA,
} from "./output-schemas.js";
import { LISTED, LIST_STATUSES } from "./list-cursor.js";
import { LIMITS, OUTPUT_VIEWS, WORKTREE_ACTIONS, type ToolSettings } from "./validation.js";

export const TOOL_NAMES = [
  "claude_run",
  "claude_start",
  "claude_wait",
  "claude_kill",
  "claude_list",
  "claude_output",
  "claude_respond",
  "claude_worktree",
  "claude_sessions",
] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

export function isToolName(name: string): name is ToolName {
  return (TOOL_NAMES as readonly string[]).includes(name);
}

export { LIMITS, type ToolSettings };

/* ------------------------------------------------------------------ *
 * Definitions, as listed by tools/list
 * ------------------------------------------------------------------ */

/*
 * What the host's model reads in every conversation, whether or not it dispatches anything: each description says
 * what the schema cannot, once. Types, enums, required arguments and the bounds a caller picks from are in the
 * schemas; patterns and length bounds are checked by the server, which says what it refused (§5). The rest is in
 * PROTOCOL.md §5. A test keeps the whole, with every agent and host offered, within 6 KB (test/listing.test.ts).
 */
const STRING = { type: "string" } as const;
const STRINGS = { type: "array", items: STRING } as const;
const JOB_ID = STRING;

/** The options of claude_run and claude_start (§5.6); described once, on claude_run. */
function agentArguments(settings: ToolSettings, described: boolean): Record<string, unknown> {
  const agents = settings.agents;
  const others = agents.filter((agent) => agent.name !== settings.homeAgent);
  // A mode one host allows is offered too: the policy refuses it elsewhere (§21.1).
  const hostModes = (settings.hosts ?? []).flatMap((host) => Object.values(host.allowedModes ?? {}).flat());
  const modes = [...new Set([...agents.flatMap((agent) => agent.allowedModes), ...hostModes])];
  const hosts = settings.hosts ?? [];
  const about = (description: string): { description?: string } => (described ? { description } : {});
  const names = { agent: agents.map((agent) => agent.name), host: hosts.map((host) => host.name) };
  const roots = hosts.map((host) => `${host.name}: ${host.roots.join(", ")}`).join("; ");
  // The default agent's modes need no words; the others', and a host's own, are named, as one enum holds them all.
  const othersModes = others.map((agent) => `${agent.name}: ${agent.allowedModes.join(", ")}.`);
  const hostsModes = hosts.flatMap((host) =>
    Object.entries(host.allowedModes ?? {}).map(
      ([agent, allowed]) => `${agent} on ${host.name}: ${allowed.join(", ")}.`,
    ),
  );
  const modesText = [...othersModes, ...hostsModes].join(" ");
  return {
    ...(others.length > 0
      ? {
          agent: {
            ...STRING,
            enum: names.agent,
            ...about(`Default ${settings.homeAgent}; each agent refuses the options it lacks.`),
          },
        }
      : {}),
    ...(hosts.length > 0
      ? { host: { ...STRING, enum: names.host, ...about(`Run there, cwd a path inside ${roots}.`) } }
      : {}),
    model: STRING,
    permission_mode: { ...STRING, enum: modes, ...(modesText ? about(modesText) : {}) },
    allowed_tools: { ...STRINGS, ...about('Tool rules such as "Edit" or "Bash(git log:*)".') },
    disallowed_tools: STRINGS,
    max_turns: { type: "integer", minimum: 1 },
    max_budget_usd: { type: "number" },
    append_system_prompt: STRING,
    add_dirs: STRINGS,
    worktree: { type: "boolean", ...about("Work in a git worktree of its own; see claude_worktree.") },
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

/** An object schema of exactly these arguments. */
function inputOf(properties: Record<string, unknown>, required: readonly string[] = []): Record<string, unknown> {
  return { type: "object", properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false };
}

/** A page's length in characters: at most the result cap, which is also the default (§5.7). */
function pageLimit(settings: ToolSettings): Record<string, unknown> {
  return { type: "integer", minimum: 1, maximum: settings.maxResultChars };
}

const PAGE_OFFSET = { type: "integer", minimum: 0 } as const;
const NEW_JOB = ["prompt", "cwd"] as const;

export function toolDefinitions(settings: ToolSettings): ToolDefinition[] {
  // The agent by name while it is the only one, so that the model knows which agent it dispatches.
  const [only, ...others] = settings.agents;
  const agent = only && others.length === 0 ? only.label : "a coding agent";
  const runArguments = {
    prompt: STRING,
    cwd: { ...STRING, description: "Absolute path of the project directory." },
    session_id: { ...STRING, description: "From an earlier result, to continue that conversation." },
    timeout_ms: {
      type: "integer",
      minimum: LIMITS.minTimeoutMs,
      maximum: LIMITS.maxTimeoutMs,
      description: `Milliseconds until it is killed (default ${settings.defaultTimeoutMs}).`,
    },
    ...agentArguments(settings, true),
  };
  const startArguments = { prompt: STRING, cwd: STRING, session_id: STRING, ...agentArguments(settings, false) };
  const holdMs = {
    type: "integer",
    minimum: 0,
    description: `Default ${LIMITS.defaultHoldMs}, at most ${LIMITS.maxHoldMs}.`,
  };
  const sessionsLimit = {
    type: "integer",
    minimum: 1,
    maximum: LIMITS.maxSessions,
    description: `Default ${LIMITS.defaultSessions}.`,
  };
  return [
    {
      name: "claude_run",
      title: "Run a coding agent and wait",
      description: `Run ${agent} on a short task in cwd and return its answer.`,
      inputSchema: inputOf(runArguments, NEW_JOB),
      outputSchema: JOB_REPORT_SCHEMA,
      annotations: { title: "Run a coding agent and wait", readOnlyHint: false, openWorldHint: true },
      execution: { taskSupport: "optional" },
    },
    {
      name: "claude_start",
      title: "Start a coding agent job",
      description:
        `Start ${agent} in the background; returns its job_id at once. Arguments as claude_run, but ` +
        `no timeout_ms.`,
      inputSchema: inputOf(startArguments, NEW_JOB),
      outputSchema: JOB_REPORT_SCHEMA,
      annotations: { title: "Start a coding agent job", readOnlyHint: false, openWorldHint: true },
      execution: { taskSupport: "optional" },
    },
    {
      name: "claude_wait",
      title: "Wait for an agent job",
      description:
        "Wait up to hold_ms for a job to end, then report it. input_required: ask the user, then claude_respond.",
      // Longer holds are lowered, not refused (§5.3), so the schema has no maximum.
      inputSchema: inputOf({ job_id: JOB_ID, hold_ms: holdMs }, ["job_id"]),
      outputSchema: JOB_REPORT_SCHEMA,
      annotations: { title: "Wait for an agent job", readOnlyHint: true, openWorldHint: false },
    },
    {
      name: "claude_kill",
      title: "Stop an agent job",
      description: "Stop a job and every process it started.",
      inputSchema: inputOf({ job_id: JOB_ID }, ["job_id"]),
      outputSchema: JOB_REPORT_SCHEMA,
      annotations: {
        title: "Stop an agent job",
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    {
      name: "claude_list",
      title: "List agent jobs",
      description: "List jobs: the active first, then the newest finished.",
      // A single status is accepted too (§5.7); the schema offers the array alone, which says less.
      inputSchema: inputOf({
        status: { type: "array", items: { ...STRING, enum: [...LIST_STATUSES] } },
        limit: { type: "integer", minimum: 1, maximum: LISTED.max, description: `Default ${LISTED.default}.` },
        cursor: STRING,
      }),
      outputSchema: LIST_SCHEMA,
      annotations: { title: "List agent jobs", readOnlyHint: true, openWorldHint: false },
    },
    {
      name: "claude_output",
      title: "Read a job's result or transcript",
      description: "Read a job's whole result, transcript or permission requests, a page at a time.",
      inputSchema: inputOf(
        {
          job_id: JOB_ID,
          view: { ...STRING, enum: [...OUTPUT_VIEWS], description: "Default result." },
          offset: PAGE_OFFSET,
          limit: { ...pageLimit(settings), description: `Default ${settings.maxResultChars}.` },
        },
        ["job_id"],
      ),
      outputSchema: OUTPUT_PAGE_SCHEMA,
      annotations: { title: "Read a job's result or transcript", readOnlyHint: true, openWorldHint: false },
    },
    {
      name: "claude_respond",
      title: "Answer a job's permission request",
      description: "Answer an input_required job's permission request with the user's decision.",
      inputSchema: inputOf(
        {
          job_id: JOB_ID,
          request_id: STRING,
          decision: { ...STRING, enum: ["allow", "deny"] },
          message: {
            ...STRING,
            maxLength: LIMITS.maxRespondMessageChars,
            description: "With deny: what to do instead.",
          },
        },
        ["job_id", "request_id", "decision"],
      ),
      outputSchema: RESPOND_SCHEMA,
      annotations: {
        title: "Answer a job's permission request",
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    {
      name: "claude_worktree",
      title: "Diff, merge or discard a job's worktree",
      description:
        "For a job run with worktree: true: diff its changes, merge them into the checked-out branch " +
        "(if clean and without conflict), or discard them.",
      inputSchema: inputOf(
        {
          job_id: JOB_ID,
          action: { ...STRING, enum: [...WORKTREE_ACTIONS] },
          offset: PAGE_OFFSET,
          limit: pageLimit(settings),
        },
        ["job_id", "action"],
      ),
      outputSchema: WORKTREE_SCHEMA,
      annotations: {
        title: "Diff, merge or discard a job's worktree",
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    {
      name: "claude_sessions",
      title: "List Claude Code sessions of a directory",
      description:
        "List a directory's Claude Code sessions, newest first, hand-started ones too; " +
        "pass a session_id with the same cwd to continue one.",
      inputSchema: inputOf({ cwd: STRING, limit: sessionsLimit }, ["cwd"]),
      outputSchema: SESSIONS_SCHEMA,
      annotations: { title: "List Claude Code sessions of a directory", readOnlyHint: true, openWorldHint: false },
    },
  ];
}
