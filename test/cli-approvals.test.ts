/**
 * Permission requests on the command line (PROTOCOL.md §18): `approve` and
 * `deny` writing the answer file, `jobs` showing input_required, `show`
 * listing every request and who answered it, and `logs` (and `logs -f`)
 * saying what waits and each answer. runCli runs in process against state
 * directories written here; requests are filed through the store, as the
 * approver files them. The owning server is this test process, alive, so
 * nothing tries a takeover.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { systemClock, type Clock } from "../src/core/clock.js";
import type { ProcessControl } from "../src/hosts/local/index.js";
import type { ApprovalRequest } from "../src/store/approvals.js";
import type { JobRecord } from "../src/store/records.js";
import { StateStore } from "../src/store/state-store.js";
import { HOME, newStateIn, runCliCaptured, startCli, type StartedCli } from "./cli-harness.js";
import { FakeClock, settle } from "./helpers.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-cli-approvals-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const NOW = Date.parse("2025-06-01T12:00:00.000Z");
const MINUTE = 60_000;
const fixedClock: Clock = { now: () => NOW, setTimer: systemClock.setTimer };

/** Liveness for `show`: the owner (this process) is alive, nothing else; nothing is ever started or killed. */
const processes: ProcessControl = {
  start: () => assert.fail("the CLI never starts a process"),
  attach: () => assert.fail("answering a request never attaches to an agent"),
  isAlive: async (pid) => pid === process.pid,
  startTimeOf: async () => undefined,
  findMarked: async () => null,
  idle: async () => undefined,
};

const cli = (args: string[], stateDir: string, clock: Clock = fixedClock): ReturnType<typeof runCliCaptured> =>
  runCliCaptured(args, { stateDir, clock, processControl: async () => processes });
const start = (args: string[], stateDir: string, clock: Clock = fixedClock): StartedCli =>
  startCli(args, { stateDir, clock, processControl: async () => processes });
const newState = (): { dir: string; store: StateStore } => newStateIn(scratch);

function running(now: number, overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    format: 1,
    runtime: "claude",
    host: "local",
    id: randomUUID(),
    kind: "start",
    cwd: `${HOME}/src/app`,
    prompt_preview: "tidy the build",
    options: {},
    status: "running",
    submitted_at: now - 10 * MINUTE,
    started_at: now - 10 * MINUTE,
    owner: { pid: process.pid },
    generation: 0,
    agent: { pid: process.pid },
    ...overrides,
  };
}

function add(store: StateStore, record: JobRecord): JobRecord {
  store.create(record, record.prompt_preview);
  return record;
}

/** A request as the approver files it, asked `agoMs` before `now`, expiring ten minutes after it was asked. */
function ask(store: StateStore, id: string, command: string, now = NOW, agoMs = MINUTE): ApprovalRequest {
  const asked_at = now - agoMs;
  return store.fileApproval(id, {
    tool_name: "Bash",
    input: { command, description: "run it" },
    tool_use_id: `toolu_${randomUUID().slice(0, 8)}`,
    preview: `Bash · ${command}`,
    asked_at,
    expires_at: asked_at + 10 * MINUTE,
  });
}

/** The files of a job's folder that are answers. */
function answerFiles(store: StateStore, id: string): string[] {
  return readdirSync(store.jobDir(id)).filter((name) => name.endsWith(".answer.json"));
}

