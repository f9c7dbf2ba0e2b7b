/**
 * The command line as a Unix tool (PROTOCOL.md §17): tables fitted to the
 * width (COLUMNS, else the terminal's), `jobs --watch` on a terminal (its
 * header kept, q and Ctrl-C, the terminal restored), in process on a fake
 * terminal and once under a real pseudo-terminal (util-linux `script`), and
 * the built command line writing into a pipe its reader closed.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import type { CliIo } from "../src/cli/index.js";
import { ownLinuxStartTime } from "../src/hosts/local/self.js";
import type { JobRecord } from "../src/store/records.js";
import type { StateStore } from "../src/store/state-store.js";
import { FakeTerminal, HOME, newStateIn, runCliCaptured, startCli } from "./cli-harness.js";
import { FakeClock, settle } from "./helpers.js";
import { minimalEnvironment, SERVER_MAIN } from "./server-process.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-cli-terminal-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const NOW = Date.parse("2025-06-01T12:00:00.000Z");
const MINUTE = 60_000;
const SESSION = "9b2f8a47-53c4-4f0e-9d61-1f7e2c3b4a50";
const ENTER_ALTERNATE_SCREEN = "\u001b[?1049h";
const LEAVE_ALTERNATE_SCREEN = "\u001b[?1049l";
const CURSOR_HOME = "\u001b[H";
/** Where a worktree job runs: the state directory's worktrees folder, deep in a repository. */
const WORKTREE_CWD = `${HOME}/.local/state/claude-dispatch/worktrees/3e1e5a47-0b1c-4d2e-8f90-a1b2c3d4e5f6/packages/src/deep/dir`;
const LONG_PROMPT = "refactor the parser into modules, keeping the public API exactly as it is and every test green";

function job(overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    format: 1,
    runtime: "claude",
    host: "local",
    id: randomUUID(),
    kind: "start",
    cwd: WORKTREE_CWD,
    prompt_preview: LONG_PROMPT,
    options: {},
    status: "completed",
    submitted_at: NOW - 10 * MINUTE,
    started_at: NOW - 10 * MINUTE,
    finished_at: NOW - 5 * MINUTE,
    turns: 3,
    cost_usd: 0.0018,
    outcome: { ok: true, result: { sessionId: SESSION, numTurns: 3, costUsd: 0.0018 }, result_chars: 5 },
    owner: { pid: 4242, start_time: "100" },
    generation: 0,
    ...overrides,
  };
}

function add(store: StateStore, record: JobRecord): JobRecord {
  store.create(record, record.prompt_preview);
  return record;
}

/** Columns a terminal gives a line: two for the wide characters of East Asian scripts, one for the rest. */
function columnsOf(line: string): number {
  let columns = 0;
  const wide = /[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\uff00-\uff60]/u;
  for (const character of line) columns += wide.test(character) ? 2 : 1;
  return columns;
}

function assertFits(text: string, width: number, what: string): void {
  for (const line of text.split("\n")) {
    assert.ok(columnsOf(line) <= width, `${what}: ${columnsOf(line)} columns > ${width}: ${JSON.stringify(line)}`);
  }
}

