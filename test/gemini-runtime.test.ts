/**
 * Google's Gemini CLI as a runtime: its argv, environment, stream-json reader
 * and outcome mapping against recorded 0.61.0 output, then the real CLI driven
 * through geminiRuntime() against a Gemini API mock on 127.0.0.1
 * (test/fixtures/mock-gemini.mjs).
 *
 * The real CLI is the pinned devDependency, or CLAUDE_DISPATCH_GEMINI_BIN when
 * the runner sets it. Without a working one these tests fail under CI=true
 * and are skipped, with one loud line, elsewhere.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import type { ChildExit } from "../src/agent/host.js";
import type { StateDisk } from "../src/agent/runtime.js";
import type { AgentOutcome, AgentSpec } from "../src/agent/types.js";
import { DISK_FULL_BYTES } from "../src/agent/ending.js";
import {
  GeminiReader,
  apiError,
  describeToolCall,
  geminiArgs,
  geminiEnvironment,
  geminiOptionProblem,
  geminiRuntime,
  interpretGeminiExit,
} from "../src/runtimes/gemini/index.js";
import { minimalEnvironment } from "./server-process.js";
// @ts-expect-error: a plain ESM fixture without type declarations
import { startMockGemini } from "./fixtures/mock-gemini.mjs";

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/gemini/${name}`, import.meta.url), "utf8");
/** `MOCK:BASH echo fixture-output` under --approval-mode=yolo: one tool call, then the answer in two pieces. */
const SHELL_RUN = fixture("stream-json-0.61.0-shell.jsonl");
/** `MOCK:HTTP 400`: the CLI exited 144 (400, modulo 256) after this. */
const HTTP_400_RUN = fixture("stream-json-0.61.0-http-400.jsonl");
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type ReaderHooks = {
  maxLineBytes?: number;
  onOverflow?: () => void;
  onMalformedLine?: (line: string) => void;
  onTranscriptEntry?: (entry: string) => void;
};

function newReader(hooks: ReaderHooks = {}): GeminiReader {
  return new GeminiReader({
    maxLineBytes: 1024 * 1024,
    transcriptChars: 100_000,
    onOverflow: () => undefined,
    ...hooks,
  });
}

function read(stdout: string | Buffer, chunkBytes = Number.POSITIVE_INFINITY, hooks: ReaderHooks = {}): GeminiReader {
  const reader = newReader(hooks);
  const bytes = typeof stdout === "string" ? Buffer.from(stdout, "utf8") : stdout;
  for (let at = 0; at < bytes.length; at += Math.min(chunkBytes, bytes.length))
    reader.push(bytes.subarray(at, at + chunkBytes));
  reader.end();
  return reader;
}

/** How an agent that printed `stdout` and ended as `fields` says is read. */
function interpret(
  fields: Partial<ChildExit> & { stdout?: string; disk?: StateDisk } = {},
  bin = "gemini",
): AgentOutcome {
  const { stdout = "", disk, ...exitFields } = fields;
  return interpretGeminiExit({ exitCode: 0, signal: null, stderrTail: "", ...exitFields }, read(stdout), bin, disk);
}

const transcriptOf = (reader: GeminiReader): string => reader.transcript.page(0, 1_000_000).text;
const lines = (...events: unknown[]): string => events.map((event) => `${JSON.stringify(event)}\n`).join("");
const SESSION = "3f0c1a52-1111-4222-8333-944455556666";
const init = { type: "init", session_id: SESSION, model: "gemini-test" };
const prompt = (content: string) => ({ type: "message", role: "user", content });
const text = (content: string) => ({ type: "message", role: "assistant", content, delta: true });
const toolUse = (id: string, command: string) => ({
  type: "tool_use",
  tool_name: "run_shell_command",
  tool_id: id,
  parameters: { command },
});
const toolResult = (id: string, output: string) => ({ type: "tool_result", tool_id: id, status: "success", output });
const success = { type: "result", status: "success", stats: { duration_ms: 120, tool_calls: 0 } };
const failure = (message?: string) => ({
  type: "result",
  status: "error",
  ...(message === undefined ? {} : { error: { type: "unknown", message } }),
  stats: { duration_ms: 0 },
});

// ---------------------------------------------------------------------------
// argv and environment
// ---------------------------------------------------------------------------