describe("approve and deny", () => {
  const { dir, store } = newState();

  test("approve ID: the only pending request is allowed by cli, at the clock's time; exit 0 and one line", async () => {
    const job = add(store, running(NOW));
    ask(store, job.id, "echo hi > out.txt");
    const run = await cli(["approve", job.id.slice(0, 8)], dir);
    assert.deepEqual(run, {
      code: 0,
      stdout: `Allowed request 1 of job ${job.id}: Bash · echo hi > out.txt\n`,
      stderr: "",
    });
    assert.deepEqual(store.approval(job.id, "1")?.answer, { decision: "allow", by: "cli", at: NOW });
  });

  test("approve ID REQUEST answers that one and leaves the other pending; --json says what was answered", async () => {
    const job = add(store, running(NOW));
    ask(store, job.id, "npm test");
    ask(store, job.id, "npm run build");
    const run = await cli(["approve", job.id, "2", "--json"], dir);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), {
      job_id: job.id,
      request_id: "2",
      decision: "allow",
      by: "cli",
      tool_name: "Bash",
      preview: "Bash · npm run build",
    });
    assert.deepEqual(store.approval(job.id, "2")?.answer, { decision: "allow", by: "cli", at: NOW });
    assert.equal(store.approval(job.id, "1")?.answer, undefined);
  });

  test("deny --message M and --message=M: the message is written for the agent", async () => {
    const job = add(store, running(NOW));
    ask(store, job.id, "rm -rf build");
    ask(store, job.id, "git push --force");
    const first = await cli(["deny", job.id, "1", "--message", "  keep the build folder "], dir);
    assert.deepEqual(first, {
      code: 0,
      stdout: `Denied request 1 of job ${job.id}: Bash · rm -rf build (message: "keep the build folder")\n`,
      stderr: "",
    });
    assert.deepEqual(store.approval(job.id, "1")?.answer, {
      decision: "deny",
      by: "cli",
      at: NOW,
      message: "keep the build folder",
    });

    const second = await cli(["deny", job.id, "--message=never force-push", "--json"], dir);
    assert.equal(second.code, 0, second.stderr);
    assert.equal((JSON.parse(second.stdout) as { request_id: string }).request_id, "2", "the one left pending");
    assert.deepEqual(store.approval(job.id, "2")?.answer, {
      decision: "deny",
      by: "cli",
      at: NOW,
      message: "never force-push",
    });
  });

  test("deny without --message writes no message", async () => {
    const job = add(store, running(NOW));
    ask(store, job.id, "curl example.com");
    const run = await cli(["deny", job.id], dir);
    assert.deepEqual(run, {
      code: 0,
      stdout: `Denied request 1 of job ${job.id}: Bash · curl example.com\n`,
      stderr: "",
    });
    assert.deepEqual(store.approval(job.id, "1")?.answer, { decision: "deny", by: "cli", at: NOW });
  });

  test("two pending and no REQUEST: exit 1 listing both, nothing answered", async () => {
    const job = add(store, running(NOW));
    ask(store, job.id, "npm test");
    ask(store, job.id, "npm run lint");
    const run = await cli(["approve", job.id], dir);
    assert.deepEqual(run, {
      code: 1,
      stdout: "",
      stderr:
        `claude-dispatch: job ${job.id} has 2 pending requests: 1 (Bash · npm test), 2 (Bash · npm run ` +
        `lint); name one\n`,
    });
    assert.deepEqual(answerFiles(store, job.id), []);
  });

  test("no pending request: exit 1 saying so", async () => {
    const job = add(store, running(NOW));
    const run = await cli(["deny", job.id], dir);
    assert.deepEqual(run, { code: 1, stdout: "", stderr: `claude-dispatch: job ${job.id} has no pending request\n` });
  });

  test("already answered: exit 1 naming the standing answer, which is left as it was", async () => {
    const job = add(store, running(NOW));
    ask(store, job.id, "npm test");
    const standing = { decision: "allow" as const, by: "tool" as const, at: NOW - 1000 };
    assert.equal(store.answerApproval(job.id, "1", standing)?.won, true);
    const run = await cli(["deny", job.id, "1", "--message", "too late"], dir);
    assert.deepEqual(run, {
      code: 1,
      stdout: "",
      stderr: `claude-dispatch: request 1 of job ${job.id} was already answered: allow (by tool)\n`,
    });
    assert.deepEqual(store.approval(job.id, "1")?.answer, standing);

    const json = await cli(["approve", job.id, "1", "--json"], dir);
    assert.equal(json.code, 1);
    assert.deepEqual(JSON.parse(json.stdout), {
      error: { code: "INVALID_ARGUMENT", message: `request 1 of job ${job.id} was already answered: allow (by tool)` },
    });
  });

  test("a finished job: exit 1, its request no longer pending, and no answer written", async () => {
    const job = add(store, { ...running(NOW), status: "completed", finished_at: NOW - MINUTE, outcome: { ok: true } });
    ask(store, job.id, "npm test");
    const named = await cli(["approve", job.id, "1"], dir);
    assert.deepEqual(named, {
      code: 1,
      stdout: "",
      stderr: `claude-dispatch: job ${job.id} has finished (completed): request 1 is no longer pending\n`,
    });
    const unnamed = await cli(["approve", job.id], dir);
    assert.equal(unnamed.code, 1);
    assert.equal(
      unnamed.stderr,
      `claude-dispatch: job ${job.id} has finished (completed): none of its requests is pending\n`,
    );
    // One it never filed is not "no longer pending": it never was.
    const never = await cli(["deny", job.id, "7"], dir);
    assert.deepEqual(never, { code: 1, stdout: "", stderr: `claude-dispatch: job ${job.id} has no request 7\n` });
    assert.equal(store.approval(job.id, "1")?.answer, undefined);
  });

  test("an unknown request: exit 1 listing the pending ones; an unknown job: exit 1", async () => {
    const job = add(store, running(NOW));
    ask(store, job.id, "npm test");
    const run = await cli(["approve", job.id, "7"], dir);
    assert.deepEqual(run, {
      code: 1,
      stdout: "",
      stderr: `claude-dispatch: job ${job.id} has no request 7; pending: 1 (Bash · npm test)\n`,
    });
    assert.deepEqual(answerFiles(store, job.id), []);

    const missing = randomUUID();
    const unknownJob = await cli(["approve", missing, "1"], dir);
    assert.deepEqual(unknownJob, { code: 1, stdout: "", stderr: `claude-dispatch: no job ${missing} in ${dir}\n` });
  });

  test("usage errors: exit 2 and nothing written", async () => {
    const job = add(store, running(NOW));
    ask(store, job.id, "npm test");
    const cases: [string[], string][] = [
      [["approve"], "approve needs a job id"],
      [["approve", job.id, "1", "2"], "approve needs a job id"],
      [["approve", job.id, "first"], 'not a request number: "first"'],
      [["approve", job.id, "0"], 'not a request number: "0"'],
      [["approve", job.id, "--message", "fine"], "approve takes no --message"],
      [["deny", job.id, "--message"], "--message needs the text the agent is told"],
      [["deny", "../etc", "1"], 'not a job id: "../etc"'],
      [["show", job.id, "--message", "x"], 'unknown option "--message" for show'],
    ];
    for (const [args, message] of cases) {
      const run = await cli(args, dir);
      assert.equal(run.code, 2, args.join(" "));
      assert.equal(run.stdout, "", args.join(" "));
      assert.ok(run.stderr.includes(message), `${args.join(" ")}: ${run.stderr}`);
      assert.ok(run.stderr.includes("approve ID [REQUEST]"), "the short usage names approve");
    }
    assert.deepEqual(answerFiles(store, job.id), []);
  });

  test("--help describes approve and deny", async () => {
    const run = await cli(["--help"], dir);
    for (const text of ["approve ID [REQUEST]", "deny ID [REQUEST] [--message M]"])
      assert.ok(run.stdout.includes(text), text);
  });
});

