/**
 * The human CLI against state directories prepared here: runCli in
 * process with fake io (captured output, a fixed clock, a process layer whose
 * liveness the test decides), real process trees killed on Linux, and the
 * built binary for `jobs --json`, `--version` and `--help`.
 */
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  claudeMcpAddLine,
  hostEnvironment,
  runCli,
  terminalHint,
  type CliIo,
  type RunFileResult,
} from "../src/cli/index.js";
import { systemClock, type Clock } from "../src/core/clock.js";
import { DEPTH_VARIABLE } from "../src/config.js";
import {
  createProcessControl,
  parseProcStat,
  TREE_MARKER_VARIABLE,
  type AttachRequest,
  type ChildHandle,
  type ProcessControl,
} from "../src/hosts/local/index.js";
import { StateStore } from "../src/store/state-store.js";
import { type JobRecord } from "../src/store/records.js";
import { SERVER_VERSION } from "../src/core/version.js";
import { RecordingLogger, settle } from "./helpers.js";
import { FakeTerminal } from "./cli-harness.js";
import { formatBytes } from "../src/cli/format.js";
import { isAlive, LINUX_PLATFORM, waitFor } from "./processes.js";
import { SERVER_MAIN } from "./server-process.js";
import { localHosts, machineOf } from "./host-fakes.js";

const isLinux = process.platform === "linux";
const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-cli-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const NOW = Date.parse("2025-06-01T12:00:00.000Z");
const HOME = "/home/tester";
const OWNER = { pid: 4242, start_time: "100" };
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Verbatim Claude Code 2.1.332 output: three tool turns, then the result (3 turns, $0.0018). */
const TOOLS_STREAM = readFileSync(
  fileURLToPath(new URL("./fixtures/cli/stream-tools-2.1.332.ndjson", import.meta.url)),
  "utf8",
);
/** The same run while still going: everything before its result event. */
const TOOLS_STREAM_SO_FAR = TOOLS_STREAM.split("\n")
  .filter((line) => line !== "" && (JSON.parse(line) as { type: string }).type !== "result")
  .map((line) => `${line}\n`)
  .join("");

/** Answers liveness from a set the test fills, and records what the CLI asks of it. */
class FakeProcesses implements ProcessControl {
  readonly alive = new Set<number>();
  readonly attached: AttachRequest[] = [];
  readonly killed: number[] = [];
  survivors: number[] = [];
  idleCalls = 0;

  start(): ChildHandle {
    throw new Error("the CLI never starts a process");
  }

  async startTimeOf(): Promise<string | undefined> {
    return undefined;
  }

  async findMarked(): Promise<{ pid: number; startTime: string } | null | undefined> {
    return null;
  }

  attach(request: AttachRequest): ChildHandle {
    this.attached.push(request);
    return {
      pid: request.pid,
      marker: request.marker,
      identity: async () => ({ pid: request.pid, startTime: request.startTime, marker: request.marker }),
      exited: new Promise(() => undefined),
      settled: Promise.resolve(),
      killTree: async () => {
        const pid = request.pid as number;
        this.killed.push(pid);
        if (this.survivors.length === 0) this.alive.delete(pid);
        return { signalled: 2, survivors: this.survivors };
      },
    };
  }

  async isAlive(pid: number): Promise<boolean> {
    return this.alive.has(pid);
  }

  async idle(): Promise<void> {
    this.idleCalls += 1;
  }
}

interface Setup {
  stateDir: string;
  env?: Record<string, string>;
  processes?: ProcessControl;
  clock?: Clock;
  runFile?: (file: string, args: string[], timeoutMs: number) => Promise<RunFileResult>;
  stdin?: CliIo["stdin"];
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

const fixedClock: Clock = { now: () => NOW, setTimer: systemClock.setTimer };
const CLI_IDENTITY = { pid: 31337, start_time: "777" };

async function cli(args: string[], setup: Setup): Promise<Run> {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    // Built from nothing: the runner's own environment never leaks in.
    env: { CLAUDE_DISPATCH_STATE_DIR: setup.stateDir, PATH: "", ...setup.env },
    machine: machineOf({ home: HOME }),
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    clock: setup.clock ?? fixedClock,
    processControl: async () => setup.processes ?? new FakeProcesses(),
    hosts: async (processes) => localHosts(processes, CLI_IDENTITY),
    nodePath: "/usr/bin/node",
    mainPath: "/opt/claude dispatch/dist/main.js",
    runFile: setup.runFile ?? (async () => ({ ok: true, stdout: "2.1.332 (Claude Code)\n", stderr: "" })),
    identity: () => CLI_IDENTITY,
    randomName: () => randomUUID(),
    stdin: setup.stdin,
  };
  const code = await runCli(args, io);
  return { code, stdout, stderr };
}

function newState(): { dir: string; store: StateStore } {
  const dir = mkdtempSync(path.join(scratch, "state-"));
  const store = new StateStore(dir, { randomName: () => randomUUID() });
  store.open();
  return { dir, store };
}

function record(overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    format: 1,
    runtime: "claude",
    host: "local",
    id: randomUUID(),
    kind: "start",
    cwd: `${HOME}/src/app`,
    prompt_preview: "fix the failing tests",
    options: {},
    status: "completed",
    submitted_at: NOW - 10 * MINUTE,
    owner: OWNER,
    generation: 0,
    ...overrides,
  };
}

function finished(overrides: Partial<JobRecord> = {}): JobRecord {
  return record({
    started_at: NOW - 10 * MINUTE,
    finished_at: NOW - 5 * MINUTE,
    turns: 3,
    cost_usd: 0.0018,
    outcome: {
      ok: true,
      result: { sessionId: "9b2f8a47-53c4-4f0e-9d61-1f7e2c3b4a50", numTurns: 3, costUsd: 0.0018 },
      result_chars: 5,
    },
    ...overrides,
  });
}

function running(overrides: Partial<JobRecord> = {}): JobRecord {
  return record({
    status: "running",
    started_at: NOW - 2 * HOUR,
    submitted_at: NOW - 2 * HOUR,
    agent: { pid: 5151, start_time: "200", tree_marker: "marker-5151" },
    ...overrides,
  });
}

function add(store: StateStore, job: JobRecord, prompt = job.prompt_preview): JobRecord {
  store.create(job, prompt);
  return job;
}

function writeJobFile(store: StateStore, id: string, name: "stdout.jsonl" | "stderr.log", text: string): void {
  writeFileSync(store.file(id, name), text);
}