describe("tables fit the width", () => {
  const { dir, store } = newStateIn(scratch);
  const jobs = [
    add(store, job({ submitted_at: NOW - 30 * MINUTE })),
    add(
      store,
      job({ submitted_at: NOW - 20 * MINUTE, cwd: `${HOME}/src/app`, prompt_preview: "fix the failing tests" }),
    ),
    // Two columns a character.
    add(
      store,
      job({
        submitted_at: NOW - 15 * MINUTE,
        prompt_preview: "テストを直して、パーサーをモジュールに分けてください。",
      }),
    ),
  ];

  for (const width of [80, 200]) {
    test(`COLUMNS=${width}: every line fits, ids whole, a path elided in the middle, a prompt at the end`, async () => {
      const run = await runCliCaptured(["jobs"], { stateDir: dir, env: { COLUMNS: String(width) } });
      assert.equal(run.code, 0, run.stderr);
      assertFits(run.stdout, width, "jobs");
      const lines = run.stdout.split("\n");
      const rowOf = (id: string): string =>
        lines.find((line) => line.startsWith(`${id} `)) ??
        assert.fail(`no whole id ${id} starts a row:\n${run.stdout}`);
      for (const { id } of jobs) rowOf(id);
      const deep = rowOf(jobs[0]?.id ?? "");
      assert.match(deep, /  ~\/\S*…\S*\/dir  /, "the worktree path keeps its start and its end");
      assert.match(deep, /  refactor th[^…]*…$/, "the prompt is cut at its end");
      const short = rowOf(jobs[1]?.id ?? "");
      assert.match(
        short,
        width === 80 ? /  ~\/src\/app  / : /  ~\/src\/app  .*fix the failing tests$/,
        "what fits is whole",
      );
      if (width === 200) assert.ok(deep.includes(SESSION), "at 200 columns the session is shown");
      else assert.match(run.stdout, /\n\(not shown at 80 columns: SESSION, TURNS, COST; --json has them\)\n/);
    });
  }

  test("the width is COLUMNS, else the terminal's, else 80 on a terminal of unknown size; piped, whole", async () => {
    const widest = (text: string): number => Math.max(...text.split("\n").map(columnsOf));
    const onTerminal = (columns: number | undefined, env: Record<string, string> = {}) =>
      runCliCaptured(["jobs"], { stateDir: dir, terminal: true, terminalSize: () => ({ columns, rows: 40 }), env });
    assert.ok(widest((await onTerminal(100)).stdout) <= 100);
    assert.ok(widest((await onTerminal(100)).stdout) > 90, "a wider terminal is used");
    assert.ok(widest((await onTerminal(undefined)).stdout) <= 80);
    assert.ok(widest((await onTerminal(100, { COLUMNS: "120" })).stdout) > 100, "COLUMNS wins over the terminal");
    const piped = await runCliCaptured(["jobs"], { stateDir: dir });
    assert.ok(widest(piped.stdout) > 200, "piped and without COLUMNS, nothing is cut");
    assert.ok(piped.stdout.includes(WORKTREE_CWD.slice(HOME.length)), "the whole path");
  });

  test("an ambiguous prefix lists its jobs within the width too", async () => {
    const { dir: other, store: otherStore } = newStateIn(scratch);
    for (const suffix of ["1", "2"]) add(otherStore, job({ id: `abcdabcd-0000-4000-8000-00000000000${suffix}` }));
    const run = await runCliCaptured(["show", "abcdabcd", "--json"], { stateDir: other, env: { COLUMNS: "80" } });
    assert.equal(run.code, 1);
    const text = await runCliCaptured(["show", "abcdabcd"], { stateDir: other, env: { COLUMNS: "80" } });
    assert.equal(text.code, 1);
    // The message names the state directory, whatever its length; the table under it fits.
    const table = text.stderr.split("\n").filter((line) => line.startsWith("  "));
    assert.equal(table.length, 3);
    assertFits(table.join("\n"), 80, "the matches");
    assert.ok(text.stderr.includes("abcdabcd-0000-4000-8000-000000000001"));
  });
});

