/**
 * `logs`, `logs -f`, `jobs --watch` and the SESSION column, with runCli in
 * process: a temporary state directory written here, captured output, and a
 * manual clock, so following and redrawing wait on timers the test fires
 * (no sleeps). Agent output is appended to stdout.jsonl between ticks.
 */
import assert from "node:assert/strict";
import type { ProcessControl } from "../src/hosts/local/index.js";
import { randomUUID } from "node:crypto";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { StateStore } from "../src/store/state-store.js";
import type { JobRecord } from "../src/store/records.js";
import { HOME, newStateIn, runCliCaptured, startCli } from "./cli-harness.js";
import { FakeClock, settle } from "./helpers.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-cli-logs-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const MINUTE = 60_000;
const CURSOR_HOME = "\u001b[H";
const CLEAR_TO_LINE_END = "\u001b[K";
/** The session of the fixture below, printed on each of its events. */
const FIXTURE_SESSION = "a4e6f90a-6476-44bd-a9eb-2a4c18c0761d";
const RESULT_SESSION = "9b2f8a47-53c4-4f0e-9d61-1f7e2c3b4a50";

/** Verbatim Claude Code 2.1.332 output: two tool calls, a text, then the result. */
const TOOLS_STREAM = readFileSync(
  fileURLToPath(new URL("./fixtures/cli/stream-tools-2.1.332.ndjson", import.meta.url)),
  "utf8",
);
const TOOLS_LINES = TOOLS_STREAM.split("\n")
  .filter((line) => line !== "")
  .map((line) => `${line}\n`);
const TOOLS_TRANSCRIPT = [
  `[session ${FIXTURE_SESSION} · model claude-opus-5-5]`,
  "tool: Bash · echo turn-1",
  "tool result: turn-1",
  "tool: Bash · echo turn-2",
  "tool result: turn-2",
  "assistant: MOCK-DONE after 2 tools: turn-2",
  "[done: success]",
];

const start = startCli;
const cli = runCliCaptured;
const newState = (): { dir: string; store: StateStore } => newStateIn(scratch);

function job(now: number, overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    format: 1,
    runtime: "claude",
    host: "local",
    id: randomUUID(),
    kind: "start",
    cwd: `${HOME}/src/app`,
    prompt_preview: "fix the failing tests",
    options: {},
    status: "running",
    submitted_at: now - 10 * MINUTE,
    started_at: now - 10 * MINUTE,
    owner: { pid: 4242, start_time: "100" },
    generation: 0,
    agent: { pid: 5151, start_time: "200" },
    ...overrides,
  };
}

function completed(record: JobRecord, now: number, result: string): JobRecord {
  return {
    ...record,
    status: "completed",
    finished_at: now,
    outcome: {
      ok: true,
      result: { sessionId: RESULT_SESSION, numTurns: 3, costUsd: 0.0018 },
      result_chars: result.length,
    },
  };
}

function add(store: StateStore, record: JobRecord, output?: string): JobRecord {
  store.create(record, record.prompt_preview);
  if (output !== undefined) writeFileSync(store.file(record.id, "stdout.jsonl"), output);
  return record;
}

/** One line of stream-json. */
const event = (value: unknown): string => `${JSON.stringify(value)}\n`;