describe("argv", () => {
  test("headless with an empty -p, stream-json; the prompt goes to stdin, never argv", () => {
    assert.deepEqual(geminiArgs({}), ["-p", "", "--output-format=stream-json"]);
    const { command, args } = geminiRuntime("/opt/gemini").invocation({ prompt: "say hello --model=x", cwd: "/work" });
    assert.equal(command, "/opt/gemini");
    assert.ok(!args.some((arg) => arg.includes("say hello")));
  });

  test("resume: --resume=<uuid> only when there is a session", () => {
    assert.deepEqual(geminiArgs({ resumeSessionId: SESSION }), [
      "-p",
      "",
      "--output-format=stream-json",
      `--resume=${SESSION}`,
    ]);
  });

  test("each option is one --flag=value; lists are one flag per value", () => {
    const args = geminiArgs({
      options: {
        model: "gemini-2.5-pro",
        permissionMode: "auto_edit",
        allowedTools: ["run_shell_command(git status)", "read_file"],
        addDirs: ["/work/lib", "/work/--docs"],
      },
    });
    assert.deepEqual(args.slice(3), [
      "--model=gemini-2.5-pro",
      "--approval-mode=auto_edit",
      "--allowed-tools=run_shell_command(git status)",
      "--allowed-tools=read_file",
      "--include-directories=/work/lib",
      "--include-directories=/work/--docs",
    ]);
  });

  test("every approval mode passes through in the CLI's own words; the approver is Claude Code's and ignored", () => {
    const runtime = geminiRuntime("gemini");
    for (const mode of runtime.permissionModes) {
      const { args } = runtime.invocation({
        prompt: "p",
        cwd: "/w",
        options: { permissionMode: mode },
        approver: { command: "node", args: ["approver.js"], waitMs: 1000 },
      });
      assert.deepEqual(args.slice(3), [`--approval-mode=${mode}`]);
    }
  });

  test("values the CLI would split on commas or trim are named", () => {
    assert.equal(geminiOptionProblem({ allowedTools: ["read_file"], addDirs: ["/work/a b"] }), undefined);
    assert.match(geminiOptionProblem({ addDirs: ["/work/ok", "/work/a,b"] }) ?? "", /^add_dirs\[1\] holds a comma/);
    assert.match(geminiOptionProblem({ allowedTools: [" read_file"] }) ?? "", /^allowed_tools\[0\]/);
  });
});

describe("the runtime", () => {
  test("names its options, Gemini's approval modes and the dangerous one", () => {
    const runtime = geminiRuntime("gemini");
    assert.equal(runtime.name, "gemini");
    assert.deepEqual([...runtime.supportedOptions], ["model", "permissionMode", "allowedTools", "addDirs"]);
    assert.deepEqual([...runtime.permissionModes], ["default", "auto_edit", "yolo", "plan"]);
    assert.deepEqual([...runtime.dangerousModes], ["yolo"]);
  });

  test("environment: the server's own plus extra, kept to one process unless the operator says otherwise", () => {
    const env = geminiEnvironment(
      { PATH: "/usr/bin", HOME: "/home/u", UNSET: undefined },
      { CLAUDE_DISPATCH_DEPTH: "1" },
    );
    assert.deepEqual(env, {
      GEMINI_CLI_NO_RELAUNCH: "true",
      PATH: "/usr/bin",
      HOME: "/home/u",
      UNSET: undefined,
      CLAUDE_DISPATCH_DEPTH: "1",
    });
    assert.equal(geminiEnvironment({ GEMINI_CLI_NO_RELAUNCH: "" }, {}).GEMINI_CLI_NO_RELAUNCH, "");
  });

  test("tool calls read as one line", () => {
    assert.equal(
      describeToolCall("run_shell_command", { command: "npm  test\n", description: "run tests" }),
      "run_shell_command · npm test",
    );
    assert.equal(describeToolCall("read_file", { file_path: "src/app.ts" }), "read_file · src/app.ts");
    assert.equal(describeToolCall("list_directory", { dir_path: "." }), "list_directory · .");
    assert.equal(describeToolCall("update_topic", {}), "update_topic");
    assert.equal(describeToolCall("custom", { n: 1 }), 'custom · {"n":1}');
  });
});

// ---------------------------------------------------------------------------
// The reader, on recorded output
// ---------------------------------------------------------------------------

