/**
 * The request handler (src/handler.ts) end to end over a real JobRegistry,
 * a FakeClock and fake agents: protocol framing, tool validation, the job
 * lifecycle as the tools report it, cancellation and the depth gate.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { ERROR_CODES } from "../src/core/errors.js";
import { LATEST_PROTOCOL_VERSION, SERVER_INSTRUCTIONS, SUPPORTED_PROTOCOL_VERSIONS } from "../src/server/opening.js";
import type { JsonRpcResponse, RequestId } from "../src/server/jsonrpc.js";
import {
  JOB_REPORT_SCHEMA,
  JOB_STATUSES,
  LIST_SCHEMA,
  OUTPUT_PAGE_SCHEMA,
  RESPOND_SCHEMA,
  SESSIONS_SCHEMA,
  TOOL_NAMES,
  WORKTREE_SCHEMA,
  type ToolName,
} from "../src/tools/definitions.js";
import { isJobId } from "../src/store/records.js";
import { cancel, handlerHarness, jobFinished, settle, track, type HandlerHarness } from "./helpers.js";
import { bounded } from "./support/events.js";
import {
  assertError,
  assertNotError,
  callTool,
  request,
  startJob,
  textOf,
  toolResultOf as anyToolResultOf,
  type CallOptions,
  type ToolResult,
} from "./support/tool-calls.js";

/* ------------------------------------------------------------------ *
 * Helpers
 * ------------------------------------------------------------------ */

const CWD = "/work/project";
const SESSION = "8f01635f-202a-449c-ab8a-05f75520788e";
const RUN_ARGS = { prompt: "What does this repo do?", cwd: CWD };

function notification(method: string, params?: unknown): Record<string, unknown> {
  return params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params };
}

/** Sends a request that must be answered. */
async function rpc(h: HandlerHarness, method: string, params?: unknown, id?: RequestId): Promise<JsonRpcResponse> {
  const response = await h.handle(request(method, params, id));
  assert.ok(response, `${method} got no response`);
  return response;
}

function resultOf(response: JsonRpcResponse | null): Record<string, unknown> {
  assert.ok(response, "expected a response");
  assert.equal(response.jsonrpc, "2.0");
  assert.ok("result" in response, `expected a result, got ${JSON.stringify(response)}`);
  assert.ok(!("error" in response));
  return response.result as Record<string, unknown>;
}

/** Asserts a JSON-RPC error with this code and id; returns its message. */
function errorOf(response: JsonRpcResponse | null, code: number, id: RequestId | null): string {
  assert.ok(response, "expected a response");
  assert.equal(response.jsonrpc, "2.0");
  assert.ok("error" in response, `expected an error, got ${JSON.stringify(response)}`);
  assert.ok(!("result" in response));
  assert.equal(response.error.code, code);
  assert.equal(response.id, id);
  assert.equal(typeof response.error.message, "string");
  assert.notEqual(response.error.message, "");
  return response.error.message;
}

let checkedToolResults = 0;

/** The invariants every tool result in this file must satisfy (PROTOCOL.md §5.5, §9). */
function checkToolResult(result: ToolResult): void {
  checkedToolResults += 1;
  assert.equal(result.content.length, 1);
  const [block] = result.content;
  assert.ok(block);
  assert.equal(block.type, "text");
  assert.equal(typeof block.text, "string");
  const report = result.structuredContent;
  assert.ok(report !== null && typeof report === "object", "structuredContent must be an object");
  assert.ok((JOB_STATUSES as readonly string[]).includes(report.status), `status ${report.status} not in JOB_STATUSES`);
  if (report.error !== undefined) {
    assert.ok(
      (ERROR_CODES as readonly string[]).includes(report.error.code),
      `error.code ${report.error.code} not in ERROR_CODES`,
    );
    assert.equal(typeof report.error.detail, "string");
  }
  if ("isError" in result) {
    assert.equal(result.isError, true, "isError is either true or absent");
    const match = /^([A-Z_]+): /.exec(block.text);
    assert.ok(match, `error text must start with "CODE: ", got ${JSON.stringify(block.text)}`);
    const code = match[1] as string;
    assert.ok((ERROR_CODES as readonly string[]).includes(code), `${code} not in ERROR_CODES`);
    assert.equal(report.error?.code, code, "structuredContent.error.code matches the text");
  } else {
    assert.notEqual(report.status, "error", "status error without isError");
    // A failed job is reported without isError only by a claude_kill that succeeded: it found the
    // job already finished, or the job's own timeout stopped it first.
    if (report.status === "failed") {
      assert.ok(
        report.already_finished === true || /while being killed/.test(block.text),
        "status failed without isError",
      );
    }
  }
}

/** A tool result with the invariants above checked. */
function toolResultOf(response: JsonRpcResponse | null): ToolResult {
  const result = anyToolResultOf(response);
  checkToolResult(result);
  return result;
}

async function tool(h: HandlerHarness, name: string, args?: unknown, options?: CallOptions): Promise<ToolResult> {
  return toolResultOf(await callTool(h, name, args, options));
}

/* ------------------------------------------------------------------ *
 * initialize, ping, tools/list
 * ------------------------------------------------------------------ */

for (const version of ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]) {
  test(`initialize echoes the supported version ${version}`, async () => {
    const h = handlerHarness();
    const result = resultOf(
      await rpc(h, "initialize", {
        protocolVersion: version,
        capabilities: {},
        clientInfo: { name: "t", version: "1" },
      }),
    );
    assert.equal(result.protocolVersion, version);
  });
}

test("the supported versions are exactly the four documented ones, newest first", () => {
  assert.deepEqual([...SUPPORTED_PROTOCOL_VERSIONS], ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]);
  assert.equal(LATEST_PROTOCOL_VERSION, "2025-11-25");
});

test("initialize answers an unknown version with the latest one", async () => {
  const h = handlerHarness();
  const result = resultOf(await rpc(h, "initialize", { protocolVersion: "1999-01-01", capabilities: {} }));
  assert.equal(result.protocolVersion, "2025-11-25");
});

test("initialize without protocolVersion is -32602", async () => {
  const h = handlerHarness();
  const message = errorOf(await rpc(h, "initialize", { capabilities: {} }, 1), -32602, 1);
  assert.match(message, /protocolVersion/);
  errorOf(await rpc(h, "initialize", undefined, 2), -32602, 2);
  errorOf(await rpc(h, "initialize", { protocolVersion: 20250618 }, 3), -32602, 3);
});

test("initialize reports tools capability, serverInfo and instructions", async () => {
  const h = handlerHarness();
  const result = resultOf(await rpc(h, "initialize", { protocolVersion: "2025-06-18" }));
  assert.deepEqual(result.capabilities, {
    tools: { listChanged: false },
    tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
  });
  assert.deepEqual(result.serverInfo, { name: "claude-dispatch", version: "0.0.0-test" });
  assert.equal(result.instructions, SERVER_INSTRUCTIONS);
  assert.match(String(result.instructions), /claude_start/);
  assert.match(String(result.instructions), /claude_wait/);
  assert.match(String(result.instructions), /session_id/);
});

