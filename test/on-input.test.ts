/**
 * CLAUDE_DISPATCH_ON_INPUT (PROTOCOL.md §18): the operator's command, run once per new permission request by the
 * process that owns the job and creates the request's mark first. Through a real JobRegistry on a state directory
 * (fake agents, a fake clock, the folder polled rather than watched, so nothing waits on the file system's
 * notifications); then through the built server, the built approver and the built `claude-dispatch approve`.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { after, describe, test } from "node:test";

import type { SpawnRequest } from "../src/agent/host.js";
import { Approvals } from "../src/jobs/approvals.js";
import type { JobEntry } from "../src/jobs/entry.js";
import { onInputCommands } from "../src/jobs/operator-commands.js";
import { JobRegistry, type JobRegistryOptions } from "../src/jobs/registry.js";
import { StateStore } from "../src/store/state-store.js";
import { Transcript } from "../src/core/transcript.js";
import { answerOf, Approver, frame } from "./approver-process.js";
import { FakeAgent, FakeClock, FakeLauncher, finishedChild, RecordingLogger, settle } from "./helpers.js";
import { waitFor } from "./processes.js";
import { minimalEnvironment, SERVER_MAIN, ServerProcess } from "./server-process.js";
import { homeOnly } from "./host-fakes.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-on-input-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const CWD = "/work/app";
const POLL_MS = 500;
const registries: JobRegistry[] = [];
after(async () => {
  for (const jobs of registries) await jobs.leave();
});

/** A host that records what it was asked to start; each command exits 0 at once. */
function recordingHost() {
  const spawned: SpawnRequest[] = [];
  return { spawned, start: (request: SpawnRequest) => (spawned.push(request), finishedChild(() => undefined, "")) };
}

/** The server that owns the jobs: its registry on a fresh state directory, with ON_INPUT set. */
function owner() {
  const store = new StateStore(mkdtempSync(path.join(scratch, "state-")), { randomName: () => randomUUID() });
  store.open();
  store.watchApprovals = () => undefined;
  const clock = new FakeClock();
  const logger = new RecordingLogger();
  const launcher = new FakeLauncher();
  const host = recordingHost();
  const argv = ["notify-send", "claude-dispatch"];
  const onInput = onInputCommands({ argv, host, env: { PATH: "/usr/bin" }, clock, logger });
  const options: JobRegistryOptions = {
    launch: launcher.launch,
    onInput,
    clock,
    newId: randomUUID,
    logger,
    retentionMs: 600_000,
    maxFinishedJobs: 1000,
    finishedTranscriptChars: 1_000_000,
    maxRunning: 10,
    ...homeOnly({ isAlive: async () => true }, { pid: 1001, start_time: "100" }),
    attach: () => new FakeAgent({ prompt: "", cwd: "/" }),
    admit: async (spec) => spec,
    approvals: {},
    persistence: {
      store,
      owner: { pid: 1001, start_time: "100" },
      replayTranscript: () => new Transcript(1000),
      maxBytes: 1024 ** 3,
      newMarker: () => `marker-${randomUUID()}`,
      isAlive: async () => true,
    },
  };
  const jobs = new JobRegistry(options);
  registries.push(jobs);
  return { jobs, store, clock, logger, spawned: host.spawned, options, onInput };
}

async function runningJob(h: { jobs: JobRegistry }): Promise<JobEntry> {
  const job = h.jobs.start({ prompt: "needs a person", cwd: CWD }, "start");
  await settle();
  assert.equal(job.status, "running");
  return job as JobEntry;
}

type Owner = ReturnType<typeof owner>;

/** What the agent's approver files. */
function ask(h: Owner, jobId: string, preview = "Bash · echo hi > out.txt", expiresInMs = 600_000, toolName = "Bash") {
  const now = h.clock.now();
  const expires_at = now + expiresInMs;
  const input = { command: "echo hi" };
  return h.store.fileApproval(jobId, { tool_name: toolName, input, preview, asked_at: now, expires_at });
}

