/**
 * Calling tools as a client does, once for every test file: on the handler in memory (a HandlerHarness) or on
 * the built server (a ServerProcess). Each check here holds for every tool result (PROTOCOL.md §5.5, §9).
 */
import assert from "node:assert/strict";

import type { JsonRpcResponse, RequestId } from "../../src/server/jsonrpc.js";
import type { HandlerHarness } from "../helpers.js";
import type { RpcResponse, ServerProcess } from "../server-process.js";

export interface ToolResult {
  content: Array<{ type: string; text: string }>;
  // The report, list or page: each test reads the fields it knows.
  structuredContent: Record<string, any>;
  isError?: boolean;
}

// Far above the ids tests choose themselves (7, "7", 31, …), which cancellation tests rely on.
let nextRequestId = 1_000_000;
const freshId = (): number => (nextRequestId += 1);

export function request(method: string, params?: unknown, id: RequestId = freshId()): Record<string, unknown> {
  return params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };
}

export interface CallOptions {
  id?: RequestId;
  token?: string | number;
}

export function callTool(
  h: HandlerHarness,
  name: string,
  args?: unknown,
  { id = freshId(), token }: CallOptions = {},
): Promise<JsonRpcResponse | null> {
  const params: Record<string, unknown> = { name };
  if (args !== undefined) params.arguments = args;
  if (token !== undefined) params._meta = { progressToken: token };
  return h.handle(request("tools/call", params, id));
}

/** The tool result a response carries: a result, not a JSON-RPC error, with exactly one text block. */
export function toolResultOf(response: JsonRpcResponse | null): ToolResult {
  assert.ok(response, "expected a response");
  assert.equal(response.jsonrpc, "2.0");
  assert.ok("result" in response && !("error" in response), `expected a result, got ${JSON.stringify(response)}`);
  const result = response.result as ToolResult;
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0]?.type, "text");
  assert.equal(typeof result.content[0]?.text, "string");
  return result;
}

export async function tool(h: HandlerHarness, name: string, args?: unknown, call?: CallOptions): Promise<ToolResult> {
  return toolResultOf(await callTool(h, name, args, call));
}

export function textOf(result: ToolResult): string {
  return (result.content[0] as { text: string }).text;
}

/** Asserts a failure with this code, in the text and in structuredContent; returns the text. */
export function assertError(result: ToolResult, code: string): string {
  const text = textOf(result);
  assert.equal(result.isError, true, `expected ${code}, got ${text}`);
  assert.ok(text.startsWith(`${code}: `), `expected ${code}, got ${JSON.stringify(text)}`);
  const { status, job_id: jobId } = result.structuredContent;
  // A call refused before any job: "error"; a job that ended badly: how it ended.
  const allowed = jobId === undefined ? ["error"] : ["error", "failed", "killed", "lost"];
  assert.ok(allowed.includes(status), `status ${status}`);
  assert.equal(result.structuredContent.error?.code, code);
  return text;
}

export function assertNotError(result: ToolResult): void {
  assert.ok(!("isError" in result), `unexpected isError: ${textOf(result)}`);
}

/** Starts a background job through claude_start, in memory or on a built server; its job id. */
export async function startJob(via: HandlerHarness | ServerProcess, args: Record<string, unknown>): Promise<string> {
  const response: JsonRpcResponse | RpcResponse | null =
    "handle" in via ? await callTool(via, "claude_start", args) : await via.callTool("claude_start", args);
  const result = response && "result" in response ? (response.result as Partial<ToolResult> | undefined) : undefined;
  const id = result?.structuredContent?.job_id;
  assert.ok(typeof id === "string" && result?.isError === undefined, `no job started: ${JSON.stringify(response)}`);
  return id;
}
