/**
 * Claude Code's own sessions of a directory (issue 15): the folder name the
 * CLI derives from a path, a projects folder built here (files to skip, a torn
 * line, files too large to read whole, order and limit), the real session
 * files of test/fixtures/sessions, the `sessions` command in process, and,
 * when the pinned CLI runs, the sessions it has just written.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  copyFileSync,
  lutimesSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import type { RunIo } from "../src/cli/run.js";
import { runCli } from "../src/cli/run.js";
import { systemClock } from "../src/core/clock.js";
import {
  claudeConfigDir,
  claudeProjectFolder,
  claudeSessionFolder,
  listClaudeSessions,
  MAX_SESSION_LIMIT,
  type ClaudeSession,
} from "../src/runtimes/claude/index.js";
import type { JobRecord } from "../src/store/records.js";
import { newStateIn, runCliCaptured } from "./cli-harness.js";
import { cliPath, mockedCliEnvironment, realCliVersion } from "./claude-cli.js";
// @ts-expect-error: a plain ESM fixture without type declarations
import { startMockAnthropic } from "./fixtures/mock-anthropic.mjs";
import { localHosts, machineOf } from "./host-fakes.js";

const scratch = realpathSync(mkdtempSync(path.join(tmpdir(), "claude-dispatch-sessions-")));
after(() => rmSync(scratch, { recursive: true, force: true }));

const NOW = Date.parse("2026-06-01T12:00:00.000Z");
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const KIB = 1024;

const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/sessions/${name}`, import.meta.url));

/** Verbatim Claude Code 2.1.332: three prompts (the second ran two Bash tools), 157,829 bytes. */
const THREE_PROMPTS = {
  file: fixture("three-prompts-2.1.332.jsonl"),
  id: "2a75f637-486e-4841-a14d-bdef0c499406",
  startedAt: Date.parse("2026-12-01T17:34:03.370Z"),
  lastActiveAt: Date.parse("2026-12-01T17:34:07.078Z"),
};
/** Verbatim Claude Code 2.1.332 with --bare: one prompt, 10,243 bytes. */
const BARE = {
  file: fixture("bare-2.1.332.jsonl"),
  id: "93bb56f6-7d85-4b29-920b-8d323031721e",
  startedAt: Date.parse("2026-12-01T17:34:07.467Z"),
  lastActiveAt: Date.parse("2026-12-01T17:34:07.619Z"),
};

/** A fresh directory under scratch, by its real path (as Claude Code files sessions). */
function newDir(prefix: string): string {
  return mkdtempSync(path.join(scratch, prefix));
}

// ---------------------------------------------------------------------------
// Session files written here, in the shape Claude Code 2.1.332 writes them
// ---------------------------------------------------------------------------

type Event = Record<string, unknown>;
const iso = (ms: number): string => new Date(ms).toISOString();

function queued(ms: number, text: string): Event {
  return { type: "queue-operation", operation: "enqueue", timestamp: iso(ms), content: `${text}\n` };
}

function prompt(ms: number, text: string, turnIndex: number, cwd = "/home/me/proj/a"): Event {
  return {
    type: "user",
    message: { role: "user", content: `${text}\n` },
    timestamp: iso(ms),
    turnPosition: { promptIndex: 0, turnIndex },
    cwd,
    uuid: randomUUID(),
  };
}

function toolResult(ms: number, output: string): Event {
  return {
    type: "user",
    message: {
      role: "user",
      content: [{ tool_use_id: "toolu_1", type: "tool_result", content: output, is_error: false }],
    },
    timestamp: iso(ms),
    cwd: "/home/me/proj/a",
  };
}

function reply(ms: number, text: string): Event {
  return {
    type: "assistant",
    message: { role: "assistant", content: [{ type: "text", text }] },
    timestamp: iso(ms),
    cwd: "/home/me/proj/a",
  };
}

/**
 * Lines without a timestamp, as the CLI's prompt snapshots and request
 * shapes are: bulk that is read but changes nothing.
 */
