/**
 * Claude Code's permission prompts, forwarded to an MCP tool (PROTOCOL.md §18;
 * observed on CLI 2.1.332, recorded in test/fixtures/permission-prompt.json):
 * with `--permission-prompt-tool mcp__<server>__<tool>` the CLI calls that
 * tool whenever it would have asked a person, with
 * `{tool_name, input, tool_use_id}`, and reads the answer from the result's
 * one text block: `{"behavior":"allow","updatedInput":{…}}` or
 * `{"behavior":"deny","message":"…"}`.
 */
import type { PermissionPrompts, PermissionRequest } from "../../agent/runtime.js";
import type { ApproverLaunch } from "../../agent/types.js";
import { isRecord } from "../../core/values.js";
import { describeToolUse } from "./text.js";

/** The approver's name in the agent's MCP configuration, and its one tool. */
export const APPROVER_SERVER = "dispatch_approver";
export const APPROVER_TOOL = "approve";

/** Holds the endpoint's token in the agent's environment (PROTOCOL.md §18). */
export const APPROVER_TOKEN_VARIABLE = "CLAUDE_DISPATCH_APPROVER_TOKEN";

/** What the agent's environment gains for its approver: the endpoint's token, when it asks the endpoint. */
export function approverEnvironment(approver: ApproverLaunch | undefined): Record<string, string> | undefined {
  return approver?.endpoint ? { [APPROVER_TOKEN_VARIABLE]: approver.endpoint.token } : undefined;
}

/** Headroom over the approval timeout, so the CLI never abandons a call the approver is about to answer. */
const TOOL_TIMEOUT_SLACK_MS = 60_000;

/**
 * The flags that point the CLI at the approver. The per-server `timeout`
 * raises both of the CLI's limits on an MCP call (the hard one, default
 * 1e8 ms, and the idle one, 30 minutes for stdio) above the approval timeout.
 */
export function approverArgs(approver: ApproverLaunch): string[] {
  const timeout = approver.waitMs + TOOL_TIMEOUT_SLACK_MS;
  // The endpoint when one serves the state directory: the CLI expands the variable from its environment, so the
  // token is never in argv (approverEnvironment).
  const server = approver.endpoint
    ? {
        type: "http",
        url: approver.endpoint.url,
        headers: { Authorization: `Bearer \${${APPROVER_TOKEN_VARIABLE}}` },
        timeout,
      }
    : { type: "stdio", command: approver.command, args: approver.args, timeout };
  const config = { mcpServers: { [APPROVER_SERVER]: server } };
  return [
    `--mcp-config=${JSON.stringify(config)}`,
    `--permission-prompt-tool=mcp__${APPROVER_SERVER}__${APPROVER_TOOL}`,
  ];
}

/** The tool's arguments as the CLI sends them; undefined when they are not a permission request. */
function readPermissionRequest(args: unknown): PermissionRequest | undefined {
  if (!isRecord(args) || typeof args.tool_name !== "string" || args.tool_name === "") return undefined;
  return {
    toolName: args.tool_name,
    input: args.input ?? {},
    ...(typeof args.tool_use_id === "string" ? { toolUseId: args.tool_use_id } : {}),
  };
}

/**
 * One line for a person deciding: "Bash · rm -rf build", "Write · src/a.ts"; the whole input is in the request file.
 * Cleaned of the input's escape sequences, controls and bidirectional overrides by describeToolUse (§10).
 */
export function permissionPreview(request: PermissionRequest): string {
  return describeToolUse(request.toolName, request.input, 200);
}

/** The text block the CLI reads its answer from; an allowed call runs with its input unchanged. */
function permissionAnswerText(decision: "allow" | "deny", input: unknown, message: string): string {
  return JSON.stringify(
    decision === "allow" ? { behavior: "allow", updatedInput: input } : { behavior: "deny", message },
  );
}

/** The tool as the approver lists it. */
const APPROVER_TOOL_DEFINITION = {
  name: APPROVER_TOOL,
  description:
    "Asks the person behind claude-dispatch whether a tool call may run; called by Claude Code itself, not " +
    "by the model.",
  inputSchema: {
    type: "object",
    properties: {
      tool_name: { type: "string" },
      input: { type: "object" },
      tool_use_id: { type: "string" },
    },
    required: ["tool_name", "input"],
  },
} as const;

/** Claude Code's side of the approver's protocol, as its runtime declares it. */
export const CLAUDE_PERMISSION_PROMPTS: PermissionPrompts = {
  tool: APPROVER_TOOL_DEFINITION,
  expected: "{tool_name, input, tool_use_id}",
  read: readPermissionRequest,
  preview: permissionPreview,
  answerText: permissionAnswerText,
};