describe("jobs: input_required", () => {
  const { dir, store } = newState();
  const waiting = add(store, running(NOW, { submitted_at: NOW - 3 * MINUTE }));
  ask(store, waiting.id, "echo hi > out.txt");
  ask(store, waiting.id, "npm test");
  store.answerApproval(waiting.id, "2", { decision: "deny", by: "timeout", at: NOW });
  const answered = add(store, running(NOW, { submitted_at: NOW - 2 * MINUTE }));
  ask(store, answered.id, "ls");
  store.answerApproval(answered.id, "1", { decision: "allow", by: "tool", at: NOW });
  // A finished job never waits, whatever its files say.
  const finished = add(store, {
    ...running(NOW, { submitted_at: NOW - MINUTE }),
    status: "killed",
    finished_at: NOW,
    outcome: { ok: false, code: "KILLED", detail: "killed" },
  });
  ask(store, finished.id, "sleep 100");

  test("the table: STATUS input_required for a running job with a request waiting, and how to answer it", async () => {
    const run = await cli(["jobs"], dir);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.trimEnd().split("\n");
    const [header = ""] = lines;
    const statusOf = (id: string): string => {
      const row = lines.find((line) => line.startsWith(id)) ?? assert.fail(`no row for ${id}`);
      return row.slice(header.indexOf("STATUS"), header.indexOf("AGE")).trimEnd();
    };
    assert.equal(statusOf(waiting.id), "input_required");
    assert.equal(statusOf(answered.id), "running");
    assert.equal(statusOf(finished.id), "killed");
    assert.equal(
      lines.at(-2),
      `(job ${waiting.id} is waiting for approval: request 1 · Bash · echo hi > out.txt — claude-dispatch approve ` +
        `${waiting.id} 1, or deny)`,
    );
    // No server has been present here (§15.8).
    assert.equal(
      lines.at(-1),
      "Nothing carries 2 unfinished jobs: no server or carrier runs; the next server takes them over.",
    );
    assert.equal(lines.length, 6, "a header, three rows, one waiting request, and who carries the work");
  });

  test("--json: status input_required and the pending requests; other rows unchanged", async () => {
    const run = await cli(["jobs", "--json"], dir);
    const rows = (JSON.parse(run.stdout) as { jobs: { id: string; status: string; pending_approvals?: unknown }[] })
      .jobs;
    assert.deepEqual(
      rows.map((row) => [row.id, row.status, row.pending_approvals]),
      [
        [waiting.id, "input_required", [{ request_id: "1", tool_name: "Bash", preview: "Bash · echo hi > out.txt" }]],
        [answered.id, "running", undefined],
        [finished.id, "killed", undefined],
      ],
    );
  });

  test("once answered from the command line, the job is running again", async () => {
    const { dir: own, store: ownStore } = newState();
    const job = add(ownStore, running(NOW));
    ask(ownStore, job.id, "npm test");
    assert.equal(
      (JSON.parse((await cli(["jobs", "--json"], own)).stdout) as { jobs: { status: string }[] }).jobs[0]?.status,
      "input_required",
    );
    assert.equal((await cli(["approve", job.id], own)).code, 0);
    const after = JSON.parse((await cli(["jobs", "--json"], own)).stdout) as {
      jobs: { status: string; pending_approvals?: unknown }[];
    };
    assert.equal(after.jobs[0]?.status, "running");
    assert.equal(after.jobs[0]?.pending_approvals, undefined);
  });
});