/** A terminal of 80 × 12 on stdout, a keyboard on stdin, and the trapped signals' listeners. */
function watching(dir: string, clock = new FakeClock(), more: { interrupted?: AbortSignal } = {}) {
  const keyboard = new FakeTerminal();
  const trapped: (() => void)[] = [];
  const trapInterrupts: NonNullable<CliIo["trapInterrupts"]> = (listener) => {
    trapped.push(listener);
    return () => trapped.splice(trapped.indexOf(listener), 1);
  };
  const started = startCli(["jobs", "--watch"], {
    stateDir: dir,
    clock,
    terminal: true,
    terminalSize: () => ({ columns: 80, rows: 12 }),
    stdin: keyboard,
    trapInterrupts,
    ...more,
  });
  /** Each redraw, as the lines it puts on the screen. */
  const frames = (): string[][] =>
    started
      .stdout()
      .split(CURSOR_HOME)
      .slice(1)
      .map((frame) => frame.replace(/\u001b\[(\?25[hl]|\?1049l|J|K)/g, "").split("\n"));
  return { ...started, keyboard, trapped, clock, frames };
}

describe("jobs --watch on a terminal", () => {
  const { dir, store } = newStateIn(scratch);
  const queued = { status: "queued", started_at: undefined, finished_at: undefined, outcome: undefined } as const;
  for (let i = 0; i < 30; i += 1) add(store, job({ ...queued, submitted_at: NOW - i * MINUTE }));

  test(
    "redraws in place on the alternate screen, its header within the rows; q quits, the " + "terminal restored",
    async () => {
      const watch = watching(dir);
      await settle();
      assert.ok(watch.stdout().startsWith(ENTER_ALTERNATE_SCREEN), "the alternate screen first");
      assert.deepEqual(watch.keyboard.modes, [true], "raw mode: each key arrives at once");
      await watch.clock.advance(1000);
      const frames = watch.frames();
      assert.equal(frames.length, 2);
      for (const frame of frames) {
        assert.ok(frame.length <= 12, `at most the terminal's rows: ${frame.length}`);
        assert.match(frame[0] ?? "", /^claude-dispatch jobs · every 1s · .* · q to quit$/);
        assert.match(frame[2] ?? "", /^ID {36}STATUS /, "the table's header is on screen");
        assert.match(frame.join("\n"), /\(\d+ earlier jobs not shown: a taller terminal shows them\)/);
        assertFits(frame.join("\n"), 80, "a frame");
      }
      watch.keyboard.type("x");
      await settle();
      assert.equal(watch.frames().length, 2, "another key does nothing");
      watch.keyboard.type("q");
      assert.equal(await watch.code, 0);
      assert.ok(watch.stdout().endsWith(LEAVE_ALTERNATE_SCREEN), "the screen it left is the one it found");
      assert.deepEqual(watch.keyboard.modes, [true, false], "raw mode off again");
      assert.equal(watch.keyboard.listenerCount("data"), 0);
      assert.deepEqual(watch.trapped, [], "signals are theirs again");
      assert.equal(watch.clock.pendingTimers, 0);
    },
  );

  test("Ctrl-C as a key, or as a signal, ends it with 130, restored", async () => {
    const byKey = watching(dir);
    await settle();
    byKey.keyboard.type("\u0003");
    assert.equal(await byKey.code, 130);
    assert.deepEqual(byKey.keyboard.modes, [true, false]);
    assert.ok(byKey.stdout().endsWith(LEAVE_ALTERNATE_SCREEN));

    const bySignal = watching(dir);
    await settle();
    assert.equal(bySignal.trapped.length, 1, "SIGINT, SIGTERM and SIGHUP are trapped while it draws");
    bySignal.trapped[0]?.();
    assert.equal(await bySignal.code, 130);
    assert.ok(bySignal.stdout().endsWith(LEAVE_ALTERNATE_SCREEN));
    assert.deepEqual(bySignal.trapped, []);
  });

  test("a failure while drawing still restores the terminal", async () => {
    class FailingClock extends FakeClock {
      failing = false;
      override now(): number {
        if (this.failing) throw new Error("the clock broke");
        return super.now();
      }
    }
    const clock = new FailingClock();
    const watch = watching(dir, clock);
    await settle();
    clock.failing = true;
    await clock.advance(1000);
    assert.equal(await watch.code, 1);
    assert.ok(watch.stdout().endsWith(LEAVE_ALTERNATE_SCREEN), JSON.stringify(watch.stdout().slice(-40)));
    assert.deepEqual(watch.keyboard.modes, [true, false]);
    assert.deepEqual(watch.trapped, []);
  });
});

const isLinux = process.platform === "linux";
const hasScript = isLinux && spawnSync("script", ["--version"]).status === 0;

/** What the built command line did with stdout closed by its reader: at once, or after the first chunk. */
function runIntoClosedPipe(
  args: string[],
  env: Record<string, string>,
  when: "at-once" | "after-first-chunk",
): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SERVER_MAIN, ...args], {
      env: minimalEnvironment(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    if (when === "at-once") child.stdout.destroy();
    else child.stdout.once("data", () => child.stdout.destroy());
    // A command that never notices would hang here: it is killed, and the test fails on its signal.
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stderr });
    });
  });
}