describe("logs", () => {
  const now = Date.parse("2025-06-01T12:00:00.000Z");
  const { dir, store } = newState();

  test("a finished job: its transcript, a blank line, then its outcome and result; exit 0", async () => {
    const record = add(store, completed(job(now), now, "the answer"), TOOLS_STREAM);
    store.writeResult(record.id, "the answer\n");
    const run = await cli(["logs", record.id], { stateDir: dir });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, "");
    const expected = [
      ...TOOLS_TRANSCRIPT,
      "",
      `job ${record.id} completed · session ${RESULT_SESSION}`,
      "result (10 characters):",
      "  the answer",
    ];
    assert.equal(run.stdout, `${expected.join("\n")}\n`);
  });

  test("the agent's text whole, tool calls and results on one line, cut; escapes removed, never obeyed", async () => {
    const output = [
      event({
        type: "assistant",
        session_id: "s-2",
        message: { id: "msg_1", content: [{ type: "text", text: "Plan:\n1. read\n\n2. \u001b[31medit" }] },
      }),
      event({
        type: "assistant",
        message: { id: "msg_1", content: [{ type: "tool_use", name: "Bash", input: { command: "ls -la\n/tmp" } }] },
      }),
      event({
        type: "user",
        message: { content: [{ type: "tool_result", content: `line one\nline two\n${"x".repeat(500)}` }] },
      }),
      event({
        type: "user",
        message: {
          content: [{ type: "tool_result", is_error: true, content: [{ type: "text", text: "denied\u0007" }] }],
        },
      }),
    ].join("");
    const record = add(store, job(now), output);
    const run = await cli(["logs", record.id.slice(0, 8)], { stateDir: dir });
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.split("\n");
    assert.deepEqual(lines.slice(0, 6), [
      "assistant: Plan:",
      "  1. read",
      "",
      "  2. edit",
      "tool: Bash · ls -la /tmp",
      lines[5],
    ]);
    assert.equal(lines[5], `tool result: line one line two ${"x".repeat(200 - "line one line two ".length - 1)}…`);
    assert.equal(lines[6], "tool error: denied\uFFFD");
    assert.equal(lines[7], "");
    assert.equal(
      lines[8],
      `job ${record.id} is running; \`claude-dispatch logs -f ${record.id}\` follows it to its end`,
    );
    assert.ok(!/[\u0007\u001b]/.test(run.stdout), "no terminal control reaches the terminal");
  });

  test("--json: one document with every entry as {kind, text}, and the outcome (null while the job runs)", async () => {
    const record = add(
      store,
      {
        ...job(now),
        status: "failed",
        finished_at: now,
        outcome: { ok: false, code: "TIMEOUT", detail: "timed out after 120s" },
      },
      TOOLS_STREAM,
    );
    const run = await cli(["logs", record.id, "--json"], { stateDir: dir });
    assert.equal(run.code, 0, run.stderr);
    const document = JSON.parse(run.stdout) as {
      id: string;
      status: string;
      entries: { kind: string; text: string }[];
      outcome: unknown;
    };
    assert.equal(document.id, record.id);
    assert.equal(document.status, "failed");
    assert.deepEqual(
      document.entries.map((entry) => entry.kind),
      ["note", "tool", "tool_output", "tool", "tool_output", "assistant", "note"],
    );
    assert.deepEqual(document.entries[1], { kind: "tool", text: "Bash · echo turn-1" });
    assert.deepEqual(document.outcome, {
      status: "failed",
      session_id: FIXTURE_SESSION,
      error: { code: "TIMEOUT", detail: "timed out after 120s" },
      result: null,
      result_path: null,
    });

    const queued = add(store, job(now, { status: "queued", started_at: undefined, agent: undefined }));
    const empty = await cli(["logs", queued.id, "--json"], { stateDir: dir });
    assert.deepEqual(JSON.parse(empty.stdout), { id: queued.id, status: "queued", entries: [], outcome: null });
  });

  test("an id: a unique prefix works; an unknown, ambiguous or malformed one fails as for show", async () => {
    const { dir: own, store: ownStore } = newState();
    const first = add(ownStore, job(now, { id: `abcd1${randomUUID().slice(5)}` }), TOOLS_LINES[0]);
    add(ownStore, job(now, { id: `abcd2${randomUUID().slice(5)}` }));
    const run = await cli(["logs", "ABCD1"], { stateDir: own });
    assert.equal(run.code, 0, run.stderr);
    assert.ok(run.stdout.startsWith(`[session ${FIXTURE_SESSION}`), run.stdout);
    assert.ok(run.stdout.includes(`job ${first.id} is running`));

    const ambiguous = await cli(["logs", "abcd"], { stateDir: own });
    assert.equal(ambiguous.code, 1);
    assert.ok(ambiguous.stderr.includes('"abcd" matches 2 jobs'), ambiguous.stderr);
    const missing = await cli(["logs", "fedc"], { stateDir: own });
    assert.deepEqual(missing, {
      code: 1,
      stdout: "",
      stderr: `claude-dispatch: no job id starts with "fedc" in ${own}\n`,
    });
    const followedJson = await cli(["logs", "abcd", "-f", "--json"], { stateDir: own });
    assert.equal(followedJson.code, 1);
    assert.equal(followedJson.stdout.trimEnd().split("\n").length, 1, "after JSON Lines, the error is one more line");
    assert.equal((JSON.parse(followedJson.stdout) as { error: { code: string } }).error.code, "INVALID_ARGUMENT");
  });
});