describe("reader", () => {
  const SHELL_TRANSCRIPT = [
    /^\[session [0-9a-f-]{36} · model auto\]$/,
    /^tool: run_shell_command · echo fixture-output$/,
    /^tool result: fixture-output$/,
    /^assistant: MOCK-DONE: <untrusted_context>$/,
  ];

  function checkShellRun(reader: GeminiReader, how: string): void {
    const live = reader.live();
    assert.match(live.sessionId ?? "", UUID, how);
    assert.equal(live.model, "auto", how);
    assert.equal(live.turns, 2, `${how}: the tool call and the answer`);
    assert.equal(live.events, 7, how);
    assert.equal(live.lastTool, "run_shell_command · echo fixture-output", how);
    assert.equal(live.lastActivity, "text", how);
    assert.match(
      live.lastText ?? "",
      /^MOCK-DONE: <untrusted_context>\nOutput: fixture-output\nProcess Group PGID: \d+\n<\/untrusted_context>$/,
      how,
    );
    assert.equal(live.costUsd, undefined, how);
    const transcript = transcriptOf(reader).split("\n");
    SHELL_TRANSCRIPT.forEach((pattern, index) => assert.match(transcript[index] ?? "", pattern, how));
    // The two pieces of the answer are one entry.
    assert.equal(transcript.filter((entry) => entry.startsWith("assistant: ")).length, 1, how);
    assert.deepEqual(transcript.slice(-3), ["</untrusted_context>", "[done: success]", ""], how);
    assert.ok(reader.hasResult(), how);
  }

  test("a tool call and the answer: summary, transcript and result, in one chunk, 7-byte and 1-byte chunks", () => {
    for (const chunkBytes of [Number.POSITIVE_INFINITY, 7, 1]) {
      const reader = read(SHELL_RUN, chunkBytes);
      checkShellRun(reader, `chunks of ${chunkBytes}`);
      const outcome = interpretGeminiExit({ exitCode: 0, signal: null, stderrTail: "" }, reader, "gemini");
      assert.ok(outcome.ok, JSON.stringify(outcome));
      assert.equal(outcome.result.sessionId, reader.live().sessionId);
      assert.match(
        outcome.result.text ?? "",
        /^MOCK-DONE: <untrusted_context>\nOutput: fixture-output\nProcess Group PGID: \d+\n<\/untrusted_context>$/,
      );
      assert.equal(outcome.result.numTurns, 2);
      assert.equal(outcome.result.durationMs, 399);
      assert.equal(outcome.result.costUsd, undefined);
    }
  });

  test("the same whichever byte the output is split at", () => {
    const bytes = Buffer.from(SHELL_RUN, "utf8");
    const wholeReader = read(bytes);
    const whole = transcriptOf(wholeReader);
    const live = wholeReader.live();
    for (let at = 1; at < bytes.length; at += 1) {
      const reader = newReader();
      reader.push(bytes.subarray(0, at));
      reader.push(bytes.subarray(at));
      reader.end();
      assert.equal(transcriptOf(reader), whole, `split at ${at}`);
      assert.deepEqual(reader.live(), live, `split at ${at}`);
    }
  });

  test("an API error: the result's message and status, the session id from init", () => {
    const reader = read(HTTP_400_RUN);
    assert.equal(reader.live().turns, 0);
    assert.match(transcriptOf(reader), /^\[session [0-9a-f-]{36} · model auto\]\n\[done: error\]\n$/);
    const outcome = interpretGeminiExit({ exitCode: 144, signal: null, stderrTail: "" }, reader, "gemini");
    assert.ok(!outcome.ok);
    assert.equal(outcome.code, "AGENT_ERROR");
    assert.equal(outcome.detail, "mock error 400 (API status 400)");
    assert.equal(outcome.result?.apiErrorStatus, 400);
    assert.match(outcome.result?.sessionId ?? "", UUID);
    assert.equal(outcome.result?.durationMs, undefined, "an error's stats say 0 ms");
  });

  test("text before a tool call is not the answer; each message is one entry", () => {
    const reader = read(
      lines(
        init,
        prompt("go"),
        text("Let me "),
        text("look."),
        toolUse("t1", "ls"),
        toolResult("t1", "a.txt"),
        text("Found "),
        text("a.txt."),
        success,
      ),
    );
    assert.equal(reader.live().turns, 2);
    assert.equal(reader.answerText(), "Found a.txt.");
    assert.equal(
      transcriptOf(reader),
      `[session ${SESSION} · model gemini-test]\nassistant: Let me look.\ntool: run_shell_command · ls\ntool result: ` +
        `a.txt\nassistant: Found a.txt.\n[done: success]\n`,
    );
    const outcome = interpretGeminiExit({ exitCode: 0, signal: null, stderrTail: "" }, reader, "gemini");
    assert.deepEqual(outcome, {
      ok: true,
      result: { numTurns: 2, sessionId: SESSION, durationMs: 120, text: "Found a.txt." },
    });
  });

  test("parallel tool calls are one turn; the next response is another", () => {
    const reader = read(
      lines(
        init,
        toolUse("a", "ls"),
        toolUse("b", "pwd"),
        toolResult("a", "x"),
        toolResult("b", "/w"),
        text("done"),
        success,
      ),
    );
    assert.equal(reader.live().turns, 2);
    assert.equal(reader.live().lastTool, "run_shell_command · pwd");
  });

  test("tool errors; refused calls are permission denials", () => {
    const refused = {
      type: "tool_result",
      tool_id: "t1",
      status: "error",
      output: "x",
      error: {
        type: "unhandled_exception",
        message:
          'Tool execution for "Shell" requires user confirmation, which is not supported in non-interactive mode.',
      },
    };
    const denied = {
      type: "tool_result",
      tool_id: "t2",
      status: "error",
      output: "",
      error: { type: "policy_violation", message: "Tool execution denied by policy." },
    };
    const missing = {
      type: "tool_result",
      tool_id: "t3",
      status: "error",
      output: 'Tool "run_shell_command" not found.',
      error: { type: "tool_not_registered", message: 'Tool "run_shell_command" not found.' },
    };
    const reader = read(
      lines(
        init,
        toolUse("t1", "echo a > f"),
        toolUse("t2", "rm -rf x"),
        toolUse("t3", "ls"),
        refused,
        denied,
        missing,
        text("gave up"),
        success,
      ),
    );
    assert.match(
      transcriptOf(reader),
      /tool error: Tool execution for "Shell" requires user confirmation.*\ntool error: Tool execution denied by policy\.\ntool error: Tool "run_shell_command" not found\.\n/,
    );
    const outcome = interpretGeminiExit({ exitCode: 0, signal: null, stderrTail: "" }, reader, "gemini");
    assert.ok(outcome.ok);
    assert.deepEqual(outcome.result.permissionDenials, [
      { tool_name: "run_shell_command", tool_input: { command: "echo a > f" } },
      { tool_name: "run_shell_command", tool_input: { command: "rm -rf x" } },
    ]);
  });

  test("warnings are notes; an error event fails an otherwise successful run, keeping its answer", () => {
    const warned = read(
      lines(
        init,
        { type: "error", severity: "warning", message: "Agent execution blocked: hook" },
        text("ok"),
        success,
      ),
    );
    assert.match(transcriptOf(warned), /\n\[warning: Agent execution blocked: hook\]\nassistant: ok\n/);
    assert.ok(interpretGeminiExit({ exitCode: 0, signal: null, stderrTail: "" }, warned, "gemini").ok);
    const capped = interpret({
      stdout: lines(
        init,
        text("partial"),
        { type: "error", severity: "error", message: "Maximum session turns exceeded" },
        success,
      ),
    });
    assert.ok(!capped.ok);
    assert.equal(capped.code, "AGENT_ERROR");
    assert.equal(capped.detail, "Maximum session turns exceeded");
    assert.equal(capped.result?.text, "partial");
  });

  test("an error result without a message takes the error event's (an invalid stream)", () => {
    const outcome = interpret({
      exitCode: 0,
      stdout: lines(
        init,
        { type: "error", severity: "error", message: "Model stream ended with empty response text." },
        failure(),
      ),
    });
    assert.ok(!outcome.ok);
    assert.equal(outcome.detail, "Model stream ended with empty response text.");
  });

  test("an API error without JSON: the status from the exit code (the CLI exits with it, modulo 256)", () => {
    const message = "[API Error: mock error 429]\nPlease wait and try again later.";
    const outcome = interpret({ exitCode: 173, stdout: lines(init, failure(message)) });
    assert.ok(!outcome.ok);
    assert.equal(outcome.code, "AGENT_ERROR");
    assert.equal(outcome.detail, "[API Error: mock error 429] Please wait and try again later. (API status 429)");
    assert.equal(outcome.result?.apiErrorStatus, 429);
    assert.deepEqual(apiError("[API Error: boom]", 244), { message: "[API Error: boom]", status: 500 });
    assert.deepEqual(apiError("[API Error: boom]", 1), { message: "[API Error: boom]" }, "exit 1 is no status");
    assert.deepEqual(
      apiError("Reached max session turns", 153),
      { message: "Reached max session turns" },
      "not an API error",
    );
    const turnLimit = interpret({
      exitCode: 53,
      stdout: lines(
        init,
        toolUse("t", "ls"),
        toolResult("t", "x"),
        failure("Reached max session turns for this session."),
      ),
    });
    assert.ok(
      !turnLimit.ok &&
        turnLimit.code === "AGENT_ERROR" &&
        turnLimit.detail === "Reached max session turns for this session.",
    );
    assert.equal(turnLimit.result?.apiErrorStatus, undefined);
  });

  test("a line that is not JSON is reported and skipped; the job goes on", () => {
    const malformed: string[] = [];
    const reader = read(
      `${lines(init)}Warning: odd\n{"type":"message", broken\n[1,2]\n${lines(text("fine"), success)}`,
      Number.POSITIVE_INFINITY,
      { onMalformedLine: (line) => malformed.push(line) },
    );
    assert.deepEqual(malformed, ["Warning: odd", '{"type":"message", broken', "[1,2]"]);
    assert.equal(reader.answerText(), "fine");
  });

  test("a line past maxLineBytes stops the agent: OUTPUT_TOO_LARGE wins over the result", () => {
    let stopped = 0;
    const reader = read(lines(init, text("z".repeat(5000)), success), 1000, {
      maxLineBytes: 1024,
      onOverflow: () => (stopped += 1),
    });
    assert.equal(reader.overflow, true);
    assert.equal(stopped, 1);
    const outcome = interpretGeminiExit({ exitCode: null, signal: "SIGTERM", stderrTail: "" }, reader, "gemini");
    assert.ok(!outcome.ok && outcome.code === "OUTPUT_TOO_LARGE");
  });

  test("an answer longer than maxLineBytes in small pieces is held no more than a line", () => {
    let stopped = 0;
    const pieces = Array.from({ length: 40 }, () => text("y".repeat(100)));
    const reader = read(lines(init, ...pieces, success), Number.POSITIVE_INFINITY, {
      maxLineBytes: 2048,
      onOverflow: () => (stopped += 1),
    });
    assert.equal(reader.overflow, true);
    assert.equal(stopped, 1, "told once");
    assert.equal(reader.answerText(), "");
    assert.equal(interpretGeminiExit({ exitCode: 0, signal: null, stderrTail: "" }, reader, "gemini").ok, false);
  });

  test("activity listeners hear each event and can unsubscribe; entries are heard as made", () => {
    const entries: string[] = [];
    const reader = newReader({ onTranscriptEntry: (entry) => entries.push(entry) });
    let heard = 0;
    const stop = reader.onActivity(() => (heard += 1));
    reader.push(Buffer.from(lines(init, prompt("p"))));
    assert.equal(heard, 2);
    stop();
    reader.push(Buffer.from(lines(text("a"), text("b"))));
    assert.equal(heard, 2);
    assert.equal(reader.live().lastText, "ab");
    reader.end();
    assert.deepEqual(
      entries,
      [`[session ${SESSION} · model gemini-test]`, "assistant: ab"],
      "a message is one entry, made when it ends",
    );
  });

  test("the live text is the end of the current message; the transcript entry is clipped, the answer whole", () => {
    const long = "w".repeat(30_000);
    const reader = read(lines(init, text(long.slice(0, 15_000)), text(long.slice(15_000)), success));
    assert.equal(reader.live().lastText, `…${"w".repeat(500)}`);
    assert.equal(transcriptOf(reader).split("\n")[1], `assistant: ${"w".repeat(20_000)}…`);
    assert.equal(reader.answerText(), long);
    reader.forgetResult();
    assert.equal(reader.hasResult(), false);
    assert.equal(reader.answerText(), "");
  });
});