describe("show: the requests", () => {
  const { dir, store } = newState();

  test(
    "every request with what it asked, when, and who answered it; a pending one with its input and " + "how to answer",
    async () => {
      const job = add(store, running(NOW));
      ask(store, job.id, "echo hi > out.txt", NOW, 5 * MINUTE);
      ask(store, job.id, "rm -rf build", NOW, 4 * MINUTE);
      ask(store, job.id, "npm test", NOW, 3 * MINUTE);
      ask(store, job.id, "git push", NOW, 2 * MINUTE);
      store.answerApproval(job.id, "1", { decision: "allow", by: "tool", at: NOW - 290_000 });
      store.answerApproval(job.id, "2", { decision: "deny", by: "cli", at: NOW - 230_000, message: "keep it" });
      store.answerApproval(job.id, "3", { decision: "deny", by: "timeout", at: NOW - 170_000 });
      const run = await cli(["show", job.id], dir);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /^ {2}status +input_required \(running, waiting for a permission answer\)$/m);
      const section = run.stdout.slice(run.stdout.indexOf("permission requests:\n"), run.stdout.indexOf("\nprompt:"));
      assert.equal(
        section,
        [
          "permission requests:",
          "  1  Bash · echo hi > out.txt",
          "     asked 2025-06-01T11:55:00.000Z (5m ago); allowed by claude_respond at 2025-06-01T11:55:10.000Z",
          "  2  Bash · rm -rf build",
          "     asked 2025-06-01T11:56:00.000Z (4m ago); denied by the command line at " +
            '2025-06-01T11:56:10.000Z: "keep it"',
          "  3  Bash · npm test",
          "     asked 2025-06-01T11:57:00.000Z (3m ago); denied by the timeout at 2025-06-01T11:57:10.000Z",
          "  4  Bash · git push",
          "     asked 2025-06-01T11:58:00.000Z (2m ago); pending: denied at 2025-06-01T12:08:00.000Z unless answered",
          '     input: {"command":"git push","description":"run it"}',
          `     answer: claude-dispatch approve ${job.id} 4, or claude-dispatch deny ${job.id} 4 --message "…"`,
          "",
        ].join("\n"),
      );
    },
  );

  test("the other answerers by name; a finished job's unanswered request is unanswered, with no hint", async () => {
    const job = add(store, {
      ...running(NOW),
      status: "failed",
      finished_at: NOW,
      outcome: { ok: false, code: "AGENT_EXITED", detail: "exited" },
    });
    ask(store, job.id, "a");
    ask(store, job.id, "b");
    ask(store, job.id, "c");
    store.answerApproval(job.id, "1", { decision: "allow", by: "elicitation", at: NOW });
    store.answerApproval(job.id, "2", { decision: "deny", by: "server", at: NOW });
    const run = await cli(["show", job.id], dir);
    assert.match(run.stdout, /^ {2}status +failed$/m);
    assert.match(run.stdout, /^ {5}asked .*; allowed by the client's form at /m);
    assert.match(run.stdout, /^ {5}asked .*; denied by the server \(nobody could be asked\) at /m);
    assert.match(run.stdout, /^ {5}asked .*; unanswered: the job finished first$/m);
    assert.ok(!run.stdout.includes("claude-dispatch approve"), "nothing to answer");
  });

  test("--json: approvals with the whole request and its answer; the record as it is", async () => {
    const job = add(store, running(NOW));
    const first = ask(store, job.id, "echo hi > out.txt");
    const second = ask(store, job.id, "npm test");
    store.answerApproval(job.id, "1", { decision: "allow", by: "cli", at: NOW });
    const run = await cli(["show", job.id, "--json"], dir);
    const document = JSON.parse(run.stdout) as Record<string, unknown>;
    assert.deepEqual(document.record, job);
    assert.equal(document.status, "input_required");
    assert.deepEqual(document.approvals, [
      { state: "answered", request: first, answer: { decision: "allow", by: "cli", at: NOW } },
      { state: "pending", request: second, answer: null },
    ]);
  });

  test("request files gone: the record's list, without the input", async () => {
    const job = add(store, {
      ...running(NOW),
      status: "completed",
      finished_at: NOW,
      outcome: { ok: true },
      approvals: [
        {
          id: "1",
          tool_name: "Edit",
          preview: "Edit · src/a.ts",
          asked_at: NOW - MINUTE,
          expires_at: NOW + 9 * MINUTE,
          decision: "allow",
          by: "tool",
          answered_at: NOW - 30_000,
        },
      ],
    });
    const run = await cli(["show", job.id], dir);
    assert.ok(
      run.stdout.includes(
        "permission requests:\n  1  Edit · src/a.ts\n     asked 2025-06-01T11:59:00.000Z (1m ago); allowed by " +
          "claude_respond at 2025-06-01T11:59:30.000Z\n",
      ),
      run.stdout,
    );
    const json = JSON.parse((await cli(["show", job.id, "--json"], dir)).stdout) as { approvals: unknown };
    assert.deepEqual(json.approvals, [
      {
        state: "answered",
        request: {
          id: "1",
          tool_name: "Edit",
          preview: "Edit · src/a.ts",
          asked_at: NOW - MINUTE,
          expires_at: NOW + 9 * MINUTE,
        },
        answer: { decision: "allow", by: "tool", at: NOW - 30_000 },
      },
    ]);
  });

  test("a job without requests has no such section and an empty list", async () => {
    const job = add(store, running(NOW));
    const run = await cli(["show", job.id], dir);
    assert.ok(!run.stdout.includes("permission requests"));
    assert.match(run.stdout, /^ {2}status +running$/m);
    assert.deepEqual(
      (JSON.parse((await cli(["show", job.id, "--json"], dir)).stdout) as { approvals: unknown }).approvals,
      [],
    );
  });
});

