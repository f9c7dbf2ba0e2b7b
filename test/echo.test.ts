/**
 * PROTOCOL.md §10, "Echoes": every value a caller sent that a reply quotes
 * back goes through errors.ts `quoted()`: JSON-quoted, cut at 60 characters.
 * A megabyte of caller input comes back as one short line, in both eras and
 * from the command line.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { runCli, type CliIo } from "../src/cli/index.js";
import { TASKS_EXTENSION } from "../src/server/eras.js";
import { ECHO_MAX_CHARS, quoted } from "../src/core/errors.js";
import type { JsonRpcResponse } from "../src/server/jsonrpc.js";
import { FakeClock, handlerHarness, type HandlerHarness } from "./helpers.js";
import { machineOf } from "./host-fakes.js";

const MIB = 1024 * 1024;
/** A megabyte of caller input with a raw newline every other character. */
const HUGE = "a\n".repeat(MIB / 2);
/** How the start of HUGE must appear: 60 characters, JSON-escaped, then "…", in quotes. */
const HUGE_ECHO = `"${"a\\n".repeat(ECHO_MAX_CHARS / 2)}…"`;
/** A whole reply, serialized, stays far below the input. */
const MAX_REPLY_BYTES = 2048;

let nextId = 1;
function request(h: HandlerHarness, method: string, params: Record<string, unknown>): Promise<JsonRpcResponse | null> {
  return h.handle({ jsonrpc: "2.0", id: (nextId += 1), method, params });
}

function modernMeta(): Record<string, unknown> {
  return {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": { extensions: { [TASKS_EXTENSION]: {} } },
  };
}

/**
 * The reply is small, and `text` (what the model or client reads) shows the input's start quoted, with no raw newline.
 */
function assertShortEcho(response: JsonRpcResponse | null, text: string, what: string): void {
  const bytes = Buffer.byteLength(JSON.stringify(response));
  assert.ok(bytes < MAX_REPLY_BYTES, `${what}: the reply is ${bytes} bytes`);
  assert.ok(!text.includes("\n"), `${what}: no raw newline in ${JSON.stringify(text.slice(0, 200))}`);
  assert.ok(text.includes(HUGE_ECHO), `${what}: the input's start, quoted, in ${JSON.stringify(text.slice(0, 200))}`);
}

function toolText(response: JsonRpcResponse | null): { text: string; structured: Record<string, unknown> } {
  assert.ok(response && "result" in response, JSON.stringify(response).slice(0, 300));
  const result = response.result as {
    isError?: boolean;
    content: Array<{ text: string }>;
    structuredContent: Record<string, unknown>;
  };
  assert.equal(result.isError, true);
  return { text: result.content.map((block) => block.text).join("\n"), structured: result.structuredContent };
}

function errorMessage(response: JsonRpcResponse | null, code: number): string {
  assert.ok(response && "error" in response, JSON.stringify(response).slice(0, 300));
  assert.equal(response.error.code, code);
  return response.error.message;
}

test("quoted(): JSON-quoted, cut at 60 characters with …, never inside a surrogate pair", () => {
  assert.equal(ECHO_MAX_CHARS, 60);
  assert.equal(quoted("job-1"), '"job-1"');
  assert.equal(quoted(""), '""');
  assert.equal(quoted("x".repeat(60)), `"${"x".repeat(60)}"`, "60 characters are not cut");
  assert.equal(quoted("x".repeat(61)), `"${"x".repeat(60)}…"`);
  assert.equal(quoted("x".repeat(MIB)), `"${"x".repeat(60)}…"`);
  assert.equal(quoted("abcdef", 3), '"abc…"');
  assert.equal(quoted("abc", 0), '"…"');
  // Escapes: what JSON escapes, and the line breakers and C1 controls it leaves raw.
  assert.equal(quoted('a"b\\c\nd\re\tf\u0000g'), '"a\\"b\\\\c\\nd\\re\\tf\\u0000g"');
  assert.equal(quoted("a\u2028b\u2029c\u0085d\u009be\u007f"), '"a\\u2028b\\u2029c\\u0085d\\u009be\\u007f"');
  assert.equal(JSON.parse(quoted('a\u2028b\u0085"c')), 'a\u2028b\u0085"c', "still a JSON string of the value");
  // Surrogate pairs: 59 characters then an emoji straddling the cut loses the whole emoji, not half.
  const emoji = "\u{1F600}";
  assert.equal(quoted(`${"x".repeat(59)}${emoji}tail`), `"${"x".repeat(59)}…"`);
  assert.equal(quoted(`${"x".repeat(58)}${emoji}tail`), `"${"x".repeat(58)}${emoji}…"`, "a pair that fits is kept");
  assert.equal(quoted(emoji.repeat(100)), `"${emoji.repeat(30)}…"`);
  // A lone surrogate the caller sent is escaped, as JSON.stringify does.
  assert.equal(quoted("a\ud800b"), '"a\\ud800b"');
  for (const value of [HUGE, emoji.repeat(MIB), `${"é".repeat(59)}${emoji}`]) {
    const echo = quoted(value);
    assert.ok(echo.length <= 2 + 61 * 6, "bounded whatever the input");
    assert.ok(
      !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(echo),
      "no lone surrogate",
    );
    assert.ok(!/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(echo), "one printable line");
  }
});