test("ping answers an empty object", async () => {
  const h = handlerHarness();
  assert.deepEqual(await rpc(h, "ping", undefined, 4), { jsonrpc: "2.0", id: 4, result: {} });
});

test("tools/list lists every tool with schemas and annotations", async () => {
  const h = handlerHarness();
  const result = resultOf(await rpc(h, "tools/list"));
  const tools = result.tools as Array<Record<string, unknown>>;
  assert.deepEqual(
    tools.map((t) => t.name),
    [
      "claude_run",
      "claude_start",
      "claude_wait",
      "claude_kill",
      "claude_list",
      "claude_output",
      "claude_respond",
      "claude_worktree",
      "claude_sessions",
    ],
  );
  assert.deepEqual(
    tools.map((t) => t.name),
    [...TOOL_NAMES],
  );
  const schemas: Record<string, unknown> = {
    claude_list: LIST_SCHEMA,
    claude_output: OUTPUT_PAGE_SCHEMA,
    claude_respond: RESPOND_SCHEMA,
    claude_worktree: WORKTREE_SCHEMA,
    claude_sessions: SESSIONS_SCHEMA,
  };
  for (const t of tools) {
    assert.equal(typeof t.title, "string", `${String(t.name)} title`);
    assert.ok((t.title as string).length > 0);
    assert.equal(typeof t.description, "string");
    assert.ok((t.description as string).length > 20);
    const input = t.inputSchema as Record<string, unknown>;
    assert.equal(input.type, "object");
    assert.equal(input.additionalProperties, false, `${String(t.name)} inputSchema.additionalProperties`);
    assert.ok(input.required === undefined || Array.isArray(input.required));
    assert.deepEqual(t.outputSchema, schemas[t.name as string] ?? JOB_REPORT_SCHEMA);
    assert.equal(typeof t.annotations, "object");
  }
  const byName = new Map(tools.map((t) => [t.name as string, t.annotations as Record<string, unknown>]));
  assert.equal(byName.get("claude_wait")?.readOnlyHint, true);
  assert.equal(byName.get("claude_kill")?.destructiveHint, true);
  assert.equal(byName.get("claude_kill")?.idempotentHint, true);
  assert.equal(byName.get("claude_run")?.openWorldHint, true);
  assert.equal(byName.get("claude_start")?.openWorldHint, true);
  assert.equal(byName.get("claude_run")?.readOnlyHint, false);
  assert.equal(byName.get("claude_start")?.readOnlyHint, false);
  const required = new Map(tools.map((t) => [t.name as string, (t.inputSchema as { required: string[] }).required]));
  assert.deepEqual(required.get("claude_run"), ["prompt", "cwd"]);
  assert.deepEqual(required.get("claude_start"), ["prompt", "cwd"]);
  assert.deepEqual(required.get("claude_wait"), ["job_id"]);
  assert.deepEqual(required.get("claude_kill"), ["job_id"]);
});

/* ------------------------------------------------------------------ *
 * JSON-RPC framing
 * ------------------------------------------------------------------ */

test("an unknown method is -32601", async () => {
  const h = handlerHarness();
  const message = errorOf(await rpc(h, "resources/list", undefined, 9), -32601, 9);
  assert.match(message, /resources\/list/);
});

test("notifications get no response, known or not", async () => {
  const h = handlerHarness();
  assert.equal(await h.handle(notification("notifications/initialized")), null);
  assert.equal(await h.handle(notification("notifications/whatever", { x: 1 })), null);
  assert.equal(await h.handle(notification("ping")), null);
  assert.equal(await h.handle(notification("tools/call", { name: "claude_start", arguments: RUN_ARGS })), null);
  assert.equal(h.launcher.agents.length, 0, "a tools/call notification must not run anything");
});

test("a batch is -32600 with id null", async () => {
  const h = handlerHarness();
  errorOf(await h.handle([request("ping", undefined, 1), request("ping", undefined, 2)]), -32600, null);
  errorOf(await h.handle([]), -32600, null);
});

test("a non-object message is -32600 with id null", async () => {
  const h = handlerHarness();
  for (const message of [42, "ping", null, true]) {
    errorOf(await h.handle(message), -32600, null);
  }
});

test('jsonrpc other than "2.0" is -32600, echoing a valid id', async () => {
  const h = handlerHarness();
  errorOf(await h.handle({ jsonrpc: "1.0", id: 5, method: "ping" }), -32600, 5);
  errorOf(await h.handle({ jsonrpc: "1.0", id: "abc", method: "ping" }), -32600, "abc");
  errorOf(await h.handle({ id: 6, method: "ping" }), -32600, 6);
  errorOf(await h.handle({ jsonrpc: "1.0", id: {}, method: "ping" }), -32600, null);
});

test("a method that is not a string is -32600", async () => {
  const h = handlerHarness();
  errorOf(await h.handle({ jsonrpc: "2.0", id: 8, method: 42 }), -32600, 8);
  errorOf(await h.handle({ jsonrpc: "2.0", id: 8 }), -32600, 8);
});

test("an id that is null, a boolean or an object is -32600 with id null", async () => {
  const h = handlerHarness();
  for (const id of [null, true, {}, [1]]) {
    errorOf(await h.handle({ jsonrpc: "2.0", id, method: "ping" }), -32600, null);
  }
});

test("a stray response from the client is ignored", async () => {
  const h = handlerHarness();
  assert.equal(await h.handle({ jsonrpc: "2.0", id: 7, result: {} }), null);
  assert.equal(await h.handle({ jsonrpc: "2.0", id: 7, error: { code: -1, message: "x" } }), null);
});

test("params as an array is -32602", async () => {
  const h = handlerHarness();
  errorOf(await rpc(h, "ping", [1, 2], 10), -32602, 10);
  errorOf(await rpc(h, "tools/call", ["claude_run"], 11), -32602, 11);
});

test("params._meta that is not an object is -32602", async () => {
  const h = handlerHarness();
  for (const meta of ["x", 5, [1], null]) {
    const message = errorOf(await rpc(h, "ping", { _meta: meta }, 12), -32602, 12);
    assert.match(message, /_meta/);
  }
});

test("a progressToken that is not a string or number is -32602", async () => {
  const h = handlerHarness();
  for (const token of [{}, [], true, null]) {
    const message = errorOf(await rpc(h, "ping", { _meta: { progressToken: token } }, 13), -32602, 13);
    assert.match(message, /progressToken/);
  }
});