describe("a request past its expiry, unanswered", () => {
  test("is not pending: approve refuses it, jobs shows running, show and logs say its time ran out", async () => {
    const { dir, store } = newState();
    const job = add(store, running(NOW));
    // Asked 11 minutes ago, expired one minute ago; nothing wrote the timeout's denial yet.
    ask(store, job.id, "npm test", NOW, 11 * MINUTE);
    const approved = await cli(["approve", job.id, "1"], dir);
    assert.deepEqual(approved, {
      code: 1,
      stdout: "",
      stderr:
        `claude-dispatch: request 1 of job ${job.id} went unanswered until its time ran out; ` +
        "it is no longer pending\n",
    });
    assert.equal(
      (await cli(["approve", job.id], dir)).stderr,
      `claude-dispatch: job ${job.id} has no pending request\n`,
    );
    assert.deepEqual(answerFiles(store, job.id), []);
    const listed = JSON.parse((await cli(["jobs", "--json"], dir)).stdout) as {
      jobs: { status: string; pending_approvals?: unknown }[];
    };
    assert.deepEqual(
      listed.jobs.map((row) => [row.status, row.pending_approvals]),
      [["running", undefined]],
    );
    const shown = await cli(["show", job.id], dir);
    assert.match(shown.stdout, /^ {5}asked .*; unanswered: its time ran out at 2025-06-01T11:59:00\.000Z$/m);
    assert.ok(!shown.stdout.includes("claude-dispatch approve"), "nothing to answer");
    const logs = await cli(["logs", "--json", job.id], dir);
    const entries = (JSON.parse(logs.stdout) as { entries: Array<Record<string, unknown>> }).entries;
    assert.deepEqual(
      entries.map((entry) => entry.state),
      ["expired"],
    );
  });
});

