/**
 * OpenAI Codex as a runtime: its argv, environment, `exec --json` reader and
 * outcome mapping against recorded 0.171.0 output, then the real CLI driven
 * through codexRuntime() against a Responses API mock on 127.0.0.1
 * (test/fixtures/mock-openai.mjs).
 *
 * The real CLI is the pinned devDependency, or CLAUDE_DISPATCH_CODEX_BIN when
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
import type { AgentOptions } from "../src/agent/options.js";
import type { StateDisk } from "../src/agent/runtime.js";
import type { AgentOutcome, AgentSpec } from "../src/agent/types.js";
import { DispatchError } from "../src/core/errors.js";
import { DISK_FULL_BYTES } from "../src/agent/ending.js";
import {
  CodexReader,
  codexArgs,
  codexEnvironment,
  codexRuntime,
  interpretCodexExit,
  shellScript,
} from "../src/runtimes/codex/index.js";
import { minimalEnvironment } from "./server-process.js";
// @ts-expect-error: a plain ESM fixture without type declarations
import { codexMockConfig, startMockOpenAI } from "./fixtures/mock-openai.mjs";

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/codex/${name}`, import.meta.url), "utf8");
const SHELL_RUN = fixture("exec-shell-0.171.0.jsonl");
const HTTP_401_RUN = fixture("exec-http-401-0.171.0.jsonl");
const HTTP_500_RUN = fixture("exec-http-500-0.171.0.jsonl");
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function newReader(
  options: {
    maxLineBytes?: number;
    onOverflow?: () => void;
    onMalformedLine?: (line: string) => void;
    onTranscriptEntry?: (entry: string) => void;
  } = {},
): CodexReader {
  return new CodexReader({
    maxLineBytes: 1024 * 1024,
    transcriptChars: 100_000,
    onOverflow: () => undefined,
    ...options,
  });
}

function read(stdout: string | Buffer, chunkBytes = Number.POSITIVE_INFINITY): CodexReader {
  const reader = newReader();
  const bytes = typeof stdout === "string" ? Buffer.from(stdout, "utf8") : stdout;
  for (let at = 0; at < bytes.length; at += Math.min(chunkBytes, bytes.length))
    reader.push(bytes.subarray(at, at + chunkBytes));
  reader.end();
  return reader;
}

/** How an agent that printed `stdout` and ended as `fields` says is read. */
function interpret(
  fields: Partial<ChildExit> & { stdout?: string; disk?: StateDisk } = {},
  bin = "codex",
): AgentOutcome {
  const { stdout = "", disk, ...exitFields } = fields;
  return interpretCodexExit({ exitCode: 0, signal: null, stderrTail: "", ...exitFields }, read(stdout), bin, disk);
}

/**
 * AgentOptions types permission_mode in Claude Code's words; Codex's own are passed as they would be once validated.
 */
const codexMode = (mode: string): AgentOptions["permissionMode"] => mode as AgentOptions["permissionMode"];

const lines = (...events: unknown[]): string => events.map((event) => `${JSON.stringify(event)}\n`).join("");
const THREAD = "01a232c5-0000-7000-8000-000000000001";
const started = { type: "thread.started", thread_id: THREAD };
const message = (text: string, id = "item_9") => ({
  type: "item.completed",
  item: { id, type: "agent_message", text },
});
const completed = { type: "turn.completed", usage: { input_tokens: 1, cached_input_tokens: 0, output_tokens: 1 } };
const failed = (text: string) => [
  { type: "error", message: text },
  { type: "turn.failed", error: { message: text } },
];

// ---------------------------------------------------------------------------
// argv and environment
// ---------------------------------------------------------------------------