describe("usage", () => {
  const { dir } = newState();

  test("--version and -V print the version", async () => {
    for (const flag of ["--version", "-V"]) {
      const run = await cli([flag], { stateDir: dir });
      assert.deepEqual(run, { code: 0, stdout: `claude-dispatch ${SERVER_VERSION}\n`, stderr: "" });
    }
    const json = await cli(["--version", "--json"], { stateDir: dir });
    assert.deepEqual(JSON.parse(json.stdout), { name: "claude-dispatch", version: SERVER_VERSION });
  });

  test("--help, -h, help and COMMAND --help describe every command", async () => {
    for (const args of [["--help"], ["-h"], ["help"], ["kill", "--help"]]) {
      const run = await cli(args, { stateDir: dir });
      assert.equal(run.code, 0, args.join(" "));
      assert.equal(run.stderr, "");
      for (const command of [
        "jobs [--all]",
        "show ID",
        "kill ID",
        "prune --all",
        "prune --older-than AGE",
        "doctor",
        "--version",
        "--json",
      ]) {
        assert.ok(run.stdout.includes(command), `${args.join(" ")} mentions ${command}`);
      }
    }
  });

  test("the usage, long and short, fits 80 columns", async () => {
    const help = await cli(["--help"], { stateDir: dir });
    const usage = await cli(["frobnicate"], { stateDir: dir });
    for (const line of [...help.stdout.split("\n"), ...usage.stderr.split("\n")])
      assert.ok(line.length <= 80, `${line.length}: ${line}`);
  });

  test(
    "unknown commands, options and arguments are usage errors: exit 2, a message and a short " + "usage on stderr",
    async () => {
      const cases: [string[], string][] = [
        [["frobnicate"], 'unknown command "frobnicate"'],
        [["--frobnicate"], 'unknown option "--frobnicate"'],
        [["jobs", "--bogus"], 'unknown option "--bogus" for jobs'],
        [["show", "--all", randomUUID()], 'unknown option "--all" for show'],
        [["jobs", "extra"], 'jobs takes no arguments, got "extra"'],
        [["jobs", "--json=yes"], '"--json" takes no value'],
        [["show"], "show needs exactly one job id"],
        [["kill", randomUUID(), randomUUID()], "kill needs exactly one job id"],
        [["prune", "--older-than"], "--older-than needs an age"],
        [["prune", "--older-than", "7 days"], 'not an age: "7 days"'],
        [["--version", "jobs"], "--version takes no arguments"],
      ];
      for (const [args, message] of cases) {
        const run = await cli(args, { stateDir: dir });
        assert.equal(run.code, 2, args.join(" "));
        assert.equal(run.stdout, "", args.join(" "));
        assert.ok(run.stderr.includes(message), `${args.join(" ")}: ${run.stderr}`);
        assert.ok(run.stderr.includes("Usage: claude-dispatch"), args.join(" "));
      }
    },
  );

  test("an id that is not a UUID never reaches a path", async () => {
    const outside = path.join(dir, "outside");
    mkdirSync(outside);
    writeFileSync(path.join(outside, "record.json"), "{}");
    for (const command of ["show", "kill"]) {
      for (const id of ["../outside", "abc", `${randomUUID()}/..`, "\u001b[31m"]) {
        const run = await cli([command, id], { stateDir: dir });
        assert.equal(run.code, 2, `${command} ${id}`);
        assert.ok(run.stderr.includes("not a job id"), run.stderr);
        assert.ok(!run.stderr.includes("\u001b"), "a terminal escape is printed escaped");
      }
    }
    assert.ok(!existsSync(path.join(outside, "kill")), "no kill marker outside the jobs folder");
  });
});

describe("jobs", () => {
  const { dir, store } = newState();
  const active = add(
    store,
    running({ prompt_preview: "refactor the parser into modules, keeping the public API exactly as it is today" }),
  );
  writeJobFile(store, active.id, "stdout.jsonl", TOOLS_STREAM_SO_FAR);
  const queued = add(store, record({ status: "queued", submitted_at: NOW - 30_000, cwd: "/srv/other" }));
  // 22 finished, 5 days old: the 20 that finished last are listed without --all.
  const done: JobRecord[] = [];
  for (let i = 0; i < 22; i += 1) {
    done.push(
      add(
        store,
        finished({ submitted_at: NOW - 5 * DAY - i, finished_at: NOW - i * MINUTE, cost_usd: i === 0 ? 0.0123 : 1.5 }),
      ),
    );
  }

  test("a table of unfinished jobs and the 20 most recently finished, columns fitted to their content", async () => {
    const run = await cli(["jobs"], { stateDir: dir });
    assert.equal(run.code, 0);
    assert.equal(run.stderr, "");
    const lines = run.stdout.trimEnd().split("\n");
    const header = lines[0] ?? "";
    assert.match(header, /^ID {36}STATUS +AGE +CWD +TURNS +COST +SESSION +PROMPT$/);
    assert.equal(lines.length, 1 + 2 + 20 + 2);
    assert.equal(lines.at(-2), "(2 older finished jobs not shown; --all lists every job)");
    // No server has been present here: nothing carries the two unfinished jobs (§15.8).
    assert.equal(
      lines.at(-1),
      "Nothing carries 2 unfinished jobs: no server or carrier runs; the next server takes them over.",
    );
    const rows = lines.slice(1, -2);
    const column = (name: string): number => header.indexOf(name);
    const rowOf = (id: string): string => rows.find((row) => row.startsWith(id)) ?? assert.fail(`no row for ${id}`);
    for (const row of rows) {
      assert.match(row.slice(column("STATUS")), /^(running|queued|completed) /, "statuses line up under STATUS");
      assert.equal(row, row.trimEnd(), "no trailing spaces");
    }
    const activeRow = rowOf(active.id);
    assert.match(
      activeRow.slice(column("AGE")),
      /^2h +~\/src\/app +3 +- +a4e6f90a-6476-44bd-a9eb-2a4c18c0761d +refactor the parser into modules, keeping the public API ex…$/,
    );
    assert.match(rowOf(queued.id).slice(column("AGE")), /^30s +\/srv\/other +0 +- +- +fix the failing tests$/);
    assert.match(rowOf(done[0]?.id ?? "").slice(column("AGE")), /^5d +~\/src\/app +3 +\$0\.0123 /);
    assert.match(
      rowOf(done[1]?.id ?? "").slice(column("TURNS")),
      /^ {4}3 {4}\$1\.50  9b2f8a47-53c4-4f0e-9d61-1f7e2c3b4a50  fix/,
      "numbers are right-aligned under TURNS and COST",
    );
    assert.ok(!run.stdout.includes(done[20]?.id ?? "-"), "the oldest finished jobs are left out");
    assert.ok(!run.stdout.includes(HOME), "the home directory is shown as ~");
  });

  test("--all lists every job, oldest first", async () => {
    const run = await cli(["jobs", "--all"], { stateDir: dir });
    assert.equal(run.code, 0);
    const rows = run.stdout.trimEnd().split("\n").slice(1, -1);
    assert.equal(rows.length, 24);
    assert.ok(rows[0]?.startsWith(done[21]?.id ?? "-"), "submitted first, listed first");
    assert.ok(!run.stdout.includes("not shown"));
  });

  test("--json: one document with the same rows, live turns for a running job", async () => {
    const run = await cli(["jobs", "--json"], { stateDir: dir });
    assert.equal(run.code, 0);
    const document = JSON.parse(run.stdout) as {
      state_dir: string;
      jobs: Record<string, unknown>[];
      hidden_finished: number;
      skipped: unknown[];
    };
    assert.equal(document.state_dir, dir);
    assert.equal(document.jobs.length, 22);
    assert.equal(document.hidden_finished, 2);
    assert.deepEqual(document.skipped, []);
    assert.deepEqual((document as unknown as Record<string, unknown>).carried_by, []);
    assert.deepEqual((document as unknown as Record<string, unknown>).not_carried, {
      jobs: 2,
      why: "no server or carrier runs; the next server takes them over",
    });
    const row = document.jobs.find((job) => job.id === active.id);
    assert.deepEqual(row, {
      id: active.id,
      kind: "start",
      agent: "claude",
      host: "local",
      status: "running",
      cwd: `${HOME}/src/app`,
      submitted_at: NOW - 2 * HOUR,
      started_at: NOW - 2 * HOUR,
      age_s: 7200,
      turns: 3,
      session_id: "a4e6f90a-6476-44bd-a9eb-2a4c18c0761d",
      prompt_preview: active.prompt_preview,
    });
    assert.equal(document.jobs.find((job) => job.id === done[0]?.id)?.cost_usd, 0.0123);
  });

  test("an empty or missing state directory has no jobs; a broken record is skipped and named", async () => {
    const empty = newState();
    assert.deepEqual(await cli(["jobs"], { stateDir: empty.dir }), {
      code: 0,
      stdout: `No jobs in ${empty.dir}.\n`,
      stderr: "",
    });
    const missing = path.join(scratch, "never-created");
    assert.equal((await cli(["jobs"], { stateDir: missing })).stdout, `No jobs in ${missing}.\n`);
    assert.ok(!existsSync(missing), "listing creates nothing");
    const torn = randomUUID();
    mkdirSync(path.join(empty.dir, "jobs", torn));
    writeFileSync(path.join(empty.dir, "jobs", torn, "record.json"), '{"format":1,');
    const run = await cli(["jobs"], { stateDir: empty.dir });
    assert.ok(run.stdout.includes(`(skipped ${torn}: record.json is not a valid record)`), run.stdout);
  });

  test("a state directory that is not absolute is a failure, not a crash", async () => {
    const run = await cli(["jobs"], { stateDir: "relative/state" });
    assert.equal(run.code, 1);
    assert.match(run.stderr, /CLAUDE_DISPATCH_STATE_DIR must be an absolute path/);
    const json = await cli(["jobs", "--json"], { stateDir: "relative/state" });
    assert.equal((JSON.parse(json.stdout) as { error: { code: string } }).error.code, "STATE_ERROR");
  });
});

