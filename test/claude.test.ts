/** Claude Code's argv, environment and output interpretation, against recorded CLI output. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { DISK_FULL_BYTES } from "../src/agent/ending.js";
import {
  ClaudeStream,
  agentEnvironment,
  claudeArgs,
  describeToolUse,
  findResultEvent,
  interpretExit,
  toAgentResult,
} from "../src/runtimes/claude/index.js";
import { createClaudeAgents, finishedChild } from "./helpers.js";
import type { AgentOutcome } from "../src/agent/types.js";
import type { StateDisk } from "../src/agent/runtime.js";
import type { ChildExit, ChildHandle } from "../src/hosts/local/index.js";

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/cli/${name}`, import.meta.url), "utf8");

function stream(stdout: string, chunkBytes = Number.POSITIVE_INFINITY, maxLineBytes = 1024 * 1024): ClaudeStream {
  const reader = new ClaudeStream({ maxLineBytes, transcriptChars: 100_000, onOverflow: () => undefined });
  const bytes = Buffer.from(stdout, "utf8");
  for (let at = 0; at < bytes.length; at += Math.min(chunkBytes, bytes.length))
    reader.push(bytes.subarray(at, at + chunkBytes));
  reader.end();
  return reader;
}

/** How an agent that printed `stdout` and ended as `fields` says is read. */
function interpret(fields: Partial<ChildExit> & { stdout?: string; disk?: StateDisk }, bin = "claude"): AgentOutcome {
  const { stdout = "", disk, ...exitFields } = fields;
  return interpretExit({ exitCode: 0, signal: null, stderrTail: "", ...exitFields }, stream(stdout), bin, disk);
}

test("argv: print mode, stream-json with --verbose, and --resume only with a session", () => {
  assert.deepEqual(claudeArgs({}), ["-p", "--output-format", "stream-json", "--verbose"]);
  assert.deepEqual(claudeArgs({ resumeSessionId: "8f01635f-202a-449c-ab8a-05f75520788e" }), [
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--resume=8f01635f-202a-449c-ab8a-05f75520788e",
  ]);
});

test("argv: each agent option maps to exactly one --flag=value, lists to one flag per rule", () => {
  const args = claudeArgs({
    options: {
      model: "sonnet",
      permissionMode: "acceptEdits",
      allowedTools: ["Bash(git log:*)", "Edit"],
      disallowedTools: ["WebFetch"],
      maxTurns: 7,
      maxBudgetUsd: 1.25,
      appendSystemPrompt: "--verbose is text here, not a flag",
      addDirs: ["/work/lib", "/work/docs"],
    },
  });
  assert.deepEqual(args.slice(4), [
    "--model=sonnet",
    "--permission-mode=acceptEdits",
    "--allowedTools=Bash(git log:*)",
    "--allowedTools=Edit",
    "--disallowedTools=WebFetch",
    "--max-turns=7",
    "--max-budget-usd=1.25",
    "--append-system-prompt=--verbose is text here, not a flag",
    "--add-dir=/work/lib",
    "--add-dir=/work/docs",
  ]);
});

test("environment: nesting markers removed, depth added, the rest inherited", () => {
  const env = agentEnvironment(
    { PATH: "/bin", CLAUDECODE: "1", CLAUDE_CODE_ENTRYPOINT: "cli", HOME: "/h" },
    { CLAUDE_DISPATCH_DEPTH: "2" },
  );
  assert.deepEqual(env, { PATH: "/bin", HOME: "/h", CLAUDE_DISPATCH_DEPTH: "2" });
});