function bulk(bytes: number): string {
  const line = `${JSON.stringify({ type: "api-request-blob", hash: "0".repeat(64), message: { role: "system", content: "z".repeat(900) } })}\n`;
  return line.repeat(Math.ceil(bytes / line.length));
}

const lines = (...events: Event[]): string => events.map((event) => `${JSON.stringify(event)}\n`).join("");

function writeSession(folder: string, name: string, text: string | Buffer, mtimeMs: number): string {
  const file = path.join(folder, name);
  writeFileSync(file, text);
  utimesSync(file, new Date(mtimeMs), new Date(mtimeMs));
  return file;
}

/**
 * A session too large to read whole: its first prompt and its last events at
 * the ends, and between them, well away from both 64 KiB windows, `middle`:
 * what it says would change the listing if it were ever read.
 */
function largeSession(start: Event[], middle: string | Buffer, end: Event[]): Buffer {
  const head = lines(...start) + bulk(70 * KIB);
  const tail = bulk(70 * KIB) + lines(...end);
  const file = Buffer.concat([Buffer.from(head), Buffer.from(middle), Buffer.from(tail)]);
  assert.ok(
    head.length > 64 * KIB && tail.length > 64 * KIB && file.length > 128 * KIB,
    "the middle lies outside both windows",
  );
  return file;
}

/**
 * What a reader that read the middle would find: prompts with a high counter, a later
 * time, another cwd, and bytes that are not JSON or UTF-8.
 */
function decoys(count: number): Buffer {
  const decoy = lines(
    { ...prompt(NOW + 365 * DAY, "DECOY prompt from the middle", 99, "/decoy/cwd"), sessionId: "decoy" },
    reply(NOW + 366 * DAY, "DECOY reply"),
  );
  const garbage = Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x00, 0x0a, ...Buffer.from("not json at all {{{\n")]);
  return Buffer.concat(Array.from({ length: count }, () => [Buffer.from(decoy), garbage]).flat());
}

// ---------------------------------------------------------------------------

describe("the folder Claude Code keeps a directory's sessions in", () => {
  test("every character but an ASCII letter or digit becomes a dash (observed with 2.1.332)", () => {
    assert.equal(
      claudeProjectFolder("/home/me/.claude", "/home/me/proj/a"),
      "/home/me/.claude/projects/-home-me-proj-a",
    );
    // Made by the CLI in a directory of that name: the accented letter, the space, _ . + are dashes.
    assert.equal(path.basename(claudeProjectFolder("/c", "/tmp/sx/Wéird dir_x.y+z")), "-tmp-sx-W-ird-dir-x-y-z");
  });

  test("a name longer than 200 characters is cut and given the hash the CLI appends", () => {
    // The CLI made -tmp-sx-longlong…-g3bmod (207 characters) for this 248-character path.
    const cwd = `/tmp/sx/${"long".repeat(60)}`;
    const name = path.basename(claudeProjectFolder("/c", cwd));
    assert.equal(name, `${`-tmp-sx-${"long".repeat(60)}`.slice(0, 200)}-g3bmod`);
    assert.equal(name.length, 207);
    assert.equal(
      path.basename(claudeProjectFolder("/c", `/tmp/${"a".repeat(195)}`)),
      `-tmp-${"a".repeat(195)}`,
      "200 characters are kept whole",
    );
  });

  test("the config folder is CLAUDE_CONFIG_DIR when set, else ~/.claude", () => {
    assert.equal(claudeConfigDir({ CLAUDE_CONFIG_DIR: "/srv/claude-config" }, "/home/me"), "/srv/claude-config");
    assert.equal(claudeConfigDir({}, "/home/me"), path.join("/home/me", ".claude"));
    assert.equal(
      claudeConfigDir({ CLAUDE_CONFIG_DIR: "" }, "/home/me"),
      path.join("/home/me", ".claude"),
      "empty is unset",
    );
  });

  test(
    "a symlinked directory's sessions are those of its real path; a deleted one's are under the " + "path as given",
    () => {
      const real = newDir("real-");
      const link = path.join(scratch, `link-${randomUUID()}`);
      symlinkSync(real, link);
      assert.equal(claudeSessionFolder("/c", link), claudeProjectFolder("/c", real));
      assert.equal(claudeSessionFolder("/c", "/no/such/dir/../dir"), claudeProjectFolder("/c", "/no/such/dir"));
    },
  );
});

