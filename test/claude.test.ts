/** Claude Code's argv, environment and output interpretation, against recorded CLI output. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { agentEnvironment, claudeArgs, findResultEvent, interpretExit, toAgentResult } from "../src/claude.js";
import type { ChildExit } from "../src/process.js";

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/cli/${name}`, import.meta.url), "utf8");

function exit(overrides: Partial<ChildExit>): ChildExit {
  return { exitCode: 0, signal: null, stdout: "", stdoutOverflow: false, stderrTail: "", ...overrides };
}

test("argv: print mode, json output, and --resume only with a session", () => {
  assert.deepEqual(claudeArgs({}), ["-p", "--output-format", "json"]);
  assert.deepEqual(claudeArgs({ resumeSessionId: "8f01635f-202a-449c-ab8a-05f75520788e" }), [
    "-p",
    "--output-format",
    "json",
    "--resume",
    "8f01635f-202a-449c-ab8a-05f75520788e",
  ]);
});

test("environment: nesting markers removed, depth added, the rest inherited", () => {
  const env = agentEnvironment({ PATH: "/bin", CLAUDECODE: "1", CLAUDE_CODE_ENTRYPOINT: "cli", HOME: "/h" }, { CLAUDE_DISPATCH_DEPTH: "2" });
  assert.deepEqual(env, { PATH: "/bin", HOME: "/h", CLAUDE_DISPATCH_DEPTH: "2" });
});

test("the recorded 2.1.197 success object is read by key", () => {
  const outcome = interpretExit(exit({ stdout: fixture("success-2.1.197.json") }), "claude");
  assert.deepEqual(outcome, {
    ok: true,
    result: { sessionId: "8f01635f-202a-449c-ab8a-05f75520788e", text: "MOCK-REPLY: say hello", costUsd: 0.01615, numTurns: 1, durationMs: 112 },
  });
});

test("stream-json NDJSON and the JSON array of events give the same result", () => {
  const lines = fixture("stream-2.1.197.ndjson");
  const fromLines = findResultEvent(lines);
  assert.equal(fromLines?.result, "MOCK-REPLY: say hello");
  const asArray = `[${lines.trim().split("\n").join(",")}]`;
  assert.deepEqual(findResultEvent(asArray), fromLines);
});

test("the last result event wins and stray non-JSON lines do not hide it", () => {
  const text = ['warning: something', '{"type":"result","result":"first","is_error":false}', "noise", '{"type":"result","result":"second","is_error":false}'].join("\n");
  assert.equal(findResultEvent(text)?.result, "second");
  assert.equal(findResultEvent(""), undefined);
  assert.equal(findResultEvent('{"type":"assistant"}'), undefined);
  assert.equal(findResultEvent("[1,2,3]"), undefined);
});

test("an API error exits 1 with subtype success, yet is_error carries the message and status", () => {
  const outcome = interpretExit(exit({ exitCode: 1, stdout: fixture("api-error-500-2.1.332.json"), stderrTail: "" }), "claude");
  assert.equal(outcome.ok, false);
  if (outcome.ok) return;
  assert.equal(outcome.code, "AGENT_ERROR");
  assert.match(outcome.detail, /^API Error: 500 Internal server error \(mock\)/);
  assert.match(outcome.detail, /\(API status 500\)$/);
  assert.match(outcome.result?.sessionId ?? "", /^[0-9a-f-]{36}$/);
  assert.equal(outcome.result?.apiErrorStatus, 500);
  const unauthorized = interpretExit(exit({ exitCode: 1, stdout: fixture("api-error-401-2.1.332.json") }), "claude");
  assert.ok(!unauthorized.ok && unauthorized.detail === "Invalid API key · Fix external API key (API status 401)");
});

test("the recorded 2.1.332 success, in its own key order, reads the same", () => {
  const outcome = interpretExit(exit({ stdout: fixture("success-2.1.332.json") }), "claude");
  assert.ok(outcome.ok);
  assert.equal(outcome.result.text, "MOCK-REPLY: say hello");
  assert.equal(outcome.result.numTurns, 1);
  assert.equal(outcome.result.costUsd, 0.0006000000000000001);
  assert.equal(findResultEvent(fixture("stream-2.1.332.ndjson"))?.result, "MOCK-REPLY: say hello");
});

test("a recorded permission denial: exit 0, and the denied call is kept", () => {
  const outcome = interpretExit(exit({ stdout: fixture("permission-denied-2.1.332.json") }), "claude");
  assert.ok(outcome.ok);
  assert.deepEqual(outcome.result.permissionDenials, [{ tool_name: "Bash", tool_input: { command: "echo hi > out.txt", description: "mock command" } }]);
});

test("not logged in: the message reaches the caller even though stderr is empty", () => {
  const outcome = interpretExit(exit({ exitCode: 1, stdout: fixture("not-logged-in-2.1.332.json") }), "claude");
  assert.ok(!outcome.ok && outcome.code === "AGENT_ERROR" && outcome.detail === "Not logged in · Please run /login");
});

test("max turns has no result field: the errors array is the message", () => {
  const outcome = interpretExit(exit({ exitCode: 1, stdout: fixture("max-turns-2.1.332.json") }), "claude");
  assert.ok(!outcome.ok);
  if (outcome.ok) return;
  assert.equal(outcome.code, "AGENT_ERROR");
  assert.equal(outcome.detail, "Reached maximum number of turns (2)");
  assert.equal(outcome.result?.numTurns, 3);
});

test("is_error false with a non-zero exit is still a result (the answer is not thrown away)", () => {
  const stdout = JSON.stringify({ type: "result", subtype: "error_during_execution", is_error: false, result: "partial", session_id: "s" });
  const outcome = interpretExit(exit({ exitCode: 1, stdout }), "claude");
  assert.deepEqual(outcome, { ok: true, result: { sessionId: "s", text: "partial" } });
});

test("permission denials are kept with tool name and input", () => {
  const stdout = JSON.stringify({
    type: "result",
    is_error: false,
    result: "could not write",
    permission_denials: [{ tool_name: "Write", tool_use_id: "t1", tool_input: { file_path: "/p/out.txt" } }, { nonsense: true }],
  });
  const result = toAgentResult(JSON.parse(stdout));
  assert.deepEqual(result.permissionDenials, [{ tool_name: "Write", tool_input: { file_path: "/p/out.txt" } }]);
});

test("unknown resume id: empty stdout, message on stderr", () => {
  const outcome = interpretExit(exit({ exitCode: 1, stderrTail: fixture("unknown-resume-2.1.332.stderr.txt") }), "claude");
  assert.deepEqual(outcome, {
    ok: false,
    code: "SESSION_NOT_FOUND",
    detail: "No conversation found with session ID 11111111-2222-4333-8444-555555555555 in this cwd",
  });
});

test("non-zero exit without JSON reports the exit code or signal and the stderr tail", () => {
  const coded = interpretExit(exit({ exitCode: 2, stderrTail: "error: option '--output-format <format>' argument 'yaml' is invalid" }), "claude");
  assert.ok(!coded.ok && coded.code === "AGENT_EXITED" && /exited with code 2: error: option/.test(coded.detail));
  const signalled = interpretExit(exit({ exitCode: null, signal: "SIGKILL" }), "claude");
  assert.ok(!signalled.ok && signalled.code === "AGENT_EXITED" && signalled.detail === "claude was killed by SIGKILL and printed no result");
});

test("exit 0 with non-JSON or nothing is BAD_OUTPUT, showing the start of what was printed", () => {
  const garbage = interpretExit(exit({ stdout: `Please log in${"!".repeat(1000)}` }), "claude");
  assert.ok(!garbage.ok && garbage.code === "BAD_OUTPUT" && garbage.detail.length < 400 && garbage.detail.includes("Please log in"));
  const empty = interpretExit(exit({}), "claude");
  assert.ok(!empty.ok && empty.code === "BAD_OUTPUT");
});

test("spawn failures: ENOENT gives install advice, others the system message", () => {
  const missing = interpretExit(exit({ exitCode: null, spawnError: { code: "ENOENT", message: "spawn claude ENOENT" } }), "claude");
  assert.deepEqual(missing, { ok: false, code: "SPAWN_FAILED", detail: "claude not found on PATH; install Claude Code or set CLAUDE_DISPATCH_CLAUDE_BIN" });
  const custom = interpretExit(exit({ exitCode: null, spawnError: { code: "ENOENT", message: "x" } }), "/opt/claude");
  assert.ok(!custom.ok && custom.detail.startsWith("/opt/claude not found"));
  const denied = interpretExit(exit({ exitCode: null, spawnError: { code: "EACCES", message: "spawn /opt/claude EACCES" } }), "/opt/claude");
  assert.ok(!denied.ok && denied.code === "SPAWN_FAILED" && denied.detail.includes("EACCES"));
});

test("overflow wins over whatever partial output there was", () => {
  const outcome = interpretExit(exit({ stdoutOverflow: true, stdout: "" }), "claude");
  assert.ok(!outcome.ok && outcome.code === "OUTPUT_TOO_LARGE");
});
