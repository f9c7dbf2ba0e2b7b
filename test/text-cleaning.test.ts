/**
 * What a person or a model reads is not the agent's to format (PROTOCOL.md §10): text derived from an
 * agent's output or a tool's input reaches no caller, terminal or log with a control character, an escape
 * sequence or a bidirectional control in it, on any path. Cleaned where it enters (the runtimes' readers,
 * the transcript, the launcher's outcome) and where it is read back from disk (records, result.txt, Claude
 * Code's sessions, the command line); then through the built server, with the fake agent and with the real
 * Claude Code CLI against its mock API.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, before, describe, test } from "node:test";

import { createAgents } from "../src/agent/launcher.js";
import type { ChildExit } from "../src/agent/host.js";
import type { AgentOutcome } from "../src/agent/types.js";
import { createLogger } from "../src/core/log.js";
import { forReading, forReadingOnOneLine, PiecewiseForReading, valueForReading } from "../src/core/text.js";
import { Transcript } from "../src/core/transcript.js";
import { ClaudeStream, listClaudeSessions } from "../src/runtimes/claude/index.js";
import { runtimeFor } from "../src/runtimes/all.js";
import type { JobRecord } from "../src/store/records.js";
import { StateStore } from "../src/store/state-store.js";
import { cliPath, realCliVersion } from "./claude-cli.js";
import { runCliCaptured } from "./cli-harness.js";
import { finishedChild } from "./helpers.js";
import { minimalEnvironment, SERVER_MAIN, ServerProcess, type RpcResponse } from "./server-process.js";
// @ts-expect-error: a plain ESM fixture without type declarations
import { startMockAnthropic } from "./fixtures/mock-anthropic.mjs";

/**
 * A colour (CSI), a hyperlink (OSC ended by ST), an 8-bit CSI, a right-to-left
 * override, a bell, NUL, NEL, an isolate, a tag.
 */
const HOSTILE =
  "\u001b[31mred\u001b[0m \u001b]8;;http://x.invalid\u001b\\link\u001b]8;;\u001b\\ \u009b38;5;196m \u202eevil\u202c " +
  "\u0007\u0000\u0085 \u2067rtl\u2069 \u{e0041}";