describe("listClaudeSessions on a projects folder prepared here", () => {
  const configDir = newDir("config-");
  const cwd = newDir("project-");
  const folder = claudeProjectFolder(configDir, cwd);
  mkdirSync(folder, { recursive: true });
  const ids = {
    older: randomUUID(),
    torn: randomUUID(),
    large: randomUUID(),
    noPromptAtEnd: randomUUID(),
    empty: randomUUID(),
  };

  writeSession(
    folder,
    `${ids.older}.jsonl`,
    lines(
      queued(NOW - 3 * DAY, "first"),
      prompt(NOW - 3 * DAY, "first", 1),
      reply(NOW - 3 * DAY + MINUTE, "ok"),
      prompt(NOW - 2 * DAY, "second", 2),
      reply(NOW - 2 * DAY, "ok"),
    ),
    NOW - 2 * DAY,
  );
  // A running session: its last line is half written.
  const tornText =
    lines(prompt(NOW - 2 * HOUR, "still running", 1), reply(NOW - HOUR, "working")) +
    JSON.stringify(reply(NOW - MINUTE, "half")).slice(0, 40);
  writeSession(folder, `${ids.torn}.jsonl`, tornText, NOW - HOUR);
  writeSession(
    folder,
    `${ids.large}.jsonl`,
    largeSession(
      [queued(NOW - 5 * DAY, "large session, first prompt"), prompt(NOW - 5 * DAY, "large session, first prompt", 1)],
      decoys(2000),
      [
        prompt(NOW - 20 * MINUTE, "large session, seventh prompt", 7),
        toolResult(NOW - 15 * MINUTE, "done"),
        reply(NOW - 10 * MINUTE, "all done"),
      ],
    ),
    NOW - 10 * MINUTE,
  );
  // The last 64 KiB hold tool results only: later prompts may hide in the middle, so the count is a lower bound.
  writeSession(
    folder,
    `${ids.noPromptAtEnd}.jsonl`,
    largeSession([prompt(NOW - 4 * DAY, "a long tool run", 1)], decoys(100), [
      toolResult(NOW - 31 * MINUTE, "step"),
      reply(NOW - 30 * MINUTE, "step done"),
    ]),
    NOW - 30 * MINUTE,
  );
  writeSession(folder, `${ids.empty}.jsonl`, "", NOW - 5 * MINUTE);
  // Newer than all of those, and never read: names that are not <uuid>.jsonl, a symlink, a folder.
  const elsewhere = writeSession(
    newDir("elsewhere-"),
    "target.jsonl",
    lines(prompt(NOW, "DECOY behind a symlink", 1)),
    NOW,
  );
  for (const name of [
    "notes.jsonl",
    `${randomUUID()}.json`,
    `${randomUUID()}.jsonl.bak`,
    `${randomUUID().toUpperCase()}.jsonl`,
    "agent-1234.jsonl",
  ]) {
    writeSession(folder, name, lines(prompt(NOW, `DECOY in ${name}`, 1)), NOW);
  }
  const link = path.join(folder, `${randomUUID()}.jsonl`);
  symlinkSync(elsewhere, link);
  lutimesSync(link, new Date(NOW), new Date(NOW));
  mkdirSync(path.join(folder, `${randomUUID()}.jsonl`));

  const listed = listClaudeSessions({ configDir, cwd });
  const byId = (id: string): ClaudeSession =>
    listed.find((session) => session.session_id === id) ?? assert.fail(`no session ${id}`);

  test("only regular <uuid>.jsonl files with events, most recently active first", () => {
    assert.deepEqual(
      listed.map((session) => session.session_id),
      [ids.large, ids.noPromptAtEnd, ids.torn, ids.older],
    );
    assert.ok(!JSON.stringify(listed).includes("DECOY"), "no skipped file was read");
  });

  test("each session: times, first prompt, turns, cwd, file and size", () => {
    assert.deepEqual(byId(ids.older), {
      session_id: ids.older,
      started_at: NOW - 3 * DAY,
      last_active_at: NOW - 2 * DAY,
      first_prompt_preview: "first",
      turns: 2,
      turns_exact: true,
      cwd: "/home/me/proj/a",
      file: path.join(folder, `${ids.older}.jsonl`),
      bytes: statSync(path.join(folder, `${ids.older}.jsonl`)).size,
    });
  });

  test("a torn last line is left out; the lines before it count", () => {
    const torn = byId(ids.torn);
    assert.equal(torn.last_active_at, NOW - HOUR, "the half-written event's time is not seen");
    assert.equal(torn.first_prompt_preview, "still running");
    assert.deepEqual([torn.turns, torn.turns_exact], [1, true]);
  });

  test("a file over 128 KiB is read only at its ends: its middle is never seen", () => {
    const large = byId(ids.large);
    assert.ok(large.bytes > 128 * KIB * 2);
    assert.equal(large.started_at, NOW - 5 * DAY);
    assert.equal(large.last_active_at, NOW - 10 * MINUTE, "the middle's later times are not read");
    assert.equal(large.first_prompt_preview, "large session, first prompt");
    assert.equal(large.cwd, "/home/me/proj/a");
    assert.deepEqual(
      [large.turns, large.turns_exact],
      [7, true],
      "the counter on the last prompt, which is in the last 64 KiB",
    );
  });

  test("with no prompt in the last 64 KiB, turns is a lower bound", () => {
    const partial = byId(ids.noPromptAtEnd);
    assert.deepEqual(
      [partial.turns, partial.turns_exact],
      [1, false],
      "the middle's prompts (counter 99) are not read",
    );
    assert.equal(partial.last_active_at, NOW - 30 * MINUTE);
  });

  test("limit keeps the most recently active; it must be 1 to 200", () => {
    assert.deepEqual(
      listClaudeSessions({ configDir, cwd, limit: 2 }).map((session) => session.session_id),
      [ids.large, ids.noPromptAtEnd],
    );
    for (const limit of [0, -1, 1.5, MAX_SESSION_LIMIT + 1, Number.NaN]) {
      assert.throws(() => listClaudeSessions({ configDir, cwd, limit }), RangeError, String(limit));
    }
  });

  test("a directory without a projects folder has no sessions", () => {
    assert.deepEqual(listClaudeSessions({ configDir, cwd: newDir("never-used-") }), []);
    assert.deepEqual(listClaudeSessions({ configDir: path.join(scratch, "no-config"), cwd }), []);
  });

  test("the first prompt: one line of at most 120 characters, without reminders, meta messages or tool results", () => {
    const dir = newDir("preview-");
    const previewFolder = claudeProjectFolder(configDir, dir);
    mkdirSync(previewFolder, { recursive: true });
    const id = randomUUID();
    const long = `Line one\n\n   line two ${"x".repeat(200)}`;
    writeSession(
      previewFolder,
      `${id}.jsonl`,
      lines(
        {
          type: "user",
          isMeta: true,
          message: { role: "user", content: "Caveat: generated by local commands" },
          timestamp: iso(NOW - HOUR),
        },
        toolResult(NOW - HOUR, "not a prompt"),
        {
          type: "user",
          isSidechain: true,
          message: { role: "user", content: "a subagent's task" },
          timestamp: iso(NOW - HOUR),
        },
        {
          type: "user",
          message: {
            role: "user",
            content: [
              { type: "text", text: "<system-reminder>\nbackground\n</system-reminder>" },
              { type: "text", text: long },
            ],
          },
          timestamp: iso(NOW - HOUR),
          turnPosition: { promptIndex: 0, turnIndex: 1 },
        },
      ),
      NOW - HOUR,
    );
    const [session] = listClaudeSessions({ configDir, cwd: dir });
    const preview = session?.first_prompt_preview ?? "";
    assert.equal(preview.length, 120);
    assert.equal(preview, `Line one line two ${"x".repeat(101)}…`);
    assert.deepEqual([session?.turns, session?.turns_exact], [1, true], "only the prompt counts as a turn");
  });

  test("a forked session started when it was forked: the history copied into it keeps older times", () => {
    // As 2.1.332 writes a --fork-session: its own queue line first, then the copied prompts, numbered on.
    const dir = newDir("fork-");
    const forkFolder = claudeProjectFolder(configDir, dir);
    mkdirSync(forkFolder, { recursive: true });
    const id = randomUUID();
    writeSession(
      forkFolder,
      `${id}.jsonl`,
      lines(
        { type: "mode", mode: "normal" },
        queued(NOW - HOUR, "forked"),
        prompt(NOW - 3 * DAY, "the original first prompt", 1),
        prompt(NOW - HOUR, "forked", 2),
        reply(NOW - HOUR + MINUTE, "ok"),
      ),
      NOW,
    );
    const [session] = listClaudeSessions({ configDir, cwd: dir });
    assert.deepEqual(
      [session?.started_at, session?.last_active_at, session?.first_prompt_preview, session?.turns],
      [NOW - HOUR, NOW - HOUR + MINUTE, "the original first prompt", 2],
    );
  });

  test("without a counter (other CLI versions), the prompts of a file read whole are counted", () => {
    const dir = newDir("no-counter-");
    const plainFolder = claudeProjectFolder(configDir, dir);
    mkdirSync(plainFolder, { recursive: true });
    const id = randomUUID();
    const uncounted = (ms: number, text: string): Event => ({
      type: "user",
      message: { role: "user", content: text },
      timestamp: iso(ms),
    });
    writeSession(
      plainFolder,
      `${id}.jsonl`,
      lines(
        uncounted(NOW - 3 * HOUR, "one"),
        reply(NOW - 3 * HOUR, "a"),
        uncounted(NOW - 2 * HOUR, "two"),
        toolResult(NOW - 2 * HOUR, "r"),
      ),
      NOW,
    );
    const [session] = listClaudeSessions({ configDir, cwd: dir });
    assert.deepEqual([session?.turns, session?.turns_exact, session?.cwd], [2, true, "/home/me/proj/a"]);
  });
});