describe("usage errors: exit 2, nothing on stdout", () => {
  const { dir } = newState();

  test("logs needs one id; -f is for logs, --watch for jobs; --watch needs a terminal and no --json", async () => {
    const cases: [string[], boolean, string][] = [
      [["logs"], false, "logs needs exactly one job id"],
      [["logs", "abc"], false, 'not a job id: "abc"'],
      [["logs", randomUUID(), randomUUID()], false, "logs needs exactly one job id"],
      [["show", randomUUID(), "-f"], false, 'unknown option "-f" for show'],
      [["jobs", "--follow"], false, 'unknown option "--follow" for jobs'],
      [["logs", randomUUID(), "--watch"], false, 'unknown option "--watch" for logs'],
      [["jobs", "--watch"], false, "jobs --watch needs a terminal on stdout"],
      [["jobs", "--watch", "--json"], true, "jobs --watch redraws a table for a terminal and takes no --json"],
    ];
    for (const [args, terminal, message] of cases) {
      const run = await cli(args, { stateDir: dir, terminal });
      assert.equal(run.code, 2, args.join(" "));
      assert.equal(run.stdout, "", args.join(" "));
      assert.ok(run.stderr.includes(message), `${args.join(" ")}: ${run.stderr}`);
      assert.ok(run.stderr.includes("logs ID [-f]"), "the short usage names logs");
    }
  });

  test("--help describes logs, -f and --watch", async () => {
    const run = await cli(["--help"], { stateDir: dir });
    for (const text of ["logs ID [-f|--follow]", "jobs [--all] [--watch]", "logs -f --json"])
      assert.ok(run.stdout.includes(text), text);
  });
});