describe("argv", () => {
  const id = "01a232c1-a8d6-7b11-b62b-748b92dc4d17";

  test("exec with JSON events, outside git too, the prompt read from stdin ('-')", () => {
    assert.deepEqual(codexArgs({}), ["exec", "--json", "--skip-git-repo-check", "-"]);
  });

  test("resume: the options stay before `resume`, which takes the thread id, then '-'", () => {
    assert.deepEqual(
      codexArgs({ resumeSessionId: id, options: { permissionMode: codexMode("workspace-write"), model: "gpt-5" } }),
      ["exec", "--json", "--skip-git-repo-check", "--sandbox=workspace-write", "-m=gpt-5", "resume", id, "-"],
    );
  });

  test("each permission mode is one flag; no mode leaves Codex's own default", () => {
    const flagsOf = (mode: string): string[] =>
      codexArgs({ options: { permissionMode: codexMode(mode) } }).slice(3, -1);
    assert.deepEqual(flagsOf("read-only"), ["--sandbox=read-only"]);
    assert.deepEqual(flagsOf("workspace-write"), ["--sandbox=workspace-write"]);
    assert.deepEqual(flagsOf("danger-full-access"), ["--sandbox=danger-full-access"]);
    assert.deepEqual(flagsOf("dangerously-bypass-approvals-and-sandbox"), [
      "--dangerously-bypass-approvals-and-sandbox",
    ]);
    assert.ok(!codexArgs({}).some((arg) => arg.startsWith("--sandbox") || arg.startsWith("--dangerously")));
  });

  test("a model that looks like a flag stays one argv element", () => {
    assert.deepEqual(codexArgs({ options: { model: "--dangerously-bypass-approvals-and-sandbox" } }).slice(3), [
      "-m=--dangerously-bypass-approvals-and-sandbox",
      "-",
    ]);
  });

  test("the prompt never reaches argv, and the approver (Claude Code's) is ignored", () => {
    const spec: AgentSpec = {
      prompt: "MOCK secret prompt",
      cwd: "/work",
      approver: { command: "node", args: ["approver.js"], waitMs: 1000 },
    };
    const { command, args } = codexRuntime("/opt/codex").invocation(spec);
    assert.equal(command, "/opt/codex");
    assert.deepEqual(args, ["exec", "--json", "--skip-git-repo-check", "-"]);
    assert.ok(!args.some((arg) => arg.includes("secret")));
  });

  test("an option or mode Codex has no flag for is refused, never dropped", () => {
    const refused = (options: NonNullable<AgentSpec["options"]>): DispatchError => {
      try {
        codexArgs({ options });
      } catch (error) {
        assert.ok(error instanceof DispatchError);
        return error;
      }
      assert.fail("expected a refusal");
    };
    assert.equal(refused({ maxTurns: 3 }).code, "INVALID_ARGUMENT");
    assert.match(refused({ appendSystemPrompt: "x" }).message, /codex has no flag for appendSystemPrompt/);
    assert.deepEqual(
      codexArgs({ options: { addDirs: ["/a", "/b c"] }, resumeSessionId: "01a232d5-c4cf-7db0-8e60-3235c23cf001" }),
      [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--add-dir=/a",
        "--add-dir=/b c",
        "resume",
        "01a232d5-c4cf-7db0-8e60-3235c23cf001",
        "-",
      ],
    );
    assert.match(
      refused({ permissionMode: "acceptEdits" }).message,
      /no permission mode "acceptEdits"; use one of read-only, /,
    );
    assert.doesNotThrow(() => codexArgs({ options: { maxTurns: undefined } }));
  });
});

test("the runtime names itself, its options and its modes; the dangerous ones are among them", () => {
  const runtime = codexRuntime("codex");
  assert.equal(runtime.name, "codex");
  assert.deepEqual(runtime.supportedOptions, ["model", "permissionMode", "addDirs"]);
  assert.deepEqual(runtime.permissionModes, [
    "read-only",
    "workspace-write",
    "danger-full-access",
    "dangerously-bypass-approvals-and-sandbox",
  ]);
  assert.deepEqual(runtime.dangerousModes, ["danger-full-access", "dangerously-bypass-approvals-and-sandbox"]);
  assert.ok(runtime.dangerousModes.every((mode) => runtime.permissionModes.includes(mode)));
});

test("environment: the server's own plus what it adds, which wins", () => {
  const base = { PATH: "/bin", HOME: "/h", CODEX_HOME: "/h/.codex", OPENAI_API_KEY: "k", CLAUDE_DISPATCH_DEPTH: "1" };
  assert.deepEqual(codexEnvironment(base, { CLAUDE_DISPATCH_DEPTH: "2" }), { ...base, CLAUDE_DISPATCH_DEPTH: "2" });
  assert.equal(base.CLAUDE_DISPATCH_DEPTH, "1", "the base is not changed");
});