describe("show", () => {
  const { dir, store } = newState();
  const prompt = "Fix the failing tests.\nThen run the whole suite\nand report.";
  const result = `${"r".repeat(2500)}THE END`;
  const job = add(
    store,
    finished({
      options: { model: "sonnet", permissionMode: "acceptEdits", allowedTools: ["Bash(npm test)", "Edit"] },
      timeout_ms: 120_000,
      outcome: {
        ok: true,
        result: { sessionId: "9b2f8a47-53c4-4f0e-9d61-1f7e2c3b4a50", numTurns: 3, costUsd: 0.0018 },
        result_chars: result.length,
      },
    }),
    prompt,
  );
  store.writeResult(job.id, result);
  writeJobFile(store, job.id, "stdout.jsonl", TOOLS_STREAM);
  writeJobFile(store, job.id, "stderr.log", Array.from({ length: 30 }, (_, i) => `stderr line ${i + 1}`).join("\n"));

  test(
    "the record, the whole prompt, the result clipped with where the rest is, and the tail " + "of its output",
    async () => {
      const run = await cli(["show", job.id], { stateDir: dir });
      assert.equal(run.code, 0, run.stderr);
      const text = run.stdout;
      assert.ok(text.startsWith(`job ${job.id}\n`));
      for (const line of [
        /^ {2}status +completed$/m,
        /^ {2}kind +start$/m,
        /^ {2}cwd +~\/src\/app$/m,
        /^ {2}submitted +2025-06-01T11:50:00\.000Z \(10m ago\)$/m,
        /^ {2}finished +2025-06-01T11:55:00\.000Z \(took 5m\)$/m,
        /^ {2}owner +server pid 4242 \(not running\)$/m,
        /^ {2}session +9b2f8a47-53c4-4f0e-9d61-1f7e2c3b4a50$/m,
        /^ {2}turns +3$/m,
        /^ {2}cost +\$0\.0018$/m,
        /^ {2}timeout +2m$/m,
        /^ {2}options +model=sonnet permissionMode=acceptEdits allowedTools=Bash\(npm test\),Edit$/m,
      ]) {
        assert.match(text, line);
      }
      assert.ok(text.includes("prompt:\n  Fix the failing tests.\n  Then run the whole suite\n  and report.\n"));
      assert.ok(text.includes(`result (${result.length} characters):\n  ${"r".repeat(2000)}\n`));
      assert.ok(!text.includes("THE END"), "the result is clipped");
      assert.ok(text.includes(`[…507 more characters; the whole result is in ${store.file(job.id, "result.txt")}]`));
      assert.match(text, /transcript \(last \d+ lines\):\n[\s\S]*tool: Bash · [\s\S]*\[done: success\]\n/);
      assert.ok(text.includes("stderr (last 10 lines):\n  stderr line 21\n"));
      assert.ok(text.endsWith("  stderr line 30\n"));
      assert.ok(!text.includes("stderr line 20\n"));
    },
  );

  test("--json has the record, the whole result and the tails", async () => {
    const run = await cli(["show", job.id, "--json"], { stateDir: dir });
    assert.equal(run.code, 0);
    const document = JSON.parse(run.stdout) as Record<string, unknown>;
    assert.deepEqual(document.record, job);
    assert.equal(document.prompt, prompt);
    assert.equal(document.result, result);
    assert.equal(document.result_path, store.file(job.id, "result.txt"));
    assert.equal(document.owner_alive, false);
    assert.equal(document.session_id, "9b2f8a47-53c4-4f0e-9d61-1f7e2c3b4a50");
    assert.equal(document.turns, 3);
    assert.equal(document.cost_usd, 0.0018);
    assert.equal((document.stderr_tail as string[]).length, 10);
    assert.equal((document.transcript_tail as string[]).at(-1), "[done: success]");
  });

  test("a running job: live progress, its server and agent alive, output escapes made harmless", async () => {
    const active = add(store, running(), "watch \u001b]0;owned\u0007 this");
    writeJobFile(store, active.id, "stdout.jsonl", TOOLS_STREAM_SO_FAR);
    const processes = new FakeProcesses();
    processes.alive.add(OWNER.pid).add(5151);
    const run = await cli(["show", active.id], { stateDir: dir, processes });
    assert.equal(run.code, 0);
    assert.match(run.stdout, /^ {2}owner +server pid 4242 \(running\)$/m);
    assert.match(run.stdout, /^ {2}agent +pid 5151, start time 200 \(running\)$/m);
    assert.match(run.stdout, /^ {2}turns +3$/m);
    assert.match(run.stdout, /^ {2}last tool +Bash · /m);
    assert.ok(
      !run.stdout.includes("\u001b") && !run.stdout.includes("\u0007"),
      "no terminal escape reaches the terminal",
    );
    assert.ok(!/result \(/.test(run.stdout), "no result yet");
    assert.equal(processes.idleCalls, 1);

    processes.alive.clear();
    const orphan = await cli(["show", active.id, "--json"], { stateDir: dir, processes });
    const document = JSON.parse(orphan.stdout) as Record<string, unknown>;
    assert.equal(document.owner_alive, false);
    assert.equal(document.agent_alive, false);
    assert.equal(document.result, null);
    const text = await cli(["show", active.id], { stateDir: dir, processes });
    assert.match(text.stdout, /owner +server pid 4242 \(not running: the next server to start adopts this job\)/);
  });

  test("an unknown id: exit 1 and where it was looked for", async () => {
    const id = randomUUID();
    const run = await cli(["show", id], { stateDir: dir });
    assert.deepEqual(run, { code: 1, stdout: "", stderr: `claude-dispatch: no job ${id} in ${dir}\n` });
    const json = await cli(["show", id, "--json"], { stateDir: dir });
    assert.equal(json.code, 1);
    assert.deepEqual(JSON.parse(json.stdout), { error: { code: "JOB_NOT_FOUND", message: `no job ${id} in ${dir}` } });
  });
});

describe("a unique prefix of a job id", () => {
  const { dir, store } = newState();
  /** A job whose id starts with `prefix`: the rest of a random UUID. */
  const withPrefix = (prefix: string, overrides: Partial<JobRecord> = {}): JobRecord =>
    add(store, finished({ id: `${prefix}${randomUUID().slice(prefix.length)}`, ...overrides }));
  const alone = withPrefix("0123");
  const first = withPrefix("abcd1", {
    prompt_preview: "first: refactor \u001b[31mthe parser into modules, keeping the public API exactly as it is",
  });
  const second = withPrefix("abcd2", { status: "running", agent: { pid: 5151, start_time: "200" } });
  // A folder the server is creating right now: no record yet, still a match.
  const bare = `abcd3${randomUUID().slice(5)}`;
  mkdirSync(path.join(store.jobsDir, bare));

  test("show and kill take a prefix of at least 4 hex digits, in either case, dashes included", async () => {
    for (const prefix of ["0123", "0123".toUpperCase(), alone.id.slice(0, 13), alone.id.toUpperCase()]) {
      const run = await cli(["show", prefix], { stateDir: dir });
      assert.equal(run.code, 0, `${prefix}: ${run.stderr}`);
      assert.ok(run.stdout.startsWith(`job ${alone.id}\n`), prefix);
    }
    const killed = await cli(["kill", "0123", "--json"], { stateDir: dir });
    assert.equal(killed.code, 0, killed.stderr);
    assert.deepEqual(JSON.parse(killed.stdout), {
      id: alone.id,
      status: "completed",
      already_finished: true,
      kill_requested: false,
      survivors: [],
    });
  });

  test("a prefix of several jobs: exit 1, and which jobs, with status and prompt", async () => {
    for (const command of ["show", "kill"]) {
      const run = await cli([command, "abcd"], { stateDir: dir });
      assert.equal(run.code, 1, command);
      assert.equal(run.stdout, "");
      const lines = run.stderr.trimEnd().split("\n");
      assert.equal(lines[0], `claude-dispatch: "abcd" matches 3 jobs in ${dir}; give more of the id:`);
      assert.match(lines[1] ?? "", /^ {2}ID +STATUS +PROMPT$/);
      assert.equal(
        lines[2],
        `  ${first.id}  completed  first: refactor the parser into modules, keeping the public…`,
        "cut as jobs cuts it, escapes removed",
      );
      assert.equal(lines[3], `  ${second.id}  running    fix the failing tests`);
      assert.equal(lines[4], `  ${bare}  -          (no record)`);
      assert.equal(lines.length, 5);
      assert.ok(!existsSync(store.file(second.id, "kill")), "nothing was killed");
    }
    const json = await cli(["show", "ABCD", "--json"], { stateDir: dir });
    assert.equal(json.code, 1);
    assert.deepEqual(JSON.parse(json.stdout), {
      error: {
        code: "INVALID_ARGUMENT",
        message: `"ABCD" matches 3 jobs in ${dir}; give more of the id: ${first.id}, ${second.id}, ${bare}`,
        matches: [
          { id: first.id, status: "completed", prompt_preview: first.prompt_preview },
          { id: second.id, status: "running", prompt_preview: second.prompt_preview },
          { id: bare, status: null, prompt_preview: null },
        ],
      },
    });
    assert.equal((await cli(["show", "abcd2"], { stateDir: dir })).code, 0, "one more digit settles it");
  });

  test("a prefix of no job is JOB_NOT_FOUND; a missing state directory has no jobs", async () => {
    const run = await cli(["show", "fedc-ba"], { stateDir: dir });
    assert.deepEqual(run, {
      code: 1,
      stdout: "",
      stderr: `claude-dispatch: no job id starts with "fedc-ba" in ${dir}\n`,
    });
    const json = await cli(["kill", "fedc", "--json"], { stateDir: dir });
    assert.deepEqual(JSON.parse(json.stdout), {
      error: { code: "JOB_NOT_FOUND", message: `no job id starts with "fedc" in ${dir}` },
    });
    const missing = path.join(scratch, `never-created-${randomUUID()}`);
    assert.equal((await cli(["show", "abcd"], { stateDir: missing })).code, 1);
    assert.ok(!existsSync(missing), "looking creates nothing");
  });

  test("fewer than 4 hex digits, or anything but hex and dashes, is a usage error echoed quoted and cut", async () => {
    for (const typed of ["abc", "a-b-c", "a---", "abcd/..", "abcd ", "abcg", `${alone.id}0`]) {
      const run = await cli(["show", typed], { stateDir: dir });
      assert.equal(run.code, 2, typed);
      assert.ok(run.stderr.includes(`not a job id: ${JSON.stringify(typed)} (`), run.stderr);
      assert.ok(run.stderr.includes("a unique prefix of one, at least 4 hex digits"), run.stderr);
    }
    const long = `${"a".repeat(100)}\u009b`;
    const run = await cli(["kill", long], { stateDir: dir });
    assert.equal(run.code, 2);
    assert.ok(run.stderr.includes(`not a job id: "${"a".repeat(60)}…" (`), run.stderr);
    assert.ok(!run.stderr.includes("a".repeat(61)), "cut at 60 characters");
  });
});

describe("kill", () => {
  test("a finished job: nothing is signalled or written", async () => {
    const { dir, store } = newState();
    const job = add(store, finished({ status: "failed" }));
    const processes = new FakeProcesses();
    const run = await cli(["kill", job.id], { stateDir: dir, processes });
    assert.deepEqual(run, {
      code: 0,
      stdout: `Job ${job.id} had already finished (failed); nothing was killed.\n`,
      stderr: "",
    });
    assert.equal(store.killRequested(job.id), undefined);
    assert.deepEqual(store.read(job.id), job);
    assert.deepEqual(processes.attached, []);
  });

  test("a queued job of a live server: the marker is left for that server, which drops the job", async () => {
    const { dir, store } = newState();
    const job = add(store, record({ status: "queued" }));
    const processes = new FakeProcesses();
    processes.alive.add(OWNER.pid);
    const run = await cli(["kill", job.id, "--json"], { stateDir: dir, processes });
    assert.equal(run.code, 0);
    assert.deepEqual(JSON.parse(run.stdout), {
      id: job.id,
      status: "queued",
      already_finished: false,
      kill_requested: true,
      signalled: 0,
      survivors: [],
      finished_by: "server",
    });
    assert.deepEqual(JSON.parse(readFileSync(store.file(job.id, "kill"), "utf8")), { by: "cli", at: NOW });
    assert.deepEqual(store.read(job.id), job, "the server finishes the record");
    assert.deepEqual(processes.attached, []);
    assert.equal(processes.idleCalls, 1);
  });

  test("a running job of a live server: its tree is killed and the server records it", async () => {
    const { dir, store } = newState();
    const job = add(store, running());
    const processes = new FakeProcesses();
    processes.alive.add(OWNER.pid).add(5151);
    const run = await cli(["kill", job.id], { stateDir: dir, processes });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(
      run.stdout,
      `Killed job ${job.id}'s process tree: 2 processes signalled, none left.\nIts server (pid ${OWNER.pid}) records ` +
        `it as killed.\n`,
    );
    assert.equal(processes.attached.length, 1);
    const request = processes.attached[0] as AttachRequest;
    assert.deepEqual(
      {
        pid: request.pid,
        startTime: request.startTime,
        marker: request.marker,
        output: request.output,
        tail: request.stderrTailBytes,
      },
      { pid: 5151, startTime: "200", marker: "marker-5151", output: store.outputFiles(job.id), tail: 0 },
    );
    assert.deepEqual(processes.killed, [5151]);
    assert.ok(store.killRequested(job.id));
    assert.equal(store.read(job.id)?.status, "running", "the server writes the final record");
  });

  test("a job whose server is gone: the CLI claims it and writes the final record", async () => {
    const { dir, store } = newState();
    const job = add(store, running({ generation: 2 }));
    writeJobFile(store, job.id, "stdout.jsonl", TOOLS_STREAM_SO_FAR);
    const processes = new FakeProcesses();
    processes.alive.add(5151);
    const run = await cli(["kill", job.id], { stateDir: dir, processes });
    assert.equal(run.code, 0, run.stderr);
    assert.ok(
      run.stdout.endsWith(`Its server (pid ${OWNER.pid}) is gone, so the record was finished here: killed.\n`),
      run.stdout,
    );
    assert.deepEqual(processes.killed, [5151]);
    assert.deepEqual(store.read(job.id), {
      ...job,
      status: "killed",
      kill_reason: "cli",
      finished_at: NOW,
      generation: 3,
      turns: 3,
      outcome: { ok: false, code: "KILLED", detail: "killed from the command line (claude-dispatch kill)" },
    });
    assert.deepEqual(JSON.parse(readFileSync(path.join(store.jobDir(job.id), "claim.3"), "utf8")), CLI_IDENTITY);
  });

  test("a queued job whose server is gone is finished as killed; its agent was never there to signal", async () => {
    const { dir, store } = newState();
    const job = add(store, record({ status: "queued" }));
    const processes = new FakeProcesses();
    const run = await cli(["kill", job.id, "--json"], { stateDir: dir, processes });
    assert.equal(run.code, 0);
    assert.equal((JSON.parse(run.stdout) as { finished_by: string; status: string }).finished_by, "cli");
    assert.equal(store.read(job.id)?.status, "killed");
    assert.deepEqual(processes.attached, []);
  });

  test("a claim held by a live server is left to it; a dead claimer's claim is taken over", async () => {
    const { dir, store } = newState();
    const adopting = { pid: 6060, start_time: "300" };
    const job = add(store, running());
    assert.ok(store.claim(job.id, 1, 0, adopting));
    const processes = new FakeProcesses();
    processes.alive.add(adopting.pid);
    const run = await cli(["kill", job.id, "--json"], { stateDir: dir, processes });
    assert.equal(run.code, 0);
    assert.equal((JSON.parse(run.stdout) as { finished_by: string }).finished_by, "adopting server");
    assert.equal(store.read(job.id)?.status, "running", "the adopting server writes the record");

    processes.alive.clear();
    const again = await cli(["kill", job.id], { stateDir: dir, processes });
    assert.equal(again.code, 0);
    assert.equal(store.read(job.id)?.status, "killed");
    assert.deepEqual(store.claimHolder(job.id, 1, 1), CLI_IDENTITY, "the next claim slot, past the dead claimer");
  });

  test("survivors: exit 1, and a record finished here says KILL_FAILED", async () => {
    const { dir, store } = newState();
    const job = add(store, running());
    const processes = new FakeProcesses();
    processes.alive.add(5151);
    processes.survivors = [5151, 5152];
    const run = await cli(["kill", job.id], { stateDir: dir, processes });
    assert.equal(run.code, 1);
    assert.ok(
      run.stdout.startsWith(`KILL_FAILED: job ${job.id}: processes 5151, 5152 survived SIGKILL.\n`),
      run.stdout,
    );
    const final = store.read(job.id);
    assert.equal(final?.status, "killed");
    assert.deepEqual(final?.outcome, {
      ok: false,
      code: "KILL_FAILED",
      detail: "processes 5151, 5152 survived SIGKILL",
    });
  });

  test("an unknown job: exit 1, nothing written", async () => {
    const { dir, store } = newState();
    const id = randomUUID();
    const run = await cli(["kill", id], { stateDir: dir });
    assert.equal(run.code, 1);
    assert.equal(run.stderr, `claude-dispatch: no job ${id} in ${dir}\n`);
    assert.ok(!existsSync(path.join(store.jobsDir, id)));
  });
});

describe("kill with real processes", { skip: !isLinux && "reads /proc" }, () => {
  const orphans: number[] = [];
  after(() => {
    for (const pid of orphans) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone already: the test killed it.
      }
    }
  });

  /**
   * An "agent" in a session of its own, with a child in yet another session, as Claude Code's Bash tool makes. It is
   * started by a process that exits at once, as a server that left it would: never this process's descendant, which
   * a kill would refuse to take for an agent (§15.3).
   */
  async function startAgent(marker: string): Promise<{ agentPid: number; startTime: string; grandchildPid: number }> {
    const pidFile = path.join(scratch, `grandchild-${randomUUID()}`);
    const agentPidFile = path.join(scratch, `agent-${randomUUID()}`);
    const script = `
      const { spawn } = require("node:child_process");
      const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { detached: true, stdio: "ignore" });
      require("node:fs").writeFileSync(${JSON.stringify(pidFile)}, String(child.pid));
      setInterval(() => {}, 1000);`;
    const starter = `
      const { spawn } = require("node:child_process");
      const agent = spawn(process.execPath, ["-e", ${JSON.stringify(script)}], { detached: true, stdio: "ignore" });
      require("node:fs").writeFileSync(${JSON.stringify(agentPidFile)}, String(agent.pid));
      agent.unref();`;
    const env = { PATH: process.env.PATH ?? "", CLAUDE_DISPATCH_TREE: marker };
    const started = spawn(process.execPath, ["-e", starter], { stdio: "ignore", env });
    await new Promise((resolve) => started.once("exit", resolve));
    const agentPid = Number(readFileSync(agentPidFile, "utf8"));
    assert.ok(agentPid > 1, "the agent did not start");
    orphans.push(agentPid);
    const startTime =
      parseProcStat(readFileSync(`/proc/${agentPid}/stat`, "latin1"))?.startTime ?? assert.fail("no start time");
    await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "", "the agent's child");
    const grandchildPid = Number(readFileSync(pidFile, "utf8"));
    orphans.push(grandchildPid);
    assert.ok(isAlive(agentPid) && isAlive(grandchildPid));
    return { agentPid, startTime, grandchildPid };
  }

  /** The real process layer, with a short grace. */
  function realProcesses(): ReturnType<typeof createProcessControl> {
    return createProcessControl({
      platform: LINUX_PLATFORM,
      clock: systemClock,
      logger: new RecordingLogger(),
      newMarker: () => randomUUID(),
      defer: (fn) => void setImmediate(fn),
      killGraceMs: 500,
      killPollMs: 50,
    });
  }

  // This test process, with a start time it never had: an owner that is certainly gone.
  const deadOwner = { pid: process.pid, start_time: "1" };

  test("in process, with the real process layer: the whole tree dies and the record becomes killed", async () => {
    const { dir, store } = newState();
    const marker = randomUUID();
    const { agentPid, startTime, grandchildPid } = await startAgent(marker);
    const job = add(
      store,
      running({ owner: deadOwner, agent: { pid: agentPid, start_time: startTime, tree_marker: marker } }),
    );
    writeJobFile(store, job.id, "stdout.jsonl", TOOLS_STREAM_SO_FAR);
    const processes = realProcesses();
    const run = await cli(["kill", job.id], { stateDir: dir, processes, clock: systemClock });
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /^Killed job .*'s process tree: \d+ processes signalled, none left\.\n/);
    await waitFor(() => !isAlive(agentPid) && !isAlive(grandchildPid), "the agent and its child to die");
    const final = store.read(job.id);
    assert.equal(final?.status, "killed");
    assert.equal(final?.kill_reason, "cli");
    assert.equal(final?.turns, 3);
    assert.deepEqual(final?.outcome, {
      ok: false,
      code: "KILLED",
      detail: "killed from the command line (claude-dispatch kill)",
    });
  });

  test(
    "a record naming the command's own process is never signalled, whatever its start time " + "says (§15.3)",
    async () => {
      const { dir, store } = newState();
      // A hostile agent can read /proc and write its record: here it names this process, which runs the command.
      const ownStart =
        parseProcStat(readFileSync(`/proc/${process.pid}/stat`, "latin1"))?.startTime ?? assert.fail("no start time");
      const job = add(store, running({ owner: deadOwner, agent: { pid: process.pid, start_time: ownStart } }));
      const processes = realProcesses();
      const run = await cli(["kill", job.id], { stateDir: dir, processes, clock: systemClock });
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.match(run.stdout, /agent is not running \(pid \d+\): there was nothing to signal/);
      assert.equal(store.read(job.id)?.status, "killed", "the record is finished, as its server is gone");
    },
  );

  test("the built binary kills the tree and exits", async () => {
    const { dir, store } = newState();
    const marker = randomUUID();
    const { agentPid, startTime, grandchildPid } = await startAgent(marker);
    const job = add(
      store,
      running({ owner: deadOwner, agent: { pid: agentPid, start_time: startTime, tree_marker: marker } }),
    );
    const run = await runBuilt(["kill", job.id, "--json"], dir);
    assert.equal(run.code, 0, run.stderr);
    const document = JSON.parse(run.stdout) as { status: string; finished_by: string; survivors: number[] };
    assert.deepEqual([document.status, document.finished_by, document.survivors], ["killed", "cli", []]);
    await waitFor(() => !isAlive(agentPid) && !isAlive(grandchildPid), "the agent and its child to die");
    const claimer = JSON.parse(readFileSync(path.join(store.jobDir(job.id), "claim.1"), "utf8")) as { pid: number };
    assert.notEqual(claimer.pid, process.pid, "the claim names the CLI process");
    assert.equal(store.read(job.id)?.status, "killed");
  });
});