// ---------------------------------------------------------------------------
// Outcomes without a result event
// ---------------------------------------------------------------------------

describe("outcome without a result", () => {
  const RED = (text: string): string => `\u001b[31m${text}\u001b[0m\n`;

  test("--resume of an unknown id is SESSION_NOT_FOUND, with or without other sessions", () => {
    const none = interpret({
      exitCode: 42,
      stderrTail: "Error resuming session: No previous sessions found for this project.\n",
    });
    assert.deepEqual(none, {
      ok: false,
      code: "SESSION_NOT_FOUND",
      detail: "no Gemini CLI session to resume in this cwd: No previous sessions found for this project.",
    });
    const other = interpret({
      exitCode: 42,
      stderrTail: `Warning: 256-color support not detected.\nError resuming session: Invalid session identifier "${SESSION}".\n  Searched for sessions in /h/.gemini/tmp/w/chats.\n`,
    });
    assert.ok(!other.ok && other.code === "SESSION_NOT_FOUND");
    assert.equal(other.detail, `no Gemini CLI session to resume in this cwd: Invalid session identifier "${SESSION}".`);
  });

  test("the CLI's own exit codes are AGENT_ERROR naming what to fix", () => {
    const auth = interpret({ exitCode: 41, stderrTail: "Invalid auth method selected.\n" });
    assert.ok(!auth.ok && auth.code === "AGENT_ERROR");
    assert.match(
      auth.detail,
      /^gemini could not authenticate \(exit 41\); set security\.auth\.selectedType in ~\/\.gemini\/settings\.json .*: Invalid auth method selected\.$/,
    );
    const untrusted = interpret({ exitCode: 55, stderrTail: RED("Gemini CLI is not running in a trusted directory.") });
    assert.ok(!untrusted.ok && untrusted.code === "AGENT_ERROR");
    assert.match(
      untrusted.detail,
      /GEMINI_CLI_TRUST_WORKSPACE=true.*: Gemini CLI is not running in a trusted directory\.$/,
    );
    assert.ok(!untrusted.detail.includes("\u001b"), "no colour escapes");
    const config = interpret({
      exitCode: 52,
      stderrTail: RED(
        "Error in /h/.gemini/settings.json: Expected property name\nPlease fix the configuration file(s) and try again.",
      ),
    });
    assert.ok(
      !config.ok &&
        config.code === "AGENT_ERROR" &&
        config.detail.startsWith(
          "gemini's configuration is invalid (exit 52); fix the settings file it names: Error in /h/.gemini/settings.json",
        ),
    );
    const input = interpret({ exitCode: 42, stderrTail: "No input provided via stdin." });
    assert.ok(
      !input.ok &&
        input.code === "AGENT_ERROR" &&
        input.detail === "gemini refused its input (exit 42): No input provided via stdin.",
    );
    for (const code of [44, 53, 54, 130]) {
      const outcome = interpret({ exitCode: code });
      assert.ok(
        !outcome.ok && outcome.code === "AGENT_ERROR" && outcome.detail.includes(`(exit ${code}`),
        `exit ${code}`,
      );
    }
  });

  test("any other failure is AGENT_EXITED with the stderr tail; exit 0 without a result is BAD_OUTPUT", () => {
    const crashed = interpret({
      exitCode: 1,
      stderrTail: "An unexpected critical error occurred:Error: Directory does not exist: /nope\n",
    });
    assert.deepEqual(crashed, {
      ok: false,
      code: "AGENT_EXITED",
      detail: "gemini exited with code 1: An unexpected critical error occurred:Error: Directory does not exist: /nope",
    });
    assert.deepEqual(interpret({ exitCode: null, signal: "SIGKILL" }), {
      ok: false,
      code: "AGENT_EXITED",
      detail: "gemini was killed by SIGKILL and printed no result",
    });
    assert.deepEqual(interpret({ exitCode: 0 }), {
      ok: false,
      code: "BAD_OUTPUT",
      detail: "gemini exited 0 and printed nothing",
    });
    // What a SIGTERM leaves: the CLI exits 0 after init and the prompt.
    const stopped = interpret({ exitCode: 0, stdout: lines(init, prompt("MOCK:HANG")) });
    assert.ok(
      !stopped.ok &&
        stopped.code === "BAD_OUTPUT" &&
        stopped.detail.startsWith('gemini printed no result event: {"type":"init"'),
    );
  });

  test("spawn errors name CLAUDE_DISPATCH_GEMINI_BIN; a full disk and an earlier server's agent are said so", () => {
    const missing = { exitCode: null, spawnError: { code: "ENOENT", message: "spawn gemini ENOENT" } };
    assert.deepEqual(interpret(missing), {
      ok: false,
      code: "SPAWN_FAILED",
      detail: "gemini not found on PATH; install Gemini CLI (@google/gemini-cli) or set CLAUDE_DISPATCH_GEMINI_BIN",
    });
    assert.deepEqual(interpret(missing, "/opt/gemini"), {
      ok: false,
      code: "SPAWN_FAILED",
      detail: "/opt/gemini not found (CLAUDE_DISPATCH_GEMINI_BIN); check the path",
    });
    const noCwd = interpret({
      exitCode: null,
      spawnError: { code: "ENOENT", message: "spawn gemini ENOENT", missingCwd: true },
    });
    assert.deepEqual(noCwd, { ok: false, code: "SPAWN_FAILED", detail: "could not start gemini: spawn gemini ENOENT" });
    const files = interpret({
      exitCode: null,
      spawnError: { code: "ENOSPC", message: "no space for stdout.jsonl", outputFiles: true },
    });
    assert.deepEqual(files, { ok: false, code: "STATE_ERROR", detail: "no space for stdout.jsonl" });
    const full = interpret({ exitCode: 1, disk: { dir: "/state/jobs/j1", freeBytes: DISK_FULL_BYTES - 1 } });
    assert.ok(!full.ok && full.code === "STATE_ERROR" && full.detail.includes("/state/jobs/j1"));
    const roomy = interpret({ exitCode: 1, disk: { dir: "/state/jobs/j1", freeBytes: DISK_FULL_BYTES * 10 } });
    assert.ok(!roomy.ok && roomy.code === "AGENT_EXITED");
    const lost = interpret({ exitCode: null, unobserved: true, stderrTail: "bye" });
    assert.ok(!lost.ok && lost.code === "AGENT_LOST" && lost.detail.endsWith("its stderr ends: bye"));
  });
});