const told = (h: Owner, jobId: string, requestId: string) =>
  existsSync(path.join(h.store.jobDir(jobId), `approval.${requestId}.told`));

describe("once per request, by the job's owner", () => {
  test("a pending request runs the command once, in the job's cwd, with the job and the request", async () => {
    const h = owner();
    const job = await runningJob(h);
    ask(h, job.id);
    await h.clock.advance(POLL_MS);
    assert.equal(h.spawned.length, 1);
    const [request] = h.spawned;
    assert.equal(request?.command, "notify-send");
    assert.deepEqual(request?.args, ["claude-dispatch"]);
    assert.equal(request?.cwd, CWD);
    assert.equal(request?.stdin, "");
    const names = ["PATH", "CLAUDE_DISPATCH_JOB_ID", "CLAUDE_DISPATCH_REQUEST_ID", "CLAUDE_DISPATCH_TOOL_NAME"].concat(
      "CLAUDE_DISPATCH_PREVIEW",
      "CLAUDE_DISPATCH_JOB_CWD",
    );
    assert.deepEqual(Object.fromEntries(names.map((name) => [name, request?.env[name]])), {
      PATH: "/usr/bin",
      CLAUDE_DISPATCH_JOB_ID: job.id,
      CLAUDE_DISPATCH_REQUEST_ID: "1",
      CLAUDE_DISPATCH_TOOL_NAME: "Bash",
      CLAUDE_DISPATCH_PREVIEW: "Bash · echo hi > out.txt",
      CLAUDE_DISPATCH_JOB_CWD: CWD,
    });
    assert.equal(told(h, job.id, "1"), true, "its mark is in the job's folder");

    // Looked at again, by the poll and by a refresh: not new any more.
    h.jobs.approvals.refresh(job);
    await h.clock.advance(POLL_MS * 3);
    assert.equal(h.spawned.length, 1, "never twice in one process");
    assert.deepEqual(
      h.logger.lines.filter((line) => line.startsWith("warn")),
      [],
    );
  });

  test("another process that sees the same request as new (a second server, a new owner) runs nothing", async () => {
    const h = owner();
    const job = await runningJob(h);
    ask(h, job.id);
    await h.clock.advance(POLL_MS);
    assert.equal(h.spawned.length, 1);
    const elsewhere = () => {
      const host = recordingHost();
      const onInput = onInputCommands({ argv: ["notify-send"], host, env: {}, clock: h.clock, logger: h.logger });
      const life = { save: () => undefined, find: async () => undefined };
      const target = { options: { ...h.options, onInput }, life };
      const approvals = new Approvals(target);
      approvals.refresh(job);
      return host.spawned;
    };
    assert.deepEqual(elsewhere(), [], "the mark says it was told");
    // The mark is what stops it: without one, the same look runs the command.
    rmSync(path.join(h.store.jobDir(job.id), "approval.1.told"));
    assert.equal(elsewhere().length, 1);
  });

  test("a request answered or expired before it is seen runs nothing; the next pending one does", async () => {
    const h = owner();
    const job = await runningJob(h);
    ask(h, job.id);
    h.store.answerApproval(job.id, "1", { decision: "allow", by: "cli", at: h.clock.now() });
    ask(h, job.id, "Bash · late", 100);
    await h.clock.advance(POLL_MS);
    assert.equal(h.spawned.length, 0);
    assert.equal(told(h, job.id, "1") || told(h, job.id, "2"), false, "no mark either");
    ask(h, job.id, "Bash · the third");
    await h.clock.advance(POLL_MS);
    assert.deepEqual(
      h.spawned.map((request) => request.env.CLAUDE_DISPATCH_REQUEST_ID),
      ["3"],
    );
  });

  test("the preview and the tool's name are cleaned onto one line and cut: no escape or newline passes", async () => {
    const h = owner();
    const job = await runningJob(h);
    ask(h, job.id, "Bash · echo \u001b]0;owned\u0007hi\u001b[2J\nrm -rf ~\r\u202eend", 600_000, "Ba\u001b[31msh\n");
    ask(h, job.id, `Write · ${"x".repeat(5000)}`);
    await h.clock.advance(POLL_MS);
    const [first, second] = h.spawned.map((request) => request.env);
    assert.equal(first?.CLAUDE_DISPATCH_PREVIEW, "Bash · echo hi rm -rf ~\uFFFD\uFFFDend");
    assert.equal(first?.CLAUDE_DISPATCH_TOOL_NAME, "Bash");
    assert.equal(second?.CLAUDE_DISPATCH_PREVIEW, `Write · ${"x".repeat(192)}…`, "200 characters, then an ellipsis");
  });

  test("after close (the process is leaving) nothing runs and no mark is made, so the next owner tells", async () => {
    const h = owner();
    const job = await runningJob(h);
    await h.onInput.close();
    assert.equal(h.onInput.closed, true);
    ask(h, job.id);
    await h.clock.advance(POLL_MS);
    assert.deepEqual(h.spawned, []);
    assert.equal(told(h, job.id, "1"), false);
  });
});