/** What must never be read: controls but tab and newline, DEL, C1, bidi controls, the line separators, tags. */
const UNREADABLE =
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|\u{e0041}/u;
/** Parts of a sequence left behind when only its ESC is replaced: it must go whole. */
const REMNANT = /\[31m|\[0m|8;;http|38;5;196m/;

/** Every string of a value, keys included. */
function stringsOf(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (typeof value !== "object" || value === null) return [];
  return Object.entries(value).flatMap(([key, inner]) => [key, ...stringsOf(inner)]);
}

function assertReadable(value: unknown, where: string): void {
  for (const string of stringsOf(value)) {
    assert.ok(!UNREADABLE.test(string), `${where}: an unreadable character in ${JSON.stringify(string).slice(0, 300)}`);
    assert.ok(
      !REMNANT.test(string),
      `${where}: an escape sequence's remnant in ${JSON.stringify(string).slice(0, 300)}`,
    );
  }
}

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-text-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

describe("the cleaner", () => {
  test(
    "escape sequences go whole; controls, bidi controls, separators and tags become U+FFFD; tabs, newlines and " +
      "CRLF ends stay lines",
    () => {
      assert.equal(forReading("a\u001b[1;31mb\u001b[0mc"), "abc");
      assert.equal(forReading("a\u001b]0;title\u0007b\u001b]8;;http://x\u001b\\c"), "abc");
      assert.equal(forReading("a\u001bPq#0;2;0;0;0\u001b\\b\u001b(Bc\u001b"), "abc", "DCS, a charset and a lone ESC");
      assert.equal(forReading("a\u009b2Jb\u009d0;t\u009cc"), "abc", "8-bit CSI and OSC");
      assert.equal(
        forReading("a\u001b]0;never ended\nnext line"),
        "a\nnext line",
        "an unterminated OSC ends with its line",
      );
      assert.equal(forReading("x\u0000\u0007\u0008\u000b\u000c\u007f\u0085y"), `x${"\uFFFD".repeat(7)}y`);
      assert.equal(
        forReading("\u202eevil\u202c \u2066i\u2069 \u200f\u061c\u2028\u2029"),
        "\uFFFDevil\uFFFD \uFFFDi\uFFFD \uFFFD\uFFFD\uFFFD\uFFFD",
      );
      assert.equal(forReading("hidden\u{e0049}\u{e0067}"), "hidden\uFFFD\uFFFD", "invisible tag characters");
      assert.equal(forReading("one\r\ntwo\rthree\n\tfour"), "one\ntwo\uFFFDthree\n\tfour");
      assert.equal(forReadingOnOneLine(" a\n\tb\u001b[2J  c\r\n"), "a b c");
      assert.equal(forReading("plain text, ünïcödé, emoji 😀, CJK 漢字"), "plain text, ünïcödé, emoji 😀, CJK 漢字");
    },
  );

  test("cleaning twice changes nothing", () => {
    const once = forReading(`${HOSTILE}\r\r\n\u001b\u001b[31m`);
    assert.equal(forReading(once), once);
    assertReadable(once, "forReading");
  });

  test("in pieces, cut anywhere, it gives what the whole gives", () => {
    const whole = `start ${HOSTILE}\r\nmid\r \u001b]0;t\u001b\\ 😀 \u{e0041}end\r`;
    const expected = forReading(whole);
    for (let cut = 0; cut <= whole.length; cut += 1) {
      const pieces = new PiecewiseForReading();
      assert.equal(
        pieces.push(whole.slice(0, cut)) + pieces.push(whole.slice(cut)) + pieces.end(),
        expected,
        `cut at ${cut}`,
      );
    }
    const single = new PiecewiseForReading();
    assert.equal(
      [...whole].map((char) => single.push(char)).join("") + single.end(),
      expected,
      "a character at a time",
    );
  });

  test(
    "a JSON value: every string and key, at any depth, numbers and shape kept; too deep a value is cut, " +
      "never thrown on",
    () => {
      const input = { command: `rm ${HOSTILE}`, [`key${HOSTILE}`]: [1, true, null, { nested: HOSTILE }] };
      const cleaned = valueForReading(input) as Record<string, unknown>;
      assertReadable(cleaned, "valueForReading");
      assert.deepEqual(Object.values(cleaned)[1], [1, true, null, { nested: forReading(HOSTILE) }]);
      let deep: unknown = HOSTILE;
      for (let depth = 0; depth < 100_000; depth += 1) deep = [deep];
      assertReadable(JSON.stringify(valueForReading(deep)).slice(-100), "a deep value");
    },
  );
});

describe("where agent text enters", () => {
  test("the transcript keeps entries cleaned, its listener hears them so, and pages add up to it", () => {
    const heard: string[] = [];
    const transcript = new Transcript(10_000, (entry) => heard.push(entry));
    transcript.append(`assistant: ${HOSTILE}\nsecond line`);
    transcript.append(`tool result: ${HOSTILE}`);
    const whole = transcript.page(0, Number.POSITIVE_INFINITY).text;
    assertReadable(whole, "transcript");
    assertReadable(heard, "onAppend");
    assert.ok(whole.includes("\nsecond line"), "newlines stay");
    let paged = "";
    for (let offset = 0; offset < transcript.end; offset += 7) paged += transcript.page(offset, 7).text;
    assert.equal(paged, whole);
    assert.equal(transcript.end, whole.length);
  });

  const lines = (...events: unknown[]): Buffer =>
    Buffer.from(events.map((event) => `${JSON.stringify(event)}\n`).join(""));
  const OUTPUTS: Record<string, Buffer> = {
    claude: lines(
      { type: "system", subtype: "init", session_id: `s-${HOSTILE}`, model: `m-${HOSTILE}` },
      { type: "assistant", message: { id: "msg_1", content: [{ type: "text", text: `says ${HOSTILE}` }] } },
      {
        type: "assistant",
        message: {
          id: "msg_1",
          content: [{ type: "tool_use", name: `Bash${HOSTILE}`, input: { command: `echo ${HOSTILE}` } }],
        },
      },
      { type: "user", message: { content: [{ type: "tool_result", content: `out ${HOSTILE}` }] } },
    ),
    codex: lines(
      { type: "thread.started", thread_id: `t-${HOSTILE}` },
      { type: "turn.started" },
      { type: "item.completed", item: { id: "i1", type: "agent_message", text: `says ${HOSTILE}` } },
      {
        type: "item.completed",
        item: {
          id: "i2",
          type: "command_execution",
          command: `echo ${HOSTILE}`,
          aggregated_output: `out ${HOSTILE}`,
          exit_code: 0,
          status: "completed",
        },
      },
      {
        type: "item.completed",
        item: {
          id: "i3",
          type: "mcp_tool_call",
          server: `srv${HOSTILE}`,
          tool: "t",
          arguments: { path: HOSTILE },
          status: "completed",
        },
      },
    ),
    gemini: lines(
      { type: "init", session_id: `g-${HOSTILE}`, model: `m-${HOSTILE}` },
      { type: "message", role: "assistant", content: `says ${HOSTILE}` },
      { type: "tool_use", tool_name: `shell${HOSTILE}`, tool_id: "t1", parameters: { command: `echo ${HOSTILE}` } },
      { type: "tool_result", tool_id: "t1", status: "success", output: `out ${HOSTILE}` },
    ),
  };

  for (const [name, output] of Object.entries(OUTPUTS)) {
    test(`${name}'s reader: the live summary and the transcript`, () => {
      const reader = runtimeFor(name).createReader({
        maxLineBytes: 1 << 20,
        transcriptChars: 100_000,
        onOverflow: () => undefined,
      });
      const summaries: unknown[] = [];
      reader.onActivity(() => summaries.push(reader.live()));
      reader.push(output);
      assert.ok(summaries.length >= 3);
      assertReadable(summaries, `${name} live`);
      assert.ok(
        summaries.some((summary) => (summary as { lastText?: string }).lastText?.startsWith("says red")),
        `${name}: the text is kept`,
      );
      reader.end();
      const transcript = reader.transcript.page(0, Number.POSITIVE_INFINITY).text;
      assertReadable(transcript, `${name} transcript`);
      assert.match(transcript, /echo red/);
    });
  }

  /** An agent of `runtime` that printed stdout and ended as exit says, through the launcher. */
  async function outcomeOf(runtime: string, stdout: string, exit: Partial<ChildExit> = {}): Promise<AgentOutcome> {
    const handle = (request: { onStdout(chunk: Buffer): void }) => finishedChild(request.onStdout, stdout, exit);
    const host = { start: handle, attach: handle };
    const agents = createAgents({
      runtime: runtimeFor(runtime),
      host,
      env: {},
      maxLineBytes: 1 << 20,
      transcriptChars: 10_000,
      stderrTailBytes: 4096,
    });
    return agents.launch({ prompt: "hi", cwd: "/tmp" }).outcome;
  }

  test(
    "the launcher's outcome, for each runtime: the result, its session, the denials' tool input, AGENT_ERROR, " +
      "stderr tails",
    async () => {
      const claudeResult = (fields: Record<string, unknown>): string =>
        `${JSON.stringify({ type: "result", subtype: "success", session_id: `s-${HOSTILE}`, ...fields })}\n`;
      const denial = { tool_name: `Bash${HOSTILE}`, tool_input: { command: `rm ${HOSTILE}`, [HOSTILE]: [HOSTILE] } };
      const outcomes: Record<string, AgentOutcome> = {
        "claude result": await outcomeOf(
          "claude",
          claudeResult({ is_error: false, result: `answer ${HOSTILE}\r\nline two`, permission_denials: [denial] }),
        ),
        "claude error": await outcomeOf(
          "claude",
          claudeResult({ is_error: true, result: `API Error: ${HOSTILE}`, api_error_status: 500 }),
          { exitCode: 1 },
        ),
        "claude exit": await outcomeOf("claude", "", { exitCode: 3, stderrTail: `crash ${HOSTILE}` }),
        "claude bad output": await outcomeOf("claude", `Welcome ${HOSTILE}\n`),
        "codex result": await outcomeOf(
          "codex",
          OUTPUTS.codex?.toString() + `${JSON.stringify({ type: "turn.completed" })}\n`,
        ),
        "codex failed": await outcomeOf(
          "codex",
          `${JSON.stringify({ type: "turn.failed", error: { message: `quota ${HOSTILE}` } })}\n`,
          { exitCode: 1 },
        ),
        "gemini result": await outcomeOf(
          "gemini",
          OUTPUTS.gemini?.toString() + `${JSON.stringify({ type: "result", status: "success" })}\n`,
        ),
        "gemini failed": await outcomeOf("gemini", "", { exitCode: 1, stderrTail: `fatal ${HOSTILE}` }),
        "remote failure": await outcomeOf("claude", "", {
          exitCode: null,
          failure: { code: "HOST_FAILED", detail: `far end says ${HOSTILE}` },
        }),
      };
      for (const [name, outcome] of Object.entries(outcomes)) assertReadable(outcome, name);
      const result = outcomes["claude result"];
      assert.ok(
        result?.ok &&
          result.result.text ===
            "answer red link  \uFFFDevil\uFFFD \uFFFD\uFFFD\uFFFD \uFFFDrtl\uFFFD \uFFFD\nline two",
        JSON.stringify(result),
      );
      assert.deepEqual(result.result.permissionDenials?.[0]?.tool_input, valueForReading(denial.tool_input));
      assert.ok(!outcomes["claude error"]?.ok && outcomes["claude error"]?.code === "AGENT_ERROR");
    },
  );

  test("a result too long to hold goes to result.txt cleaned in pieces, and its length is the cleaned text's", () => {
    // Escape sequences every ~1000 characters, so the reader's 64 KiB pieces cut some of them in two.
    const text = Array.from({ length: 400 }, (_, index) => `${"x".repeat(997 - (index % 7))}${HOSTILE}\r\n`).join("");
    const line = Buffer.from(
      `${JSON.stringify({ type: "result", subtype: "success", is_error: false, session_id: "s", result: text })}\n`,
    );
    const written: string[] = [];
    const reader = new ClaudeStream({
      maxLineBytes: 1 << 24,
      transcriptChars: 10_000,
      onOverflow: () => undefined,
      source: {
        read: (offset, length) => line.subarray(offset, offset + length),
        createResult: () => ({ write: (piece) => written.push(piece), close: () => undefined }),
      },
    });
    for (let at = 0; at < line.length; at += 65_536) reader.push(line.subarray(at, at + 65_536));
    reader.end();
    const stored = written.join("");
    assert.equal(stored, forReading(text));
    assert.equal(reader.streamedResultChars(), stored.length);
  });
});

describe("where it is read back", () => {
  test("log lines", () => {
    let written = "";
    createLogger({ write: (text: string) => (written += text) }, "debug").warn(
      `skipped a line of agent output: ${HOSTILE}`,
    );
    assertReadable(written.trimEnd(), "log line");
  });

  test("Claude Code's sessions on disk: the first prompt and the recorded cwd", () => {
    const configDir = path.join(scratch, "claude-config");
    const cwd = mkdtempSync(path.join(scratch, "project-"));
    const folder = path.join(configDir, "projects", cwd.replace(/[^A-Za-z0-9]/g, "-"));
    mkdirSync(folder, { recursive: true });
    const prompt = {
      type: "user",
      timestamp: "2025-06-01T10:00:00.000Z",
      cwd: `${cwd}${HOSTILE}`,
      message: { role: "user", content: `do ${HOSTILE}` },
    };
    writeFileSync(path.join(folder, `${randomUUID()}.jsonl`), `${JSON.stringify(prompt)}\n`);
    const [session] = listClaudeSessions({ configDir, cwd });
    assert.ok(session);
    assertReadable(session, "session");
    assert.match(session.first_prompt_preview, /^do red link/);
  });
});

const report = (response: RpcResponse): Record<string, any> => response.result.structuredContent;
const textOf = (response: RpcResponse): string => response.result.content[0].text;

/** Pages of a job's view read with claude_output until next_offset runs out: each page readable, all joined. */
async function readWhole(server: ServerProcess, jobId: string, view: "result" | "transcript"): Promise<string> {
  let offset = 0;
  let whole = "";
  for (;;) {
    const page = await server.callTool("claude_output", { job_id: jobId, view, offset, limit: 5000 });
    assertReadable(page.result, `claude_output ${view} at ${offset}`);
    assert.equal(report(page).offset, whole.length, "offsets add up");
    whole += report(page).text;
    if (report(page).next_offset === undefined) return whole;
    offset = report(page).next_offset;
  }
}

describe("the built server and the command line", () => {
  const servers: ServerProcess[] = [];
  afterEach(() => {
    for (const server of servers.splice(0)) server.dispose();
  });
  const startServer = (env: Record<string, string> = {}): ServerProcess => {
    const server = new ServerProcess(env);
    servers.push(server);
    return server;
  };

  test(
    "the fake agent: a 300 KB result streamed to result.txt, an AGENT_ERROR, the list; pages add up to the " +
      "cleaned text",
    async () => {
      const server = startServer();
      await server.initialize();
      const prompt = Array.from({ length: 300 }, (_, index) => `${"w".repeat(1000 + (index % 13))}${HOSTILE}`).join(
        "\r\n",
      );
      const run = await server.callTool("claude_run", { prompt, cwd: scratch });
      assertReadable(run.result, "claude_run");
      assert.equal(report(run).truncated, true);
      assert.equal(await readWhole(server, report(run).job_id, "result"), forReading(`ECHO: ${prompt.trim()}`));
      assertReadable(await readWhole(server, report(run).job_id, "transcript"), "transcript");
      const failed = await server.callTool("claude_run", { prompt: `@error-json API Error: ${HOSTILE}`, cwd: scratch });
      assert.equal(failed.result.isError, true);
      assert.match(textOf(failed), /^AGENT_ERROR: API Error: red link/);
      assertReadable(failed.result, "AGENT_ERROR");
      const list = await server.callTool("claude_list", {});
      assertReadable(list.result, "claude_list");
      assertReadable(server.stderr, "the server's log");
    },
  );

  test(
    "a planted record, result.txt and output: read back clean by the server and by jobs, " + "show and logs",
    async () => {
      const dir = mkdtempSync(path.join(scratch, "state-"));
      const store = new StateStore(dir, { randomName: () => randomUUID() });
      store.open();
      const id = randomUUID();
      const now = Date.now();
      const denial = { tool_name: `Bash${HOSTILE}`, tool_input: { command: `rm ${HOSTILE}` } };
      const resultText = `answer ${HOSTILE}\r\n`.repeat(50);
      const record: JobRecord = {
        format: 1,
        host: "local",
        id,
        kind: "start",
        runtime: `claude${HOSTILE}`,
        cwd: scratch,
        prompt_preview: `fix ${HOSTILE}`,
        options: {},
        status: "failed",
        submitted_at: now - 60_000,
        started_at: now - 60_000,
        finished_at: now - 1000,
        owner: { pid: 2_000_000_000, start_time: "1" },
        generation: 0,
        resume_session_id: `r-${HOSTILE}`,
        outcome: {
          ok: false,
          code: "AGENT_ERROR",
          detail: `API Error: ${HOSTILE}`,
          result: { sessionId: `s-${HOSTILE}`, permissionDenials: [denial] },
          result_chars: resultText.length,
        },
      };
      store.create(record, `fix ${HOSTILE}\r\nplease`);
      store.writeResult(id, resultText);
      const stdout = [
        { type: "system", subtype: "init", session_id: `s-${HOSTILE}`, model: `m-${HOSTILE}` },
        {
          type: "assistant",
          message: {
            id: "msg_1",
            content: [{ type: "tool_use", name: "Bash", input: { command: `echo ${HOSTILE}` } }],
          },
        },
        { type: "user", message: { content: [{ type: "tool_result", content: `out ${HOSTILE}` }] } },
      ];
      writeFileSync(store.file(id, "stdout.jsonl"), stdout.map((event) => `${JSON.stringify(event)}\n`).join(""));
      writeFileSync(store.file(id, "stderr.log"), `warning ${HOSTILE}\n`);

      const control = async () => ({ isAlive: async () => false, idle: async () => undefined }) as never;
      for (const args of [
        ["jobs"],
        ["jobs", "--all", "--json"],
        ["show", id],
        ["show", id, "--json"],
        ["logs", id],
        ["logs", id, "--json"],
      ]) {
        const run = await runCliCaptured(args, { stateDir: dir, processControl: control });
        assert.equal(run.code, 0, `${args.join(" ")}: ${run.stderr}`);
        assertReadable(run.stdout, args.join(" "));
        if (args.includes("--json")) assertReadable(JSON.parse(run.stdout), `${args.join(" ")} parsed`);
      }

      const server = startServer({ CLAUDE_DISPATCH_STATE_DIR: dir });
      await server.initialize();
      const waited = await server.callTool("claude_wait", { job_id: id });
      assert.equal(report(waited).error?.code, "AGENT_ERROR", textOf(waited));
      assertReadable(waited.result, "claude_wait");
      assert.equal(await readWhole(server, id, "result"), forReading(resultText));
      assertReadable(await readWhole(server, id, "transcript"), "transcript read back");
      assertReadable((await server.callTool("claude_list", {})).result, "claude_list");
    },
  );
});

const version = realCliVersion("text cleaning");

describe(`the real Claude Code CLI (${version ?? "missing"}) against its mock API`, { skip: !version }, () => {
  let mock: { url: string; requests: { prompt: string; toolResults: string[] }[]; close(): Promise<void> };
  let home: string;
  const servers: ServerProcess[] = [];
  before(async () => {
    mock = await startMockAnthropic();
    home = path.join(scratch, "home");
    mkdirSync(path.join(home, ".claude"), { recursive: true });
    mkdirSync(path.join(scratch, "tmp"), { recursive: true });
    writeFileSync(path.join(home, ".claude", "settings.json"), JSON.stringify({ permissions: { allow: ["Bash"] } }));
  });
  after(async () => {
    for (const server of servers.splice(0)) server.dispose();
    await mock.close();
  });

  /**
   * A JSON string with everything but letters and spaces escaped: a marker
   * the CLI passes on, which reads as no sequence.
   */
  const scripted = (value: string): string =>
    `"${value.replace(/[^A-Za-z ]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`)}"`;

  /** The built command line on the state directory, as a person runs it. */
  const cliRun = (stateDir: string, args: string[]): string => {
    const run = spawnSync(process.execPath, [SERVER_MAIN, ...args], {
      env: minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: stateDir, HOME: home }),
      encoding: "utf8",
    });
    assert.equal(run.status, 0, `${args.join(" ")}: ${run.stderr}`);
    return run.stdout;
  };

  /** The server on the real CLI, as a host starts it, with an environment built from nothing. */
  const startServer = (userHome: string, stateDir?: string): ServerProcess => {
    const server = new ServerProcess({
      HOME: userHome,
      TMPDIR: path.join(scratch, "tmp"),
      ANTHROPIC_BASE_URL: mock.url,
      ANTHROPIC_API_KEY: "dummy",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      CLAUDE_CODE_MAX_RETRIES: "0",
      CLAUDE_DISPATCH_CLAUDE_BIN: cliPath,
      ...(stateDir ? { CLAUDE_DISPATCH_STATE_DIR: stateDir } : {}),
    });
    servers.push(server);
    return server;
  };

  test(
    "escape sequences, C1 controls and U+202E in a Bash tool's input and output, and in the text before it, " +
      "reach no surface",
    async () => {
      const project = mkdtempSync(path.join(scratch, "real-"));
      const stateDir = mkdtempSync(path.join(scratch, "real-state-"));
      const gate = path.join(project, "gate");
      const hostile = "\u001b[31mred\u001b[0m \u009b38;5;196m \u202eevil\u202c \u001b]0;title\u0007 \u0085";
      // Claude Code refuses a Bash command with C0 or C1 controls, so this one
      // prints them, "[" in octal too (its input keeps
      // U+202E and a tag).
      const printing =
        `printf 'out \\033\\13331mred\\033\\1330m \\302\\233 \\342\\200\\256evil\\n'; echo '\u202e ` + `\u{e0041}in'`;
      const command = `${printing}; while [ ! -e ${gate} ]; do sleep 0.05; done; echo released`;
      const server = startServer(home, stateDir);
      await server.initialize();
      const prompt = `MOCK:SAY ${scripted(`thinking ${hostile}`)}\nMOCK:BASH ${scripted(command)}\nplease ${hostile}`;
      const jobId = report(await server.callTool("claude_start", { prompt, cwd: project })).job_id as string;
      try {
        // While the tool runs: the summary names it, and the text before it, both cleaned.
        let waited = await server.callTool("claude_wait", { job_id: jobId, hold_ms: 500 });
        while (!/Bash/.test(report(waited).last_activity ?? "") && report(waited).status === "running") {
          waited = await server.callTool("claude_wait", { job_id: jobId, hold_ms: 500 });
        }
        assert.equal(report(waited).status, "running", textOf(waited));
        assert.match(report(waited).last_activity, /Bash · printf 'out /);
        assert.match(report(waited).recent_text, /^thinking red/);
        assertReadable(waited.result, "claude_wait while running");
        assertReadable(cliRun(stateDir, ["jobs"]), "jobs while running");
        assertReadable(cliRun(stateDir, ["show", jobId]), "show while running");
      } finally {
        writeFileSync(gate, "");
      }
      assert.equal((await server.waitForJob(jobId)).status, "completed");
      assert.ok(
        mock.requests.some((request) => request.toolResults.some((output) => output.includes("\u001b[31m"))),
        "the tool's output carried escapes",
      );
      const final = await server.callTool("claude_wait", { job_id: jobId });
      assertReadable(final.result, "the report");
      assert.match(report(final).result, /^MOCK-DONE: out red/);
      assert.match(await readWhole(server, jobId, "transcript"), /tool result: out red/);
      assert.equal(await readWhole(server, jobId, "result"), report(final).result);

      // A command with the controls themselves: Claude Code refuses it, but its tool_use event carried them.
      const refused = await server.callTool("claude_run", {
        prompt: `MOCK:BASH ${scripted(`echo '${hostile}'`)}`,
        cwd: project,
      });
      assertReadable(refused.result, "a refused command's report");
      assert.match(await readWhole(server, report(refused).job_id, "transcript"), /tool: Bash · echo 'red/);
      assertReadable((await server.callTool("claude_list", {})).result, "claude_list");
      for (const args of [
        ["jobs", "--all"],
        ["jobs", "--json"],
        ["show", jobId],
        ["show", jobId, "--json"],
        ["logs", jobId],
        ["logs", jobId, "--json"],
      ]) {
        assertReadable(cliRun(stateDir, args), args.join(" "));
      }
      assertReadable(server.stderr, "the server's log");

      // Without the permission, the tool's input comes back in permission_denials.
      const plain = path.join(scratch, "home-plain");
      mkdirSync(plain, { recursive: true });
      const denying = startServer(plain);
      await denying.initialize();
      const denied = await denying.callTool("claude_run", {
        prompt: `MOCK:BASH ${scripted("echo '\u202eevil\u202c' > out.txt")}`,
        cwd: project,
      });
      assert.equal(report(denied).permission_denials?.[0]?.tool_name, "Bash", textOf(denied));
      assert.match(report(denied).permission_denials[0].tool_input.command, /^echo '\uFFFDevil\uFFFD'/);
      assertReadable(denied.result, "permission_denials");
    },
  );
});