test("a string or number progressToken is accepted", async () => {
  const h = handlerHarness();
  resultOf(await rpc(h, "ping", { _meta: { progressToken: "tok-1" } }));
  resultOf(await rpc(h, "ping", { _meta: { progressToken: 17 } }));
  resultOf(await rpc(h, "ping", { _meta: {} }));
  const result = resultOf(await rpc(h, "tools/list", { _meta: { progressToken: 0 } }));
  assert.equal((result.tools as unknown[]).length, TOOL_NAMES.length);
  const run = await tool(h, "claude_start", RUN_ARGS);
  assertNotError(run);
  const viaMeta = toolResultOf(
    await h.handle(
      request("tools/call", {
        name: "claude_wait",
        arguments: { job_id: "job-1", hold_ms: 0 },
        _meta: { progressToken: "p" },
      }),
    ),
  );
  assertNotError(viaMeta);
});

test("extra top-level members are fine", async () => {
  const h = handlerHarness();
  const response = await h.handle({ jsonrpc: "2.0", id: 14, method: "ping", extra: true, trace: { a: 1 } });
  assert.deepEqual(response, { jsonrpc: "2.0", id: 14, result: {} });
});

test("string and number ids are echoed exactly", async () => {
  const h = handlerHarness();
  for (const id of [0, -1, 1.5, 2 ** 53, "", "abc", "7", " x "]) {
    const response = await rpc(h, "ping", undefined, id);
    assert.equal(response.id, id);
    assert.equal(typeof response.id, typeof id);
  }
  errorOf(await rpc(h, "nope", undefined, 0), -32601, 0);
  errorOf(await rpc(h, "nope", undefined, ""), -32601, "");
});

/* ------------------------------------------------------------------ *
 * tools/call framing
 * ------------------------------------------------------------------ */

test("tools/call without a name is -32602", async () => {
  const h = handlerHarness();
  errorOf(await rpc(h, "tools/call", { arguments: RUN_ARGS }, 20), -32602, 20);
  errorOf(await rpc(h, "tools/call", { name: 5 }, 21), -32602, 21);
  errorOf(await rpc(h, "tools/call", undefined, 22), -32602, 22);
  assert.equal(h.launcher.agents.length, 0);
});

test("tools/call with arguments that are not an object is -32602", async () => {
  const h = handlerHarness();
  errorOf(await callTool(h, "claude_run", ["hi", CWD], { id: 23 }), -32602, 23);
  errorOf(await callTool(h, "claude_run", "hi", { id: 24 }), -32602, 24);
  assert.equal(h.launcher.agents.length, 0);
});

test('tools/call of an unknown tool is -32602 "Unknown tool"', async () => {
  const h = handlerHarness();
  const message = errorOf(await callTool(h, "claude_fly", {}, { id: 25 }), -32602, 25);
  assert.match(message, /^Unknown tool/);
  assert.match(message, /claude_fly/);
});

test("tools/call without arguments is an INVALID_ARGUMENT result (prompt missing)", async () => {
  const h = handlerHarness();
  const result = await tool(h, "claude_run");
  const text = assertError(result, "INVALID_ARGUMENT");
  assert.match(text, /"prompt"/);
  const withNull = await tool(h, "claude_start", null);
  assert.match(assertError(withNull, "INVALID_ARGUMENT"), /"prompt"/);
  assert.equal(h.launcher.agents.length, 0);
});

/* ------------------------------------------------------------------ *
 * Argument validation (src/tools.ts)
 * ------------------------------------------------------------------ */

interface InvalidCase {
  name: string;
  tool: ToolName;
  args: Record<string, unknown>;
  mentions: string;
}

