/**
 * The process layer against injected platforms: the tree walk and pid-reuse
 * guard with a scripted POSIX process table, and the Windows branch with a
 * fake file system and spawn.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import type { ChildProcess, SpawnOptions } from "node:child_process";

import { ClaudeStream, interpretExit } from "../src/runtimes/claude/index.js";
import {
  createProcessControl,
  parseNpmShimTarget,
  parseProcStat,
  parsePsOutput,
  resolveWindowsInvocation,
  type PosixPlatform,
  type ProcessInfo,
  type Signal,
  type SpawnRequest,
  type WindowsPlatform,
} from "../src/hosts/local/index.js";
import { FakeClock, RecordingLogger, settle } from "./helpers.js";

/** The randomness and deferral the wiring injects (src/main.ts). */
const INJECTED = { newMarker: () => randomUUID(), defer: (fn: () => void) => void setImmediate(fn) };

interface SpawnCall {
  command: string;
  args: readonly string[];
  options: SpawnOptions;
  child: FakeChild;
}

class FakeChild extends EventEmitter {
  readonly stdin = new PassThrough();
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  stdinText = "";
  constructor(readonly pid: number | undefined) {
    super();
    this.stdin.on("data", (chunk: Buffer) => (this.stdinText += chunk.toString()));
  }
  /** Prints and exits, as a process would: exit first, then the pipes close. */
  exitWith(stdout: string, code = 0): void {
    this.stdout.end(stdout);
    this.stderr.end();
    this.emit("exit", code, null);
    setImmediate(() => this.emit("close", code, null));
  }
}

function recordingSpawn(calls: SpawnCall[], pid: number | undefined = 100): PosixPlatform["spawn"] {
  return (command, args, options) => {
    const child = new FakeChild(pid);
    calls.push({ command, args, options, child });
    return child as unknown as ChildProcess;
  };
}

// A directory that exists: a spawn error for a missing cwd is reported differently.
const request: SpawnRequest = {
  command: "claude",
  args: ["-p", "--output-format", "json"],
  cwd: tmpdir(),
  env: { PATH: "/usr/bin" },
  stdin: "the prompt",
  onStdout: () => undefined,
  stderrTailBytes: 1024,
};

const proc = (pid: number, ppid: number, startTime: string, extra: Partial<ProcessInfo> = {}): ProcessInfo => ({
  pid,
  ppid,
  pgid: pid,
  sid: pid,
  startTime,
  zombie: false,
  ...extra,
});

test("parseProcStat reads ppid, group, session and start time after a command name with spaces and parentheses", () => {
  const line = "4242 (my (odd) name) S 4000 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1234 56";
  assert.deepEqual(parseProcStat(line), {
    pid: 4242,
    ppid: 4000,
    pgid: 4242,
    sid: 4242,
    startTime: "987654",
    zombie: false,
  });
  assert.equal(parseProcStat("4243 (z) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0")?.zombie, true);
  assert.equal(parseProcStat("garbage"), undefined);
});

test("parsePsOutput reads the macOS/BSD ps format, with lstart as the rest of the line", () => {
  const text =
    "  1     0     1 Ss   Mon Nov 30 04:00:41 2026\n 501     1   501 S+   Mon Nov 30 04:01:02 2026\n 777   501   501 " +
    "Z    Mon Nov 30 04:02:03 2026\n";
  assert.deepEqual(parsePsOutput(text), [
    { pid: 1, ppid: 0, pgid: 1, sid: undefined, startTime: "Mon Nov 30 04:00:41 2026", zombie: false },
    { pid: 501, ppid: 1, pgid: 501, sid: undefined, startTime: "Mon Nov 30 04:01:02 2026", zombie: false },
    { pid: 777, ppid: 501, pgid: 501, sid: undefined, startTime: "Mon Nov 30 04:02:03 2026", zombie: true },
  ]);
});

const IGNORES_SIGTERM = new Set([300]);