// ---------------------------------------------------------------------------
// The real CLI
// ---------------------------------------------------------------------------

const PINNED_GEMINI = fileURLToPath(new URL("../node_modules/.bin/gemini", import.meta.url));
const geminiBin = process.env.CLAUDE_DISPATCH_GEMINI_BIN || PINNED_GEMINI;

/** The CLI's version, or undefined after failing (CI) or announcing the skip. */
function realGeminiVersion(): string | undefined {
  const found = !path.isAbsolute(geminiBin) || existsSync(geminiBin);
  const probe = found
    ? spawnSync(geminiBin, ["--version"], {
        encoding: "utf8",
        timeout: 30_000,
        env: minimalEnvironment({ GEMINI_CLI_NO_RELAUNCH: "true" }),
      })
    : undefined;
  if (probe?.status === 0) return probe.stdout.trim();
  const why = `no working Gemini CLI at ${geminiBin}`;
  if (process.env.CI === "true") test("the real Gemini CLI is installed", () => assert.fail(`${why}; run npm ci`));
  else
    process.stderr.write(
      `\n!!! SKIPPING the real Gemini CLI tests: ${why}. Run \`npm ci\` to install the pinned CLI.\n\n`,
    );
  return undefined;
}

/**
 * What Gemini CLI needs in $HOME to talk to an API key's endpoint headless,
 * and nothing to talk to besides: no usage statistics, telemetry or update
 * checks, and one attempt per request (it retries 429 and 5xx ten times, from 5 s).
 */