describe("prune", () => {
  function prepared(): {
    dir: string;
    store: StateStore;
    old: JobRecord;
    recent: JobRecord;
    active: JobRecord;
    queued: JobRecord;
  } {
    const { dir, store } = newState();
    const old = add(store, finished({ finished_at: NOW - 2 * HOUR }));
    store.writeResult(old.id, "x".repeat(1000));
    const recent = add(store, finished({ status: "killed", finished_at: NOW - 30 * MINUTE }));
    const active = add(store, running());
    writeJobFile(store, active.id, "stdout.jsonl", TOOLS_STREAM_SO_FAR);
    const queued = add(store, record({ status: "queued" }));
    return { dir, store, old, recent, active, queued };
  }


  test("a pruned job's worktree on another machine is left to that machine's retention: no git here (§21.3)", async () => {
    const { dir, store } = newState();
    // A path that happens to exist here too: git here must not touch it.
    const worktree = {
      path: mkdtempSync(path.join(scratch, "remote-worktree-")),
      branch: "dispatch/x",
      base: "0".repeat(40),
      repo: "/srv/repo",
      subdir: "",
      left_behind: false,
    };
    const elsewhere = add(store, finished({ host: "box", worktree, finished_at: NOW - 2 * HOUR }));
    const run = await cli(["prune", "--all", "--json"], { stateDir: dir });
    assert.equal(run.code, 0, run.stderr);
    const document = JSON.parse(run.stdout) as { removed: string[]; kept_worktrees: unknown[] };
    assert.deepEqual(document.removed, [elsewhere.id]);
    assert.deepEqual(document.kept_worktrees, [], "nothing was tried here");
    assert.equal(run.stderr, "");
  });
  test("--all removes every finished job and never an unfinished one, saying how much it freed", async () => {
    const { dir, store, old, recent, active, queued } = prepared();
    const bytes = store.size(old.id) + store.size(recent.id);
    const run = await cli(["prune", "--all", "--json"], { stateDir: dir });
    assert.equal(run.code, 0);
    const document = JSON.parse(run.stdout) as { removed: string[]; bytes_freed: number; kept: number };
    assert.deepEqual(document.removed.sort(), [old.id, recent.id].sort());
    assert.equal(document.bytes_freed, bytes);
    assert.equal(document.kept, 2);
    assert.ok(!existsSync(store.jobDir(old.id)) && !existsSync(store.jobDir(recent.id)));
    assert.deepEqual(store.read(active.id), active);
    assert.deepEqual(store.read(queued.id), queued);

    const again = await cli(["prune", "--all"], { stateDir: dir });
    assert.equal(again.stdout, `Removed 0 finished jobs from ${dir}, freeing 0 B.\nKept 2 (2 queued or running).\n`);
  });

  test("--older-than keeps jobs finished more recently", async () => {
    const { dir, store, old, recent } = prepared();
    const run = await cli(["prune", "--older-than", "1h"], { stateDir: dir });
    assert.equal(run.code, 0);
    assert.match(
      run.stdout,
      /^Removed 1 finished job from .*, freeing 1\.\d KiB\.\nKept 3 \(2 queued or running, and those finished within 1h\)\.\n$/,
    );
    assert.ok(!existsSync(store.jobDir(old.id)));
    assert.ok(existsSync(store.jobDir(recent.id)));
    assert.equal(
      (await cli(["prune", "--older-than=2d"], { stateDir: dir })).stdout.split("\n")[0],
      `Removed 0 finished jobs from ${dir}, freeing 0 B.`,
    );
  });

  test(
    "without an age and without a terminal: exit 2, nothing deleted, and the message names --all and " + "--older-than",
    async () => {
      const { dir, store, old, recent } = prepared();
      for (const args of [["prune"], ["prune", "--json"]]) {
        const run = await cli(args, { stateDir: dir });
        assert.equal(run.code, 2, args.join(" "));
        assert.equal(run.stdout, "");
        assert.match(
          run.stderr,
          /^claude-dispatch: without a terminal to ask on, prune needs --all \(every finished job\) or --older-than AGE/,
        );
        assert.ok(existsSync(store.jobDir(old.id)) && existsSync(store.jobDir(recent.id)));
      }
      const both = await cli(["prune", "--all", "--older-than", "1h"], { stateDir: dir });
      assert.equal(both.code, 2);
      assert.match(both.stderr, /--all or --older-than, not both/);
    },
  );

  test("without an age on a terminal: it asks, y deletes, anything else keeps", async () => {
    const { dir, store, old, recent } = prepared();
    const size = formatBytes(store.size(old.id) + store.size(recent.id));
    for (const answer of ["n\n", "\n", "yes please no\n", ""]) {
      const terminal = new FakeTerminal();
      const running = cli(["prune"], { stateDir: dir, stdin: terminal });
      await settle();
      if (answer === "") terminal.end();
      else terminal.type(answer);
      const run = await running;
      assert.equal(run.code, 0, JSON.stringify(answer));
      assert.equal(run.stderr, `Delete all 2 finished jobs (${size})? [y/N] `);
      assert.equal(run.stdout, "Deleted nothing.\n");
      assert.ok(existsSync(store.jobDir(old.id)) && existsSync(store.jobDir(recent.id)), JSON.stringify(answer));
    }
    const terminal = new FakeTerminal();
    const running = cli(["prune"], { stateDir: dir, stdin: terminal });
    await settle();
    terminal.type("y\n");
    const run = await running;
    assert.equal(run.code, 0);
    assert.match(run.stdout, /^Removed 2 finished jobs from /);
    assert.ok(!existsSync(store.jobDir(old.id)) && !existsSync(store.jobDir(recent.id)));
    assert.equal(terminal.listenerCount("data"), 0, "stdin is let go");

    // Nothing to delete: nothing to ask.
    const none = await cli(["prune"], { stateDir: dir, stdin: new FakeTerminal() });
    assert.equal(none.stderr, "");
    assert.match(none.stdout, /^Removed 0 finished jobs/);
  });
});

