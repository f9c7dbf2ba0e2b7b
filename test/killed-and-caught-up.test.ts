/**
 * Two takeover defects, at the registry (fakes) and through the built server
 * (PROTOCOL.md §8, §15.3):
 *
 * - A killed job's outcome is KILLED, however its agent's end looked: an
 *   adopted agent's exit is unobserved (AGENT_LOST), one this server spawned
 *   dies by SIGTERM (AGENT_EXITED). Neither may reach the record.
 * - An adopted running job is served only once its output file was read, so
 *   the first claude_output of its transcript already shows what the agent did
 *   while no server ran.
 *
 * Agents wait on gate files and tests wait on files and events, never on time.
 */
import { memoryPersistence } from "../src/jobs/memory.js";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import type { AgentOutcome } from "../src/agent/types.js";
import { JobRegistry, type IsAlive, type KillReason } from "../src/jobs/registry.js";
import { StateStore } from "../src/store/state-store.js";
import { type JobRecord } from "../src/store/records.js";
import { Transcript } from "../src/core/transcript.js";
import { FakeAgent, FakeClock, FakeLauncher, RecordingLogger, settle, track } from "./helpers.js";
import { agentRecorded, isAlive, readPids, readRecordFile, waitFor } from "./processes.js";
import { minimalEnvironment, SERVER_MAIN, ServerProcess } from "./server-process.js";
import { startJob } from "./support/tool-calls.js";
import { homeOnly, tableOf } from "./host-fakes.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-killed-"));
const pidFiles: string[] = [];
const servers: ServerProcess[] = [];