test("the recorded 2.1.197 success object is read by key", () => {
  const outcome = interpret({ stdout: fixture("success-2.1.197.json") }, "claude");
  assert.deepEqual(outcome, {
    ok: true,
    result: {
      sessionId: "8f01635f-202a-449c-ab8a-05f75520788e",
      text: "MOCK-REPLY: say hello",
      costUsd: 0.01615,
      numTurns: 1,
      durationMs: 112,
    },
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
  const text = [
    "warning: something",
    '{"type":"result","result":"first","is_error":false}',
    "noise",
    '{"type":"result","result":"second","is_error":false}',
  ].join("\n");
  assert.equal(findResultEvent(text)?.result, "second");
  assert.equal(findResultEvent(""), undefined);
  assert.equal(findResultEvent('{"type":"assistant"}'), undefined);
  assert.equal(findResultEvent("[1,2,3]"), undefined);
});

test("an API error exits 1 with subtype success, yet is_error carries the message and status", () => {
  const outcome = interpret({ exitCode: 1, stdout: fixture("api-error-500-2.1.332.json"), stderrTail: "" }, "claude");
  assert.equal(outcome.ok, false);
  if (outcome.ok) return;
  assert.equal(outcome.code, "AGENT_ERROR");
  assert.match(outcome.detail, /^API Error: 500 Internal server error \(mock\)/);
  assert.match(outcome.detail, /\(API status 500\)$/);
  assert.match(outcome.result?.sessionId ?? "", /^[0-9a-f-]{36}$/);
  assert.equal(outcome.result?.apiErrorStatus, 500);
  const unauthorized = interpret({ exitCode: 1, stdout: fixture("api-error-401-2.1.332.json") }, "claude");
  assert.ok(!unauthorized.ok && unauthorized.detail === "Invalid API key · Fix external API key (API status 401)");
});

test("the recorded 2.1.332 success, in its own key order, reads the same", () => {
  const outcome = interpret({ stdout: fixture("success-2.1.332.json") }, "claude");
  assert.ok(outcome.ok);
  assert.equal(outcome.result.text, "MOCK-REPLY: say hello");
  assert.equal(outcome.result.numTurns, 1);
  assert.equal(outcome.result.costUsd, 0.0006000000000000001);
  assert.equal(findResultEvent(fixture("stream-2.1.332.ndjson"))?.result, "MOCK-REPLY: say hello");
});

test("a recorded permission denial: exit 0, and the denied call is kept", () => {
  const outcome = interpret({ stdout: fixture("permission-denied-2.1.332.json") }, "claude");
  assert.ok(outcome.ok);
  assert.deepEqual(outcome.result.permissionDenials, [
    { tool_name: "Bash", tool_input: { command: "echo hi > out.txt", description: "mock command" } },
  ]);
});

test("not logged in: the message reaches the caller even though stderr is empty", () => {
  const outcome = interpret({ exitCode: 1, stdout: fixture("not-logged-in-2.1.332.json") }, "claude");
  assert.ok(!outcome.ok && outcome.code === "AGENT_ERROR" && outcome.detail === "Not logged in · Please run /login");
});

test("max turns has no result field: the errors array is the message", () => {
  const outcome = interpret({ exitCode: 1, stdout: fixture("max-turns-2.1.332.json") }, "claude");
  assert.ok(!outcome.ok);
  if (outcome.ok) return;
  assert.equal(outcome.code, "AGENT_ERROR");
  assert.equal(outcome.detail, "Reached maximum number of turns (2)");
  assert.equal(outcome.result?.numTurns, 3);
});

test("is_error false with a non-zero exit is still a result (the answer is not thrown away)", () => {
  const stdout = JSON.stringify({
    type: "result",
    subtype: "error_during_execution",
    is_error: false,
    result: "partial",
    session_id: "s",
  });
  const outcome = interpret({ exitCode: 1, stdout }, "claude");
  assert.deepEqual(outcome, { ok: true, result: { sessionId: "s", text: "partial" } });
});

test("permission denials are kept with tool name and input", () => {
  const stdout = JSON.stringify({
    type: "result",
    is_error: false,
    result: "could not write",
    permission_denials: [
      { tool_name: "Write", tool_use_id: "t1", tool_input: { file_path: "/p/out.txt" } },
      { nonsense: true },
    ],
  });
  const result = toAgentResult(JSON.parse(stdout));
  assert.deepEqual(result.permissionDenials, [{ tool_name: "Write", tool_input: { file_path: "/p/out.txt" } }]);
});

test("unknown resume id: empty stdout, message on stderr", () => {
  const outcome = interpret({ exitCode: 1, stderrTail: fixture("unknown-resume-2.1.332.stderr.txt") }, "claude");
  assert.deepEqual(outcome, {
    ok: false,
    code: "SESSION_NOT_FOUND",
    detail: "No conversation found with session ID 11111111-2222-4333-8444-555555555555 in this cwd",
  });
});

test("non-zero exit without JSON reports the exit code or signal and the stderr tail", () => {
  const coded = interpret(
    { exitCode: 2, stderrTail: "error: option '--output-format <format>' argument 'yaml' is invalid" },
    "claude",
  );
  assert.ok(!coded.ok && coded.code === "AGENT_EXITED" && /exited with code 2: error: option/.test(coded.detail));
  const signalled = interpret({ exitCode: null, signal: "SIGKILL" }, "claude");
  assert.ok(
    !signalled.ok &&
      signalled.code === "AGENT_EXITED" &&
      signalled.detail === "claude was killed by SIGKILL and printed no result",
  );
});

test("exit 0 with non-JSON or nothing is BAD_OUTPUT, showing the start of what was printed", () => {
  const garbage = interpret({ stdout: `Please log in${"!".repeat(1000)}` }, "claude");
  assert.ok(
    !garbage.ok &&
      garbage.code === "BAD_OUTPUT" &&
      garbage.detail.length < 400 &&
      garbage.detail.includes("Please log in"),
  );
  const empty = interpret({}, "claude");
  assert.ok(!empty.ok && empty.code === "BAD_OUTPUT");
});

test("spawn failures: ENOENT gives install advice, others the system message", () => {
  const missing = interpret(
    { exitCode: null, spawnError: { code: "ENOENT", message: "spawn claude ENOENT" } },
    "claude",
  );
  assert.deepEqual(missing, {
    ok: false,
    code: "SPAWN_FAILED",
    detail: "claude not found on PATH; install Claude Code or set CLAUDE_DISPATCH_CLAUDE_BIN",
  });
  const custom = interpret({ exitCode: null, spawnError: { code: "ENOENT", message: "x" } }, "/opt/claude");
  assert.ok(!custom.ok && custom.detail.startsWith("/opt/claude not found"));
  const denied = interpret(
    { exitCode: null, spawnError: { code: "EACCES", message: "spawn /opt/claude EACCES" } },
    "/opt/claude",
  );
  assert.ok(!denied.ok && denied.code === "SPAWN_FAILED" && denied.detail.includes("EACCES"));
});

test("overflow wins over whatever partial output there was", () => {
  const reader = stream(
    `${JSON.stringify({ type: "assistant", message: { content: [{ type: "text", text: "z".repeat(5000) }] } })}\n`,
    1000,
    1024,
  );
  assert.equal(reader.overflow, true);
  const outcome = interpretExit({ exitCode: null, signal: "SIGTERM", stderrTail: "" }, reader, "claude");
  assert.ok(!outcome.ok && outcome.code === "OUTPUT_TOO_LARGE");
});

test("stream-json from the real CLI: live summary, transcript and result, whatever the chunking", () => {
  const text = fixture("stream-tools-2.1.332.ndjson");
  for (const chunkBytes of [Number.POSITIVE_INFINITY, 7, 1]) {
    const reader = stream(text, chunkBytes);
    const live = reader.live();
    assert.match(live.sessionId ?? "", /^[0-9a-f-]{36}$/);
    assert.equal(live.turns, 3, "two tool turns and the answer");
    assert.equal(live.lastTool, "Bash · echo turn-2");
    assert.equal(live.lastActivity, "text");
    assert.match(live.lastText ?? "", /^MOCK-DONE after 2 tools/);
    assert.ok((live.costUsd ?? 0) > 0);
    const transcript = reader.transcript.page(0, 100_000).text;
    assert.match(transcript, /^\[session [0-9a-f-]{36} · model /);
    assert.match(transcript, /tool: Bash · echo turn-1\ntool result: turn-1\n/);
    assert.match(transcript, /\[done: success\]\n$/);
    const outcome = interpretExit({ exitCode: 0, signal: null, stderrTail: "" }, reader, "claude");
    assert.ok(
      outcome.ok && outcome.result.numTurns === 3 && outcome.result.text?.startsWith("MOCK-DONE after 2 tools"),
    );
  }
});

test("a line that is not JSON is reported and skipped; the job goes on", () => {
  const malformed: string[] = [];
  const reader = new ClaudeStream({
    maxLineBytes: 1 << 20,
    transcriptChars: 10_000,
    onOverflow: () => undefined,
    onMalformedLine: (line) => malformed.push(line),
  });
  const lines = fixture("stream-2.1.332.ndjson").trim().split("\n");
  reader.push(
    Buffer.from(`${lines[0]}\nWarning: something odd\n{"type":"assistant", broken\n${lines.slice(1).join("\n")}\n`),
  );
  reader.end();
  assert.deepEqual(malformed, ["Warning: something odd", '{"type":"assistant", broken']);
  const outcome = interpretExit({ exitCode: 0, signal: null, stderrTail: "" }, reader, "claude");
  assert.ok(outcome.ok && outcome.result.text === "MOCK-REPLY: say hello");
});

test("activity listeners hear each event and can unsubscribe", () => {
  const reader = new ClaudeStream({ maxLineBytes: 1 << 20, transcriptChars: 10_000, onOverflow: () => undefined });
  let heard = 0;
  const stop = reader.onActivity(() => (heard += 1));
  const lines = fixture("stream-tools-2.1.332.ndjson").trim().split("\n");
  reader.push(Buffer.from(`${lines[0]}\n${lines[1]}\n`));
  assert.equal(heard, 2);
  stop();
  reader.push(Buffer.from(`${lines[2]}\n`));
  assert.equal(heard, 2);
});

test("with stream-json an unknown --resume id is an error result, read as SESSION_NOT_FOUND", () => {
  const outcome = interpret({ exitCode: 1, stdout: fixture("stream-unknown-resume-2.1.332.ndjson") });
  assert.ok(!outcome.ok);
  if (outcome.ok) return;
  assert.equal(outcome.code, "SESSION_NOT_FOUND");
  assert.match(outcome.detail, /11111111-2222-4333-8444-555555555555/);
});

test("a recorded stream with a permission denial keeps it", () => {
  const outcome = interpret({ stdout: fixture("stream-denied-2.1.332.ndjson") });
  assert.ok(outcome.ok);
  assert.equal(outcome.result.permissionDenials?.[0]?.tool_name, "Bash");
});

test("the older shapes still read: one object, an array on one line, pretty-printed JSON", () => {
  const single = fixture("success-2.1.332.json");
  assert.ok(interpret({ stdout: single }).ok);
  assert.ok(interpret({ stdout: fixture("verbose-json-array-2.1.332.json") }).ok);
  assert.ok(interpret({ stdout: JSON.stringify(JSON.parse(single), null, 2) }).ok);
});

test("describeToolUse picks the telling argument and keeps it to one short line", () => {
  assert.equal(
    describeToolUse("Bash", { command: "npm test\n  -- --watch", description: "run tests" }),
    "Bash · npm test -- --watch",
  );
  assert.equal(
    describeToolUse("Edit", { file_path: "/p/src/app.ts", old_string: "a", new_string: "b" }),
    "Edit · /p/src/app.ts",
  );
  assert.equal(describeToolUse("Grep", { pattern: "TODO" }), "Grep · TODO");
  assert.equal(describeToolUse("TodoWrite", {}), "TodoWrite");
  assert.equal(describeToolUse("Bash", { command: "x".repeat(200) }).length, "Bash · ".length + 81);
});

const fullDisk: StateDisk = { dir: "/state/jobs/j1", freeBytes: 4096 };

test("no result, exit 0, and a full disk: STATE_ERROR names the full disk, not BAD_OUTPUT", () => {
  const outcome = interpret({ stdout: '{"type":"system","subtype":"init","session_id":"s"}\n', disk: fullDisk });
  assert.deepEqual(outcome, {
    ok: false,
    code: "STATE_ERROR",
    detail:
      "the disk holding the state directory is full (4096 bytes free in /state/jobs/j1): the agent's output could not be written to stdout.jsonl; free space and run it again",
  });
  const empty = interpret({ disk: { dir: "/d", freeBytes: 0 } });
  assert.ok(!empty.ok && empty.code === "STATE_ERROR");
});

test("no result, a non-zero exit or a lost agent, and a full disk: STATE_ERROR too", () => {
  for (const exit of [
    { exitCode: 1, stderrTail: "Error: ENOSPC: no space left on device, write" },
    { exitCode: null, signal: "SIGABRT" },
    { exitCode: null, unobserved: true as const },
  ]) {
    const outcome = interpret({ ...exit, disk: fullDisk });
    assert.ok(
      !outcome.ok && outcome.code === "STATE_ERROR" && outcome.detail.includes("4096 bytes free in /state/jobs/j1"),
      JSON.stringify(exit),
    );
  }
});

test("a printed result wins over a full disk; an unknown resume id and an overflow still say so", () => {
  const ok = interpret({ stdout: fixture("success-2.1.332.json"), disk: fullDisk });
  assert.deepEqual(ok, interpret({ stdout: fixture("success-2.1.332.json") }));
  assert.ok(ok.ok);
  const failed = interpret({ exitCode: 1, stdout: fixture("not-logged-in-2.1.332.json"), disk: fullDisk });
  assert.ok(!failed.ok && failed.code === "AGENT_ERROR");
  const resume = interpret({ exitCode: 1, stderrTail: fixture("unknown-resume-2.1.332.stderr.txt"), disk: fullDisk });
  assert.ok(!resume.ok && resume.code === "SESSION_NOT_FOUND");
  const reader = stream(`${"z".repeat(5000)}\n`, 1000, 1024);
  const overflow = interpretExit({ exitCode: null, signal: "SIGTERM", stderrTail: "" }, reader, "claude", fullDisk);
  assert.ok(!overflow.ok && overflow.code === "OUTPUT_TOO_LARGE");
});

test("no result with space to spare, or space unknown, reads as before", () => {
  for (const disk of [
    { dir: "/d", freeBytes: DISK_FULL_BYTES },
    { dir: "/d", freeBytes: 50 * 1024 ** 3 },
    { dir: "/d", freeBytes: undefined },
    undefined,
  ]) {
    const garbage = interpret({ stdout: "Please log in", disk });
    assert.deepEqual(garbage, {
      ok: false,
      code: "BAD_OUTPUT",
      detail: "claude printed no result event: Please log in",
    });
    const exited = interpret({ exitCode: 2, stderrTail: "boom", disk });
    assert.deepEqual(exited, { ok: false, code: "AGENT_EXITED", detail: "claude exited with code 2: boom" });
  }
});

/** An agent that prints stdout and exits as exit says, followed by createClaudeAgents with the given probe. */
async function runAgent(
  stdout: string,
  exit: Partial<ChildExit>,
  freeBytes?: (dir: string) => number | undefined,
): Promise<{ outcome: AgentOutcome; asked: string[] }> {
  const asked: string[] = [];
  const handle = (onStdout: (chunk: Buffer) => void): ChildHandle => finishedChild(onStdout, stdout, exit);
  const agents = createClaudeAgents({
    start: (request) => handle(request.onStdout),
    attach: (request) => handle(request.onStdout),
    files: {
      readRange: (_file, offset, length) => Buffer.from(stdout).subarray(offset, offset + length),
      create: () => ({ write: () => undefined, close: () => undefined }),
      ...(freeBytes
        ? {
            freeBytes: (dir: string) => {
              asked.push(dir);
              return freeBytes(dir);
            },
          }
        : {}),
    },
    bin: "claude",
    env: {},
    maxLineBytes: 1 << 20,
    transcriptChars: 10_000,
    stderrTailBytes: 4096,
  });
  const output = {
    stdoutPath: "/state/jobs/j1/stdout.jsonl",
    stderrPath: "/state/jobs/j1/stderr.log",
    resultPath: "/state/jobs/j1/result.txt",
  };
  const outcome = await agents.launch({ prompt: "hi", cwd: "/tmp", output }).outcome;
  return { outcome, asked };
}

test("createClaudeAgents asks the probe about stdout.jsonl's folder only when there is no result", async () => {
  const full = await runAgent("", { exitCode: 0 }, () => 512);
  assert.deepEqual(full.asked, ["/state/jobs/j1"]);
  assert.ok(
    !full.outcome.ok &&
      full.outcome.code === "STATE_ERROR" &&
      full.outcome.detail.includes("512 bytes free in /state/jobs/j1"),
  );
  assert.deepEqual(full.outcome.exit, { code: 0, signal: null });

  const exited = await runAgent("", { exitCode: 1, stderrTail: "crash" }, () => 0);
  assert.ok(!exited.outcome.ok && exited.outcome.code === "STATE_ERROR");

  const done = await runAgent(fixture("stream-2.1.332.ndjson"), { exitCode: 0 }, () => 0);
  assert.deepEqual(done.asked, [], "a printed result needs no probe");
  assert.ok(done.outcome.ok && done.outcome.result.text === "MOCK-REPLY: say hello");

  const roomy = await runAgent("", { exitCode: 0 }, () => 10 * DISK_FULL_BYTES);
  assert.ok(!roomy.outcome.ok && roomy.outcome.code === "BAD_OUTPUT");
  const unknown = await runAgent("", { exitCode: 0 }, () => undefined);
  assert.ok(!unknown.outcome.ok && unknown.outcome.code === "BAD_OUTPUT");
  const throwing = await runAgent("", { exitCode: 0 }, () => {
    throw new Error("EACCES");
  });
  assert.ok(!throwing.outcome.ok && throwing.outcome.code === "BAD_OUTPUT");
  const noProbe = await runAgent("", { exitCode: 0 });
  assert.ok(!noProbe.outcome.ok && noProbe.outcome.code === "BAD_OUTPUT");
});