const INVALID_CASES: InvalidCase[] = [
  { name: "a missing prompt", tool: "claude_run", args: { cwd: CWD }, mentions: '"prompt" is required' },
  {
    name: "a numeric prompt",
    tool: "claude_run",
    args: { prompt: 42, cwd: CWD },
    mentions: '"prompt" must be a string, got number',
  },
  {
    name: "an empty prompt",
    tool: "claude_run",
    args: { prompt: "", cwd: CWD },
    mentions: '"prompt" must not be empty',
  },
  {
    name: "a whitespace prompt",
    tool: "claude_run",
    args: { prompt: " \n\t ", cwd: CWD },
    mentions: '"prompt" must not be empty',
  },
  { name: "a missing prompt", tool: "claude_start", args: { cwd: CWD }, mentions: '"prompt" is required' },
  {
    name: "an empty prompt",
    tool: "claude_start",
    args: { prompt: "  ", cwd: CWD },
    mentions: '"prompt" must not be empty',
  },
  { name: "a missing cwd", tool: "claude_run", args: { prompt: "hi" }, mentions: '"cwd" is required' },
  {
    name: "a numeric cwd",
    tool: "claude_run",
    args: { prompt: "hi", cwd: 42 },
    mentions: '"cwd" must be a string, got number',
  },
  { name: "an empty cwd", tool: "claude_run", args: { prompt: "hi", cwd: "" }, mentions: '"cwd" must not be empty' },
  {
    name: "a cwd with NUL",
    tool: "claude_run",
    args: { prompt: "hi", cwd: "/tmp/a\0b" },
    mentions: '"cwd" must not contain NUL',
  },
  {
    name: "a cwd that does not exist",
    tool: "claude_run",
    args: { prompt: "hi", cwd: "/missing/dir" },
    mentions: '"cwd" does not exist: /missing/dir',
  },
  {
    name: "a cwd that does not exist",
    tool: "claude_start",
    args: { prompt: "hi", cwd: "/missing/dir" },
    mentions: "does not exist",
  },
  {
    name: 'session_id "--anything"',
    tool: "claude_run",
    args: { ...RUN_ARGS, session_id: "--anything" },
    mentions: '"session_id" must be a session UUID as returned by an earlier run, got "--anything"',
  },
  {
    name: 'session_id "not-a-uuid"',
    tool: "claude_run",
    args: { ...RUN_ARGS, session_id: "not-a-uuid" },
    mentions: '"session_id" must be a session UUID',
  },
  {
    name: "a numeric session_id",
    tool: "claude_run",
    args: { ...RUN_ARGS, session_id: 42 },
    mentions: '"session_id" must be a session UUID as returned by an earlier run, got 42',
  },
  {
    name: 'session_id "--anything"',
    tool: "claude_start",
    args: { ...RUN_ARGS, session_id: "--anything" },
    mentions: '"session_id"',
  },
  {
    name: "a session_id with a UUID inside it",
    tool: "claude_start",
    args: { ...RUN_ARGS, session_id: `--resume ${SESSION}` },
    mentions: '"session_id"',
  },
  {
    name: "timeout_ms 0",
    tool: "claude_run",
    args: { ...RUN_ARGS, timeout_ms: 0 },
    mentions: '"timeout_ms" must be between 1000 and 86400000, got 0',
  },
  { name: "timeout_ms -5", tool: "claude_run", args: { ...RUN_ARGS, timeout_ms: -5 }, mentions: "got -5" },
  { name: "timeout_ms 999", tool: "claude_run", args: { ...RUN_ARGS, timeout_ms: 999 }, mentions: "got 999" },
  {
    name: "timeout_ms 86_400_001",
    tool: "claude_run",
    args: { ...RUN_ARGS, timeout_ms: 86_400_001 },
    mentions: "got 86400001",
  },
  {
    name: "timeout_ms 2^31",
    tool: "claude_run",
    args: { ...RUN_ARGS, timeout_ms: 2 ** 31 },
    mentions: "got 2147483648",
  },
  {
    name: "timeout_ms 2^31 - 1",
    tool: "claude_run",
    args: { ...RUN_ARGS, timeout_ms: 2 ** 31 - 1 },
    mentions: "got 2147483647",
  },
  {
    name: "timeout_ms 1e300",
    tool: "claude_run",
    args: { ...RUN_ARGS, timeout_ms: 1e300 },
    mentions: '"timeout_ms" must be between',
  },
  {
    name: "timeout_ms 1.5",
    tool: "claude_run",
    args: { ...RUN_ARGS, timeout_ms: 1.5 },
    mentions: '"timeout_ms" must be an integer number of milliseconds, got 1.5',
  },
  {
    name: 'timeout_ms "5000"',
    tool: "claude_run",
    args: { ...RUN_ARGS, timeout_ms: "5000" },
    mentions: '"timeout_ms" must be an integer number of milliseconds, got "5000"',
  },
  { name: "timeout_ms true", tool: "claude_run", args: { ...RUN_ARGS, timeout_ms: true }, mentions: "got true" },
  {
    name: "hold_ms -1",
    tool: "claude_wait",
    args: { job_id: "job-1", hold_ms: -1 },
    mentions: '"hold_ms" must be between 0 and',
  },
  {
    name: "hold_ms 1.5",
    tool: "claude_wait",
    args: { job_id: "job-1", hold_ms: 1.5 },
    mentions: '"hold_ms" must be an integer number of milliseconds, got 1.5',
  },
  {
    name: 'hold_ms "10"',
    tool: "claude_wait",
    args: { job_id: "job-1", hold_ms: "10" },
    mentions: '"hold_ms" must be an integer number of milliseconds, got "10"',
  },
  {
    name: 'an unknown argument "timeout"',
    tool: "claude_run",
    args: { ...RUN_ARGS, timeout: 5 },
    mentions: 'unknown argument "timeout"',
  },
  {
    name: "timeout_ms (only claude_run takes it)",
    tool: "claude_start",
    args: { ...RUN_ARGS, timeout_ms: 5000 },
    mentions: 'unknown argument "timeout_ms"',
  },
  {
    name: 'an unknown argument "hold"',
    tool: "claude_wait",
    args: { job_id: "job-1", hold: 5 },
    mentions: 'unknown argument "hold"',
  },
  {
    name: "hold_ms (only claude_wait takes it)",
    tool: "claude_kill",
    args: { job_id: "job-1", hold_ms: 5 },
    mentions: 'unknown argument "hold_ms"',
  },
  { name: "a missing job_id", tool: "claude_wait", args: {}, mentions: '"job_id" is required' },
  {
    name: "an empty job_id",
    tool: "claude_wait",
    args: { job_id: "" },
    mentions: '"job_id" must be a non-empty string, got ""',
  },
  {
    name: "a blank job_id",
    tool: "claude_wait",
    args: { job_id: "  " },
    mentions: '"job_id" must be a non-empty string',
  },
  {
    name: "a numeric job_id",
    tool: "claude_wait",
    args: { job_id: 1 },
    mentions: '"job_id" must be a non-empty string, got 1',
  },
  { name: "a missing job_id", tool: "claude_kill", args: {}, mentions: '"job_id" is required' },
  {
    name: "an empty job_id",
    tool: "claude_kill",
    args: { job_id: "" },
    mentions: '"job_id" must be a non-empty string, got ""',
  },
  {
    name: "a numeric job_id",
    tool: "claude_kill",
    args: { job_id: 1 },
    mentions: '"job_id" must be a non-empty string, got 1',
  },
];

for (const c of INVALID_CASES) {
  test(`${c.tool} rejects ${c.name} as INVALID_ARGUMENT`, async () => {
    const h = handlerHarness();
    const result = await tool(h, c.tool, c.args);
    const text = assertError(result, "INVALID_ARGUMENT");
    assert.ok(text.includes(c.mentions), `${JSON.stringify(text)} should mention ${JSON.stringify(c.mentions)}`);
    const detail = text.slice("INVALID_ARGUMENT: ".length);
    const expected: Record<string, unknown> = { status: "error", error: { code: "INVALID_ARGUMENT", detail } };
    if (typeof c.args.job_id === "string" && isJobId(c.args.job_id)) expected.job_id = c.args.job_id;
    const { next, ...rest } = result.structuredContent;
    assert.deepEqual(rest, expected);
    assert.match(next ?? "", /^(Fix .* as error\.detail says, then call|Call) the same tool again/);
    assert.equal(h.launcher.agents.length, 0, "nothing is launched");
    assert.equal(h.clock.pendingTimers, 0, "no timer is left");
  });
}

test("a valid session_id in upper case is accepted and lower-cased into the spec", async () => {
  const h = handlerHarness();
  await startJob(h, { ...RUN_ARGS, session_id: SESSION.toUpperCase() });
  assert.equal(h.launcher.agents.length, 1);
  assert.equal(h.launcher.last.spec.resumeSessionId, SESSION);
  assert.equal(h.jobs.get("job-1")?.resumeSessionId, SESSION);

  const run = track(callTool(h, "claude_run", { ...RUN_ARGS, session_id: SESSION.toUpperCase() }));
  await h.launcher.launched(2);
  assert.equal(h.launcher.agents.length, 2);
  assert.equal(h.launcher.last.spec.resumeSessionId, SESSION);
  h.launcher.last.succeed();
  assertNotError(toolResultOf(await run.promise));
});

test("null for session_id, timeout_ms and hold_ms means not given", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", { ...RUN_ARGS, session_id: null, timeout_ms: null }));
  await h.launcher.launched(1);
  assert.equal(h.launcher.agents.length, 1);
  assert.equal(h.launcher.last.spec.resumeSessionId, undefined);
  assert.equal(h.jobs.get("job-1")?.timeoutMs, 120_000, "the default timeout applies");
  h.launcher.last.succeed();
  assertNotError(toolResultOf(await run.promise));

  const jobId = await startJob(h, { ...RUN_ARGS, session_id: null });
  assert.equal(h.launcher.last.spec.resumeSessionId, undefined);
  const wait = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: null }));
  await h.clock.advance(29_999);
  assert.equal(wait.done, false, "the default hold of 30s applies");
  await h.clock.advance(1);
  assert.equal(toolResultOf(await wait.promise).structuredContent.status, "running");
});