describe("doctor", () => {
  const binDir = mkdtempSync(path.join(scratch, "bin-"));
  const claude = path.join(binDir, "claude");
  writeFileSync(claude, "#!/bin/sh\necho 2.1.332\n");
  chmodSync(claude, 0o755);

  function healthyState(): string {
    const { dir, store } = newState();
    add(store, finished());
    add(store, running());
    return dir;
  }

  test("a healthy install: ok lines, claude found on PATH and run without a shell, and the host config", async () => {
    const stateDir = healthyState();
    const runs: unknown[][] = [];
    const run = await cli(["doctor"], {
      stateDir,
      env: {
        PATH: `relative/bin:${path.join(scratch, "nothing")}:${binDir}`,
        ANTHROPIC_API_KEY: "sk-ant-do-not-print",
        CLAUDE_DISPATCH_ROOTS: scratch,
      },
      runFile: async (file, args, timeoutMs) => {
        runs.push([file, args, timeoutMs]);
        const status = '{"loggedIn": true, "authMethod": "api_key", "apiKeySource": "ANTHROPIC_API_KEY"}';
        return { ok: true, stdout: args[0] === "auth" ? status : "2.1.332 (Claude Code)\n", stderr: "" };
      },
    });
    assert.equal(run.code, 0, run.stdout);
    assert.deepEqual(runs, [
      [claude, ["--version"], 10_000],
      [claude, ["auth", "status"], 10_000],
    ]);
    const text = run.stdout.replace(/\n {6}/g, " ");
    for (const line of [
      /^ok {4}configuration: /m,
      new RegExp(`^ok {4}claude: ${claude}, 2\\.1\\.332 \\(Claude Code\\)$`, "m"),
      /^ok {4}claude login: claude auth status says logged in \(api_key from ANTHROPIC_API_KEY\)$/m,
      new RegExp(`^ok {4}state directory: ${stateDir} \\(writable, mode 0700\\)$`, "m"),
      /^ok {4}jobs: 2 \(1 running, 0 queued; claude 2\), \d+ B$/m,
      /^ok {4}permission modes: default, acceptEdits, plan, auto, dontAsk; default: none/m,
      /^ok {4}agents: claude is offered: Claude Code always, the others when found \(CLAUDE_DISPATCH_AGENTS is unset\); codex and gemini are not found, so not offered$/m,
      /^ok {4}approvals: forward: what would prompt is asked of the caller, denied after 10m unanswered/m,
      /^ok {4}worktrees: off \(in .*\/worktrees\); none kept after its job was pruned$/m,
      /^ok {4}agent defaults: model Claude Code's default, max turns no cap, max budget no cap, claude_run timeout 2m$/m,
      /^ok {4}roots: \//m,
      /^ok {4}depth: 0, below CLAUDE_DISPATCH_MAX_DEPTH 1: tools are offered$/m,
      /^ok {4}on exit: keep .*; finished jobs kept 7d, at most 1\.0 GiB$/m,
    ]) {
      assert.match(text, line);
    }
    // The variables its checks passed with, so that the pasted configuration passes them too.
    const env = { CLAUDE_DISPATCH_ROOTS: scratch, CLAUDE_DISPATCH_STATE_DIR: stateDir };
    const hostConfig = {
      mcpServers: { "claude-dispatch": { command: "/usr/bin/node", args: ["/opt/claude dispatch/dist/main.js"], env } },
    };
    assert.ok(run.stdout.includes(JSON.stringify(hostConfig, null, 2).replaceAll("\n", "\n  ")), run.stdout);
    // Longer than the terminal: an option a line, each line but the last ending in a backslash.
    assert.ok(
      run.stdout.includes(
        `  claude mcp add -s user claude-dispatch \\\n    --env CLAUDE_DISPATCH_ROOTS=${scratch} \\\n    --env CLAUDE_DISPATCH_STATE_DIR=${stateDir} \\\n    -- /usr/bin/node '/opt/claude dispatch/dist/main.js'\n`,
      ),
      run.stdout,
    );
    assert.ok(!text.includes("sk-ant"), "no secret is printed");
    assert.deepEqual(
      readdirSync(stateDir).sort(),
      ["carrier", "jobs", "servers", "slots"],
      "the write probe is removed",
    );
  });

  test("problems are warn and fail lines, and any fail is exit 1", async () => {
    const { dir } = newState();
    chmodSync(dir, 0o755);
    const run = await cli(["doctor", "--json"], {
      stateDir: dir,
      env: {
        PATH: path.join(scratch, "nothing"),
        CLAUDE_DISPATCH_DEPTH: "1",
        CLAUDE_DISPATCH_TREE: "marker-of-the-agent-doctor-runs-in",
        CLAUDE_DISPATCH_PERMISSION_MODES: "default,bypassPermissions",
      },
    });
    assert.equal(run.code, 1);
    const document = JSON.parse(run.stdout) as {
      ok: boolean;
      checks: { name: string; status: string; detail: string }[];
      host_config: { mcpServers: Record<string, { env: Record<string, string> }> };
      claude_mcp_add: string;
    };
    assert.equal(document.ok, false);
    const status = (name: string): string | undefined => document.checks.find((check) => check.name === name)?.status;
    assert.equal(status("claude"), "fail");
    assert.equal(
      document.checks.find((check) => check.name === "claude")?.detail,
      "claude not found on PATH; install Claude Code or set CLAUDE_DISPATCH_CLAUDE_BIN",
    );
    assert.equal(status("state directory"), "warn", "mode 0755 is not private");
    assert.equal(status("depth"), "warn", "no tools would be offered");
    assert.equal(status("permission modes"), "warn", "bypassPermissions is allowed");
    assert.equal(status("roots"), "warn");
    // The depth and the tree marker belong to the process doctor runs in: a host's server must not inherit them.
    assert.deepEqual(document.host_config.mcpServers["claude-dispatch"]?.env, {
      CLAUDE_DISPATCH_PERMISSION_MODES: "default,bypassPermissions",
      CLAUDE_DISPATCH_STATE_DIR: dir,
    });
    assert.equal(
      document.claude_mcp_add,
      `claude mcp add -s user claude-dispatch --env 'CLAUDE_DISPATCH_PERMISSION_MODES=default,bypassPermissions' --env CLAUDE_DISPATCH_STATE_DIR=${dir} -- /usr/bin/node '/opt/claude dispatch/dist/main.js'`,
    );
  });

  test("claude that fails to run, roots that do not exist, a missing state directory", async () => {
    const stateDir = path.join(scratch, `doctor-missing-${randomUUID()}`);
    const run = await cli(["doctor"], {
      stateDir,
      env: { CLAUDE_DISPATCH_CLAUDE_BIN: claude, CLAUDE_DISPATCH_ROOTS: path.join(scratch, "no-such-root") },
      runFile: async () => ({ ok: false, stdout: "", stderr: "", error: "Command failed: spawn EACCES" }),
    });
    assert.equal(run.code, 1);
    const text = run.stdout.replace(/\n {6}/g, " ");
    assert.match(text, new RegExp(`^fail  claude: ${claude} --version failed: Command failed: spawn EACCES$`, "m"));
    assert.doesNotMatch(text, /claude login/, "a claude that does not run is not asked more");
    assert.match(text, /^fail  roots: CLAUDE_DISPATCH_ROOTS entry does not exist: .*; the server will not start$/m);
    assert.match(
      text,
      /^warn  state directory: .* does not exist yet; the server creates it \(mode 0700\) when it starts$/m,
    );
    assert.ok(!existsSync(stateDir), "doctor creates nothing");
  });

  test("an invalid configuration is a fail line, not a crash, and stays out of the host configuration", async () => {
    const { dir } = newState();
    const run = await cli(["doctor"], { stateDir: dir, env: { PATH: binDir, CLAUDE_DISPATCH_MAX_TURNS: "lots" } });
    assert.equal(run.code, 1);
    assert.equal(run.stderr, "");
    const text = run.stdout.replace(/\n {6}/g, " ");
    assert.match(
      text,
      /^fail  configuration: CLAUDE_DISPATCH_MAX_TURNS must be an integer from 1 to 10000, got "lots"; the server will not start, and doctor skips the agent defaults check$/m,
    );
    assert.match(text, /^ok {4}claude: /m, "what can be checked still is");
    assert.match(text, /^ok {4}state directory: /m);
    assert.ok(
      !run.stdout.includes("MAX_TURNS=lots") && !run.stdout.includes('"CLAUDE_DISPATCH_MAX_TURNS"'),
      "the invalid value is not offered to paste",
    );
    assert.match(
      run.stdout.replace(/\s+/g, " "),
      /Left out of the configuration below, as invalid: CLAUDE_DISPATCH_MAX_TURNS; /,
    );
  });
});