const GEMINI_TEST_SETTINGS = {
  security: { auth: { selectedType: "gemini-api-key" } },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false, maxAttempts: 1 },
};

interface MockRequest {
  model: string;
  stream: boolean;
  contentCount: number;
  tools: string[];
  prompt: string;
  prompts: string[];
  modelTexts: string[];
  toolResults: string[];
  apiKey: string | null;
}
interface Mock {
  url: string;
  requests: MockRequest[];
  close(): Promise<void>;
}

interface Run {
  outcome: AgentOutcome;
  reader: GeminiReader;
  args: string[];
  stderr: string;
  ms: number;
}

const version = realGeminiVersion();

describe(`real Gemini CLI (${version ?? "missing"}) against a mock Gemini API`, { skip: !version }, () => {
  const runtime = geminiRuntime(geminiBin);
  let mock: Mock;
  let scratch: string;
  let home: string;
  let tmp: string;

  before(async () => {
    mock = (await startMockGemini()) as Mock;
    scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-gemini-"));
    home = path.join(scratch, "home");
    tmp = path.join(scratch, "tmp");
    for (const dir of [path.join(home, ".gemini"), tmp]) mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(home, ".gemini", "settings.json"), JSON.stringify(GEMINI_TEST_SETTINGS));
  });

  after(async () => {
    await mock.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  function project(): string {
    return mkdtempSync(path.join(scratch, "project-"));
  }

  /** The model requests of the latest run (the CLI also asks a router model, without streaming). */
  const lastModelRequest = (): MockRequest | undefined => mock.requests.filter((request) => request.stream).at(-1);

  /**
   * Runs the CLI as the launcher would: the runtime's argv and environment,
   * the prompt on stdin, stdout through its reader, the end through its
   * outcome. The environment is built from nothing but what it names.
   */
  function run(spec: AgentSpec, env: Record<string, string> = { GEMINI_CLI_TRUST_WORKSPACE: "true" }): Promise<Run> {
    return runOnce(spec, env).then((first) => {
      if (!first.hung) return first;
      // The CLI (0.61.0) has been seen, once in a full clean-clone run, not to end in 20 s a run that takes 3 s,
      // printing no result: a hang of its own, with nothing of ours in between. Once more, said loudly; twice fails.
      process.stderr.write(`\n!!! gemini did not end in 20 s (${spec.prompt.slice(0, 60)}); running it again\n`);
      return runOnce(spec, env);
    });
  }

  function runOnce(spec: AgentSpec, env: Record<string, string>): Promise<Run & { hung: boolean }> {
    const { command, args } = runtime.invocation(spec);
    const base = minimalEnvironment({
      HOME: home,
      TMPDIR: tmp,
      GOOGLE_GEMINI_BASE_URL: mock.url,
      GEMINI_API_KEY: "dummy",
      ...env,
    });
    const childEnv = runtime.environment(base, { CLAUDE_DISPATCH_DEPTH: "1" });
    const reader = runtime.createReader({
      maxLineBytes: 1024 * 1024,
      transcriptChars: 100_000,
      onOverflow: () => undefined,
    });
    const startedAt = Date.now();
    const child = spawn(command, args, { cwd: spec.cwd, env: childEnv, stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    let guarded = false;
    child.stdout.on("data", (chunk: Buffer) => reader.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.end(spec.prompt);
    const timer = setTimeout(() => {
      guarded = true;
      child.kill("SIGKILL");
    }, 20_000);
    return new Promise((resolve) =>
      child.once("close", (exitCode, signal) => {
        clearTimeout(timer);
        reader.end();
        const exit: ChildExit = { exitCode, signal, stderrTail: stderr.slice(-8192) };
        resolve({
          outcome: runtime.outcome(exit, reader, undefined),
          reader,
          args,
          stderr,
          ms: Date.now() - startedAt,
          hung: guarded,
        });
      }),
    );
  }

  test("a run: its answer and session id, the prompt from stdin only", async () => {
    const { outcome, reader, args } = await run({ prompt: "say hello", cwd: project() });
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(outcome.result.text, "MOCK-REPLY: say hello");
    assert.match(outcome.result.sessionId ?? "", UUID);
    assert.equal(outcome.result.numTurns, 1);
    assert.equal(outcome.result.costUsd, undefined);
    assert.ok((outcome.result.durationMs ?? 0) > 0);
    assert.equal(reader.live().sessionId, outcome.result.sessionId);
    assert.ok(!args.some((arg) => arg.includes("say hello")));
    const request = lastModelRequest();
    assert.equal(request?.prompt, "say hello");
    assert.deepEqual(request?.prompts, ["say hello"]);
    assert.equal(request?.apiKey, "dummy");
  });

  test("resume: the same session, and the mock sees the earlier conversation", async () => {
    const cwd = project();
    const first = await run({ prompt: "remember the word PLUM", cwd, options: { model: "mock-model" } });
    assert.ok(first.outcome.ok, JSON.stringify(first.outcome));
    assert.equal(lastModelRequest()?.model, "mock-model");
    const sessionId = first.outcome.result.sessionId;
    assert.ok(sessionId !== undefined);
    const second = await run({
      prompt: "what was the word?",
      cwd,
      resumeSessionId: sessionId,
      options: { model: "mock-model" },
    });
    assert.ok(second.outcome.ok, JSON.stringify(second.outcome));
    assert.ok(second.args.includes(`--resume=${sessionId}`));
    assert.equal(second.outcome.result.sessionId, sessionId);
    assert.equal(second.outcome.result.text, "MOCK-REPLY: what was the word?");
    const request = lastModelRequest();
    assert.deepEqual(request?.prompts, ["remember the word PLUM", "what was the word?"]);
    assert.deepEqual(request?.modelTexts, ["MOCK-REPLY: remember the word PLUM"]);
    assert.equal(request?.contentCount, 3);
  });

  test("--resume of an unknown id is SESSION_NOT_FOUND", async () => {
    const { outcome } = await run({ prompt: "hello again", cwd: project(), resumeSessionId: SESSION });
    assert.ok(!outcome.ok);
    assert.equal(outcome.code, "SESSION_NOT_FOUND");
    assert.match(outcome.detail, /No previous sessions found for this project/);
  });

  test("yolo: a shell command writes in cwd, and the transcript shows it", async () => {
    const cwd = project();
    const { outcome, reader } = await run({
      prompt: "Write a file.\nMOCK:BASH echo written > out.txt",
      cwd,
      options: { permissionMode: "yolo" },
    });
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(readFileSync(path.join(cwd, "out.txt"), "utf8"), "written\n");
    assert.match(outcome.result.text ?? "", /^MOCK-DONE: <untrusted_context>\nOutput: \(empty\)/);
    assert.equal(outcome.result.numTurns, 2);
    assert.equal(reader.live().lastTool, "run_shell_command · echo written > out.txt");
    assert.match(
      transcriptOf(reader),
      /\ntool: run_shell_command · echo written > out\.txt\ntool result: \nassistant: MOCK-DONE: /,
    );
    assert.ok(lastModelRequest()?.tools.includes("run_shell_command"));
  });

  test("default mode: the shell tool is not offered, the call fails, nothing is written", async () => {
    const cwd = project();
    const { outcome, reader } = await run({
      prompt: "MOCK:BASH echo written > out.txt",
      cwd,
      options: { permissionMode: "default" },
    });
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(existsSync(path.join(cwd, "out.txt")), false);
    assert.match(transcriptOf(reader), /tool error: Tool "run_shell_command" not found/);
    assert.ok(!lastModelRequest()?.tools.includes("run_shell_command"));
  });

  test(
    "allowed_tools offers the shell in default mode; a redirection still needs a person, so " + "it is a denial",
    async () => {
      const cwd = project();
      const allowed = await run({
        prompt: "MOCK:BASH echo allowed",
        cwd,
        options: { allowedTools: ["run_shell_command"] },
      });
      assert.ok(allowed.outcome.ok, JSON.stringify(allowed.outcome));
      assert.match(transcriptOf(allowed.reader), /\ntool result: allowed\n/);
      const asked = await run({
        prompt: "MOCK:BASH echo written > out.txt",
        cwd,
        options: { allowedTools: ["run_shell_command"] },
      });
      assert.ok(asked.outcome.ok, JSON.stringify(asked.outcome));
      assert.equal(existsSync(path.join(cwd, "out.txt")), false);
      assert.deepEqual(asked.outcome.result.permissionDenials, [
        {
          tool_name: "run_shell_command",
          tool_input: { command: "echo written > out.txt", description: "mock command" },
        },
      ]);
    },
  );

  test("an API error reaches the outcome with its message and status", async () => {
    const { outcome } = await run({ prompt: "MOCK:HTTP 401", cwd: project() });
    assert.ok(!outcome.ok);
    assert.equal(outcome.code, "AGENT_ERROR");
    assert.equal(outcome.detail, "mock error 401 (API status 401)");
    assert.equal(outcome.result?.apiErrorStatus, 401);
    assert.match(outcome.result?.sessionId ?? "", UUID);
    const quota = await run({ prompt: "MOCK:HTTP 429", cwd: project() });
    assert.ok(!quota.outcome.ok && quota.outcome.code === "AGENT_ERROR");
    assert.match(quota.outcome.detail, /mock error 429.*\(API status 429\)$/);
    assert.equal(quota.outcome.result?.apiErrorStatus, 429);
  });

  test("an untrusted cwd is AGENT_ERROR naming GEMINI_CLI_TRUST_WORKSPACE", async () => {
    const { outcome } = await run({ prompt: "hello", cwd: project() }, {});
    assert.ok(!outcome.ok);
    assert.equal(outcome.code, "AGENT_ERROR");
    assert.match(outcome.detail, /^gemini does not trust this cwd \(exit 55\); set GEMINI_CLI_TRUST_WORKSPACE=true/);
  });
});