/** A scripted POSIX machine: a process table the test edits, and signals that kill what they hit. */
function fakePosix(table: ProcessInfo[]): {
  platform: PosixPlatform;
  signals: Array<[number, Signal]>;
  calls: SpawnCall[];
} {
  const signals: Array<[number, Signal]> = [];
  const calls: SpawnCall[] = [];
  const platform: PosixPlatform = {
    kind: "posix",
    spawn: recordingSpawn(calls, 100),
    listProcesses: async () => table.map((info) => ({ ...info })),
    signal: (pid, signal) => {
      signals.push([pid, signal]);
      const hit = pid < 0 ? table.filter((info) => info.pgid === -pid) : table.filter((info) => info.pid === pid);
      if (hit.length === 0) throw Object.assign(new Error("ESRCH"), { code: "ESRCH" });
      for (const info of hit) {
        if (signal === "SIGKILL" || !IGNORES_SIGTERM.has(info.pid)) table.splice(table.indexOf(info), 1);
      }
    },
    selfPid: 10,
  };
  return { platform, signals, calls };
}

test("POSIX spawn: no shell, detached, windowsHide, prompt on stdin", async () => {
  const { platform, calls } = fakePosix([proc(10, 1, "s10", { pgid: 10, sid: 5 }), proc(100, 10, "s100")]);
  const control = createProcessControl({
    ...INJECTED,
    platform,
    clock: new FakeClock(),
    logger: new RecordingLogger(),
    killGraceMs: 0,
  });
  control.start(request);
  const call = calls[0];
  assert.ok(call);
  assert.equal(call.command, "claude");
  assert.deepEqual(call.args, ["-p", "--output-format", "json"]);
  assert.equal(call.options.shell, undefined);
  assert.equal(call.options.detached, true);
  assert.equal(call.options.windowsHide, true);
  assert.equal(call.options.cwd, tmpdir());
  await settle();
  assert.equal(call.child.stdinText, "the prompt");
});

test(
  "tree kill: signals descendants in other sessions, re-walks for new ones, never a reused pid, never " +
    "our own group",
  async () => {
    // 10 is this server (group 10, session 5). 100 is the agent. 200 is a tool shell in its own
    // session (as Claude Code runs Bash); 201 its child. 300 ignores SIGTERM. 900 is unrelated.
    const table = [
      proc(10, 1, "s10", { pgid: 10, sid: 5 }),
      proc(100, 10, "s100"),
      proc(200, 100, "s200"),
      proc(201, 200, "s201", { pgid: 200, sid: 200 }),
      proc(300, 100, "s300", { pgid: 100, sid: 100 }),
      proc(900, 1, "s900"),
    ];
    const { platform, signals } = fakePosix(table);
    const clock = new FakeClock();
    const control = createProcessControl({
      ...INJECTED,
      platform,
      clock,
      logger: new RecordingLogger(),
      killGraceMs: 1000,
      killPollMs: 100,
      treeRefreshMs: 1000,
    });
    const handle = control.start(request);
    await settle();

    // The tool shell exits; its child is reparented to init but stays remembered.
    table.splice(
      table.findIndex((info) => info.pid === 200),
      1,
    );
    table.find((info) => info.pid === 201)!.ppid = 1;
    const killing = handle.killTree();
    await clock.advance(5000);
    const report = await killing;

    assert.deepEqual(report.survivors, []);
    const hit = new Set(signals.map(([pid]) => pid));
    for (const pid of [100, 201, 300]) assert.ok(hit.has(pid), `pid ${pid} was not signalled`);
    assert.ok(
      !hit.has(900) && !hit.has(10) && !hit.has(-10) && !hit.has(-5),
      "an unrelated process or our own group was signalled",
    );
    assert.ok(
      signals.some(([pid, signal]) => pid === 300 && signal === "SIGKILL"),
      "the SIGTERM-ignoring child got SIGKILL after the grace",
    );
    assert.deepEqual(
      table.map((info) => info.pid),
      [10, 900],
    );
  },
);