describe("logs -f", () => {
  test(
    "prints what is there, then each new line once as it is appended, waiting on the clock; at the end, the " +
      "outcome and exit 0",
    async () => {
      const clock = new FakeClock();
      const { dir, store } = newState();
      const record = add(store, job(clock.now()), TOOLS_LINES.slice(0, 2).join(""));
      const following = start(["logs", record.id, "-f"], { stateDir: dir, clock });
      await settle();
      assert.equal(following.stdout(), `${TOOLS_TRANSCRIPT.slice(0, 2).join("\n")}\n`);
      assert.equal(clock.pendingTimers, 1, "one timer: it waits on the clock, never spins");

      // Half a line is held until its newline arrives; nothing is printed twice.
      const third = TOOLS_LINES[2] ?? "";
      appendFileSync(store.file(record.id, "stdout.jsonl"), third.slice(0, 40));
      await clock.advance(199);
      await clock.advance(1);
      assert.equal(following.stdout(), `${TOOLS_TRANSCRIPT.slice(0, 2).join("\n")}\n`);
      appendFileSync(store.file(record.id, "stdout.jsonl"), `${third.slice(40)}${TOOLS_LINES.slice(3).join("")}`);
      await clock.advance(199);
      assert.equal(following.stdout().split("\n").length, 3, "nothing before the next poll");
      await clock.advance(1);
      assert.equal(following.stdout(), `${TOOLS_TRANSCRIPT.join("\n")}\n`);

      store.writeResult(record.id, "MOCK-DONE");
      store.write(completed(record, clock.now(), "MOCK-DONE"));
      await clock.advance(200);
      assert.equal(await following.code, 0, following.stderr());
      const expected = [
        ...TOOLS_TRANSCRIPT,
        "",
        `job ${record.id} completed · session ${RESULT_SESSION}`,
        "result (9 characters):",
        "  MOCK-DONE",
      ];
      assert.equal(following.stdout(), `${expected.join("\n")}\n`);
      assert.equal(clock.pendingTimers, 0, "no timer is left behind");
    },
  );

  test(
    "--json: one object per line, then the outcome; a job that did not complete is exit 1, its " + "error printed",
    async () => {
      const clock = new FakeClock();
      const { dir, store } = newState();
      const record = add(store, job(clock.now(), { status: "queued", started_at: undefined, agent: undefined }));
      const following = start(["logs", record.id.slice(0, 4), "--follow", "--json"], { stateDir: dir, clock });
      await settle();
      assert.equal(following.stdout(), "", "a queued job has no output yet");
      writeFileSync(store.file(record.id, "stdout.jsonl"), TOOLS_LINES.slice(0, 3).join(""));
      store.write({ ...record, status: "running", started_at: clock.now() });
      await clock.advance(200);
      assert.equal(following.stdout().split("\n").length, 4);
      store.write({
        ...record,
        status: "killed",
        finished_at: clock.now(),
        kill_reason: "cli",
        outcome: { ok: false, code: "KILLED", detail: "killed from the command line" },
      });
      await clock.advance(200);
      assert.equal(await following.code, 1);
      const lines = following
        .stdout()
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      assert.deepEqual(lines.slice(0, 3), [
        { kind: "note", text: `[session ${FIXTURE_SESSION} · model claude-opus-5-5]` },
        { kind: "tool", text: "Bash · echo turn-1" },
        { kind: "tool_output", text: "turn-1" },
      ]);
      assert.deepEqual(lines.at(-1), {
        kind: "outcome",
        status: "killed",
        session_id: FIXTURE_SESSION,
        error: { code: "KILLED", detail: "killed from the command line" },
        result: null,
        result_path: null,
      });
      assert.equal(lines.length, 4);
    },
  );

  test("a failed job in text: the error code and detail; exit 1", async () => {
    const clock = new FakeClock();
    const { dir, store } = newState();
    const record = add(store, job(clock.now()), TOOLS_LINES[0]);
    const following = start(["logs", record.id, "-f"], { stateDir: dir, clock });
    await settle();
    store.write({
      ...record,
      status: "failed",
      finished_at: clock.now(),
      outcome: { ok: false, code: "TIMEOUT", detail: "timed out after 2m" },
    });
    await clock.advance(200);
    assert.equal(await following.code, 1);
    assert.ok(
      following
        .stdout()
        .endsWith(`\n\njob ${record.id} failed · session ${FIXTURE_SESSION}\nerror: TIMEOUT: timed out after 2m\n`),
      following.stdout(),
    );
  });

  test("stops when interrupted (exit 130, no timer left), and fails if the job is pruned meanwhile", async () => {
    const clock = new FakeClock();
    const { dir, store } = newState();
    const record = add(store, job(clock.now()));
    const interrupt = new AbortController();
    // Its server lives: it will end the job, so logs -f waits (§15.8).
    const processControl = async () => ({ isAlive: async () => true }) as unknown as ProcessControl;
    const following = start(["logs", record.id, "-f"], {
      stateDir: dir,
      clock,
      interrupted: interrupt.signal,
      processControl,
    });
    await clock.advance(1000);
    interrupt.abort();
    assert.equal(await following.code, 130);
    assert.equal(clock.pendingTimers, 0);

    const pruned = start(["logs", record.id, "-f"], { stateDir: dir, clock, processControl });
    await settle();
    store.remove(record.id);
    await clock.advance(200);
    assert.equal(await pruned.code, 1);
    assert.equal(pruned.stderr(), `claude-dispatch: no job ${record.id} in ${dir}\n`);
  });
});