test("timeout_ms 1000 and 86_400_000 are accepted", async () => {
  const h = handlerHarness();
  const short = track(callTool(h, "claude_run", { ...RUN_ARGS, timeout_ms: 1000 }));
  await h.launcher.launched(1);
  assert.equal(h.jobs.get("job-1")?.timeoutMs, 1000);
  await h.clock.advance(1000);
  assert.equal(short.done, true);
  assertError(toolResultOf(short.value ?? null), "TIMEOUT");

  const long = track(callTool(h, "claude_run", { ...RUN_ARGS, timeout_ms: 86_400_000 }));
  await h.launcher.launched(2);
  assert.equal(h.jobs.get("job-2")?.timeoutMs, 86_400_000);
  assert.equal(h.clock.pendingTimers, 1);
  await h.clock.advance(86_399_999);
  assert.equal(long.done, false);
  h.launcher.last.succeed();
  assertNotError(toolResultOf(await long.promise));
  assert.equal(h.clock.pendingTimers, 0, "finishing cancels the timeout");
});

test("timeouts of 2^31 ms or more never reach a timer: they are rejected", async () => {
  const h = handlerHarness();
  for (const timeout of [2 ** 31, 2 ** 31 + 1, 2 ** 32, Number.MAX_SAFE_INTEGER]) {
    assertError(await tool(h, "claude_run", { ...RUN_ARGS, timeout_ms: timeout }), "INVALID_ARGUMENT");
  }
  assert.equal(h.clock.pendingTimers, 0);
  assert.equal(h.launcher.agents.length, 0);
});

/* ------------------------------------------------------------------ *
 * claude_run
 * ------------------------------------------------------------------ */

test("claude_run: the spec reaches the launcher and the result is reported", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", { prompt: "Explain src/", cwd: CWD, session_id: SESSION }));
  await h.launcher.launched(1);
  assert.deepEqual(h.checkedDirectories, [CWD]);
  assert.equal(h.launcher.agents.length, 1);
  const agent = h.launcher.last;
  assert.equal(agent.spec.prompt, "Explain src/");
  assert.equal(agent.spec.cwd, CWD);
  assert.equal(agent.spec.resumeSessionId, SESSION);
  assert.equal(run.done, false);

  await h.clock.advance(2_000);
  agent.succeed("The answer.", "11111111-2222-4333-8444-555555555555");
  const result = toolResultOf(await run.promise);
  assertNotError(result);
  assert.deepEqual(result.structuredContent, {
    status: "completed",
    job_id: "job-1",
    session_id: "11111111-2222-4333-8444-555555555555",
    result: "The answer.",
    cost_usd: 0.5,
    num_turns: 3,
    duration_ms: 1500,
    elapsed_s: 2,
  });
  const text = textOf(result);
  assert.ok(text.startsWith("Job job-1 completed in 2s"), text);
  assert.match(text, /session_id 11111111-2222-4333-8444-555555555555/);
  assert.match(text, /cost \$0\.5000/);
  assert.match(text, /3 turns/);
  assert.ok(text.endsWith("\n\nThe answer."), text);
  assert.equal(h.clock.pendingTimers, 0, "the timeout timer is cancelled");
});

test("claude_run: the default timeout of 120 s kills the agent and reports TIMEOUT", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", RUN_ARGS));
  const agent = await h.launcher.launched(1);
  await h.clock.advance(119_999);
  assert.equal(run.done, false);
  assert.equal(agent.killCalls, 0);
  await h.clock.advance(1);
  assert.equal(agent.killCalls, 1);
  assert.equal(run.done, true);
  const result = toolResultOf(run.value ?? null);
  const text = assertError(result, "TIMEOUT");
  assert.match(text, /120s/);
  assert.equal(result.structuredContent.status, "failed");
  assert.equal(result.structuredContent.job_id, "job-1");
  assert.equal(result.structuredContent.elapsed_s, 120);
  assert.equal(h.jobs.get("job-1")?.status, "failed");
});

test("claude_run: a custom timeout_ms of 5000 kills at 5 s", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", { ...RUN_ARGS, timeout_ms: 5000 }));
  const agent = await h.launcher.launched(1);
  await h.clock.advance(4_999);
  assert.equal(run.done, false);
  await h.clock.advance(1);
  assert.equal(agent.killCalls, 1);
  const result = toolResultOf(run.value ?? null);
  assert.match(assertError(result, "TIMEOUT"), /5s/);
  assert.equal(result.structuredContent.status, "failed");
  assert.equal(result.structuredContent.error?.code, "TIMEOUT");
});

for (const [code, detail] of [
  ["AGENT_ERROR", "Not logged in · Please run /login"],
  ["SPAWN_FAILED", "claude not found on PATH; install Claude Code or set CLAUDE_DISPATCH_CLAUDE_BIN"],
  ["SESSION_NOT_FOUND", `No conversation found with session ID ${SESSION} in this cwd`],
] as const) {
  test(`claude_run: the outcome ${code} passes through unchanged`, async () => {
    const h = handlerHarness();
    const run = callTool(h, "claude_run", RUN_ARGS);
    (await h.launcher.launched(1)).finish({ ok: false, code, detail, result: { sessionId: SESSION } });
    const result = toolResultOf(await run);
    const text = assertError(result, code);
    assert.ok(text.startsWith(`${code}: ${detail}`), text);
    assert.equal(result.structuredContent.status, "failed");
    assert.equal(result.structuredContent.session_id, SESSION);
    assert.deepEqual(result.structuredContent.error, { code, detail });
  });
}

/* ------------------------------------------------------------------ *
 * claude_start and claude_wait
 * ------------------------------------------------------------------ */

test("claude_start returns at once with status running and a job_id", async () => {
  const h = handlerHarness();
  const result = await tool(h, "claude_start", RUN_ARGS);
  assertNotError(result);
  assert.deepEqual(result.structuredContent, {
    status: "running",
    job_id: "job-1",
    elapsed_s: 0,
    num_turns: 0,
    last_activity: "0s · starting",
    next:
      'Call claude_wait with job_id "job-1" to collect the result (each call waits up to 30s by default, ' +
      "60s at most).",
  });
  assert.match(textOf(result), /Started job job-1/);
  assert.match(textOf(result), /claude_wait/);
  assert.equal(h.launcher.agents.length, 1);
  assert.equal(h.clock.pendingTimers, 0, "a background job has no timeout");
  assert.equal(h.jobs.get("job-1")?.kind, "start");
});

test("claude_wait with hold_ms 0 on a running job reports running and elapsed time", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  await h.clock.advance(45_000);
  const result = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
  assertNotError(result);
  assert.deepEqual(result.structuredContent, {
    status: "running",
    job_id: jobId,
    elapsed_s: 45,
    num_turns: 0,
    last_activity: "45s · starting",
    next: `Call claude_wait again with job_id "${jobId}" to keep waiting, or claude_kill to stop it.`,
  });
  assert.match(textOf(result), /still running \(45s · starting\)/);
  assert.match(textOf(result), /Call claude_wait again/);
});