test("a remembered pid that now belongs to another process (new start time) is not signalled", async () => {
  const table = [
    proc(10, 1, "s10", { pgid: 10, sid: 5 }),
    proc(100, 10, "s100"),
    proc(150, 100, "old", { pgid: 150, sid: 150 }),
  ];
  const { platform, signals } = fakePosix(table);
  const clock = new FakeClock();
  const control = createProcessControl({
    ...INJECTED,
    platform,
    clock,
    logger: new RecordingLogger(),
    killGraceMs: 100,
    killPollMs: 50,
  });
  const handle = control.start(request);
  await settle();
  // 150 exits and an unrelated process is born with the same pid.
  table.splice(2, 1, proc(150, 1, "new", { pgid: 150, sid: 150 }));
  const killing = handle.killTree();
  await clock.advance(2000);
  await killing;
  assert.ok(!signals.some(([pid]) => pid === 150 || pid === -150), "the reused pid 150 was signalled");
  assert.ok(table.some((info) => info.pid === 150 && info.startTime === "new"));
});

test("survivors after SIGKILL are reported", async () => {
  const table = [proc(10, 1, "s10", { pgid: 10, sid: 5 }), proc(100, 10, "s100")];
  const { platform } = fakePosix(table);
  platform.signal = () => undefined; // nothing dies: think of a process stuck in uninterruptible sleep
  const clock = new FakeClock();
  const logger = new RecordingLogger();
  const control = createProcessControl({ ...INJECTED, platform, clock, logger, killGraceMs: 100, killPollMs: 50 });
  const handle = control.start(request);
  const killing = handle.killTree();
  await clock.advance(5000);
  assert.deepEqual((await killing).survivors, [100]);
  assert.ok(logger.lines.some((line) => line.includes("still alive: 100")));
});

test("processes carrying the agent's environment marker are adopted, others are not", async () => {
  // 500: the agent's tool child, orphaned before any refresh (ppid 1, own session).
  // 501: another agent's. 502: ours by marker but started before the agent: impossible, so never read.
  const table = [
    proc(10, 1, "10", { pgid: 10, sid: 5 }),
    proc(100, 10, "1000"),
    proc(500, 1, "1005"),
    proc(501, 1, "1006"),
    proc(502, 1, "900"),
  ];
  const { platform, signals, calls } = fakePosix(table);
  const environments = new Map<number, string>();
  const read: number[] = [];
  platform.readEnvironment = (pid) => {
    read.push(pid);
    return environments.get(pid);
  };
  const clock = new FakeClock();
  const control = createProcessControl({
    ...INJECTED,
    platform,
    clock,
    logger: new RecordingLogger(),
    killGraceMs: 100,
    killPollMs: 50,
  });
  const handle = control.start(request);
  const marker = String(calls[0]?.options.env?.CLAUDE_DISPATCH_TREE);
  assert.match(marker, /^[0-9a-f-]{36}$/, "each agent gets its own marker");
  environments.set(500, `PATH=/bin\0CLAUDE_DISPATCH_TREE=${marker}\0HOME=/h`);
  environments.set(501, `CLAUDE_DISPATCH_TREE=someone-else\0`);
  environments.set(502, `CLAUDE_DISPATCH_TREE=${marker}`);
  await settle();
  const killing = handle.killTree();
  await clock.advance(2000);
  assert.deepEqual((await killing).survivors, []);
  const hit = new Set(signals.map(([pid]) => pid));
  assert.ok(hit.has(500), "the marked orphan was not killed");
  assert.ok(!hit.has(501) && !hit.has(502));
  assert.ok(!read.includes(502) && !read.includes(10), "only processes started after the agent are read");
});

test("without a process table the kill falls back to the group and reports the agent unless it exited", async () => {
  const { platform, signals } = fakePosix([]);
  platform.listProcesses = async () => {
    throw new Error("no /proc");
  };
  const clock = new FakeClock();
  const control = createProcessControl({
    ...INJECTED,
    platform,
    clock,
    logger: new RecordingLogger(),
    killGraceMs: 100,
    killPollMs: 50,
  });
  const handle = control.start(request);
  const killing = handle.killTree();
  await clock.advance(1000);
  assert.deepEqual((await killing).survivors, [100], "an unverified kill must not claim success");
  assert.deepEqual(
    signals.map(([pid, signal]) => `${pid}:${signal}`),
    ["-100:SIGTERM", "-100:SIGKILL"],
  );
});