describe("logs: the requests", () => {
  test("a pending request: the waiting line after the transcript; the job is input_required", async () => {
    const { dir, store } = newState();
    const job = add(store, running(NOW));
    ask(store, job.id, "echo hi > out.txt");
    const run = await cli(["logs", job.id], dir);
    assert.deepEqual(run, {
      code: 0,
      stdout: [
        `[waiting for approval: request 1 · Bash · echo hi > out.txt — claude-dispatch approve ${job.id} 1, or deny]`,
        "",
        `job ${job.id} is input_required; \`claude-dispatch logs -f ${job.id}\` follows it to its end`,
        "",
      ].join("\n"),
      stderr: "",
    });
  });

  test("answered and unanswered requests of a finished job, one line each; --json: approval entries", async () => {
    const { dir, store } = newState();
    const job = add(store, {
      ...running(NOW),
      status: "killed",
      finished_at: NOW,
      kill_reason: "cli",
      outcome: { ok: false, code: "KILLED", detail: "killed" },
    });
    ask(store, job.id, "npm test");
    ask(store, job.id, "rm -rf /");
    store.answerApproval(job.id, "1", { decision: "deny", by: "cli", at: NOW, message: "not now" });
    const run = await cli(["logs", job.id], dir);
    assert.equal(run.code, 0, run.stderr);
    assert.ok(
      run.stdout.startsWith(
        '[request 1 · Bash · npm test: denied by the command line: "not now"]\n[request 2 · Bash · rm -rf /: went unanswered (the job finished first)]\n\n',
      ),
      run.stdout,
    );
    const document = JSON.parse((await cli(["logs", job.id, "--json"], dir)).stdout) as {
      status: string;
      entries: unknown[];
    };
    assert.equal(document.status, "killed");
    assert.deepEqual(document.entries, [
      {
        kind: "approval",
        request_id: "1",
        tool_name: "Bash",
        preview: "Bash · npm test",
        state: "deny",
        by: "cli",
        message: "not now",
      },
      { kind: "approval", request_id: "2", tool_name: "Bash", preview: "Bash · rm -rf /", state: "unanswered" },
    ]);
  });

  test("-f: each new request once when it appears, each answer once, then the outcome; no timer left", async () => {
    const clock = new FakeClock();
    const { dir, store } = newState();
    const job = add(store, running(clock.now()));
    const following = start(["logs", job.id, "-f"], dir, clock);
    await settle();
    assert.equal(following.stdout(), "");

    ask(store, job.id, "echo hi > out.txt", clock.now());
    await clock.advance(200);
    const waitingLine =
      `[waiting for approval: request 1 · Bash · echo hi > out.txt — claude-dispatch approve ` +
      `${job.id} 1, or deny]`;
    assert.equal(following.stdout(), `${waitingLine}\n`);
    await clock.advance(1000);
    assert.equal(following.stdout(), `${waitingLine}\n`, "said once, however long it waits");

    store.answerApproval(job.id, "1", { decision: "allow", by: "tool", at: clock.now() });
    // Filed and answered between two polls: seen first with its answer.
    ask(store, job.id, "npm test", clock.now());
    store.answerApproval(job.id, "2", { decision: "deny", by: "timeout", at: clock.now() });
    await clock.advance(200);
    await clock.advance(1000);
    assert.equal(
      following.stdout(),
      `${waitingLine}\n[request 1 allowed by claude_respond]\n[request 2 · Bash · npm test: denied by the timeout]\n`,
    );

    ask(store, job.id, "git push", clock.now());
    await clock.advance(200);
    store.write({ ...job, status: "completed", finished_at: clock.now(), outcome: { ok: true } });
    await clock.advance(200);
    assert.equal(await following.code, 0, following.stderr());
    const lines = following.stdout().split("\n");
    assert.deepEqual(lines.slice(3, 7), [
      `[waiting for approval: request 3 · Bash · git push — claude-dispatch approve ${job.id} 3, or deny]`,
      "[request 3 went unanswered (the job finished first)]",
      "",
      `job ${job.id} completed`,
    ]);
    assert.equal(clock.pendingTimers, 0, "no timer is left behind");
  });

  test("-f: a request whose time runs out is said so once, then its denial; the job's end adds nothing", async () => {
    const clock = new FakeClock();
    const { dir, store } = newState();
    const job = add(store, running(clock.now()));
    ask(store, job.id, "npm test", clock.now(), 0);
    ask(store, job.id, "git push", clock.now(), 0);
    const following = start(["logs", job.id, "-f"], dir, clock);
    await clock.advance(200);
    await clock.advance(10 * MINUTE);
    await clock.advance(1000);
    // The owner's denial comes for request 1; none for request 2 before the job ends.
    store.answerApproval(job.id, "1", { decision: "deny", by: "timeout", at: clock.now() });
    await clock.advance(200);
    store.write({ ...job, status: "completed", finished_at: clock.now(), outcome: { ok: true } });
    await clock.advance(200);
    assert.equal(await following.code, 0, following.stderr());
    assert.deepEqual(following.stdout().split("\n"), [
      `[waiting for approval: request 1 · Bash · npm test — claude-dispatch approve ${job.id} 1, or deny]`,
      `[waiting for approval: request 2 · Bash · git push — claude-dispatch approve ${job.id} 2, or deny]`,
      "[request 1 went unanswered until its time ran out]",
      "[request 2 went unanswered until its time ran out]",
      "[request 1 denied by the timeout]",
      "",
      `job ${job.id} completed`,
      "",
    ]);
  });

  test("-f --json: approval objects as lines, pending then the answer", async () => {
    const clock = new FakeClock();
    const { dir, store } = newState();
    const job = add(store, running(clock.now()));
    ask(store, job.id, "npm test", clock.now());
    const following = start(["logs", job.id, "-f", "--json"], dir, clock);
    await settle();
    store.answerApproval(job.id, "1", { decision: "deny", by: "cli", at: clock.now(), message: "no" });
    await clock.advance(200);
    store.write({
      ...job,
      status: "failed",
      finished_at: clock.now(),
      outcome: { ok: false, code: "AGENT_EXITED", detail: "exited" },
    });
    await clock.advance(200);
    assert.equal(await following.code, 1);
    const lines = following
      .stdout()
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.deepEqual(lines.slice(0, 2), [
      { kind: "approval", request_id: "1", tool_name: "Bash", preview: "Bash · npm test", state: "pending" },
      {
        kind: "approval",
        request_id: "1",
        tool_name: "Bash",
        preview: "Bash · npm test",
        state: "deny",
        by: "cli",
        message: "no",
      },
    ]);
    assert.equal(lines[2]?.kind, "outcome");
    assert.equal(lines.length, 3);
  });
});