test("shellScript unwraps the shell line Codex reports, in either quoting", () => {
  assert.equal(shellScript("/bin/bash -lc 'echo hi > out.txt && cat out.txt'"), "echo hi > out.txt && cat out.txt");
  assert.equal(shellScript(`/bin/bash -lc "echo \\"it's here\\"; exit 3"`), `echo "it's here"; exit 3`);
  assert.equal(shellScript(`/bin/bash -lc "printf \\"a\\\\n\\" > n.txt"`), `printf "a\\n" > n.txt`);
  assert.equal(shellScript("python3 -c 'print(1)'"), "python3 -c 'print(1)'");
  assert.equal(shellScript("/bin/bash -lc 'a' 'b'"), "/bin/bash -lc 'a' 'b'");
});

// ---------------------------------------------------------------------------
// The reader, on recorded output
// ---------------------------------------------------------------------------

const SHELL_TRANSCRIPT = [
  "[session 01a232c5-4487-7dd2-8a63-c6f5996f205c]",
  "[warning: Model metadata for `mock-model` not found. Defaulting to fallback metadata; this can degrade " +
    "performance and cause issues.]",
  'tool: shell · printf "hello from codex\\n" > note.txt && cat note.txt',
  "tool result: hello from codex",
  "assistant: MOCK-DONE: hello from codex",
  "[done: success]",
  "",
].join("\n");