test("stderr keeps only its tail; stdout goes to the reader as it arrives", async () => {
  const { platform, calls } = fakePosix([proc(10, 1, "10", { pgid: 10, sid: 5 })]);
  const clock = new FakeClock();
  const control = createProcessControl({ ...INJECTED, platform, clock, logger: new RecordingLogger(), killGraceMs: 0 });
  const received: string[] = [];
  const handle = control.start({
    ...request,
    onStdout: (chunk) => received.push(chunk.toString()),
    stderrTailBytes: 100,
  });
  const child = calls[0]?.child;
  assert.ok(child);
  for (let i = 0; i < 50; i += 1) child.stderr.write(`line ${i} ${"e".repeat(50)}\n`);
  child.stdout.write("first ");
  child.exitWith("second");
  await clock.advance(1000);
  const exit = await handle.exited;
  assert.equal(exit.stderrTail.length, 100);
  assert.ok(exit.stderrTail.endsWith(`line 49 ${"e".repeat(50)}\n`));
  assert.equal(received.join(""), "first second");
});

/* ------------------------------------------------------------------ *
 * Windows
 * ------------------------------------------------------------------ */

const NPM_SCRIPT_SHIM = `@ECHO off
GOTO start
:find_dp0
SET dp0=%~dp0
EXIT /b
:start
SETLOCAL
CALL :find_dp0

IF EXIST "%dp0%\\node.exe" (
  SET "_prog=%dp0%\\node.exe"
) ELSE (
  SET "_prog=node"
  SET PATHEXT=%PATHEXT:;.JS;=;%
)

endLocal & goto #_undefined_# 2>NUL || title %COMSPEC% & "%_prog%"  "%dp0%\\node_modules\\@anthropic-ai\\claude-code\\cli.js" %*
`;

const NPM_EXE_SHIM = `@ECHO off
GOTO start
:find_dp0
SET dp0=%~dp0
EXIT /b
:start
SETLOCAL
CALL :find_dp0
"%dp0%\\node_modules\\@anthropic-ai\\claude-code\\bin\\claude.exe"   %*
`;

function fakeWindows(
  files: Record<string, string>,
  calls: SpawnCall[] = [],
  taskkill: Array<readonly string[]> = [],
  taskkillExit = 0,
): WindowsPlatform {
  const lower = new Map(Object.entries(files).map(([name, text]) => [name.toLowerCase(), text]));
  return {
    kind: "windows",
    isRunning: () => false,
    spawn: recordingSpawn(calls, 4321),
    runFile: async (file, args) => {
      taskkill.push([file, ...args]);
      return { exitCode: taskkillExit };
    },
    env: {
      PATH: "C:\\Tools;C:\\Users\\me\\AppData\\Roaming\\npm",
      PATHEXT: ".COM;.EXE;.BAT;.CMD",
      SystemRoot: "C:\\Windows",
    },
    fileExists: (file) => lower.has(file.toLowerCase()),
    readTextFile: (file) => lower.get(file.toLowerCase()),
    nodePath: "C:\\Program Files\\nodejs\\node.exe",
  };
}

const NPM_DIR = "C:\\Users\\me\\AppData\\Roaming\\npm";

test("Windows: an npm shim wrapping a script runs that script under our node, without cmd.exe", () => {
  const platform = fakeWindows({
    [`${NPM_DIR}\\claude.cmd`]: NPM_SCRIPT_SHIM,
    [`${NPM_DIR}\\node_modules\\@anthropic-ai\\claude-code\\cli.js`]: "",
  });
  assert.deepEqual(resolveWindowsInvocation("claude", ["-p", "--output-format", "json"], platform), {
    command: "C:\\Program Files\\nodejs\\node.exe",
    args: [`${NPM_DIR}\\node_modules\\@anthropic-ai\\claude-code\\cli.js`, "-p", "--output-format", "json"],
    verbatim: false,
  });
});