// A test that failed half-way leaves agents waiting on their gate, under servers run with ON_EXIT=keep: stop them all.
after(() => {
  for (const server of servers) server.dispose();
  for (const file of pidFiles) for (const pid of readPids(file)) if (isAlive(pid)) process.kill(pid, "SIGKILL");
  rmSync(scratch, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------
// The registry, with a real state store and fake agents.

let dirs = 0;
function freshStore(): StateStore {
  dirs += 1;
  const store = new StateStore(path.join(scratch, `store${dirs}`), { randomName: () => randomUUID() });
  store.open();
  return store;
}

let ids = 0;
function nextId(): string {
  ids += 1;
  return `00000000-0000-4000-8000-${String(ids).padStart(12, "0")}`;
}

/** What the real attacher's outcome says when an adopted agent ends without a result: its exit was not observed. */
const UNOBSERVED_END: AgentOutcome = {
  ok: false,
  code: "AGENT_LOST",
  detail: "claude ended without printing a result; it was started by an earlier server, so its exit status is unknown",
};

/** An agent an earlier server started: a kill ends it as a real adopted agent's unobserved exit does. */
class AdoptedAgent extends FakeAgent {
  override async kill(): Promise<{ survivors: number[] }> {
    this.killCalls += 1;
    this.finish(UNOBSERVED_END);
    return { survivors: [] };
  }
}

const OLD_OWNER = { pid: 77, start_time: "1" };
const NEW_OWNER = { pid: 1000, start_time: "500" };
/** The old server is gone; the agent it recorded (the fakes' pid 4242) and the new server itself are alive. */
const onlyTheAgentLives: IsAlive = async (named) => named.pid === 4242 || named.pid === NEW_OWNER.pid;

function registry(
  store: StateStore,
  options: { owner?: typeof NEW_OWNER; adopted?: () => FakeAgent } = {},
): { jobs: JobRegistry; launcher: FakeLauncher; adopted: FakeAgent[] } {
  const launcher = new FakeLauncher();
  const adopted: FakeAgent[] = [];
  const jobs = new JobRegistry({
    launch: launcher.launch,
    clock: new FakeClock(),
    newId: nextId,
    logger: new RecordingLogger(),
    retentionMs: 7 * 24 * 3600 * 1000,
    maxFinishedJobs: 1000,
    finishedTranscriptChars: 1_000_000,
    maxRunning: 1000,
    ...homeOnly(tableOf(onlyTheAgentLives), options.owner ?? NEW_OWNER),
    attach: () => {
      const run = options.adopted?.() ?? new AdoptedAgent({ prompt: "", cwd: "/" });
      adopted.push(run);
      return run;
    },
    admit: async (spec) => spec,
    persistence: {
      store,
      owner: options.owner ?? NEW_OWNER,
      replayTranscript: () => new Transcript(1000),
      maxBytes: 1024 ** 3,
      newMarker: () => "fake-marker",
      isAlive: onlyTheAgentLives,
    },
  });
  return { jobs, launcher, adopted };
}

/** A running job whose server (pid 77) then died: its record, with the agent's identity, is left in the store. */
async function orphanedRunningJob(store: StateStore): Promise<string> {
  const old = registry(store, { owner: OLD_OWNER });
  const job = old.jobs.start({ prompt: "long work", cwd: "/w" }, "start");
  await settle();
  assert.equal(store.read(job.id)?.agent?.start_time, "fake-start", "the agent is on record");
  return job.id;
}

function outcomeCode(outcome: AgentOutcome | undefined): string | undefined {
  return outcome === undefined ? undefined : outcome.ok ? "ok" : outcome.code;
}

function outcomeDetail(outcome: AgentOutcome | undefined): string | undefined {
  return outcome && !outcome.ok ? outcome.detail : undefined;
}

describe("a killed job's outcome is KILLED (registry)", () => {
  test(
    "an adopted running job killed by claude_kill: killed, KILLED in memory and in its record, " + "not AGENT_LOST",
    async () => {
      const store = freshStore();
      const id = await orphanedRunningJob(store);
      const fresh = registry(store);
      await fresh.jobs.restore(store.loadAll().records);
      assert.equal(fresh.jobs.get(id)?.status, "running", "the new server follows the agent");
      const result = await fresh.jobs.kill(id, "claude_kill");
      assert.deepEqual(result, { killed: true, survivors: [] });
      assert.equal(fresh.adopted[0]?.killCalls, 1);
      const job = fresh.jobs.get(id);
      assert.equal(job?.status, "killed");
      assert.equal(outcomeCode(job?.outcome), "KILLED", JSON.stringify(job?.outcome));
      assert.equal(outcomeDetail(job?.outcome), "killed by claude_kill");
      const record = store.read(id) as JobRecord;
      assert.equal(record.status, "killed");
      assert.equal(record.kill_reason, "claude_kill");
      assert.deepEqual(
        record.outcome,
        { ok: false, code: "KILLED", detail: "killed by claude_kill" },
        "AGENT_LOST never reaches the record",
      );
    },
  );

  test(
    "an adopted job whose kill was under way when its server died: the next server's kill " + "ends it KILLED",
    async () => {
      const store = freshStore();
      const id = await orphanedRunningJob(store);
      // The dead server had recorded the reason, before any signal, and died before the agent did.
      store.write({ ...(store.read(id) as JobRecord), kill_reason: "cli" });
      const fresh = registry(store);
      await fresh.jobs.restore(store.loadAll().records);
      await fresh.jobs.get(id)?.done;
      assert.equal(fresh.adopted[0]?.killCalls, 1, "the kill is carried out at once");
      assert.equal(fresh.jobs.get(id)?.status, "killed");
      assert.deepEqual(store.read(id)?.outcome, {
        ok: false,
        code: "KILLED",
        detail: "killed from the command line (claude-dispatch kill)",
      });
    },
  );

  test(
    "a job this server spawned, killed for each reason: KILLED with who killed it, not " + "AGENT_EXITED by SIGTERM",
    async () => {
      const expected: Array<[KillReason, string]> = [
        ["claude_kill", "killed by claude_kill"],
        ["cancelled", "killed because its request was cancelled"],
        ["shutdown", "killed because the server shut down"],
        ["cli", "killed from the command line (claude-dispatch kill)"],
      ];
      for (const [reason, detail] of expected) {
        const store = freshStore();
        const { jobs, launcher } = registry(store);
        const job = jobs.start({ prompt: `killed: ${reason}`, cwd: "/w" }, "start");
        await settle();
        // The fake agent dies as the real one does on SIGTERM: AGENT_EXITED, "killed by SIGTERM and printed no result".
        await jobs.kill(job.id, reason);
        assert.equal(launcher.last.killCalls, 1);
        assert.equal(jobs.get(job.id)?.status, "killed", reason);
        assert.equal(
          outcomeCode(jobs.get(job.id)?.outcome),
          "KILLED",
          `${reason}: ${JSON.stringify(jobs.get(job.id)?.outcome)}`,
        );
        assert.deepEqual(store.read(job.id)?.outcome, { ok: false, code: "KILLED", detail }, reason);
      }
    },
  );

  test("a kill that leaves survivors keeps KILL_FAILED and their pids in the record", async () => {
    const store = freshStore();
    const { jobs, launcher } = registry(store);
    const job = jobs.start({ prompt: "unkillable", cwd: "/w" }, "start");
    await settle();
    launcher.last.exitsOnKill = false;
    launcher.last.survivors = [4243, 4244];
    const result = await jobs.kill(job.id, "claude_kill");
    assert.deepEqual(result, { killed: true, survivors: [4243, 4244] });
    assert.equal(jobs.get(job.id)?.status, "killed");
    assert.deepEqual(store.read(job.id)?.outcome, {
      ok: false,
      code: "KILL_FAILED",
      detail: "processes 4243, 4244 survived SIGKILL",
    });
  });

  test(
    "a killed job keeps the result its agent printed; a queued one says it never started; a timeout " + "stays TIMEOUT",
    async () => {
      const store = freshStore();
      const { jobs, launcher } = registry(store);
      const answered = jobs.start({ prompt: "answers as it dies", cwd: "/w" }, "start");
      await settle();
      const agent = launcher.last;
      agent.kill = async () => {
        agent.finish({
          ok: true,
          result: {
            text: "the last words",
            sessionId: "8f01635f-202a-449c-ab8a-05f75520788e",
            costUsd: 0.5,
            numTurns: 2,
            durationMs: 10,
          },
        });
        return { survivors: [] };
      };
      await jobs.kill(answered.id, "claude_kill");
      assert.equal(jobs.get(answered.id)?.status, "killed");
      assert.equal(outcomeCode(jobs.get(answered.id)?.outcome), "KILLED");
      assert.equal(jobs.get(answered.id)?.resultText(), "the last words", "what the agent printed is still reported");
      const record = store.read(answered.id) as JobRecord;
      assert.equal(record.outcome?.code, "KILLED");
      assert.equal(record.outcome?.result?.sessionId, "8f01635f-202a-449c-ab8a-05f75520788e");
      assert.equal(record.outcome?.result_chars, "the last words".length);

      const limited = new JobRegistry({
        launch: launcher.launch,
        clock: new FakeClock(),
        newId: nextId,
        logger: new RecordingLogger(),
        retentionMs: 600_000,
        maxFinishedJobs: 1000,
        finishedTranscriptChars: 1_000_000,
        maxRunning: 1,
        ...homeOnly(),
        persistence: memoryPersistence(),
      });
      limited.start({ prompt: "blocker", cwd: "/w" }, "start");
      const queued = limited.start({ prompt: "never runs", cwd: "/w" }, "start");
      await limited.kill(queued.id, "claude_kill");
      assert.equal(outcomeCode(limited.get(queued.id)?.outcome), "KILLED");
      assert.equal(outcomeDetail(limited.get(queued.id)?.outcome), "removed from the queue before it started");

      const timed = jobs.start({ prompt: "too slow", cwd: "/w" }, "run", 5_000);
      await settle();
      await jobs.kill(timed.id, "timeout");
      assert.equal(jobs.get(timed.id)?.status, "failed");
      assert.equal(outcomeCode(jobs.get(timed.id)?.outcome), "TIMEOUT");
    },
  );
});

describe("an adopted running job is served once its output was read (registry)", () => {
  /** An adopted agent whose first read of its output file the test holds. */
  function heldAgent(): { make: () => FakeAgent; release: () => void } {
    let release!: () => void;
    const ready = new Promise<void>((resolve) => (release = resolve));
    return {
      make: () => {
        const agent = new AdoptedAgent({ prompt: "", cwd: "/" });
        agent.ready = ready;
        return agent;
      },
      release: () => release(),
    };
  }

  test(
    "a lookup that takes a job over does not resolve, and the job is not served, until the agent's " +
      "output was read",
    async () => {
      const store = freshStore();
      const id = await orphanedRunningJob(store);
      const held = heldAgent();
      const fresh = registry(store, { adopted: held.make });
      const first = track(fresh.jobs.recover(id));
      const second = track(fresh.jobs.recover(id));
      await settle();
      assert.equal(fresh.adopted.length, 1, "the agent is attached, and only once for two lookups");
      assert.equal(first.done, false, "recover waits for the first read of the output file");
      assert.equal(second.done, false);
      assert.equal(fresh.jobs.get(id), undefined, "not served half caught up");
      assert.ok(!fresh.jobs.list().some((job) => job.id === id), "nor listed");
      // The first read finds what the agent did while no server ran.
      (fresh.adopted[0] as FakeAgent).report({ turns: 3, lastTool: "Bash · echo step-3" }, "tool: Bash · echo step-3");
      held.release();
      const job = await first.promise;
      assert.equal(await second.promise, job, "the second lookup gets the same job");
      assert.equal(job?.status, "running");
      assert.equal(fresh.jobs.get(id), job);
      assert.equal(job?.live().turns, 3, "caught up at the first call");
      assert.match(job?.transcript.page(0, 1000).text ?? "", /tool: Bash · echo step-3/);
    },
  );

  test("at startup too: restore waits for the first read before the job is served", async () => {
    const store = freshStore();
    const id = await orphanedRunningJob(store);
    const held = heldAgent();
    const fresh = registry(store, { adopted: held.make });
    const restoring = track(fresh.jobs.restore(store.loadAll().records));
    await settle();
    assert.equal(fresh.adopted.length, 1);
    assert.equal(restoring.done, false);
    assert.equal(fresh.jobs.get(id), undefined);
    held.release();
    await restoring.promise;
    assert.equal(fresh.jobs.get(id)?.status, "running");
  });
});

// ---------------------------------------------------------------------------
// Through the built server.

let counter = 0;
function fixture(): { stateDir: string; cwd: string; gate: string; pids: string } {
  counter += 1;
  const base = path.join(scratch, `e2e${counter}`);
  const cwd = path.join(base, "work");
  mkdirSync(cwd, { recursive: true });
  const pids = path.join(base, "pids");
  pidFiles.push(pids);
  return { stateDir: path.join(base, "state"), cwd, gate: path.join(base, "gate"), pids };
}

async function startServer(stateDir: string): Promise<ServerProcess> {
  const server = new ServerProcess({ CLAUDE_DISPATCH_STATE_DIR: stateDir, CLAUDE_DISPATCH_ON_EXIT: "keep" });
  servers.push(server);
  await server.initialize();
  return server;
}

const structured = (response: { result?: any }): Record<string, any> =>
  response.result?.structuredContent as Record<string, any>;

/** The tool results the agent has written to its stdout.jsonl so far, whole lines only. */
function toolResultsWritten(stateDir: string, id: string): number {
  const file = path.join(stateDir, "jobs", id, "stdout.jsonl");
  if (!existsSync(file)) return 0;
  const lines = readFileSync(file, "utf8").split("\n").slice(0, -1);
  return lines.filter((line) => (JSON.parse(line) as { type?: string }).type === "user").length;
}

async function crash(server: ServerProcess): Promise<void> {
  server.child.kill("SIGKILL");
  await server.exited;
}

function runCli(args: string[], stateDir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [SERVER_MAIN, ...args],
      { env: minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: stateDir }) },
      (error, stdout, stderr) => {
        resolve({
          code: error ? Number((error as NodeJS.ErrnoException & { code?: unknown }).code ?? 1) : 0,
          stdout,
          stderr,
        });
      },
    );
  });
}