test("claude_wait answers as soon as the job finishes, leaving no timer", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const timersBefore = h.clock.pendingTimers;
  const wait = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: 30_000 }));
  await h.clock.pending(timersBefore + 1);
  assert.equal(h.clock.pendingTimers, timersBefore + 1, "one hold timer");
  await h.clock.advance(1_000);
  assert.equal(wait.done, false);
  const before = h.clock.now();
  h.launcher.last.succeed("finished early");
  await bounded("the wait to answer", wait.promise);
  assert.equal(h.clock.now(), before, "answered without any more time passing");
  const result = toolResultOf(wait.value ?? null);
  assertNotError(result);
  assert.equal(result.structuredContent.status, "completed");
  assert.equal(result.structuredContent.result, "finished early");
  assert.equal(result.structuredContent.elapsed_s, 1);
  assert.equal(h.clock.pendingTimers, timersBefore, "the hold timer was cancelled");
});

test("claude_wait caps hold_ms at 60 s", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const wait = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: 90_000 }));
  await h.clock.advance(59_999);
  assert.equal(wait.done, false);
  await h.clock.advance(1);
  assert.equal(wait.done, true);
  const result = toolResultOf(wait.value ?? null);
  assert.equal(result.structuredContent.status, "running");
  assert.equal(result.structuredContent.elapsed_s, 60);
  assert.equal(h.clock.pendingTimers, 0);

  const huge = track(callTool(h, "claude_wait", { job_id: jobId, hold_ms: Number.MAX_SAFE_INTEGER }));
  await h.clock.advance(60_000);
  assert.equal(huge.done, true);
});

test("claude_wait holds 30 s by default", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const wait = track(callTool(h, "claude_wait", { job_id: jobId }));
  await h.clock.advance(29_999);
  assert.equal(wait.done, false);
  await h.clock.advance(1);
  assert.equal(wait.done, true);
  assert.equal(toolResultOf(wait.value ?? null).structuredContent.status, "running");
});

test("claude_wait on a finished job answers at once, even with a hold", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  h.launcher.last.succeed();
  await jobFinished(h, jobId);
  const result = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 60_000 });
  assert.equal(result.structuredContent.status, "completed");
  assert.equal(h.clock.pendingTimers, 0);
});

test("elapsed time is frozen when the job finishes", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  await h.clock.advance(10_000);
  h.launcher.last.succeed();
  await jobFinished(h, jobId);
  await h.clock.advance(100_000);
  const result = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
  assert.equal(result.structuredContent.status, "completed");
  assert.equal(result.structuredContent.elapsed_s, 10);
  assert.match(textOf(result), /completed in 10s/);
});

test("claude_wait on a killed job reports killed without isError", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  await h.clock.advance(3_000);
  assertNotError(await tool(h, "claude_kill", { job_id: jobId }));
  const result = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
  assertNotError(result);
  assert.equal(result.structuredContent.status, "killed");
  assert.equal(result.structuredContent.error, undefined);
  assert.match(textOf(result), /was killed by claude_kill after 3s/);
});

test("claude_wait on a failed job is isError with the agent's code", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  h.launcher.last.finish({ ok: false, code: "AGENT_EXITED", detail: "claude exited with code 3: boom" });
  await jobFinished(h, jobId);
  const result = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
  const text = assertError(result, "AGENT_EXITED");
  assert.ok(text.startsWith("AGENT_EXITED: claude exited with code 3: boom"), text);
  assert.equal(result.structuredContent.status, "failed");
  assert.equal(result.structuredContent.job_id, jobId);
});

/* ------------------------------------------------------------------ *
 * claude_kill
 * ------------------------------------------------------------------ */

test("claude_kill kills a running job once; a second kill says it already finished", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const agent = h.launcher.last;
  await h.clock.advance(7_000);
  const first = await tool(h, "claude_kill", { job_id: jobId });
  assertNotError(first);
  assert.equal(agent.killCalls, 1);
  assert.equal(first.structuredContent.status, "killed");
  assert.equal(first.structuredContent.already_finished, undefined);
  assert.equal(first.structuredContent.elapsed_s, 7);
  assert.match(textOf(first), /^Killed job job-1 after 7s/);

  const second = await tool(h, "claude_kill", { job_id: jobId });
  assertNotError(second);
  assert.equal(second.structuredContent.already_finished, true);
  assert.equal(second.structuredContent.status, "killed");
  assert.match(textOf(second), /already finished \(killed\)/);
  assert.equal(agent.killCalls, 1, "no second signal");
});

test("claude_kill of a completed job changes nothing and says so", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const agent = h.launcher.last;
  agent.succeed();
  await jobFinished(h, jobId);
  const result = await tool(h, "claude_kill", { job_id: jobId });
  assertNotError(result);
  assert.equal(result.structuredContent.already_finished, true);
  assert.equal(result.structuredContent.status, "completed");
  assert.equal(agent.killCalls, 0);
  assert.equal(h.jobs.get(jobId)?.status, "completed");
});

test("claude_kill of a failed job says already finished without an error", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  h.launcher.last.finish({ ok: false, code: "AGENT_ERROR", detail: "nope" });
  await jobFinished(h, jobId);
  const result = await tool(h, "claude_kill", { job_id: jobId });
  assertNotError(result);
  assert.equal(result.structuredContent.already_finished, true);
  assert.equal(result.structuredContent.error, undefined);
});

test("claude_kill of an unknown job is JOB_NOT_FOUND", async () => {
  const h = handlerHarness();
  const result = await tool(h, "claude_kill", { job_id: "job-404" });
  const text = assertError(result, "JOB_NOT_FOUND");
  assert.match(text, /no job with id "job-404"/);
  assert.equal(result.structuredContent.status, "error");
  assert.equal(result.structuredContent.job_id, undefined, "only a UUID is echoed");
  assertError(await tool(h, "claude_wait", { job_id: "job-404", hold_ms: 0 }), "JOB_NOT_FOUND");
});

test("claude_kill reports processes that survived as KILL_FAILED", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  h.launcher.last.survivors = [123];
  const result = await tool(h, "claude_kill", { job_id: jobId });
  const text = assertError(result, "KILL_FAILED");
  assert.match(text, /123/);
  assert.equal(result.structuredContent.status, "killed");
  assert.equal(h.launcher.last.killCalls, 1);
});

test("claude_kill does not hang when the agent itself survives SIGKILL", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const agent = h.launcher.last;
  agent.exitsOnKill = false;
  agent.survivors = [agent.pid];
  const answered = callTool(h, "claude_kill", { job_id: jobId });
  const kill = await bounded("claude_kill to answer though the job never finishes", answered);
  const text = assertError(toolResultOf(kill), "KILL_FAILED");
  assert.match(text, /4242/);
});