test("Windows: an npm shim wrapping the native claude.exe runs the exe directly", () => {
  const platform = fakeWindows({
    [`${NPM_DIR}\\claude.cmd`]: NPM_EXE_SHIM,
    [`${NPM_DIR}\\node_modules\\@anthropic-ai\\claude-code\\bin\\claude.exe`]: "",
  });
  const invocation = resolveWindowsInvocation("claude", ["-p"], platform);
  assert.equal(invocation.command, `${NPM_DIR}\\node_modules\\@anthropic-ai\\claude-code\\bin\\claude.exe`);
  assert.deepEqual(invocation.args, ["-p"]);
});

test("Windows: PATH order and PATHEXT decide, and an .exe is run directly", () => {
  const platform = fakeWindows({ "C:\\Tools\\claude.exe": "", [`${NPM_DIR}\\claude.cmd`]: NPM_EXE_SHIM });
  assert.deepEqual(resolveWindowsInvocation("claude", ["-p"], platform), {
    command: "C:\\Tools\\claude.EXE",
    args: ["-p"],
    verbatim: false,
  });
});

test("Windows: an unknown .cmd goes through cmd.exe by absolute path, with constant arguments only", () => {
  const platform = fakeWindows({ "C:\\Tools\\claude.cmd": "@echo off\r\nsomething-else %*\r\n" });
  const uuid = "8f01635f-202a-449c-ab8a-05f75520788e";
  assert.deepEqual(resolveWindowsInvocation("claude", ["-p", "--resume", uuid], platform), {
    command: "C:\\Windows\\System32\\cmd.exe",
    args: ["/d", "/s", "/c", `""C:\\Tools\\claude.CMD" -p --resume ${uuid}"`],
    verbatim: true,
  });
  assert.throws(
    () => resolveWindowsInvocation("claude", ["-p", "a & calc.exe"], platform),
    /refusing to pass argument/,
  );
  assert.throws(() => resolveWindowsInvocation("claude", ['"quoted"'], platform), /refusing/);
});

test("Windows: the shim target parser handles both %dp0% forms and rejects others", () => {
  assert.equal(
    parseNpmShimTarget(NPM_EXE_SHIM, "C:\\npm"),
    "C:\\npm\\node_modules\\@anthropic-ai\\claude-code\\bin\\claude.exe",
  );
  assert.equal(
    parseNpmShimTarget(`"%~dp0\\node_modules\\x\\cli.js" %*`, "C:\\npm"),
    "C:\\npm\\node_modules\\x\\cli.js",
  );
  assert.equal(parseNpmShimTarget("echo hi", "C:\\npm"), undefined);
});

test("Windows: spawn hides the window, is not detached, and a missing claude is SPAWN_FAILED", async () => {
  const calls: SpawnCall[] = [];
  const platform = fakeWindows({ "C:\\Tools\\claude.exe": "" }, calls);
  const control = createProcessControl({
    ...INJECTED,
    platform,
    clock: new FakeClock(),
    logger: new RecordingLogger(),
    killGraceMs: 0,
  });
  control.start(request);
  const call = calls[0];
  assert.ok(call);
  assert.equal(call.command, "C:\\Tools\\claude.EXE", "found through PATHEXT, whose case Windows ignores");
  assert.equal(call.options.windowsHide, true);
  assert.equal(call.options.detached, undefined);
  assert.equal(call.options.shell, undefined);

  const missing = createProcessControl({
    ...INJECTED,
    platform: fakeWindows({}),
    clock: new FakeClock(),
    logger: new RecordingLogger(),
    killGraceMs: 0,
  }).start(request);
  const exit = await missing.exited;
  const outcome = interpretExit(
    exit,
    new ClaudeStream({ maxLineBytes: 1024, transcriptChars: 1024, onOverflow: () => undefined }),
    "claude",
  );
  assert.ok(!outcome.ok && outcome.code === "SPAWN_FAILED" && outcome.detail.includes("not found on PATH"));
});