/** The recorded fixtures filed under `cwd` in a fresh config folder, each with its last activity as mtime. */
function installFixtures(configDir: string, cwd: string): string {
  const folder = claudeProjectFolder(configDir, cwd);
  mkdirSync(folder, { recursive: true });
  for (const { file, id, lastActiveAt } of [THREE_PROMPTS, BARE]) {
    const target = path.join(folder, `${id}.jsonl`);
    copyFileSync(file, target);
    utimesSync(target, new Date(lastActiveAt), new Date(lastActiveAt));
  }
  return folder;
}

describe("session files recorded with Claude Code 2.1.332", () => {
  const configDir = newDir("config-");
  const cwd = newDir("project-");
  const folder = installFixtures(configDir, cwd);
  const [bare, three] = listClaudeSessions({ configDir, cwd });

  test("three prompts, the second with two tool turns: larger than 128 KiB, exact from its last 64 KiB", () => {
    assert.deepEqual(three, {
      session_id: THREE_PROMPTS.id,
      started_at: THREE_PROMPTS.startedAt,
      last_active_at: THREE_PROMPTS.lastActiveAt,
      first_prompt_preview: "Find why the parser test fails and fix it",
      turns: 3,
      turns_exact: true,
      cwd: "/tmp/sxfix/project",
      file: path.join(folder, `${THREE_PROMPTS.id}.jsonl`),
      bytes: 157_829,
    });
  });

  test("a --bare session, read whole", () => {
    assert.deepEqual(bare, {
      session_id: BARE.id,
      started_at: BARE.startedAt,
      last_active_at: BARE.lastActiveAt,
      first_prompt_preview: "A bare session",
      turns: 1,
      turns_exact: true,
      cwd: "/tmp/sxfix/project",
      file: path.join(folder, `${BARE.id}.jsonl`),
      bytes: 10_243,
    });
  });
});