test(
  "a 1 MiB job_id to claude_wait, claude_kill and claude_output: JOB_NOT_FOUND quoting its start, in " +
    "a small reply",
  async () => {
    const h = handlerHarness();
    for (const name of ["claude_wait", "claude_kill", "claude_output"]) {
      const response = await request(h, "tools/call", { name, arguments: { job_id: HUGE } });
      const { text, structured } = toolText(response);
      assert.ok(
        text.startsWith(`JOB_NOT_FOUND: no job with id ${HUGE_ECHO} in this state directory: `),
        `${name}: ${text.slice(0, 200)}`,
      );
      assertShortEcho(response, text, name);
      assert.equal((structured.error as { detail: string }).detail.includes(HUGE_ECHO), true);
      assert.equal(structured.job_id, undefined, `${name}: a malformed id is not echoed in structuredContent`);
    }
    // The same id in the 2026-07-28 era.
    const response = await request(h, "tools/call", {
      name: "claude_wait",
      arguments: { job_id: HUGE },
      _meta: modernMeta(),
    });
    assertShortEcho(response, toolText(response).text, "claude_wait (2026-07-28)");
  },
);

test("a 1 MiB unknown tool name: -32602 whose message quotes its start", async () => {
  const h = handlerHarness();
  for (const extra of [{}, { _meta: modernMeta() }]) {
    const response = await request(h, "tools/call", { name: HUGE, arguments: {}, ...extra });
    const message = errorMessage(response, -32602);
    assert.equal(message, `Unknown tool: ${HUGE_ECHO}`);
    assertShortEcho(response, message, "unknown tool");
  }
});

test("a 1 MiB unknown argument name: INVALID_ARGUMENT quoting its start", async () => {
  const h = handlerHarness();
  for (const [name, args] of [
    ["claude_kill", { job_id: "job-1", [HUGE]: 1 }],
    ["claude_run", { [HUGE]: true, prompt: "p", cwd: "/w" }],
    ["claude_list", { [HUGE]: null }],
  ] as const) {
    const response = await request(h, "tools/call", { name, arguments: args });
    const { text } = toolText(response);
    assert.ok(
      text.startsWith(`INVALID_ARGUMENT: unknown argument ${HUGE_ECHO}; expected only`),
      `${name}: ${text.slice(0, 200)}`,
    );
    assertShortEcho(response, text, name);
  }
  assert.equal(h.launcher.agents.length, 0, "nothing ran");
});

test("a 1 MiB argument value is echoed cut too (job_id must be non-empty: a whitespace megabyte)", async () => {
  const h = handlerHarness();
  const blank = " \n".repeat(MIB / 2);
  const response = await request(h, "tools/call", { name: "claude_wait", arguments: { job_id: blank } });
  const { text } = toolText(response);
  assert.ok(text.includes(`got "${" \\n".repeat(30)}…"`), text.slice(0, 200));
  assert.ok(!text.includes("\n") && Buffer.byteLength(JSON.stringify(response)) < MAX_REPLY_BYTES);
});