describe("the host configuration line", () => {
  const posix = { nodePath: "/usr/bin/node", mainPath: "/opt/claude dispatch/dist/main.js", shell: machineOf().shell };

  test("every CLAUDE_DISPATCH_* variable but the per-process ones, by name; nothing else of the environment", () => {
    const env = {
      HOME: "/home/tester",
      ANTHROPIC_API_KEY: "sk-ant-do-not-print",
      CLAUDE_DISPATCH_STATE_DIR: "/var/state",
      CLAUDE_DISPATCH_CLAUDE_BIN: "/opt/claude/bin/claude",
      CLAUDE_DISPATCH_DEPTH: "1",
      CLAUDE_DISPATCH_TREE: "marker",
      CLAUDE_DISPATCH_LOG_LEVEL: undefined,
    };
    assert.deepEqual(Object.entries(hostEnvironment(env)), [
      ["CLAUDE_DISPATCH_CLAUDE_BIN", "/opt/claude/bin/claude"],
      ["CLAUDE_DISPATCH_STATE_DIR", "/var/state"],
    ]);
    assert.equal(
      claudeMcpAddLine(posix, env),
      "claude mcp add -s user claude-dispatch --env CLAUDE_DISPATCH_CLAUDE_BIN=/opt/claude/bin/claude --env CLAUDE_DISPATCH_STATE_DIR=/var/state -- /usr/bin/node '/opt/claude dispatch/dist/main.js'",
    );
    assert.equal(
      claudeMcpAddLine(posix, {}),
      "claude mcp add -s user claude-dispatch -- /usr/bin/node '/opt/claude dispatch/dist/main.js'",
    );
  });

  test("the per-process variables left out are the ones config.ts and process.ts set", () => {
    assert.deepEqual(hostEnvironment({ [DEPTH_VARIABLE]: "1", [TREE_MARKER_VARIABLE]: "marker" }), {});
  });

  test("values are quoted for the shell the line is pasted into", () => {
    assert.equal(
      claudeMcpAddLine(posix, { CLAUDE_DISPATCH_ROOTS: "/src/it's mine:/srv" }),
      "claude mcp add -s user claude-dispatch --env 'CLAUDE_DISPATCH_ROOTS=/src/it'\\''s mine:/srv' -- /usr/bin/node '/opt/claude dispatch/dist/main.js'",
    );
    const windows = {
      nodePath: "C:\\Program Files\\nodejs\\node.exe",
      mainPath: "C:\\src\\claude-dispatch\\dist\\main.js",
      shell: machineOf({ platform: "win32" }).shell,
    };
    assert.equal(
      claudeMcpAddLine(windows, { CLAUDE_DISPATCH_ROOTS: "C:\\my work" }),
      'claude mcp add -s user claude-dispatch --env "CLAUDE_DISPATCH_ROOTS=C:\\my work" -- "C:\\Program ' +
        'Files\\nodejs\\node.exe" C:\\src\\claude-dispatch\\dist\\main.js',
    );
  });

  test("the terminal hint is one line with the same absolute command as doctor's", () => {
    const env = { CLAUDE_DISPATCH_STATE_DIR: "/var/state", CLAUDE_DISPATCH_DEPTH: "0" };
    const hint = terminalHint(posix, env);
    assert.equal(
      hint,
      "claude-dispatch is an MCP server on stdio, started by an MCP host. Add it to one, e.g. " +
        "`claude mcp add -s user claude-dispatch --env CLAUDE_DISPATCH_STATE_DIR=/var/state -- /usr/bin/node '/opt/claude dispatch/dist/main.js'`; " +
        "run it with --help or doctor for more.\n",
    );
    assert.ok(hint.includes(claudeMcpAddLine(posix, env)));
    const hostile = terminalHint(posix, { CLAUDE_DISPATCH_DEFAULT_MODEL: "a\nb\u001b[2J" });
    assert.equal(hostile.indexOf("\n"), hostile.length - 1, "one line, whatever a variable holds");
    assert.ok(!hostile.includes("\u001b"));
  });
});