describe("the reader on a recorded 0.171.0 run with a shell command", () => {
  test("summary, transcript and result", () => {
    const reader = read(SHELL_RUN);
    assert.deepEqual(reader.live(), {
      sessionId: "01a232c5-4487-7dd2-8a63-c6f5996f205c",
      turns: 1,
      lastTool: 'shell · printf "hello from codex\\n" > note.txt && cat note.txt',
      lastText: "MOCK-DONE: hello from codex",
      lastActivity: "text",
      events: 7,
    });
    assert.equal(reader.transcript.page(0, 100_000).text, SHELL_TRANSCRIPT);
    assert.ok(reader.hasResult());
    assert.deepEqual(interpretCodexExit({ exitCode: 0, signal: null, stderrTail: "" }, reader, "codex"), {
      ok: true,
      result: { sessionId: "01a232c5-4487-7dd2-8a63-c6f5996f205c", numTurns: 1, text: "MOCK-DONE: hello from codex" },
    });
  });

  test("the same whatever the chunking: split at every byte boundary, and one byte at a time", () => {
    const whole = read(SHELL_RUN);
    for (const text of [SHELL_RUN, HTTP_500_RUN]) {
      const bytes = Buffer.from(text, "utf8");
      const expected = read(bytes);
      for (let cut = 0; cut <= bytes.length; cut += 1) {
        const reader = newReader();
        reader.push(bytes.subarray(0, cut));
        reader.push(bytes.subarray(cut));
        reader.end();
        assert.deepEqual(reader.live(), expected.live(), `split at byte ${cut}`);
        assert.equal(
          reader.transcript.page(0, 100_000).text,
          expected.transcript.page(0, 100_000).text,
          `split at byte ${cut}`,
        );
        assert.deepEqual(reader.turnEnd(), expected.turnEnd(), `split at byte ${cut}`);
      }
      const byteAtATime = read(bytes, 1);
      assert.equal(byteAtATime.transcript.page(0, 100_000).text, expected.transcript.page(0, 100_000).text);
    }
    assert.equal(whole.transcript.page(0, 100_000).text, SHELL_TRANSCRIPT);
    assert.match(
      read(HTTP_500_RUN, 1).transcript.page(0, 100_000).text,
      /\[error: We’re currently experiencing high demand/,
    );
  });

  test("without the trailing newline the last event still counts", () => {
    const reader = read(SHELL_RUN.trimEnd());
    assert.ok(reader.hasResult());
    assert.equal(reader.live().events, 7);
  });

  test("each transcript entry is heard as it is made", () => {
    const heard: string[] = [];
    const reader = newReader({ onTranscriptEntry: (entry) => heard.push(entry) });
    reader.push(Buffer.from(SHELL_RUN));
    reader.end();
    assert.deepEqual(heard, SHELL_TRANSCRIPT.trimEnd().split("\n"));
  });

  test("activity listeners hear each event and can unsubscribe", () => {
    const reader = newReader();
    let heard = 0;
    const stop = reader.onActivity(() => (heard += 1));
    const [first, second, third] = SHELL_RUN.split("\n");
    reader.push(Buffer.from(`${first}\n${second}\n`));
    assert.equal(heard, 2);
    stop();
    reader.push(Buffer.from(`${third}\n`));
    assert.equal(heard, 2);
  });

  test("forgetResult lets go of the answer; that the turn ended is still known", () => {
    const reader = read(SHELL_RUN);
    reader.forgetResult();
    assert.ok(reader.hasResult());
    assert.deepEqual(reader.turnEnd(), { kind: "completed", text: undefined });
  });
});

describe("the reader on other events", () => {
  test("a line that is not a JSON object is reported and skipped; the run goes on", () => {
    const malformed: string[] = [];
    const reader = newReader({ onMalformedLine: (line) => malformed.push(line) });
    reader.push(
      Buffer.from(
        `Reading prompt from stdin...\n{"type":"turn.started", ` +
          `broken\n[1,2]\n${lines(started, { type: "turn.started" }, message("ok"), completed)}`,
      ),
    );
    reader.end();
    assert.deepEqual(malformed, ["Reading prompt from stdin...", '{"type":"turn.started", broken', "[1,2]"]);
    const outcome = interpretCodexExit({ exitCode: 0, signal: null, stderrTail: "" }, reader, "codex");
    assert.ok(outcome.ok && outcome.result.text === "ok");
  });

  test("a line over maxLineBytes is overflow, reported once, and wins over the rest", () => {
    let overflows = 0;
    const reader = newReader({ maxLineBytes: 1024, onOverflow: () => (overflows += 1) });
    const long = lines(message("z".repeat(5000)));
    for (let at = 0; at < long.length; at += 1000) reader.push(Buffer.from(long.slice(at, at + 1000)));
    reader.push(Buffer.from(lines(completed)));
    reader.end();
    assert.equal(reader.overflow, true);
    assert.equal(overflows, 1);
    const outcome = interpretCodexExit({ exitCode: null, signal: "SIGTERM", stderrTail: "" }, reader, "codex");
    assert.ok(!outcome.ok && outcome.code === "OUTPUT_TOO_LARGE");
  });

  test("tools: a failed command, an MCP call, a patch, a web search; each shown once", () => {
    const command = {
      id: "c1",
      type: "command_execution",
      command: "/bin/bash -lc 'exit 3'",
      aggregated_output: "",
      exit_code: null,
      status: "in_progress",
    };
    const reader = read(
      lines(
        { type: "turn.started" },
        { type: "item.started", item: command },
        { type: "item.completed", item: { ...command, aggregated_output: "boom\n", exit_code: 3, status: "failed" } },
        {
          type: "item.completed",
          item: {
            id: "c2",
            type: "command_execution",
            command: "ls",
            aggregated_output: "",
            exit_code: 0,
            status: "completed",
          },
        },
        {
          type: "item.started",
          item: {
            id: "m1",
            type: "mcp_tool_call",
            server: "docs",
            tool: "search",
            arguments: { query: "sandbox" },
            status: "in_progress",
          },
        },
        {
          type: "item.completed",
          item: {
            id: "m1",
            type: "mcp_tool_call",
            server: "docs",
            tool: "search",
            arguments: { query: "sandbox" },
            result: { content: [{ type: "text", text: "found" }] },
            status: "completed",
          },
        },
        {
          type: "item.completed",
          item: {
            id: "m2",
            type: "mcp_tool_call",
            server: "docs",
            tool: "fetch",
            arguments: {},
            error: { message: "no such page" },
            status: "failed",
          },
        },
        {
          type: "item.completed",
          item: {
            id: "p1",
            type: "file_change",
            changes: [
              { path: "src/a.ts", kind: "update" },
              { path: "b.ts", kind: "add" },
            ],
            status: "completed",
          },
        },
        { type: "item.started", item: { id: "w1", type: "web_search", query: "codex exec" } },
        { type: "item.completed", item: { id: "w1", type: "web_search", query: "codex exec" } },
        { type: "item.completed", item: { id: "r1", type: "reasoning", text: "thinking it over" } },
        { type: "item.updated", item: { id: "t1", type: "todo_list", items: [{ text: "a", completed: false }] } },
        message("all done"),
        completed,
      ),
    );
    assert.equal(
      reader.transcript.page(0, 100_000).text,
      [
        "tool: shell · exit 3",
        "tool error: exit 3: boom",
        "tool: shell · ls",
        "tool result: ",
        "tool: docs.search · sandbox",
        "tool result: found",
        "tool: docs.fetch",
        "tool error: no such page",
        "tool: apply_patch · update src/a.ts, add b.ts",
        "tool result: applied",
        "tool: web_search · codex exec",
        "assistant: all done",
        "[done: success]",
        "",
      ].join("\n"),
    );
    assert.equal(reader.live().lastTool, "web_search · codex exec");
    assert.equal(reader.live().lastActivity, "text");
  });

  test("the answer is the last agent message of the last turn; a failed turn before it does not matter", () => {
    const reader = read(
      lines(
        started,
        { type: "turn.started" },
        ...failed("first failed"),
        { type: "turn.started" },
        message("draft", "a"),
        message("final", "b"),
        completed,
      ),
    );
    assert.equal(reader.live().turns, 2);
    assert.deepEqual(interpretCodexExit({ exitCode: 0, signal: null, stderrTail: "" }, reader, "codex"), {
      ok: true,
      result: { sessionId: THREAD, numTurns: 1, text: "final" },
    });
  });
});

// ---------------------------------------------------------------------------
// Outcomes
// ---------------------------------------------------------------------------

describe("outcomes", () => {
  test("a recorded 401: AGENT_ERROR with Codex's message and the status it names", () => {
    const outcome = interpret({ exitCode: 1, stdout: HTTP_401_RUN });
    assert.deepEqual(outcome, {
      ok: false,
      code: "AGENT_ERROR",
      detail: "unexpected status 401 Unauthorized: invalid api key (mock), url: http://127.0.0.1:43953/v1/responses",
      result: { sessionId: "01a232c5-470a-7f51-a31c-2f7bd3224ad9", apiErrorStatus: 401 },
    });
    assert.match(
      read(HTTP_401_RUN).transcript.page(0, 10_000).text,
      /\[error: unexpected status 401 [^\n]*\]\n\[done: failed, error\]\n$/,
    );
  });

  test("a recorded 500 names no status, and none is guessed", () => {
    const outcome = interpret({ exitCode: 1, stdout: HTTP_500_RUN });
    assert.ok(!outcome.ok && outcome.code === "AGENT_ERROR");
    assert.equal(outcome.detail, "We’re currently experiencing high demand, which may cause temporary errors.");
    assert.deepEqual(outcome.result, { sessionId: "01a232c5-b552-7123-b292-2d1dee65cf83" });
  });

  test("retries exhausted: the last status is read", () => {
    const outcome = interpret({
      exitCode: 1,
      stdout: lines(
        started,
        { type: "turn.started" },
        ...failed("exceeded retry limit, last status: 429 Too Many Requests"),
      ),
    });
    assert.ok(!outcome.ok && outcome.result?.apiErrorStatus === 429);
  });

  test("an error event with no turn.failed after it is still the reason, unless the agent was killed", () => {
    const stdout = lines(
      started,
      { type: "turn.started" },
      { type: "error", message: "Missing environment variable: `OPENAI_API_KEY`." },
    );
    const outcome = interpret({ exitCode: 1, stdout });
    assert.ok(
      !outcome.ok &&
        outcome.code === "AGENT_ERROR" &&
        outcome.detail === "Missing environment variable: `OPENAI_API_KEY`.",
    );
    const killed = interpret({ exitCode: null, signal: "SIGTERM", stdout });
    assert.deepEqual(killed, {
      ok: false,
      code: "AGENT_EXITED",
      detail: "codex was killed by SIGTERM before finishing its turn",
    });
  });

  test("a completed turn is the answer even if the exit code is not 0", () => {
    const outcome = interpret({
      exitCode: 1,
      stdout: lines(started, { type: "turn.started" }, message("answer"), completed),
    });
    assert.deepEqual(outcome, { ok: true, result: { sessionId: THREAD, numTurns: 1, text: "answer" } });
  });

  test("a completed turn without a message is BAD_OUTPUT, with the thread id kept", () => {
    const outcome = interpret({ stdout: lines(started, { type: "turn.started" }, completed) });
    assert.deepEqual(outcome, {
      ok: false,
      code: "BAD_OUTPUT",
      detail: "codex completed its turn without a final message",
      result: { sessionId: THREAD, numTurns: 1 },
    });
  });

  test("a recorded resume of an unknown thread: SESSION_NOT_FOUND from stderr", () => {
    const outcome = interpret({ exitCode: 1, stderrTail: fixture("resume-unknown-0.171.0.stderr.txt") });
    assert.deepEqual(outcome, {
      ok: false,
      code: "SESSION_NOT_FOUND",
      detail: "No Codex conversation found with session ID 01a232c1-0000-7000-8000-000000000000",
    });
  });

  test("a non-zero exit with nothing printed reports the code or signal and the stderr tail", () => {
    const usage =
      "error: invalid value 'bogus' for '--sandbox <SANDBOX_MODE>'\n  [possible values: read-only, workspace-write, " +
      "danger-full-access]";
    const coded = interpret({ exitCode: 2, stderrTail: usage });
    assert.ok(
      !coded.ok &&
        coded.code === "AGENT_EXITED" &&
        coded.detail.startsWith("codex exited with code 2: error: invalid value 'bogus'"),
    );
    const signalled = interpret({ exitCode: null, signal: "SIGKILL" });
    assert.deepEqual(signalled, {
      ok: false,
      code: "AGENT_EXITED",
      detail: "codex was killed by SIGKILL before finishing its turn",
    });
  });

  test("exit 0 without a finished turn is BAD_OUTPUT, showing the start of what was printed", () => {
    const partial = interpret({ stdout: lines(started, { type: "turn.started" }) });
    assert.ok(!partial.ok && partial.code === "BAD_OUTPUT" && partial.detail.includes("thread.started"));
    const garbage = interpret({ stdout: `Please log in${"!".repeat(1000)}` });
    assert.ok(
      !garbage.ok &&
        garbage.code === "BAD_OUTPUT" &&
        garbage.detail.length < 400 &&
        garbage.detail.includes("Please log in"),
    );
    assert.deepEqual(interpret(), { ok: false, code: "BAD_OUTPUT", detail: "codex exited 0 and printed nothing" });
  });

  test("an attached agent that ended unfinished is AGENT_LOST; a finished one is its answer", () => {
    const lost = interpret({ unobserved: true, exitCode: null, stdout: lines(started, { type: "turn.started" }) });
    assert.ok(!lost.ok && lost.code === "AGENT_LOST");
    assert.ok(
      interpret({
        unobserved: true,
        exitCode: null,
        stdout: lines(started, { type: "turn.started" }, message("done"), completed),
      }).ok,
    );
  });

  test("no turn ended and a full disk: STATE_ERROR; a disk merely low is not blamed", () => {
    const stdout = lines(started, { type: "turn.started" });
    const full = interpret({ exitCode: 1, stdout, disk: { dir: "/state/jobs/x", freeBytes: 4096 } });
    assert.ok(!full.ok && full.code === "STATE_ERROR" && full.detail.includes("4096 bytes free in /state/jobs/x"));
    const low = interpret({ exitCode: 1, stdout, disk: { dir: "/state", freeBytes: DISK_FULL_BYTES * 10 } });
    assert.ok(!low.ok && low.code === "AGENT_EXITED");
  });

  test("spawn failures: ENOENT names CLAUDE_DISPATCH_CODEX_BIN, others give the system message", () => {
    const missing = interpret({ exitCode: null, spawnError: { code: "ENOENT", message: "spawn codex ENOENT" } });
    assert.deepEqual(missing, {
      ok: false,
      code: "SPAWN_FAILED",
      detail: "codex not found on PATH; install Codex (@openai/codex) or set CLAUDE_DISPATCH_CODEX_BIN",
    });
    const custom = interpret({ exitCode: null, spawnError: { code: "ENOENT", message: "x" } }, "/opt/codex");
    assert.ok(!custom.ok && custom.detail === "/opt/codex not found (CLAUDE_DISPATCH_CODEX_BIN); check the path");
    const noCwd = interpret({
      exitCode: null,
      spawnError: { code: "ENOENT", message: "spawn codex ENOENT", missingCwd: true },
    });
    assert.ok(
      !noCwd.ok && noCwd.code === "SPAWN_FAILED" && noCwd.detail === "could not start codex: spawn codex ENOENT",
    );
    const files = interpret({
      exitCode: null,
      spawnError: { code: "ENOSPC", message: "no space for stdout.jsonl", outputFiles: true },
    });
    assert.deepEqual(files, { ok: false, code: "STATE_ERROR", detail: "no space for stdout.jsonl" });
  });
});

// ---------------------------------------------------------------------------
// The real CLI
// ---------------------------------------------------------------------------

const PINNED_CODEX = fileURLToPath(new URL("../node_modules/.bin/codex", import.meta.url));
const codexBin = process.env.CLAUDE_DISPATCH_CODEX_BIN || PINNED_CODEX;

/** The CLI's version, or undefined after failing (CI) or announcing the skip. */
function realCodexVersion(): string | undefined {
  const found = !path.isAbsolute(codexBin) || existsSync(codexBin);
  const probe = found
    ? spawnSync(codexBin, ["--version"], { encoding: "utf8", timeout: 30_000, env: minimalEnvironment() })
    : undefined;
  if (probe?.status === 0) return probe.stdout.trim();
  const why = `no working Codex CLI at ${codexBin}`;
  if (process.env.CI === "true") test("the real Codex CLI is installed", () => assert.fail(`${why}; run npm ci`));
  else
    process.stderr.write(
      `\n!!! SKIPPING the real Codex CLI tests: ${why}. Run \`npm ci\` to install the pinned CLI.\n\n`,
    );
  return undefined;
}

interface MockRequest {
  model: string;
  inputItems: number;
  prompt: string;
  prompts: string[];
  toolOutputs: string[];
  assistantTexts: string[];
  authorization: string | null;
}
interface Mock {
  url: string;
  requests: MockRequest[];
  close(): Promise<void>;
}

interface Run {
  outcome: AgentOutcome;
  reader: CodexReader;
  args: string[];
  ms: number;
}

const version = realCodexVersion();

describe(`real Codex CLI (${version ?? "missing"}) against a mock Responses API`, { skip: !version }, () => {
  const runtime = codexRuntime(codexBin);
  let mock: Mock;
  let scratch: string;
  let home: string;
  let codexHome: string;
  let tmp: string;

  before(async () => {
    mock = (await startMockOpenAI()) as Mock;
    scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-codex-"));
    // Siblings: Codex refuses to put its helper links in a CODEX_HOME under the temporary directory.
    home = path.join(scratch, "home");
    codexHome = path.join(scratch, "codex-home");
    tmp = path.join(scratch, "tmp");
    for (const dir of [home, codexHome, tmp]) mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(codexHome, "config.toml"), codexMockConfig(mock.url) as string);
  });

  after(async () => {
    await mock.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A fresh project folder (not a git repository). */
  function project(): string {
    return mkdtempSync(path.join(scratch, "project-"));
  }

  /**
   * Runs the CLI as the launcher would: the runtime's argv and environment,
   * the prompt on stdin, stdout through its reader, the end through its outcome.
   * The environment is built from nothing but what it names.
   */
  function run(spec: AgentSpec, whileRunning?: (stop: () => void) => void): Promise<Run> {
    const { command, args } = runtime.invocation(spec);
    const env = runtime.environment(
      minimalEnvironment({ HOME: home, TMPDIR: tmp, CODEX_HOME: codexHome, MOCK_KEY: "dummy" }),
      { CLAUDE_DISPATCH_DEPTH: "1" },
    );
    const reader = runtime.createReader({
      maxLineBytes: 1024 * 1024,
      transcriptChars: 100_000,
      onOverflow: () => undefined,
    });
    const startedAt = Date.now();
    const child = spawn(command, args, { cwd: spec.cwd, env, stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => reader.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.end(spec.prompt);
    whileRunning?.(() => child.kill("SIGTERM"));
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    return new Promise((resolve) =>
      child.once("close", (exitCode, signal) => {
        clearTimeout(timer);
        reader.end();
        const exit: ChildExit = { exitCode, signal, stderrTail: stderr.slice(-8192) };
        resolve({ outcome: runtime.outcome(exit, reader, undefined), reader, args, ms: Date.now() - startedAt });
      }),
    );
  }

  test("a run: its answer and thread id, the prompt from stdin only", async () => {
    const cwd = project();
    const { outcome, reader, args } = await run({ prompt: "say hello", cwd });
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(outcome.result.text, "MOCK-REPLY: say hello");
    assert.match(outcome.result.sessionId ?? "", UUID);
    assert.equal(outcome.result.numTurns, 1);
    assert.equal(outcome.result.costUsd, undefined);
    assert.equal(reader.live().sessionId, outcome.result.sessionId);
    assert.ok(!args.includes("say hello"));
    const request = mock.requests.at(-1);
    assert.equal(request?.prompt, "say hello");
    assert.equal(request?.authorization, "Bearer dummy");
  });

  test("resume: the same thread, and the mock sees the earlier conversation", async () => {
    const cwd = project();
    const first = await run({ prompt: "remember the word PLUM", cwd });
    assert.ok(first.outcome.ok, JSON.stringify(first.outcome));
    const firstItems = mock.requests.at(-1)?.inputItems ?? 0;
    const sessionId = first.outcome.result.sessionId;
    assert.ok(sessionId !== undefined);
    const second = await run({ prompt: "what was the word?", cwd, resumeSessionId: sessionId });
    assert.ok(second.outcome.ok, JSON.stringify(second.outcome));
    assert.equal(second.outcome.result.sessionId, sessionId);
    assert.equal(second.outcome.result.text, "MOCK-REPLY: what was the word?");
    const request = mock.requests.at(-1);
    assert.deepEqual(request?.prompts, ["remember the word PLUM", "what was the word?"]);
    assert.deepEqual(request?.assistantTexts, ["MOCK-REPLY: remember the word PLUM"]);
    assert.ok((request?.inputItems ?? 0) > firstItems);
  });

  test("workspace-write: a shell command writes in cwd, and the transcript shows it", async () => {
    const cwd = project();
    const { outcome, reader } = await run({
      prompt: "Write a file.\nMOCK:BASH echo written > out.txt && cat out.txt",
      cwd,
      options: { permissionMode: codexMode("workspace-write"), model: "mock-other" },
    });
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.equal(outcome.result.text, "MOCK-DONE: written");
    assert.equal(readFileSync(path.join(cwd, "out.txt"), "utf8"), "written\n");
    assert.equal(mock.requests.at(-1)?.model, "mock-other");
    assert.equal(reader.live().lastTool, "shell · echo written > out.txt && cat out.txt");
    assert.match(
      reader.transcript.page(0, 100_000).text,
      /tool: shell · echo written > out\.txt && cat out\.txt\ntool result: written\nassistant: MOCK-DONE: written\n\[done: success\]\n$/,
    );
  });

  test("read-only (Codex's default here): the same command cannot write, and the model is told", async () => {
    const cwd = project();
    const { outcome } = await run({ prompt: "MOCK:BASH echo written > out.txt", cwd });
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.match(outcome.result.text ?? "", /Read-only file system/);
    assert.equal(existsSync(path.join(cwd, "out.txt")), false);
  });

  test("API errors reach the outcome with Codex's message", async () => {
    const unauthorized = await run({ prompt: "MOCK:HTTP 401", cwd: project() });
    assert.ok(!unauthorized.outcome.ok);
    assert.equal(unauthorized.outcome.code, "AGENT_ERROR");
    assert.match(unauthorized.outcome.detail, /^unexpected status 401 Unauthorized: invalid api key \(mock\)/);
    assert.equal(unauthorized.outcome.result?.apiErrorStatus, 401);
    assert.match(unauthorized.outcome.result?.sessionId ?? "", UUID);
    const overloaded = await run({ prompt: "MOCK:HTTP 500", cwd: project() });
    assert.ok(
      !overloaded.outcome.ok &&
        overloaded.outcome.code === "AGENT_ERROR" &&
        /high demand/.test(overloaded.outcome.detail),
    );
  });

  test("resume of an unknown thread is SESSION_NOT_FOUND", async () => {
    const unknown = "01a232c1-0000-7000-8000-000000000000";
    const { outcome } = await run({ prompt: "hello again", cwd: project(), resumeSessionId: unknown });
    assert.deepEqual(outcome, {
      ok: false,
      code: "SESSION_NOT_FOUND",
      detail: `No Codex conversation found with session ID ${unknown}`,
    });
  });

  test("stopped while the model hangs: AGENT_EXITED, killed by the signal", async () => {
    const before = mock.requests.length;
    const { outcome, reader } = await run({ prompt: "MOCK:HANG", cwd: project() }, (stop) => {
      const poll = setInterval(() => {
        if (mock.requests.length > before) {
          clearInterval(poll);
          stop();
        }
      }, 20);
    });
    assert.deepEqual(outcome, {
      ok: false,
      code: "AGENT_EXITED",
      detail: "codex was killed by SIGTERM before finishing its turn",
    });
    assert.match(reader.live().sessionId ?? "", UUID);
    assert.equal(reader.hasResult(), false);
  });
});