test("claude_kill racing the run's own timeout reports what really happened", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", { ...RUN_ARGS, timeout_ms: 5_000 }, { id: 90 }));
  const agent = await h.launcher.launched(1);
  agent.exitsOnKill = false;
  await h.clock.advance(5_000); // the timeout fires its kill, which has not finished yet
  const kill = track(callTool(h, "claude_kill", { job_id: "job-1" }, { id: 91 }));
  // Nothing tells that the kill has joined the one under way: let it get there before the agent ends.
  await settle();
  agent.finish({ ok: false, code: "AGENT_EXITED", detail: "killed" });
  const killed = toolResultOf(await bounded("claude_kill to answer", kill.promise));
  assertNotError(killed);
  assert.equal(killed.structuredContent.status, "failed");
  assert.match(textOf(killed), /ended as failed \(TIMEOUT\) while being killed/);
  assertError(toolResultOf(run.value ?? null), "TIMEOUT");
  assert.equal(agent.killCalls, 1, "one kill, shared by both stops");
});

test("JOB_NOT_FOUND names the retention in readable units", async () => {
  const minutes = handlerHarness();
  assert.match(
    assertError(await tool(minutes, "claude_wait", { job_id: "x" }), "JOB_NOT_FOUND"),
    /forgotten 10 minutes after/,
  );
  const seconds = handlerHarness({ jobRetentionMs: 30_000 });
  assert.match(
    assertError(await tool(seconds, "claude_wait", { job_id: "x" }), "JOB_NOT_FOUND"),
    /forgotten 30 seconds after/,
  );
});

test("a failure report carries job_id only for tools that take one", async () => {
  const h = handlerHarness();
  const run = await tool(h, "claude_run", { ...RUN_ARGS, job_id: "abc" });
  assertError(run, "INVALID_ARGUMENT");
  assert.equal(run.structuredContent.job_id, undefined);
  const wait = await tool(h, "claude_wait", { job_id: SESSION, hold_ms: 0 });
  assert.equal(wait.structuredContent.job_id, SESSION);
  const malformed = await tool(h, "claude_wait", { job_id: "abc", hold_ms: 0 });
  assert.equal(malformed.structuredContent.job_id, undefined, "only a well-formed job id is echoed");
});

test("a claude_run killed by claude_kill from another request answers KILLED", async () => {
  const h = handlerHarness();
  const run = callTool(h, "claude_run", RUN_ARGS, { id: 31 });
  await h.launcher.launched(1);
  await h.clock.advance(4_000);
  const kill = await tool(h, "claude_kill", { job_id: "job-1" }, { id: 32 });
  assertNotError(kill);
  const result = toolResultOf(await bounded("the run to answer", run));
  const text = assertError(result, "KILLED");
  assert.match(text, /killed by claude_kill after 4s/);
  assert.equal(result.structuredContent.status, "killed");
  assert.equal(h.jobs.get("job-1")?.killReason, "claude_kill");
  assert.equal(h.launcher.last.killCalls, 1);
  assert.equal(h.clock.pendingTimers, 0, "the run's timeout timer is cancelled");
});

/* ------------------------------------------------------------------ *
 * Concurrency and cancellation
 * ------------------------------------------------------------------ */

test("a holding claude_wait does not delay a ping or a claude_kill sent after it", async () => {
  const h = handlerHarness();
  const waited = await startJob(h, RUN_ARGS);
  const other = await startJob(h, RUN_ARGS);
  const order: string[] = [];
  const wait = track(callTool(h, "claude_wait", { job_id: waited, hold_ms: 30_000 }, { id: 40 }));
  void wait.promise.then(() => order.push("wait"));
  await h.clock.pending(1);
  const ping = h.handle(request("ping", undefined, 41)).then((r) => (order.push("ping"), r));
  const kill = callTool(h, "claude_kill", { job_id: other }, { id: 42 }).then((r) => (order.push("kill"), r));
  assert.deepEqual(await ping, { jsonrpc: "2.0", id: 41, result: {} });
  assertNotError(toolResultOf(await kill));
  await settle();
  assert.equal(wait.done, false);
  assert.deepEqual(order, ["ping", "kill"]);
  await h.clock.advance(30_000);
  assert.deepEqual(order, ["ping", "kill", "wait"]);
  assert.equal(toolResultOf(wait.value ?? null).structuredContent.status, "running");
});

test("cancelling a claude_run kills its agent and sends no response", async () => {
  const h = handlerHarness();
  const run = callTool(h, "claude_run", RUN_ARGS, { id: 7 });
  const agent = await h.launcher.launched(1);
  assert.equal(await cancel(h, 7), null);
  assert.equal(await bounded("the cancelled run to end", run), null);
  await jobFinished(h, "job-1");
  assert.equal(agent.killCalls, 1);
  assert.equal(h.jobs.get("job-1")?.status, "killed");
  assert.equal(h.jobs.get("job-1")?.killReason, "cancelled");
  assert.equal(h.clock.pendingTimers, 0);
  // The job stays reachable and says why it was killed.
  const report = await tool(h, "claude_wait", { job_id: "job-1", hold_ms: 0 });
  assert.match(textOf(report), /because its request was cancelled/);
});

test("cancelling a claude_wait answers nothing and leaves the job running", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  const wait = callTool(h, "claude_wait", { job_id: jobId, hold_ms: 60_000 }, { id: 8 });
  await h.clock.pending(1);
  assert.equal(h.clock.pendingTimers, 1);
  const now = h.clock.now();
  await cancel(h, 8);
  assert.equal(await bounded("the cancelled wait to end", wait), null);
  assert.equal(h.clock.now(), now, "resolved without time passing");
  assert.equal(h.launcher.last.killCalls, 0);
  assert.equal(h.jobs.get(jobId)?.status, "running");
  assert.equal(h.clock.pendingTimers, 0, "the hold timer was cancelled");
});

test("cancelling an unknown request id does nothing", async () => {
  const h = handlerHarness();
  const run = track(callTool(h, "claude_run", RUN_ARGS, { id: 50 }));
  await h.launcher.launched(1);
  assert.equal(await cancel(h, 999), null);
  assert.equal(await cancel(h, "50x"), null);
  assert.equal(await cancel(h, undefined), null);
  assert.equal(await h.handle(notification("notifications/cancelled")), null);
  assert.equal(await h.handle(notification("notifications/cancelled", [50])), null);
  await settle();
  assert.equal(run.done, false);
  assert.equal(h.launcher.last.killCalls, 0);
  h.launcher.last.succeed();
  assertNotError(toolResultOf(await run.promise));
});

test("cancelling a request that already finished does nothing", async () => {
  const h = handlerHarness();
  const run = callTool(h, "claude_run", RUN_ARGS, { id: 51 });
  (await h.launcher.launched(1)).succeed();
  assertNotError(toolResultOf(await run));
  await cancel(h, 51);
  await settle();
  assert.equal(h.jobs.get("job-1")?.status, "completed");
  assert.equal(h.launcher.last.killCalls, 0);
});

