/**
 * The operator's commands' runner (jobs/operator-commands.ts), through CLAUDE_DISPATCH_ON_DONE: the argv and the job's
 * variables reach the host as data, a failure is only logged, a command that hangs is killed whole at its
 * bound, busy() says while one runs, and shutdown leaves none behind and starts none after.
 * CLAUDE_DISPATCH_ON_INPUT's variables and when it runs: on-input.test.ts.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import type { ChildExit, ChildHandle, SpawnRequest } from "../src/agent/host.js";
import { onDoneCommands } from "../src/jobs/operator-commands.js";
import type { Job } from "../src/jobs/types.js";
import { FakeClock, RecordingLogger, settle } from "./helpers.js";

class FakeChild implements ChildHandle {
  readonly pid = 777;
  readonly marker = "m";
  killed = 0;
  readonly exited: Promise<ChildExit>;
  readonly settled: Promise<void>;
  private exit!: (exit: ChildExit) => void;

  constructor(readonly request: SpawnRequest) {
    this.exited = new Promise((resolve) => (this.exit = resolve));
    this.settled = this.exited.then(() => undefined);
  }
  async identity() {
    return { pid: this.pid, startTime: "1", marker: this.marker };
  }
  async killTree() {
    this.killed += 1;
    this.end({ exitCode: null, signal: "SIGTERM", stderrTail: "" });
    return { signalled: 1, survivors: [] };
  }
  end(exit: Partial<ChildExit>): void {
    this.exit({ exitCode: 0, signal: null, stderrTail: "", ...exit });
  }
}

function harness(argv = ["notify-send", "claude-dispatch", "a job ended"]) {
  const children: FakeChild[] = [];
  const clock = new FakeClock();
  const logger = new RecordingLogger();
  const commands = onDoneCommands({
    argv,
    host: { start: (request: SpawnRequest) => children.at(children.push(new FakeChild(request)) - 1) as FakeChild },
    env: { PATH: "/usr/bin", DISPLAY: ":0" },
    clock,
    logger,
    timeoutMs: 5000,
  });
  return { children, clock, logger, commands };
}

const JOB = {
  id: "0b7a8c1e-4f0d-4c55-9a52-6f0e4c3d2b1a",
  status: "completed",
  cwd: "/work/app",
  outcome: { ok: true, result: { text: "done", sessionId: "8f01635f-202a-449c-ab8a-05f75520788e" } },
  live: () => ({ turns: 1, events: 3 }),
} as unknown as Job;

test("the argv as given, in the job's cwd, with the job in the environment; a clean exit logs nothing", async () => {
  const { children, logger, commands } = harness();
  const ran = commands.run(JOB);
  const [child] = children;
  assert.ok(child);
  assert.equal(child.request.command, "notify-send");
  assert.deepEqual(child.request.args, ["claude-dispatch", "a job ended"]);
  assert.equal(child.request.cwd, "/work/app");
  assert.equal(child.request.stdin, "");
  assert.deepEqual(
    {
      id: child.request.env.CLAUDE_DISPATCH_JOB_ID,
      status: child.request.env.CLAUDE_DISPATCH_JOB_STATUS,
      cwd: child.request.env.CLAUDE_DISPATCH_JOB_CWD,
      session: child.request.env.CLAUDE_DISPATCH_JOB_SESSION_ID,
      display: child.request.env.DISPLAY,
    },
    {
      id: JOB.id,
      status: "completed",
      cwd: "/work/app",
      session: "8f01635f-202a-449c-ab8a-05f75520788e",
      display: ":0",
    },
  );
  child.end({ exitCode: 0 });
  await ran;
  assert.deepEqual(
    logger.lines.filter((line) => line.startsWith("warn")),
    [],
  );
});

test("a failing command is logged with its stderr; one that cannot start too", async () => {
  const { children, logger, commands } = harness();
  const failing = commands.run(JOB);
  children[0]?.end({ exitCode: 3, stderrTail: "no display\n" });
  await failing;
  const missing = commands.run(JOB);
  children[1]?.end({ exitCode: null, spawnError: { code: "ENOENT", message: "spawn notify-send ENOENT" } });
  await missing;
  const warnings = logger.lines.filter((line) => line.startsWith("warn"));
  assert.equal(warnings.length, 2);
  assert.match(warnings[0] ?? "", /CLAUDE_DISPATCH_ON_DONE for job 0b7a8c1e-.* exited 3: no display/);
  assert.match(warnings[1] ?? "", /did not start: spawn notify-send ENOENT/);
});

test("a command that hangs is killed, tree and all, at its bound; shutdown kills any still running", async () => {
  const { children, clock, logger, commands } = harness();
  const hanging = commands.run(JOB);
  await clock.advance(4999);
  assert.equal(children[0]?.killed, 0);
  await clock.advance(1);
  await hanging;
  assert.equal(children[0]?.killed, 1);
  assert.ok(logger.lines.some((line) => /was killed after 5s/.test(line)));

  const left = commands.run(JOB);
  await settle();
  assert.equal(commands.busy(), true, "a process about to exit can tell that one runs");
  await commands.close();
  await left;
  assert.equal(children[1]?.killed, 1, "never left behind by a server that exits");
  assert.equal(commands.busy(), false);
  assert.equal(clock.pendingTimers, 0, "no timer outlives the command");
  await commands.run(JOB);
  assert.equal(children.length, 2, "none starts once closed");
});

test("busy while a command runs, and no longer once it has exited", async () => {
  const { children, commands } = harness();
  assert.equal(commands.busy(), false);
  const first = commands.run(JOB);
  const second = commands.run(JOB);
  assert.equal(commands.busy(), true);
  children[0]?.end({ exitCode: 0 });
  await first;
  assert.equal(commands.busy(), true, "the other still runs");
  children[1]?.end({ exitCode: 0 });
  await second;
  assert.equal(commands.busy(), false);
});