// ---------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------

interface SessionsSetup {
  stateDir: string;
  /** CLAUDE_CONFIG_DIR; without it the sessions are looked for under home. */
  configDir?: string;
  home?: string;
  cwd?: string;
  now?: number;
  /** COLUMNS: the width the table must fit. */
  columns?: number;
}

/**
 * runCli in process as cli-harness.ts runs it, with what that harness cannot
 * set: CLAUDE_CONFIG_DIR, the home and the command's directory.
 */
async function sessionsCli(
  args: string[],
  setup: SessionsSetup,
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const io: RunIo = {
    env: {
      CLAUDE_DISPATCH_STATE_DIR: setup.stateDir,
      PATH: "",
      ...(setup.configDir ? { CLAUDE_CONFIG_DIR: setup.configDir } : {}),
      ...(setup.columns ? { COLUMNS: String(setup.columns) } : {}),
    },
    machine: machineOf({ home: setup.home ?? "/home/tester" }),
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    clock: { now: () => setup.now ?? NOW, setTimer: systemClock.setTimer },
    processControl: async () => assert.fail("sessions never loads the process layer"),
    hosts: async (processes) => localHosts(processes),
    nodePath: "/usr/bin/node",
    mainPath: "/opt/claude-dispatch/dist/main.js",
    runFile: async () => assert.fail("sessions runs no program"),
    identity: () => ({ pid: 31337 }),
    randomName: () => randomUUID(),
    cwd: setup.cwd,
  };
  const code = await runCli(args, io);
  return { code, stdout, stderr };
}