test('request ids "7" and 7 are distinct for cancellation', async () => {
  const h = handlerHarness();
  const byString = track(callTool(h, "claude_run", RUN_ARGS, { id: "7" }));
  const stringAgent = await h.launcher.launched(1);
  const byNumber = callTool(h, "claude_run", RUN_ARGS, { id: 7 });
  const numberAgent = await h.launcher.launched(2);
  assert.notEqual(stringAgent, numberAgent);

  await cancel(h, 7);
  assert.equal(await bounded("the run with id 7 to end", byNumber), null);
  await jobFinished(h, "job-2");
  assert.equal(numberAgent.killCalls, 1);
  assert.equal(stringAgent.killCalls, 0);
  assert.equal(byString.done, false);

  await cancel(h, "7");
  assert.equal(await bounded('the run with id "7" to end', byString.promise), null);
  await jobFinished(h, "job-1");
  assert.equal(stringAgent.killCalls, 1);
});

test("a claude_run cancelled while its cwd is being checked launches nothing", async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let checking!: () => void;
  const checked = new Promise<void>((resolve) => (checking = resolve));
  const h = handlerHarness({ checkDirectory: async (dir) => (checking(), await gate, { ok: true, path: dir }) });
  const run = callTool(h, "claude_run", RUN_ARGS, { id: 60 });
  await checked;
  await cancel(h, 60);
  release();
  const answer = await bounded("the cancelled call to end", run);
  assert.equal(h.launcher.agents.length, 0, "an agent was launched for a cancelled run");
  assert.deepEqual(h.jobs.list(), [], "a job was made for a cancelled run");
  assert.equal(answer, null);
});

test("a claude_start cancelled while its cwd is being checked starts no orphan job", async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let checking!: () => void;
  const checked = new Promise<void>((resolve) => (checking = resolve));
  const h = handlerHarness({ checkDirectory: async (dir) => (checking(), await gate, { ok: true, path: dir }) });
  const start = callTool(h, "claude_start", RUN_ARGS, { id: 61 });
  await checked;
  await cancel(h, 61);
  release();
  const answer = await bounded("the cancelled call to end", start);
  assert.equal(answer, null);
  assert.deepEqual(h.jobs.running(), [], "no job is left running without anyone holding its id");
});

/* ------------------------------------------------------------------ *
 * The depth gate
 * ------------------------------------------------------------------ */

async function assertGated(h: HandlerHarness, reason: RegExp): Promise<void> {
  const init = resultOf(await rpc(h, "initialize", { protocolVersion: "2025-11-25" }));
  assert.match(String(init.instructions), /offers no tools here/);
  const list = resultOf(await rpc(h, "tools/list"));
  assert.deepEqual(list.tools, []);
  const calls: Array<[ToolName, Record<string, unknown>]> = [
    ["claude_run", RUN_ARGS],
    ["claude_start", RUN_ARGS],
    ["claude_wait", { job_id: "job-1" }],
    ["claude_kill", { job_id: "job-1" }],
  ];
  for (const [name, args] of calls) {
    const result = await tool(h, name, args);
    const text = assertError(result, "DEPTH_LIMIT");
    assert.match(text, reason);
    assert.equal(result.structuredContent.status, "error");
  }
  // Even invalid arguments get the gate's answer, not a validation error.
  assertError(await tool(h, "claude_run", { bogus: 1 }), "DEPTH_LIMIT");
  assert.equal(h.launcher.agents.length, 0);
  assert.deepEqual(h.checkedDirectories, []);
  errorOf(await callTool(h, "claude_fly", {}, { id: 70 }), -32602, 70);
  // The rest of the protocol still works.
  assert.deepEqual(await rpc(h, "ping", undefined, 71), { jsonrpc: "2.0", id: 71, result: {} });
}

test("at depth 1 of 1 no tool is listed or runs", async () => {
  const h = handlerHarness({ depth: { current: 1, max: 1 } });
  await assertGated(h, /nested dispatch is off/);
  const text = textOf(await tool(h, "claude_start", RUN_ARGS));
  assert.match(text, /depth 1, limit 1/);
});

test("at depth 0 of 0 no tool is listed or runs", async () => {
  const h = handlerHarness({ depth: { current: 0, max: 0 } });
  await assertGated(h, /CLAUDE_DISPATCH_MAX_DEPTH is 0: the operator turned dispatch off/);
});

test("at depth 1 of 2 the tools are available", async () => {
  const h = handlerHarness({ depth: { current: 1, max: 2 } });
  const list = resultOf(await rpc(h, "tools/list"));
  assert.equal((list.tools as unknown[]).length, TOOL_NAMES.length);
  await startJob(h, RUN_ARGS);
  assert.equal(h.launcher.agents.length, 1);
});

/* ------------------------------------------------------------------ *
 * Retention
 * ------------------------------------------------------------------ */

test("a finished job is found until retention runs out, then JOB_NOT_FOUND", async () => {
  const h = handlerHarness();
  const first = await startJob(h, RUN_ARGS);
  h.launcher.last.succeed();
  await jobFinished(h, first);
  await h.clock.advance(599_999);
  await startJob(h, RUN_ARGS);
  const still = await tool(h, "claude_wait", { job_id: first, hold_ms: 0 });
  assert.equal(still.structuredContent.status, "completed");

  await h.clock.advance(2);
  await startJob(h, RUN_ARGS);
  const gone = await tool(h, "claude_wait", { job_id: first, hold_ms: 0 });
  const text = assertError(gone, "JOB_NOT_FOUND");
  assert.match(text, /forgotten 10 minutes after it ends/);
  assert.match(
    gone.structuredContent.error?.detail ?? "",
    new RegExp(`no job with id "${first}" in this state directory`),
  );
  assertError(await tool(h, "claude_kill", { job_id: first }), "JOB_NOT_FOUND");
});

test("a running job is never reaped", async () => {
  const h = handlerHarness();
  const jobId = await startJob(h, RUN_ARGS);
  await h.clock.advance(10 * 3_600_000);
  await startJob(h, RUN_ARGS);
  const result = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
  assert.equal(result.structuredContent.status, "running");
  assert.equal(result.structuredContent.elapsed_s, 36_000);
});

/* ------------------------------------------------------------------ *
 * Bookkeeping
 * ------------------------------------------------------------------ */

test("every tool result in this file passed the shape invariants", () => {
  assert.ok(checkedToolResults > 100, `only ${checkedToolResults} tool results were checked`);
});

test("the tools/list listing is Latin-1 only, so V8 keeps it one byte per character and writes it fast", async () => {
  const h = handlerHarness();
  const response = await h.handle({ jsonrpc: "2.0", id: 1, method: "tools/list" });
  const text = JSON.stringify(response);
  const wide = [...text].filter((char) => (char.codePointAt(0) as number) > 0xff);
  assert.deepEqual(wide, [], "a character beyond U+00FF in a tool definition");
});
