/**
 * When the host closes, the work goes on (PROTOCOL.md §15.8), through the built server and the built command line
 * with the fake agent: the headless carrier the last server leaves behind finishes running jobs, starts queued
 * ones, runs ON_DONE and exits once idle; a carrier SIGKILLed is replaced by the next command; a server that
 * leaves while another lives hands its work to that one, and no carrier starts; `logs -f` ends with the job, or
 * says that nothing will end it. Agents wait on gate files, so the order of events is the test's.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { answerOf, Approver, frame } from "./approver-process.js";
import { commandLine, isAlive, readPids, readRecordFile, waitFor } from "./processes.js";
import { minimalEnvironment, SERVER_MAIN, ServerProcess } from "./server-process.js";
import { startJob } from "./support/tool-calls.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-carrier-"));
const servers: ServerProcess[] = [];

/** Every process whose command line names the scratch folder: carriers, and agents (their prompt files are there). */
function ourProcesses(): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid)
    .map(Number)
    .filter((pid) => {
      try {
        return commandLine(pid).includes(scratch);
      } catch {
        return false;
      }
    });
}

after(() => {
  for (const server of servers) server.dispose();
  for (const pid of [
    ...ourProcesses(),
    ...readdirSync(scratch).flatMap((name) => readPids(path.join(scratch, name, "pids"))),
  ]) {
    if (isAlive(pid)) process.kill(pid, "SIGKILL");
  }
  rmSync(scratch, { recursive: true, force: true });
});

let counter = 0;
function fixture() {
  counter += 1;
  const base = path.join(scratch, `t${counter}`);
  const cwd = path.join(base, "work");
  mkdirSync(cwd, { recursive: true });
  return {
    base,
    cwd,
    stateDir: path.join(base, "state"),
    times: path.join(base, "times"),
    done: path.join(base, "done"),
    pids: path.join(base, "pids"),
    gate: (n: number) => path.join(base, `gate${n}`),
  };
}
type Fixture = ReturnType<typeof fixture>;

/** ON_DONE appends "<job id> <status>" to the fixture's done file: an argv, no shell. */
function onDone(f: Fixture): string {
  const script =
    `require("node:fs").appendFileSync(${JSON.stringify(f.done)}, process.env.CLAUDE_DISPATCH_JOB_ID + ` +
    `" " + process.env.CLAUDE_DISPATCH_JOB_STATUS + "\\n")`;
  return JSON.stringify([process.execPath, "-e", script]);
}

async function startServer(f: Fixture, env: Record<string, string> = {}): Promise<ServerProcess> {
  const server = new ServerProcess({
    CLAUDE_DISPATCH_STATE_DIR: f.stateDir,
    CLAUDE_DISPATCH_ON_EXIT: "keep",
    CLAUDE_DISPATCH_MAX_JOBS: "1",
    CLAUDE_DISPATCH_ON_DONE: onDone(f),
    ...env,
  });
  servers.push(server);
  await server.initialize();
  return server;
}

/** A job whose agent records its pid and its run, and answers once gate n exists. */
function gatedJob(server: ServerProcess, f: Fixture, n: number): Promise<string> {
  const prompt = `@pid ${f.pids}\n@times ${f.times} job${n}\n@wait-file ${f.gate(n)}\njob ${n}`;
  return startJob(server, { prompt, cwd: f.cwd });
}

function open(f: Fixture, n: number): void {
  writeFileSync(f.gate(n), "");
}

/** The built command line on the state directory, with nothing of the runner's environment but PATH. */
function cli(f: Fixture, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [SERVER_MAIN, ...args], {
    env: minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: f.stateDir }),
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

interface Presence {
  pid: number;
  role: string;
}

function presences(f: Fixture): Presence[] {
  const dir = path.join(f.stateDir, "servers");
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    try {
      return [JSON.parse(readFileSync(path.join(dir, name), "utf8")) as Presence];
    } catch {
      return [];
    }
  });
}