describe("a closed pipe ends a command quietly", { skip: !isLinux && "the built CLI's tests run on Linux" }, () => {
  const { dir, store } = newStateIn(scratch);
  // Enough jobs, prompt and transcript that each listing is several times a pipe's buffer (64 KiB): a reader
  // gone after its first chunk leaves most of it unwritten.
  for (let i = 0; i < 1000; i += 1) add(store, job({ submitted_at: NOW - i * MINUTE }));
  const startTime = ownLinuxStartTime(process.platform);
  const bigPrompt = "Read every file and say what it does. ".repeat(10_000);
  // Running, its server this test's own process: alive, so `logs -f` would follow it for ever.
  const owner = { pid: process.pid, ...(startTime ? { start_time: startTime } : {}) };
  const runningJob = job({ status: "running", finished_at: undefined, outcome: undefined, owner });
  store.create(runningJob, bigPrompt);
  const event = (text: string): string =>
    `${JSON.stringify({ type: "assistant", session_id: SESSION, message: { role: "assistant", content: [{ type: "text", text }] } })}\n`;
  const transcript = (what: string): string =>
    Array.from({ length: 10_000 }, (_, i) => event(`step ${i}: ${what}`)).join("");
  writeFileSync(store.file(runningJob.id, "stdout.jsonl"), transcript("read another file and said what it does"));
  const finishedJob = add(store, job({ submitted_at: NOW }));
  writeFileSync(store.file(finishedJob.id, "stdout.jsonl"), transcript("nothing to see here, move along"));
  const claudeConfig = path.join(scratch, "claude-config");
  mkdirSync(claudeConfig, { recursive: true });
  const env = { CLAUDE_DISPATCH_STATE_DIR: dir, HOME: scratch, CLAUDE_CONFIG_DIR: claudeConfig };

  // Each command, and whether what it prints is long enough to be cut short by a reader gone after one chunk.
  const commands: [string[], boolean][] = [
    [["jobs", "--all"], true],
    [["jobs", "--all", "--json"], true],
    [["show", runningJob.id], true],
    [["show", runningJob.id, "--json"], true],
    [["logs", finishedJob.id], true],
    [["logs", finishedJob.id, "--json"], true],
    [["logs", "-f", runningJob.id], true],
    [["logs", "-f", "--json", runningJob.id], true],
    [["sessions", scratch], false],
    [["doctor"], false],
    [["--help"], false],
    [["help"], false],
  ];
  for (const [args, long] of commands) {
    test(`${args.join(" ")}: no stack trace, exit 141 once a write found the reader gone`, async () => {
      for (const when of ["at-once", "after-first-chunk"] as const) {
        const run = await runIntoClosedPipe(args, env, when);
        const what = `${args.join(" ")} (closed ${when}): ${run.stderr.slice(0, 500)}`;
        assert.equal(run.signal, null, what);
        assert.doesNotMatch(run.stderr, /Error|EPIPE|^\s+at /m, what);
        // Output that fitted whole in the pipe before its reader left was written: the command ends as it would have.
        if (when === "at-once" || long) assert.equal(run.code, 141, what);
        else assert.ok(run.code === 141 || run.code === 0 || (args[0] === "doctor" && run.code === 1), what);
      }
    });
  }
});

describe("jobs --watch under a pseudo-terminal", { skip: !hasScript && "needs util-linux script on Linux" }, () => {
  const { dir, store } = newStateIn(scratch);
  for (let i = 0; i < 30; i += 1) add(store, job({ submitted_at: NOW - i * MINUTE }));

  test(
    "draws on the alternate screen within the terminal's rows, quits on q, leaves the " + "terminal as it was",
    async () => {
      // The terminal's size is set inside it, so the size the command reads is the real one.
      const command = `stty rows 14 cols 90 && '${process.execPath}' '${SERVER_MAIN}' jobs --watch; stty -a`;
      const env = minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: dir, TERM: "xterm" });
      const child = spawn("script", ["-qfec", command, "/dev/null"], { env, stdio: ["pipe", "pipe", "pipe"] });
      let output = "";
      let stderr = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
      const closed = new Promise<number | null>((resolve) => child.on("close", resolve));
      const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
      try {
        // Keys typed before the first frame would be read by a terminal still in line mode: typed after it.
        const drawn = (): boolean => output.includes(ENTER_ALTERNATE_SCREEN) && /ID {36}STATUS/.test(output);
        await Promise.race([until(child.stdout, drawn), closed]);
        assert.ok(drawn(), `no frame:\n${output}\n${stderr}`);
        child.stdin.write("q");
        assert.equal(await closed, 0, `${output}\n${stderr}`);
      } finally {
        clearTimeout(timer);
        child.stdin.end();
      }
      const screen = output.slice(output.indexOf(ENTER_ALTERNATE_SCREEN), output.indexOf(LEAVE_ALTERNATE_SCREEN));
      assert.ok(output.includes(LEAVE_ALTERNATE_SCREEN), "the alternate screen is left");
      const frame = screen.split(CURSOR_HOME)[1] ?? "";
      assert.ok(frame.split("\n").length <= 14, "within the rows");
      assert.match(frame, /claude-dispatch jobs · every 1s/);
      assert.match(frame, /earlier jobs not shown/);
      const after = output.slice(output.indexOf(LEAVE_ALTERNATE_SCREEN));
      assert.match(after, /(^|\s)icanon(\s|$)/m, "line editing is back");
      assert.match(after, /(^|\s)echo(\s|$)/m, "echo is back");
      assert.doesNotMatch(output, /Error|^\s+at /m);
    },
  );
});

/** Resolves once what a stream has printed so far satisfies a condition, waiting on its chunks (no timers). */
function until(stream: NodeJS.ReadableStream, condition: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (!condition()) return;
      stream.off("data", check);
      resolve();
    };
    stream.on("data", check);
    check();
  });
}