describe("through the built server, approver and command line", () => {
  const servers: ServerProcess[] = [];
  const approvers: Approver[] = [];
  after(async () => {
    for (const approver of approvers) approver.child.kill("SIGKILL");
    for (const server of servers) await server.shutdown();
  });

  test("a request runs CLAUDE_DISPATCH_ON_INPUT once; `claude-dispatch approve` answers; the job ends", async () => {
    const base = mkdtempSync(path.join(scratch, "e2e-"));
    const cwd = path.join(base, "work");
    mkdirSync(cwd);
    const gate = path.join(base, "gate");
    const hook = path.join(base, "on-input.mjs");
    const lines = path.join(base, "told.log");
    writeFileSync(
      hook,
      'import { appendFileSync } from "node:fs";\n' +
        "const e = process.env;\n" +
        "const fields = [e.CLAUDE_DISPATCH_JOB_ID, e.CLAUDE_DISPATCH_REQUEST_ID, e.CLAUDE_DISPATCH_TOOL_NAME,\n" +
        "  e.CLAUDE_DISPATCH_PREVIEW, e.CLAUDE_DISPATCH_JOB_CWD, process.cwd()];\n" +
        "appendFileSync(process.argv[2], JSON.stringify(fields) + '\\n');\n",
    );
    const server = new ServerProcess({ CLAUDE_DISPATCH_ON_INPUT: JSON.stringify([process.execPath, hook, lines]) });
    servers.push(server);
    await server.initialize();
    const started = await server.callTool("claude_start", { prompt: `@wait-file ${gate}\nneeds a person`, cwd });
    const jobId = started.result.structuredContent.job_id as string;

    // The agent asks, as Claude Code asks its approver, for a command on two lines with an escape sequence in it.
    const approver = new Approver([`--state-dir=${server.stateDir}`, "--wait-ms=600000", jobId]);
    approvers.push(approver);
    await approver.handshake();
    const call = frame("tools/call");
    call.params.arguments.input.command = "echo \u001b[2Jhi > out.txt\necho there";
    const answered = approver.send({ ...call, id: 31 });
    const waited = (await server.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 })).result.structuredContent;
    assert.equal(waited.status, "input_required", JSON.stringify(waited));
    const preview = waited.pending_approvals[0].preview as string;
    await waitFor(() => existsSync(lines) && readFileSync(lines, "utf8").endsWith("\n"), "the command to run");

    const approve = await promisify(execFile)(process.execPath, [SERVER_MAIN, "approve", jobId], {
      env: minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: server.stateDir }),
    });
    assert.match(approve.stdout, /^Allowed request 1 of job /);
    assert.equal(answerOf(await answered).behavior, "allow");
    writeFileSync(gate, "");
    assert.equal((await server.waitForJob(jobId)).status, "completed");

    const told = readFileSync(lines, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as string[]);
    assert.deepEqual(told, [[jobId, "1", "Bash", preview, cwd, cwd]], "once, with all four, in the job's cwd");
    assert.doesNotMatch(preview, /[\u001b\n]/);
    assert.match(preview, /^Bash · echo hi > out\.txt echo there$/);
  });
});