async function carrierPid(f: Fixture): Promise<number> {
  await waitFor(
    () => presences(f).some((presence) => presence.role === "carrier" && isAlive(presence.pid)),
    "the carrier",
  );
  return (presences(f).find((presence) => presence.role === "carrier" && isAlive(presence.pid)) as Presence).pid;
}

function runs(f: Fixture): Array<{ label: string; started: number; ended: number }> {
  if (!existsSync(f.times)) return [];
  return readFileSync(f.times, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

function doneLines(f: Fixture): string[] {
  return existsSync(f.done) ? readFileSync(f.done, "utf8").split("\n").filter(Boolean) : [];
}

const finished = (f: Fixture, id: string) =>
  ["completed", "failed", "killed", "lost"].includes(readRecordFile(f.stateDir, id).status);

describe("the work goes on when the host closes (§15.8)", () => {
  test(
    "one running and two queued jobs complete in order with no server; ON_DONE runs for each; the " +
      "carrier then exits",
    async () => {
      const f = fixture();
      const server = await startServer(f);
      const ids = [await gatedJob(server, f, 0), await gatedJob(server, f, 1), await gatedJob(server, f, 2)];
      await waitFor(
        () => readRecordFile(f.stateDir, ids[0] as string).agent?.start_time !== undefined,
        "the first agent recorded",
      );
      await server.shutdown();
      const carrier = await carrierPid(f);
      const listed = await cli(f, ["jobs", "--json"]);
      assert.deepEqual(
        JSON.parse(listed.stdout).carried_by.map((by: Presence) => [by.pid, by.role]),
        [[carrier, "carrier"]],
      );
      assert.match((await cli(f, ["jobs"])).stdout, new RegExp(`Carried by the carrier \\(pid ${carrier}\\)`));

      for (const n of [0, 1, 2]) open(f, n);
      await waitFor(() => ids.every((id) => finished(f, id)), "all three jobs finished", 20_000);
      const records = ids.map((id) => readRecordFile(f.stateDir, id)) as [
        Record<string, any>,
        Record<string, any>,
        Record<string, any>,
      ];
      assert.deepEqual(
        records.map((record) => record.status),
        ["completed", "completed", "completed"],
      );
      for (const [n, id] of ids.entries())
        assert.match(readFileSync(path.join(f.stateDir, "jobs", id, "result.txt"), "utf8"), new RegExp(`job ${n}$`));
      // One agent at a time, in submission order.
      assert.ok(
        records[0].finished_at <= records[1].started_at && records[1].finished_at <= records[2].started_at,
        JSON.stringify(records.map((r) => [r.started_at, r.finished_at])),
      );
      // Each job's times hold its agent's run: on record as started before the agent began; the two the carrier
      // started itself, finished once they had ended. (A late-noticed end is the next test's.)
      const agents = new Map(runs(f).map((run) => [run.label, run]));
      for (const [n, record] of records.entries()) {
        const agent = agents.get(`job${n}`);
        assert.ok(agent && record.started_at <= agent.started, `job ${n}: ${record.started_at} > ${agent?.started}`);
        if (n > 0) assert.ok(record.finished_at >= agent.ended, `job ${n}: ${record.finished_at} < ${agent.ended}`);
      }
      await waitFor(() => doneLines(f).length === 3, "ON_DONE for each job");
      assert.deepEqual(doneLines(f).sort(), ids.map((id) => `${id} completed`).sort());

      // Idle, it goes, and nothing of ours is left running.
      await waitFor(() => !isAlive(carrier), "the carrier to exit once idle");
      assert.deepEqual(ourProcesses(), []);
      assert.deepEqual(presences(f), []);
      assert.deepEqual(JSON.parse((await cli(f, ["jobs", "--json"])).stdout).carried_by, []);
    },
  );

  test(
    "a carrier SIGKILLed mid-way is replaced by the next command, and every job still runs " + "exactly once",
    async () => {
      const f = fixture();
      const server = await startServer(f);
      const ids = [await gatedJob(server, f, 0), await gatedJob(server, f, 1), await gatedJob(server, f, 2)];
      await waitFor(
        () => readRecordFile(f.stateDir, ids[0] as string).agent?.start_time !== undefined,
        "the first agent recorded",
      );
      await server.shutdown();
      const first = await carrierPid(f);
      await waitFor(
        () => readRecordFile(f.stateDir, ids[0] as string).owner?.pid === first,
        "the carrier to take the first job over",
      );
      process.kill(first, "SIGKILL");
      await waitFor(() => !isAlive(first), "the carrier to die");
      // The first agent ends while nothing runs.
      open(f, 0);
      await waitFor(() => runs(f).length === 1, "the first agent to end");

      const listed = await cli(f, ["jobs", "--json"]);
      assert.equal(listed.code, 0, listed.stderr);
      const document = JSON.parse(listed.stdout);
      const second = document.carried_by[0]?.pid as number;
      assert.ok(
        second !== undefined && second !== first,
        `${JSON.stringify(document.carried_by)} ${JSON.stringify(document.not_carried)} ${listed.stderr}`,
      );
      const rows = new Map(document.jobs.map((row: { id: string; status: string }) => [row.id, row.status]));
      assert.equal(rows.get(ids[0]), "completed", "the job whose agent ended while nothing ran, as it really ended");
      // Its end was noticed only after the next command, long after it came: finished_at is when the agent ended.
      await waitFor(() => finished(f, ids[0] as string), "the first job's record to be finished");
      const [ended] = runs(f);
      const finishedAt = readRecordFile(f.stateDir, ids[0] as string).finished_at;
      assert.ok(
        ended && finishedAt <= ended.ended,
        `finished_at ${finishedAt}: its notice, not its end ${ended?.ended}`,
      );

      open(f, 1);
      open(f, 2);
      await waitFor(() => ids.every((id) => finished(f, id)), "the other two jobs finished", 20_000);
      assert.deepEqual(
        ids.map((id) => readRecordFile(f.stateDir, id).status),
        ["completed", "completed", "completed"],
      );
      assert.deepEqual(
        runs(f)
          .map((run) => run.label)
          .sort(),
        ["job0", "job1", "job2"],
      );
      await waitFor(() => doneLines(f).length === 3, "ON_DONE for each job");
      assert.deepEqual(doneLines(f).sort(), ids.map((id) => `${id} completed`).sort());
      await waitFor(() => !isAlive(second), "the second carrier to exit once idle");
    },
  );

  test(
    "a server that leaves while another lives hands it its work: no carrier starts, and its queued job " +
      "starts unasked",
    async () => {
      const f = fixture();
      const leaving = await startServer(f);
      const staying = await startServer(f, { CLAUDE_DISPATCH_ON_EXIT: "kill" });
      const ids = [await gatedJob(leaving, f, 0), await gatedJob(leaving, f, 1)];
      open(f, 1);
      await waitFor(
        () => readRecordFile(f.stateDir, ids[0] as string).agent?.start_time !== undefined,
        "the first agent recorded",
      );
      await leaving.shutdown();
      // Taken over by the server that stays, not by a carrier.
      await waitFor(
        () => ids.every((id) => readRecordFile(f.stateDir, id).owner?.pid === staying.child.pid),
        "the staying server to take both jobs over",
      );
      open(f, 0);
      await waitFor(() => ids.every((id) => finished(f, id)), "both jobs finished");
      const [first, second] = ids.map((id) => readRecordFile(f.stateDir, id));
      assert.equal(second?.status, "completed");
      // Started with no call asking for it (none was made), once the slot was free.
      assert.ok(
        second?.started_at >= first?.finished_at,
        `started ${second?.started_at}, before ${first?.finished_at}`,
      );
      assert.deepEqual(
        presences(f).map((presence) => [presence.pid, presence.role]),
        [[staying.child.pid, "server"]],
      );
      assert.ok(!existsSync(path.join(f.stateDir, "carrier.log")), "no carrier was started");
      assert.match((await cli(f, ["jobs"])).stdout, new RegExp(`Carried by server ${staying.child.pid}\\.`));
    },
  );

  test(
    "a permission request with no server: ON_INPUT runs, `claude-dispatch approve` answers, the " + "job completes",
    async () => {
      const f = fixture();
      const hook = path.join(f.base, "on-input.mjs");
      const told = path.join(f.base, "told");
      writeFileSync(
        hook,
        `import { appendFileSync } from "node:fs";\nconst e = process.env;\n` +
          `appendFileSync(${JSON.stringify(told)}, [e.CLAUDE_DISPATCH_JOB_ID, e.CLAUDE_DISPATCH_REQUEST_ID, ` +
          `e.CLAUDE_DISPATCH_TOOL_NAME].join(" ") + "\\n");\n`,
      );
      const server = await startServer(f, { CLAUDE_DISPATCH_ON_INPUT: JSON.stringify([process.execPath, hook]) });
      const id = await gatedJob(server, f, 0);
      await waitFor(() => readRecordFile(f.stateDir, id).agent?.start_time !== undefined, "the agent recorded");
      await server.shutdown();
      await carrierPid(f);
      // The agent asks its approver, as Claude Code does, while nothing but the carrier runs.
      const approver = new Approver([`--state-dir=${f.stateDir}`, "--wait-ms=600000", id]);
      try {
        await approver.handshake();
        const answered = approver.send({ ...frame("tools/call"), id: 41 });
        await waitFor(
          () => existsSync(told) && readFileSync(told, "utf8").endsWith("\n"),
          "CLAUDE_DISPATCH_ON_INPUT to run",
        );
        assert.deepEqual(readFileSync(told, "utf8").trim().split("\n"), [`${id} 1 Bash`]);
        const approve = await cli(f, ["approve", id]);
        assert.equal(approve.code, 0, approve.stderr);
        assert.equal(answerOf(await answered).behavior, "allow");
      } finally {
        approver.child.kill("SIGKILL");
      }
      open(f, 0);
      await waitFor(() => finished(f, id), "the job to finish");
      assert.equal(readRecordFile(f.stateDir, id).status, "completed");
      assert.deepEqual(
        readRecordFile(f.stateDir, id).approvals?.map((approval: { decision?: string }) => approval.decision),
        ["allow"],
      );
    },
  );

  test("logs -f on a job that ends with no server exits 0 with its outcome", async () => {
    const f = fixture();
    const server = await startServer(f);
    const id = await gatedJob(server, f, 0);
    await waitFor(() => readRecordFile(f.stateDir, id).agent?.start_time !== undefined, "the agent recorded");
    await server.shutdown();
    await carrierPid(f);
    const following = cli(f, ["logs", "-f", id]);
    open(f, 0);
    const { code, stdout, stderr } = await following;
    assert.equal(code, 0, stderr);
    assert.match(stdout, new RegExp(`job ${id} completed`));
    assert.match(stdout, /job 0/);
  });

  test("logs -f on a job nothing can carry says so and exits 1", async () => {
    const f = fixture();
    const server = await startServer(f);
    const id = await gatedJob(server, f, 0);
    await waitFor(() => readRecordFile(f.stateDir, id).agent?.start_time !== undefined, "the agent recorded");
    server.child.kill("SIGKILL");
    await server.exited;
    // As a state directory of an earlier version leaves it: no server's presence on file to start a carrier from.
    rmSync(path.join(f.stateDir, "servers"), { recursive: true, force: true });
    const { code, stderr } = await cli(f, ["logs", "-f", id]);
    assert.equal(code, 1);
    assert.match(
      stderr,
      new RegExp(`job ${id} is running on record, but nothing will end it: no server or carrier runs`),
    );
    assert.ok(!existsSync(path.join(f.stateDir, "carrier.log")), "no carrier was started");
  });
});