test("Windows: kill runs taskkill /T /F by its absolute System32 path; 'not found' is success", async () => {
  const calls: SpawnCall[] = [];
  const taskkill: Array<readonly string[]> = [];
  const platform = fakeWindows({ "C:\\Tools\\claude.exe": "" }, calls, taskkill, 128);
  const control = createProcessControl({
    ...INJECTED,
    platform,
    clock: new FakeClock(),
    logger: new RecordingLogger(),
    killGraceMs: 0,
  });
  const handle = control.start(request);
  const report = await handle.killTree();
  assert.deepEqual(taskkill, [["C:\\Windows\\System32\\taskkill.exe", "/pid", "4321", "/T", "/F"]]);
  assert.deepEqual(report.survivors, []);
  calls[0]?.child.exitWith(JSON.stringify({ type: "result", is_error: false, result: "ok" }));
  const exit = await handle.exited;
  assert.equal(exit.exitCode, 0);
  await control.idle();
});

/** An attached agent's output files, stdout holding `stdout`, in a folder removed afterwards. */
async function withOutputFiles(
  stdout: string,
  body: (output: { stdoutPath: string; stderrPath: string }) => Promise<void>,
): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "claude-dispatch-attach-"));
  try {
    const output = { stdoutPath: path.join(dir, "stdout.jsonl"), stderrPath: path.join(dir, "stderr.log") };
    writeFileSync(output.stdoutPath, stdout);
    await body(output);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Agent 777 of an earlier server, attached on a fake Windows and followed (followMs 10) while agent.running. */
function followedOnWindows(
  output: { stdoutPath: string; stderrPath: string },
  onStdout: (chunk: Buffer) => void,
  taskkill: Array<readonly string[]> = [],
) {
  const agent = { running: true };
  const platform: WindowsPlatform = {
    ...fakeWindows({}, [], taskkill, 0),
    isRunning: (pid) => pid === 777 && agent.running,
  };
  const clock = new FakeClock();
  const control = createProcessControl({
    ...INJECTED,
    platform,
    clock,
    logger: new RecordingLogger(),
    killGraceMs: 0,
    followMs: 10,
  });
  const handle = control.attach({
    pid: 777,
    startTime: undefined,
    marker: undefined,
    output,
    onStdout,
    stderrTailBytes: 100,
  });
  return { agent, clock, control, handle };
}

test(
  "Windows: an agent of an earlier server is followed from its output file until its pid is gone, and killed " +
    "with taskkill",
  async () => {
    await withOutputFiles(
      `${JSON.stringify({ type: "result", is_error: false, result: "done while away" })}\n`,
      async (output) => {
        writeFileSync(output.stderrPath, "a warning\n");
        const taskkill: Array<readonly string[]> = [];
        const chunks: Buffer[] = [];
        const { agent, clock, control, handle } = followedOnWindows(output, (chunk) => chunks.push(chunk), taskkill);
        let exited = false;
        void handle.exited.then(() => (exited = true));
        await clock.advance(5000);
        assert.equal(exited, false, "alive: still followed");
        const report = await handle.killTree();
        assert.deepEqual(taskkill, [["C:\\Windows\\System32\\taskkill.exe", "/pid", "777", "/T", "/F"]]);
        assert.deepEqual(report.survivors, []);
        agent.running = false;
        await clock.advance(2000);
        const exit = await handle.exited;
        assert.deepEqual([exit.unobserved, exit.exitCode, exit.stderrTail], [true, null, "a warning\n"]);
        assert.match(Buffer.concat(chunks).toString(), /done while away/);
        await control.idle();
      },
    );
  },
);

test("a quiet output file is read less often, up to ten times followMs apart, fast again once it grows", async () => {
  await withOutputFiles("", async (output) => {
    const arrivals: number[] = [];
    const { agent, clock, control, handle } = followedOnWindows(output, () => arrivals.push(clock.now()));
    /** Appends a line, then moves the clock 1 ms at a time until it is read: how long that took. */
    const readAfter = async (line: string): Promise<number> => {
      const [writtenAt, count] = [clock.now(), arrivals.length];
      appendFileSync(output.stdoutPath, `${line}\n`);
      for (let ms = 0; arrivals.length === count && ms < 5000; ms += 1) await clock.advance(1);
      return (arrivals[count] ?? Number.NaN) - writtenAt;
    };
    await clock.advance(3000);
    const afterQuiet = await readAfter('{"type":"system"}');
    assert.ok(afterQuiet > 10 && afterQuiet <= 100, `read ${afterQuiet} ms after 3 s of quiet: slower, within 100 ms`);
    const afterGrowth = await readAfter('{"type":"assistant"}');
    assert.ok(afterGrowth <= 10, `read ${afterGrowth} ms after the file grew: at the fast pace again`);
    agent.running = false;
    await clock.advance(2000);
    await handle.exited;
    await control.idle();
  });
});

test(
  "attaching without a recorded start time: a pid that does not carry the agent's marker is neither followed " +
    "nor signalled",
  async () => {
    await withOutputFiles("", async (output) => {
      // 700 reused the agent's pid (a stranger, with a child 701); 800 is a real agent with the recorded marker.
      const table = [
        proc(10, 1, "10", { pgid: 10, sid: 5 }),
        proc(700, 1, "7000"),
        proc(701, 700, "7001"),
        proc(800, 1, "8000"),
      ];
      const { platform, signals } = fakePosix(table);
      platform.readEnvironment = (pid) =>
        pid === 800 ? `CLAUDE_DISPATCH_TREE=the-marker\0` : `CLAUDE_DISPATCH_TREE=other\0`;
      const clock = new FakeClock();
      const control = createProcessControl({
        ...INJECTED,
        platform,
        clock,
        logger: new RecordingLogger(),
        killGraceMs: 100,
        killPollMs: 50,
        followMs: 10,
      });
      const attach = (pid: number, marker: string) =>
        control.attach({ pid, startTime: undefined, marker, output, onStdout: () => undefined, stderrTailBytes: 10 });

      assert.equal(await control.isAlive(700, undefined, "the-marker"), false);
      assert.equal(await control.isAlive(800, undefined, "the-marker"), true);
      // The record of an agent that is gone, whose pid 700 now names a stranger.
      const stranger = attach(700, "a-gone-agent");
      await clock.advance(100);
      const exit = await stranger.exited;
      assert.equal(exit.unobserved, true, "taken for gone at once");
      const killingStranger = stranger.killTree();
      await clock.advance(2000);
      const report = await killingStranger;
      assert.deepEqual(
        [report.signalled, report.survivors, signals],
        [0, [], []],
        "the stranger and its child were never signalled",
      );

      const agent = attach(800, "the-marker");
      await clock.advance(600);
      const killing = agent.killTree();
      await clock.advance(2000);
      assert.deepEqual((await killing).survivors, []);
      assert.ok(
        signals.some(([pid]) => pid === 800),
        "the marked agent was killed",
      );
      await clock.advance(3000);
      await agent.exited;
      await control.idle();
    });
  },
);

test("an agent attached a moment after its spawn is not taken for gone from a table read before it", async () => {
  await withOutputFiles("", async (output) => {
    const table = [proc(10, 1, "10", { pgid: 10, sid: 5 })];
    const { platform, signals } = fakePosix(table);
    const clock = new FakeClock();
    const control = createProcessControl({
      ...INJECTED,
      platform,
      clock,
      logger: new RecordingLogger(),
      killGraceMs: 100,
      killPollMs: 50,
      followMs: 10,
      livenessMs: { first: 500, max: 2000 },
    });
    // A table read shared for a moment (another server's job looked at just before)...
    assert.equal(await control.isAlive(999, "1"), false);
    // ...and then that server's agent spawns, and its pid goes on record: this server follows it at once.
    table.push(proc(950, 1, "9500"));
    const handle = control.attach({
      pid: 950,
      startTime: "9500",
      marker: undefined,
      output,
      onStdout: () => undefined,
      stderrTailBytes: 10,
    });
    let exited = false;
    void handle.exited.then(() => (exited = true));
    await clock.advance(100);
    assert.equal(exited, false, "the agent is alive");
    assert.deepEqual(signals, [], "and nothing of it was stopped as a leftover");
    table.splice(
      table.findIndex((info) => info.pid === 950),
      1,
    );
    await clock.advance(3000);
    await handle.exited;
    await control.idle();
  });
});

test(
  "an attached agent that survives its kill is still polled at the usual pace, and a failed table read does not " +
    "make it gone",
  async () => {
    await withOutputFiles("", async (output) => {
      const table = [proc(10, 1, "10", { pgid: 10, sid: 5 }), proc(900, 1, "9000")];
      const { platform } = fakePosix(table);
      // 900 is stuck in the kernel: no signal removes it.
      platform.signal = () => undefined;
      let reads = 0;
      let failNextRead = false;
      platform.listProcesses = async () => {
        reads += 1;
        if (failNextRead) {
          failNextRead = false;
          throw Object.assign(new Error("EMFILE: too many open files"), { code: "EMFILE" });
        }
        return table.map((info) => ({ ...info }));
      };
      const clock = new FakeClock();
      const control = createProcessControl({
        ...INJECTED,
        platform,
        clock,
        logger: new RecordingLogger(),
        killGraceMs: 100,
        killPollMs: 50,
        followMs: 10,
        livenessMs: { first: 500, max: 2000 },
      });
      const handle = control.attach({
        pid: 900,
        startTime: "9000",
        marker: undefined,
        output,
        onStdout: () => undefined,
        stderrTailBytes: 10,
      });
      let exited = false;
      void handle.exited.then(() => (exited = true));
      await clock.advance(1000);
      failNextRead = true;
      await clock.advance(3000);
      assert.equal(exited, false, "one failed read of the process table is not taken for the agent's death");

      const killing = handle.killTree();
      await clock.advance(3000);
      assert.deepEqual((await killing).survivors, [900]);
      const before = reads;
      await clock.advance(10_000);
      assert.ok(
        reads - before < 40,
        `after the kill, liveness is polled at the usual pace, not in a busy loop (${reads - before} reads in 10 s)`,
      );
      assert.equal(exited, false);
      table.splice(
        table.findIndex((info) => info.pid === 900),
        1,
      );
      await clock.advance(3000);
      await handle.exited;
      await control.idle();
    });
  },
);

test("the end of stderr is read without a character cut in two at its start", async () => {
  await withOutputFiles("", async (output) => {
    // "é" is two bytes and "€" three: the last 4 bytes of "xxé€" start inside the é.
    writeFileSync(output.stderrPath, "xxé€");
    const platform: WindowsPlatform = { ...fakeWindows({}), isRunning: () => false };
    const control = createProcessControl({
      ...INJECTED,
      platform,
      clock: new FakeClock(),
      logger: new RecordingLogger(),
      killGraceMs: 0,
      followMs: 10,
    });
    const exit = await control.attach({
      pid: 5,
      startTime: undefined,
      marker: undefined,
      output,
      onStdout: () => undefined,
      stderrTailBytes: 4,
    }).exited;
    assert.equal(exit.stderrTail, "€");
    await control.idle();
  });
});

test("a pid recorded alone (no start time, no marker) is neither alive nor gone while it exists", async () => {
  const { platform } = fakePosix([proc(10, 1, "10", { pgid: 10, sid: 5 }), proc(600, 1, "6000")]);
  const control = createProcessControl({
    ...INJECTED,
    platform,
    clock: new FakeClock(),
    logger: new RecordingLogger(),
    killGraceMs: 0,
  });
  assert.equal(await control.isAlive(600, undefined), undefined);
  assert.equal(await control.isAlive(601, undefined), false);
  assert.equal(await control.isAlive(600, "6000"), true);
  assert.equal(await control.isAlive(600, "1"), false);
});