test("a 1 MiB 2025-11-25 taskId to tasks/get, tasks/result and tasks/cancel: -32602 quoting its start", async () => {
  const h = handlerHarness();
  for (const method of ["tasks/get", "tasks/result", "tasks/cancel"]) {
    const response = await request(h, method, { taskId: HUGE });
    const message = errorMessage(response, -32602);
    assert.equal(message, `Failed to retrieve task: Task not found: ${HUGE_ECHO}`, method);
    assertShortEcho(response, message, method);
  }
  // A cursor is never echoed.
  const cursor = await request(h, "tasks/list", { cursor: HUGE });
  assert.ok(Buffer.byteLength(JSON.stringify(cursor)) < MAX_REPLY_BYTES);
  assert.ok(!errorMessage(cursor, -32602).includes("a\n"));
});

test("a 1 MiB 2026-07-28 taskId to tasks/get, tasks/update and tasks/cancel: -32602 quoting its start", async () => {
  const h = handlerHarness();
  for (const method of ["tasks/get", "tasks/update", "tasks/cancel"]) {
    const response = await request(h, method, { taskId: HUGE, inputResponses: {}, _meta: modernMeta() });
    const message = errorMessage(response, -32602);
    assert.equal(message, `Failed to retrieve task: Task not found: ${HUGE_ECHO}`, method);
    assertShortEcho(response, message, method);
  }
});

test("a 1 MiB method name: -32601 quoting its start, in both eras", async () => {
  const h = handlerHarness();
  const legacy = await request(h, HUGE, {});
  assert.equal(errorMessage(legacy, -32601), `Method not found: ${HUGE_ECHO}`);
  assertShortEcho(legacy, errorMessage(legacy, -32601), "legacy method");
  const modern = await request(h, HUGE, { _meta: modernMeta() });
  assert.equal(errorMessage(modern, -32601), `Method not found: ${HUGE_ECHO} (in protocol version 2026-07-28)`);
  assertShortEcho(modern, errorMessage(modern, -32601), "2026-07-28 method");
  // The log line about an ignored notification is one line too.
  await h.handle({ jsonrpc: "2.0", method: HUGE });
  const logged = h.logger.lines.filter((line) => line.startsWith("debug ignored notification"));
  assert.deepEqual(logged, [`debug ignored notification ${HUGE_ECHO}`]);
});

test("the command line echoes a 1 MiB option, flag, id, age or argument the same way", async () => {
  const cases: Array<[string[], string]> = [
    [[`-${HUGE}`], `unknown option "-${"a\\n".repeat(29)}a…"`],
    [["jobs", `--${HUGE}`], `unknown option "--${"a\\n".repeat(29)}…" for jobs`],
    [["jobs", `--${HUGE}=1`], `"--${"a\\n".repeat(29)}…" takes no value`],
    [["jobs", HUGE], `jobs takes no arguments, got ${HUGE_ECHO}`],
    [["show", HUGE], `not a job id: ${HUGE_ECHO} (`],
    [["prune", "--older-than", HUGE], `not an age: ${HUGE_ECHO};`],
    [[HUGE], `unknown command ${HUGE_ECHO}`],
  ];
  for (const [args, message] of cases) {
    let stdout = "";
    let stderr = "";
    const io: CliIo = {
      env: {},
      machine: machineOf({ cpus: 1, home: "/home/tester" }),
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
      clock: new FakeClock(),
      processControl: async () => {
        throw new Error("a usage error needs no process layer");
      },
      nodePath: "/usr/bin/node",
      mainPath: "/opt/claude-dispatch/dist/main.js",
      randomName: () => "random",
      runFile: async () => {
        throw new Error("a usage error runs nothing");
      },
      identity: () => {
        throw new Error("a usage error writes no record");
      },
    };
    const code = await runCli(args, io);
    const what = message.slice(0, 40);
    assert.equal(code, 2, what);
    assert.equal(stdout, "", what);
    const [first, ...rest] = stderr.split("\n");
    assert.ok(first?.includes(message), `${what}: ${stderr.slice(0, 300)}`);
    assert.ok(stderr.length < MAX_REPLY_BYTES, `${what}: ${stderr.length} characters`);
    assert.ok(rest.join("\n").startsWith("Usage: claude-dispatch"), "the id's newlines added no line");
  }
});