function jobRecord(overrides: Partial<JobRecord>): JobRecord {
  return {
    format: 1,
    runtime: "claude",
    host: "local",
    id: randomUUID(),
    kind: "start",
    cwd: "/tmp/sxfix/project",
    prompt_preview: "continue",
    options: {},
    status: "completed",
    submitted_at: NOW - DAY,
    owner: { pid: 4242, start_time: "100" },
    generation: 0,
    ...overrides,
  };
}

describe("claude-dispatch sessions", () => {
  const configDir = newDir("config-");
  const cwd = newDir("project-");
  const folder = installFixtures(configDir, cwd);
  const { dir: stateDir, store } = newStateIn(scratch);
  // One job resumed the three-prompt session; another ended in the bare one; a third is of neither.
  const resumed = jobRecord({ resume_session_id: THREE_PROMPTS.id });
  const ended = jobRecord({ outcome: { ok: true, result: { sessionId: BARE.id, numTurns: 1 } } });
  const unrelated = jobRecord({ resume_session_id: randomUUID() });
  for (const record of [resumed, ended, unrelated]) store.create(record, record.prompt_preview);
  // A day and a bit after the fixtures were recorded.
  const now = Date.parse("2026-12-02T19:00:00.000Z");

  test("at 60 columns every line fits: the prompt is cut, the ages and turns left out, the ids whole", async () => {
    const run = await sessionsCli(["sessions", cwd], { stateDir, configDir, now, columns: 60 });
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.trimEnd().split("\n");
    for (const line of lines) assert.ok(line.length <= 60, `${line.length} columns: ${line}`);
    assert.ok(
      lines.some((line) => line.startsWith(`${THREE_PROMPTS.id}  `)),
      run.stdout,
    );
    assert.ok(run.stdout.includes(resumed.id), "a job id is never cut");
  });

  test("a table: session, ages, turns and first prompt, the jobs of each, and how to resume", async () => {
    const run = await sessionsCli(["sessions", cwd], { stateDir, configDir, now });
    assert.deepEqual(run, {
      code: 0,
      stderr: "",
      stdout: [
        "SESSION                               STARTED  LAST ACTIVE  TURNS  FIRST PROMPT",
        `${BARE.id}  1d       1d               1  A bare session`,
        `  jobs: ${ended.id}`,
        `${THREE_PROMPTS.id}  1d       1d               3  Find why the parser test fails and fix it`,
        `  jobs: ${resumed.id}`,
        `(to resume one, pass its session id as session_id to claude_start, with cwd ${cwd})`,
        "",
      ].join("\n"),
    });
  });

  test("--json: the directory, the folder read and every session with its job ids", async () => {
    const run = await sessionsCli(["sessions", cwd, "--json", "--limit", "1"], { stateDir, configDir, now });
    assert.equal(run.code, 0, run.stderr);
    const document = JSON.parse(run.stdout) as {
      dir: string;
      project_folder: string;
      sessions: (ClaudeSession & { job_ids: string[] })[];
    };
    assert.equal(document.dir, cwd);
    assert.equal(document.project_folder, folder);
    assert.deepEqual(document.sessions, [
      { ...listClaudeSessions({ configDir, cwd, limit: 1 })[0], job_ids: [ended.id] },
    ]);
    assert.equal(document.sessions[0]?.session_id, BARE.id);
  });

  test("DIR defaults to the command's directory, and a relative one is taken from it", async () => {
    const parent = path.dirname(cwd);
    for (const [args, from] of [
      [["sessions", "--json"], cwd],
      [["sessions", path.basename(cwd), "--json"], parent],
      [["sessions", `--limit=2`, "--json", "."], cwd],
    ] as const) {
      const run = await sessionsCli([...args], { stateDir, configDir, cwd: from, now });
      assert.equal(run.code, 0, run.stderr);
      const document = JSON.parse(run.stdout) as { dir: string; sessions: unknown[] };
      assert.equal(document.dir, cwd, args.join(" "));
      assert.equal(document.sessions.length, 2);
    }
  });

  test("without CLAUDE_CONFIG_DIR the sessions are those under ~/.claude", async () => {
    const home = newDir("home-");
    installFixtures(path.join(home, ".claude"), cwd);
    const run = await sessionsCli(["sessions", cwd, "--json"], { stateDir, home, now });
    const document = JSON.parse(run.stdout) as { project_folder: string; sessions: ClaudeSession[] };
    assert.equal(document.project_folder, claudeProjectFolder(path.join(home, ".claude"), cwd));
    assert.deepEqual(
      document.sessions.map((session) => session.session_id),
      [BARE.id, THREE_PROMPTS.id],
    );
  });

  test("no sessions: one line that says where it looked", async () => {
    const empty = newDir("empty-");
    const run = await sessionsCli(["sessions", empty], { stateDir, configDir, now });
    assert.deepEqual(run, {
      code: 0,
      stderr: "",
      stdout: `No Claude Code sessions of ${empty} (looked in ${claudeProjectFolder(configDir, empty)}).\n`,
    });
  });

  test("usage errors: exit 2 and the short usage, never a listing", async () => {
    const cases: [string[], string][] = [
      [["sessions"], "sessions needs a directory here (the current one is not known)"],
      [
        ["sessions", "relative/dir"],
        'sessions needs an absolute directory here (the current one is not known), got "relative/dir"',
      ],
      [["sessions", "/a", "/b"], 'sessions takes one directory at most, got "/b"'],
      [["sessions", "/a", "--limit"], "--limit needs a number of sessions from 1 to 200"],
      [["sessions", "/a", "--limit", "0"], '--limit needs a number of sessions from 1 to 200, got "0"'],
      [["sessions", "/a", "--limit=201"], 'got "201"'],
      [["sessions", "/a", "--limit", "ten"], 'got "ten"'],
      [["sessions", "/a", "--all"], 'unknown option "--all" for sessions'],
      [["jobs", "--limit", "3"], 'unknown option "--limit" for jobs'],
    ];
    for (const [args, message] of cases) {
      // The shared harness: it hands the CLI no current directory.
      const run = await runCliCaptured(args, { stateDir });
      assert.equal(run.code, 2, args.join(" "));
      assert.equal(run.stdout, "", args.join(" "));
      assert.ok(run.stderr.includes(message), `${args.join(" ")}: ${run.stderr}`);
      assert.ok(run.stderr.includes("Usage: claude-dispatch"), args.join(" "));
    }
  });

  test("--help describes the command", async () => {
    const run = await runCliCaptured(["sessions", "--help"], { stateDir });
    assert.equal(run.code, 0);
    assert.ok(run.stdout.includes("sessions [DIR] [--limit N]"));
    assert.ok(run.stdout.includes("CLAUDE_CONFIG_DIR"));
  });
});