describe("through the built server", { skip: process.platform !== "linux" && "the liveness checks read /proc" }, () => {
  test(
    "a job killed after a takeover is recorded killed with KILLED, and claude-dispatch show reports " + "no AGENT_LOST",
    async () => {
      const { stateDir, cwd, gate, pids } = fixture();
      const first = await startServer(stateDir);
      const id = await startJob(first, { prompt: `@pid ${pids}\n@wait-file ${gate}\nkill me after the takeover`, cwd });
      await waitFor(() => readPids(pids).length === 1, "the agent to start");
      await agentRecorded(stateDir, id);
      await crash(first);
      const [agent] = readPids(pids) as [number];
      assert.ok(isAlive(agent), "the agent outlives its server");

      const second = await startServer(stateDir);
      const killed = await second.callTool("claude_kill", { job_id: id });
      assert.equal(structured(killed)?.status, "killed", JSON.stringify(killed));
      assert.equal(killed.result?.isError, undefined);
      assert.ok(!isAlive(agent), "the adopted agent's tree is gone");
      const waited = await second.callTool("claude_wait", { job_id: id, hold_ms: 0 });
      assert.equal(structured(waited)?.status, "killed");
      const record = readRecordFile(stateDir, id);
      assert.equal(record.status, "killed");
      assert.equal(record.kill_reason, "claude_kill");
      assert.equal(record.outcome?.code, "KILLED", JSON.stringify(record.outcome));
      assert.equal(record.outcome?.detail, "killed by claude_kill");

      const shown = await runCli(["show", id, "--json"], stateDir);
      assert.equal(shown.code, 0, shown.stderr);
      const document = JSON.parse(shown.stdout) as Record<string, any>;
      assert.equal(document.record?.status, "killed");
      assert.equal(document.record?.outcome?.code, "KILLED");
      assert.ok(!shown.stdout.includes("AGENT_LOST"), shown.stdout);
      second.endInput();
      await second.exited;
    },
  );

  test(
    "after a restart, the first claude_output of an adopted running job's transcript already shows what " +
      "the agent did",
    async () => {
      const { stateDir, cwd, gate, pids } = fixture();
      const first = await startServer(stateDir);
      const id = await startJob(first, { prompt: `@pid ${pids}\n@tools 3\n@wait-file ${gate}\ncaught up`, cwd });
      await agentRecorded(stateDir, id);
      await waitFor(() => toolResultsWritten(stateDir, id) === 3, "the three tool turns in stdout.jsonl");
      await crash(first);

      const second = await startServer(stateDir);
      // The first call after initialize.
      const page = structured(await second.callTool("claude_output", { job_id: id, view: "transcript" }));
      assert.equal(page?.status, "running", JSON.stringify(page));
      for (const step of [1, 2, 3])
        assert.ok(
          String(page?.text).includes(`Bash · echo step-${step}`),
          `step ${step} in: ${JSON.stringify(page?.text)}`,
        );
      const waited = structured(await second.callTool("claude_wait", { job_id: id, hold_ms: 0 }));
      assert.equal(waited?.status, "running");
      assert.equal(waited?.num_turns, 3);
      writeFileSync(gate, "");
      const done = structured(await second.callTool("claude_wait", { job_id: id, hold_ms: 30_000 }));
      assert.equal(done?.status, "completed");
      assert.deepEqual(readPids(pids).length, 1, "the agent ran once");
      second.endInput();
      await second.exited;
    },
  );

  test(
    "two servers on one state directory: the survivor's first lookup, a claude_output, is " + "caught up too",
    async () => {
      const { stateDir, cwd, gate, pids } = fixture();
      const first = await startServer(stateDir);
      const second = await startServer(stateDir);
      const prompt = `@pid ${pids}\n@tools 3\n@wait-file ${gate}\ncaught up on lookup`;
      const id = await startJob(first, { prompt, cwd });
      await agentRecorded(stateDir, id);
      await waitFor(() => toolResultsWritten(stateDir, id) === 3, "the three tool turns in stdout.jsonl");
      await crash(first);

      const page = structured(await second.callTool("claude_output", { job_id: id, view: "transcript" }));
      assert.equal(page?.status, "running", JSON.stringify(page));
      for (const step of [1, 2, 3])
        assert.ok(
          String(page?.text).includes(`Bash · echo step-${step}`),
          `step ${step} in: ${JSON.stringify(page?.text)}`,
        );
      assert.equal(structured(await second.callTool("claude_wait", { job_id: id, hold_ms: 0 }))?.num_turns, 3);
      writeFileSync(gate, "");
      assert.equal(
        structured(await second.callTool("claude_wait", { job_id: id, hold_ms: 30_000 }))?.status,
        "completed",
      );
      second.endInput();
      await second.exited;
    },
  );
});