describe("jobs: the session to resume", () => {
  const now = Date.parse("2025-06-01T12:00:00.000Z");
  const { dir, store } = newState();
  const soFar = TOOLS_LINES.filter((line) => !line.includes('"type":"result"')).join("");
  const runningJob = add(store, job(now, { submitted_at: now - 4 * MINUTE }), soFar);
  const done = add(store, completed(job(now, { submitted_at: now - 3 * MINUTE }), now, "ok"), TOOLS_STREAM);
  // Killed before any result: the session is only in what the agent printed.
  const killed = add(
    store,
    {
      ...job(now, { submitted_at: now - 2 * MINUTE }),
      status: "killed",
      finished_at: now,
      outcome: { ok: false, code: "KILLED", detail: "killed" },
    },
    soFar,
  );
  const queued = add(
    store,
    job(now, { status: "queued", submitted_at: now - MINUTE, started_at: undefined, agent: undefined }),
  );

  test(
    "a SESSION column: live while running, the result's once finished, from the output without one, - " +
      "when unknown",
    async () => {
      const run = await cli(["jobs"], { stateDir: dir });
      assert.equal(run.code, 0, run.stderr);
      const [header = "", ...rows] = run.stdout.trimEnd().split("\n");
      assert.match(header, /^ID {36}STATUS +AGE +CWD +TURNS +COST +SESSION {31}PROMPT$/);
      const sessionOf = (id: string): string => {
        const row = rows.find((line) => line.startsWith(id)) ?? assert.fail(`no row for ${id}`);
        return row.slice(header.indexOf("SESSION"), header.indexOf("PROMPT")).trimEnd();
      };
      assert.equal(sessionOf(runningJob.id), FIXTURE_SESSION);
      assert.equal(sessionOf(done.id), RESULT_SESSION);
      assert.equal(sessionOf(killed.id), FIXTURE_SESSION);
      assert.equal(sessionOf(queued.id), "-");
    },
  );

  test("--json: session_id on each row that has one", async () => {
    const run = await cli(["jobs", "--json"], { stateDir: dir });
    const rows = (JSON.parse(run.stdout) as { jobs: { id: string; session_id?: string }[] }).jobs;
    assert.deepEqual(
      rows.map((row) => [row.id, row.session_id]),
      [
        [runningJob.id, FIXTURE_SESSION],
        [done.id, RESULT_SESSION],
        [killed.id, FIXTURE_SESSION],
        [queued.id, undefined],
      ],
    );
  });
});

describe("jobs --watch", () => {
  test("on a terminal: draws the table every second on the clock, in place, until interrupted", async () => {
    const clock = new FakeClock();
    const { dir, store } = newState();
    const first = add(store, job(clock.now()));
    const interrupt = new AbortController();
    const watching = start(["jobs", "--watch"], {
      stateDir: dir,
      clock,
      terminal: true,
      interrupted: interrupt.signal,
    });
    await settle();
    // Each frame: the cursor home, each line cleared to its end, then the rest of the screen cleared.
    const screens = (): string[] =>
      watching
        .stdout()
        .split(CURSOR_HOME)
        .slice(1)
        .map((frame) =>
          frame
            .replace(/\u001b\[\?(25h|1049l)/g, "")
            .replaceAll(CLEAR_TO_LINE_END, "")
            .replace(/\u001b\[J$/, ""),
        );
    assert.equal(screens().length, 1);
    const [firstScreen = ""] = screens();
    assert.match(
      firstScreen,
      /^claude-dispatch jobs · every 1s · 1970-01-01T00:16:40\.000Z · q to quit\n\nID +STATUS /,
    );
    assert.ok(firstScreen.includes(first.id));

    const second = add(store, job(clock.now(), { status: "queued", started_at: undefined, agent: undefined }));
    await clock.advance(999);
    assert.equal(screens().length, 1, "no redraw before a second has passed");
    await clock.advance(1);
    assert.equal(screens().length, 2);
    // A terminal that does not say its width has 80 columns.
    const listed = await cli(["jobs"], { stateDir: dir, clock, env: { COLUMNS: "80" } });
    assert.equal(
      screens()[1]?.split("\n").slice(2).join("\n"),
      listed.stdout.trimEnd(),
      "the same table as jobs prints",
    );
    assert.ok(screens()[1]?.includes(second.id));

    await clock.advance(3000);
    assert.equal(screens().length, 5);
    interrupt.abort();
    assert.equal(await watching.code, 130);
    assert.equal(clock.pendingTimers, 0, "no timer is left behind");
    assert.equal(screens().length, 5);
  });
});