// ---------------------------------------------------------------------------
// The real CLI
// ---------------------------------------------------------------------------

interface Mock {
  url: string;
  close(): Promise<void>;
}

const version = realCliVersion("the session listing");

describe(`sessions the real Claude Code CLI (${version ?? "missing"}) writes`, { skip: !version }, () => {
  let mock: Mock;
  let home: string;
  let project: string;
  /** The CLI is started in a symlink to the project: it files the session under the real path. */
  let projectLink: string;

  before(async () => {
    mock = (await startMockAnthropic()) as Mock;
    home = newDir("real-home-");
    project = newDir("real-project-");
    projectLink = path.join(scratch, `real-link-${randomUUID()}`);
    symlinkSync(project, projectLink);
    mkdirSync(path.join(home, ".claude"));
    writeFileSync(path.join(home, ".claude", "settings.json"), JSON.stringify({ permissions: { allow: ["Bash"] } }));
    mkdirSync(path.join(home, "tmp"));
  });

  after(async () => {
    await mock.close();
  });

  /** One headless prompt, with an environment built from nothing but what it names; resolves to the session id. */
  function runClaude(promptText: string, extraArgs: string[] = [], env: Record<string, string> = {}): Promise<string> {
    const child = spawn(cliPath, ["-p", "--output-format", "stream-json", "--verbose", ...extraArgs], {
      cwd: projectLink,
      env: mockedCliEnvironment(home, path.join(home, "tmp"), mock.url, env),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.end(`${promptText}\n`);
    return new Promise((resolve, reject) => {
      child.once("error", reject);
      child.once("close", (status) => {
        const result = stdout
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as { type: string; session_id?: string })
          .findLast((event) => event.type === "result");
        if (status !== 0 || !result?.session_id)
          reject(new Error(`claude exited ${status}: ${stderr}${stdout.slice(-2000)}`));
        else resolve(result.session_id);
      });
    });
  }

  test("a session and its resume are listed, with the CLI's own turn count", async () => {
    const first = await runClaude("Remember the number 42\nplease");
    const resumed = await runClaude("MOCK:REPEAT 2", [`--resume=${first}`]);
    assert.equal(resumed, first, "--resume continues the same session");
    const other = await runClaude("A second session");
    const configDir = claudeConfigDir({}, home);
    const sessions = listClaudeSessions({ configDir, cwd: projectLink });
    assert.deepEqual(
      sessions.map((session) => session.session_id),
      [other, first],
    );
    const [latest, earlier] = sessions as [ClaudeSession, ClaudeSession];
    assert.equal(earlier.first_prompt_preview, "Remember the number 42 please");
    assert.deepEqual([earlier.turns, earlier.turns_exact], [2, true]);
    assert.equal(earlier.cwd, project);
    assert.ok(earlier.started_at <= earlier.last_active_at && earlier.last_active_at <= latest.started_at + 1000);
    assert.equal(earlier.file, path.join(claudeProjectFolder(configDir, project), `${first}.jsonl`));
    assert.deepEqual([latest.first_prompt_preview, latest.turns], ["A second session", 1]);

    const { dir: stateDir } = newStateIn(scratch);
    const run = await sessionsCli(["sessions", "--json"], { stateDir, home, cwd: project, now: Date.now() });
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(
      (JSON.parse(run.stdout) as { sessions: ClaudeSession[] }).sessions.map((session) => session.session_id),
      [other, first],
    );
  });

  test("CLAUDE_CONFIG_DIR moves the store, and the listing follows it", async () => {
    const configDir = newDir("real-config-");
    const id = await runClaude("Stored elsewhere", [], { CLAUDE_CONFIG_DIR: configDir });
    assert.deepEqual(
      listClaudeSessions({ configDir, cwd: project }).map((session) => session.session_id),
      [id],
    );
    assert.ok(
      !listClaudeSessions({ configDir: claudeConfigDir({}, home), cwd: project }).some(
        (session) => session.session_id === id,
      ),
    );
    const recorded = readFileSync(path.join(claudeProjectFolder(configDir, project), `${id}.jsonl`), "utf8");
    assert.ok(recorded.includes(`"sessionId":"${id}"`));
  });
});