/** Runs dist/main.js (built by `npm test` before the tests) with an environment built from nothing. */
function runBuilt(args: string[], stateDir: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [SERVER_MAIN, ...args],
      { env: { PATH: process.env.PATH ?? "", CLAUDE_DISPATCH_STATE_DIR: stateDir }, timeout: 30_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === "number" ? error.code : -1) : 0, stdout, stderr }),
    );
  });
}

describe("the built binary", () => {
  const { dir, store } = newState();
  const job = add(store, finished());

  test("jobs --json reads the state directory it is given", async () => {
    const run = await runBuilt(["jobs", "--json"], dir);
    assert.equal(run.code, 0, run.stderr);
    const document = JSON.parse(run.stdout) as { state_dir: string; jobs: { id: string; status: string }[] };
    assert.equal(document.state_dir, dir);
    assert.deepEqual(
      document.jobs.map((row) => [row.id, row.status]),
      [[job.id, "completed"]],
    );
  });

  test("--version and --help", async () => {
    assert.deepEqual(await runBuilt(["--version"], dir), {
      code: 0,
      stdout: `claude-dispatch ${SERVER_VERSION}\n`,
      stderr: "",
    });
    const help = await runBuilt(["--help"], dir);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^Usage: claude-dispatch/);
    const usage = await runBuilt(["nonsense"], dir);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /unknown command "nonsense"/);
  });
});
