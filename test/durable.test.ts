/**
 * Durable jobs through the real server (PROTOCOL.md §15): a server killed
 * with SIGKILL, a new one on the same state directory, and the jobs carry on;
 * two live servers on one directory serving each other's jobs (§15.6).
 * The fake agent waits for a gate file, so nothing here depends on timing.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { agentRecorded, isAlive, readPids, readRecordFile, waitFor } from "./processes.js";
import { FAKE_CLAUDE, minimalEnvironment, ServerProcess } from "./server-process.js";
import { startJob } from "./support/tool-calls.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-durable-"));

let counter = 0;
const fixtures: Array<{ gate: string; pids: string }> = [];
/** A fresh state dir, work dir, gate file and pid file for one test. */
function fixture(): { stateDir: string; cwd: string; gate: string; pids: string } {
  counter += 1;
  const base = path.join(scratch, `t${counter}`);
  const cwd = path.join(base, "work");
  mkdirSync(cwd, { recursive: true });
  const made = {
    stateDir: path.join(base, "state"),
    cwd,
    gate: path.join(base, "gate"),
    pids: path.join(base, "pids"),
  };
  fixtures.push(made);
  return made;
}

// A test that failed half-way leaves agents waiting on their gate, and servers run with ON_EXIT=keep: stop them all.
after(() => {
  for (const { pids } of fixtures) {
    for (const pid of readPids(pids)) {
      if (isAlive(pid)) process.kill(pid, "SIGKILL");
    }
  }
  rmSync(scratch, { recursive: true, force: true });
});

const servers: ServerProcess[] = [];
after(() => {
  for (const server of servers) server.dispose();
});

async function startServer(stateDir: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const server = new ServerProcess({ CLAUDE_DISPATCH_STATE_DIR: stateDir, CLAUDE_DISPATCH_ON_EXIT: "keep", ...env });
  servers.push(server);
  await server.initialize();
  return server;
}

async function crash(server: ServerProcess): Promise<void> {
  server.child.kill("SIGKILL");
  await server.exited;
}

async function waitResult(server: ServerProcess, id: string): Promise<Record<string, any>> {
  const waited = await server.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
  return waited.result?.structuredContent as Record<string, any>;
}

/** Live processes whose working directory is cwd: the agents of one test, read from the process table. */
function agentsIn(cwd: string): number {
  let count = 0;
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/cwd`) === cwd && !/\) Z /.test(readFileSync(`/proc/${name}/stat`, "latin1")))
        count += 1;
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return count;
}

async function structured(
  server: ServerProcess,
  name: string,
  args: Record<string, unknown>,
): Promise<Record<string, any>> {
  const response = await server.callTool(name, args);
  const content = response.result?.structuredContent as Record<string, any> | undefined;
  assert.ok(content, JSON.stringify(response));
  return content;
}

describe(
  "durable jobs through the real server",
  { skip: process.platform !== "linux" && "the liveness checks read /proc" },
  () => {
    test(
      "SIGKILL the server mid-job: a new server follows the agent and claude_wait gets the result; nothing is " +
        "duplicated or orphaned",
      async () => {
        const { stateDir, cwd, gate, pids } = fixture();
        const first = await startServer(stateDir);
        const id = await startJob(first, {
          prompt: `@pid ${pids}\n@tools 2\n@wait-file ${gate}\nsurvive a crash`,
          cwd,
        });
        await waitFor(() => readPids(pids).length === 1, "the agent to start");
        await agentRecorded(stateDir, id);
        const [agent] = readPids(pids) as [number];
        const recorded = readRecordFile(stateDir, id);
        assert.deepEqual(
          [recorded.status, recorded.agent.pid, recorded.agent.pgid],
          ["running", agent, agent],
          "the agent leads its own process group",
        );
        assert.match(recorded.agent.tree_marker, /^[0-9a-f-]{36}$/);
        await crash(first);
        assert.ok(isAlive(agent), "the agent outlives the server that started it");

        const second = await startServer(stateDir);
        const running = await second.callTool("claude_wait", { job_id: id, hold_ms: 300 });
        assert.equal(running.result?.structuredContent?.status, "running", "the new server follows the old job");
        assert.equal(
          running.result?.structuredContent?.num_turns,
          2,
          "what the agent did before the crash is read back from its output file",
        );
        writeFileSync(gate, "");
        const report = await waitResult(second, id);
        assert.equal(report.status, "completed");
        assert.match(String(report.result), /^ECHO: .*survive a crash/s);
        assert.ok(report.session_id, "the session id is known, so the conversation can be resumed");
        assert.deepEqual(readPids(pids), [agent], "the agent was never started twice");
        await waitFor(() => !isAlive(agent), "the agent to be gone");
        assert.equal(readRecordFile(stateDir, id).status, "completed");

        const listed = await second.callTool("claude_list", {});
        assert.equal(
          listed.result?.structuredContent?.jobs.filter((job: { job_id: string }) => job.job_id === id).length,
          1,
        );
        second.endInput();
        await second.exited;
      },
    );

    test("the agent finishes while no server runs: the next server finishes the job from its output file", async () => {
      const { stateDir, cwd, gate, pids } = fixture();
      const first = await startServer(stateDir);
      const id = await startJob(first, { prompt: `@pid ${pids}\n@wait-file ${gate}\nfinish alone`, cwd });
      await waitFor(() => readPids(pids).length === 1, "the agent to start");
      await agentRecorded(stateDir, id);
      await crash(first);
      writeFileSync(gate, "");
      const [agent] = readPids(pids) as [number];
      await waitFor(() => !isAlive(agent), "the agent to finish on its own");

      const second = await startServer(stateDir);
      const report = await waitResult(second, id);
      assert.equal(report.status, "completed");
      assert.match(String(report.result), /finish alone/);
      const output = await second.callTool("claude_output", { job_id: id, view: "transcript" });
      assert.match(output.result?.structuredContent?.text, /session/, "the transcript is rebuilt from the output file");
      second.endInput();
      await second.exited;
    });

    test("an agent that died with no result while no server ran is lost, with a clear code", async () => {
      const { stateDir, cwd, gate, pids } = fixture();
      const first = await startServer(stateDir);
      const id = await startJob(first, { prompt: `@pid ${pids}\n@wait-file ${gate}\nnever answers`, cwd });
      await waitFor(() => readPids(pids).length === 1, "the agent to start");
      await agentRecorded(stateDir, id);
      await crash(first);
      const [agent] = readPids(pids) as [number];
      process.kill(agent, "SIGKILL");
      await waitFor(() => !isAlive(agent), "the agent to die");

      const second = await startServer(stateDir);
      const waited = await second.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
      assert.equal(waited.result?.structuredContent?.status, "lost");
      assert.equal(waited.result?.structuredContent?.error?.code, "AGENT_LOST");
      assert.equal(waited.result?.isError, true);
      assert.equal(readRecordFile(stateDir, id).status, "lost");
      second.endInput();
      await second.exited;
    });

    test("a reused pid with another start time is not taken for the agent, and is not killed", async () => {
      const { stateDir, cwd } = fixture();
      // Any live process stands in for the one that reused the agent's pid.
      const stranger = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], {
        stdio: "ignore",
        env: minimalEnvironment(),
      });
      try {
        const id = "0f0f0f0f-1111-4222-8333-444455556666";
        const dir = path.join(stateDir, "jobs", id);
        mkdirSync(dir, { recursive: true });
        writeFileSync(path.join(dir, "prompt.txt"), "hello");
        const record = {
          format: 1,
          id,
          kind: "start",
          cwd,
          prompt_preview: "hello",
          options: {},
          status: "running",
          submitted_at: Date.now() - 1000,
          started_at: Date.now() - 1000,
          owner: { pid: 99_999_999, start_time: "1" },
          generation: 0,
          agent: { pid: stranger.pid, start_time: "1", tree_marker: "not-this-one" },
        };
        writeFileSync(path.join(dir, "record.json"), JSON.stringify(record));
        // A torn write left behind by a crash, and a folder whose record is garbage: both ignored.
        writeFileSync(path.join(dir, "record.json.k2j3.tmp"), '{"format":1,"id":"0f0f');
        const garbage = path.join(stateDir, "jobs", "1f1f1f1f-1111-4222-8333-444455556666");
        mkdirSync(garbage);
        writeFileSync(path.join(garbage, "record.json"), "{not json");

        const server = await startServer(stateDir);
        const waited = await server.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
        assert.equal(waited.result?.structuredContent?.status, "lost", "the stranger is not the agent");
        assert.ok(isAlive(stranger.pid as number), "the stranger was not signalled");
        assert.match(server.stderr, /1f1f1f1f-1111-4222-8333-444455556666 skipped: record.json is not a valid record/);
        server.endInput();
        await server.exited;
      } finally {
        stranger.kill("SIGKILL");
      }
    });

    test("the queue survives a restart, in order, and the limit still holds", async () => {
      const { stateDir, cwd, gate, pids } = fixture();
      const first = await startServer(stateDir, { CLAUDE_DISPATCH_MAX_JOBS: "1" });
      const ids: string[] = [];
      for (const name of ["one", "two", "three"]) {
        ids.push(await startJob(first, { prompt: `@pid ${pids}\n@wait-file ${gate}\njob ${name}`, cwd }));
      }
      await waitFor(() => readPids(pids).length === 1, "the first agent to start");
      await agentRecorded(stateDir, ids[0] as string);
      assert.deepEqual(
        ids.map((id) => readRecordFile(stateDir, id).status),
        ["running", "queued", "queued"],
      );
      await crash(first);

      const second = await startServer(stateDir, { CLAUDE_DISPATCH_MAX_JOBS: "1" });
      const queued = await second.callTool("claude_wait", { job_id: ids[2] as string, hold_ms: 0 });
      assert.equal(queued.result?.structuredContent?.status, "queued");
      assert.equal(queued.result?.structuredContent?.queue_position, 2);
      writeFileSync(gate, "");
      for (const [index, id] of ids.entries()) {
        const report = await waitResult(second, id);
        assert.equal(report.status, "completed", `job ${index + 1}`);
        assert.match(String(report.result), new RegExp(`job ${["one", "two", "three"][index]}`));
      }
      assert.equal(readPids(pids).length, 3, "each job ran exactly once");
      const exitOf = (id: string | undefined): unknown => readRecordFile(stateDir, id as string).outcome.exit;
      assert.equal(exitOf(ids[0]), undefined, "followed after the restart: its exit status is unknown");
      assert.deepEqual(exitOf(ids[1]), { code: 0, signal: null }, "started by this server: its exit is recorded");
      second.endInput();
      await second.exited;
    });

    test(
      "CLAUDE_DISPATCH_ON_EXIT=keep: closing stdin leaves the agent running for the next server; " + "kill stops it",
      async () => {
        const { stateDir, cwd, gate, pids } = fixture();
        const first = await startServer(stateDir);
        const id = await startJob(first, { prompt: `@pid ${pids}\n@wait-file ${gate}\nkeep me`, cwd });
        await waitFor(() => readPids(pids).length === 1, "the agent to start");
        await agentRecorded(stateDir, id);
        first.endInput();
        assert.equal((await first.exited).code, 0);
        const [agent] = readPids(pids) as [number];
        assert.ok(isAlive(agent), "keep leaves the agent running");

        const second = await startServer(stateDir, { CLAUDE_DISPATCH_ON_EXIT: "kill" });
        const killed = await second.callTool("claude_kill", { job_id: id });
        assert.equal(killed.result?.structuredContent?.status, "killed", JSON.stringify(killed));
        assert.ok(!isAlive(agent), "the adopted agent's tree is killed like any other");
        assert.equal(readRecordFile(stateDir, id).status, "killed");
        second.endInput();
        await second.exited;
      },
    );

    test(
      "a burst of starts, then stdin closed at once (keep): every agent is on record with its start time, and the " +
        "next server finishes them all",
      async () => {
        const { stateDir, cwd, gate, pids } = fixture();
        const first = await startServer(stateDir, { CLAUDE_DISPATCH_MAX_JOBS: "3" });
        const burst = (n: number) => startJob(first, { prompt: `@pid ${pids}\n@wait-file ${gate}\nburst ${n}`, cwd });
        const ids = await Promise.all([1, 2, 3].map(burst));
        first.endInput();
        assert.equal((await first.exited).code, 0);
        for (const id of ids) {
          const agent = readRecordFile(stateDir, id).agent;
          assert.ok(
            agent?.pid && agent.start_time && agent.tree_marker,
            `job ${id} was left without its agent's identity: ${JSON.stringify(agent)}`,
          );
        }
        const second = await startServer(stateDir);
        writeFileSync(gate, "");
        for (const [index, id] of ids.entries()) {
          const report = await waitResult(second, id);
          assert.equal(report.status, "completed");
          assert.match(String(report.result), new RegExp(`burst ${index + 1}`));
        }
        assert.equal(readPids(pids).length, 3, "each agent ran once");
        second.endInput();
        await second.exited;
      },
    );

    test(
      "a record written just before the spawn (tree marker, no pid yet): the next server finds the agent " +
        "by its marker",
      async () => {
        const { stateDir, cwd, gate, pids } = fixture();
        const id = "2f2f2f2f-1111-4222-8333-444455556666";
        const dir = path.join(stateDir, "jobs", id);
        mkdirSync(dir, { recursive: true });
        const prompt = `@pid ${pids}\n@wait-file ${gate}\nfound by marker`;
        writeFileSync(path.join(dir, "prompt.txt"), prompt);
        const marker = "5e5e5e5e-1111-4222-8333-444455556666";
        const record = {
          format: 1,
          id,
          kind: "start",
          cwd,
          prompt_preview: "found by marker",
          options: {},
          status: "running",
          submitted_at: Date.now(),
          started_at: Date.now(),
          owner: { pid: 99_999_999, start_time: "1" },
          generation: 0,
          agent: { tree_marker: marker },
        };
        writeFileSync(path.join(dir, "record.json"), JSON.stringify(record));
        // The agent the dead server had just spawned: its own session, output to
        // the job's file, the marker in its environment.
        const { openSync } = await import("node:fs");
        const out = openSync(path.join(dir, "stdout.jsonl"), "a");
        const agentProcess = spawn(
          process.execPath,
          [FAKE_CLAUDE, "-p", "--output-format", "stream-json", "--verbose"],
          {
            cwd,
            detached: true,
            stdio: ["pipe", out, "ignore"],
            env: minimalEnvironment({ CLAUDE_DISPATCH_TREE: marker }),
          },
        );
        agentProcess.stdin?.end(prompt);
        agentProcess.unref();
        await waitFor(() => readPids(pids).length === 1, "the agent to start");

        const server = await startServer(stateDir);
        const following = await server.callTool("claude_wait", { job_id: id, hold_ms: 300 });
        assert.equal(following.result?.structuredContent?.status, "running", JSON.stringify(following));
        assert.equal(
          readRecordFile(stateDir, id).agent.pid,
          readPids(pids)[0],
          "the pid found by the marker is recorded",
        );
        writeFileSync(gate, "");
        const report = await waitResult(server, id);
        assert.equal(report.status, "completed");
        assert.match(String(report.result), /found by marker/);
        server.endInput();
        await server.exited;
      },
    );

    test(
      "two servers on one state directory: the other serves the job while its owner lives, and takes it over when " +
        "the owner dies, without a restart",
      async () => {
        const { stateDir, cwd, gate, pids } = fixture();
        const first = await startServer(stateDir);
        const second = await startServer(stateDir);
        const id = await startJob(first, { prompt: `@pid ${pids}\n@wait-file ${gate}\nserved by the survivor`, cwd });
        await waitFor(() => readPids(pids).length === 1, "the agent to start");
        await agentRecorded(stateDir, id);
        const whileAlive = await second.callTool("claude_wait", { job_id: id, hold_ms: 0 });
        assert.equal(
          whileAlive.result?.structuredContent?.status,
          "running",
          "served from its files while its owner lives (§15.6)",
        );
        await crash(first);
        const taken = await second.callTool("claude_wait", { job_id: id, hold_ms: 200 });
        assert.equal(taken.result?.structuredContent?.status, "running", JSON.stringify(taken));
        writeFileSync(gate, "");
        const report = await waitResult(second, id);
        assert.equal(report.status, "completed");
        assert.match(String(report.result), /served by the survivor/);
        assert.equal(readPids(pids).length, 1);
        const owner = readRecordFile(stateDir, id).owner.pid;
        assert.equal(owner, second.child.pid, "taken over by the survivor, which wrote the final record");
        second.endInput();
        await second.exited;
      },
    );

    test("a job started on A is listed, waited on and paged through B while A lives; both see the result", async () => {
      const { stateDir, cwd, gate, pids } = fixture();
      const a = await startServer(stateDir);
      const b = await startServer(stateDir);
      const { job_id: id } = await structured(a, "claude_start", {
        prompt: `@pid ${pids}\n@tools 2\n@wait-file ${gate}\nshared between hosts`,
        cwd,
      });
      await agentRecorded(stateDir, id);

      const listed = await structured(b, "claude_list", {});
      const row = listed.jobs.find((job: { job_id: string }) => job.job_id === id);
      assert.equal(row?.status, "running");
      assert.equal(row?.other_server, true, "marked as another live server's");

      const held = await structured(b, "claude_wait", { job_id: id, hold_ms: 200 });
      assert.equal(held.status, "running");
      await waitFor(() => readPids(pids).length === 1, "the agent to start");
      const waiting = b.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
      writeFileSync(gate, "");
      const done = (await waiting).result?.structuredContent as Record<string, any>;
      assert.equal(done.status, "completed");
      assert.match(String(done.result), /^ECHO: .*shared between hosts/s);
      assert.ok(done.session_id);

      const page = await structured(b, "claude_output", { job_id: id, view: "transcript" });
      assert.match(String(page.text), /Bash/, "the transcript, read from the job's output file");
      const onA = await structured(a, "claude_wait", { job_id: id });
      assert.equal(onA.status, "completed");
      assert.equal(readPids(pids).length, 1, "one agent, never started twice");
    });

    test(
      "CLAUDE_DISPATCH_ON_DONE runs once for a job two servers watch, by its owner, with the job in " +
        "its environment",
      async () => {
        const { stateDir, cwd, gate, pids } = fixture();
        const hook = path.join(path.dirname(stateDir), "on-done.mjs");
        const ran = path.join(path.dirname(stateDir), "on-done.log");
        writeFileSync(
          hook,
          'import { appendFileSync } from "node:fs";\n' +
            "const e = process.env;\n" +
            "appendFileSync(process.argv[2], [e.CLAUDE_DISPATCH_JOB_ID, e.CLAUDE_DISPATCH_JOB_STATUS, " +
            "e.CLAUDE_DISPATCH_JOB_CWD, e.CLAUDE_DISPATCH_JOB_SESSION_ID, process.cwd()].join(' ') + '\\n');\n",
        );
        const onDone = { CLAUDE_DISPATCH_ON_DONE: JSON.stringify([process.execPath, hook, ran]) };
        const a = await startServer(stateDir, onDone);
        const b = await startServer(stateDir, onDone);
        const { job_id: id } = await structured(a, "claude_start", {
          prompt: `@pid ${pids}\n@wait-file ${gate}\nnotify me`,
          cwd,
        });
        await agentRecorded(stateDir, id);
        const waiting = b.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
        await structured(b, "claude_list", {});
        writeFileSync(gate, "");
        const done = (await waiting).result?.structuredContent as Record<string, any>;
        assert.equal(done.status, "completed");
        await waitFor(() => existsSync(ran) && readFileSync(ran, "utf8").endsWith("\n"), "the command to run");
        for (const server of [a, b]) {
          server.endInput();
          await server.exited;
        }
        assert.deepEqual(
          readFileSync(ran, "utf8").trim().split("\n"),
          [`${id} completed ${cwd} ${done.session_id} ${cwd}`],
          "once, with the job's id, status, cwd and session, in its cwd",
        );
      },
    );

    test(
      "CLAUDE_DISPATCH_MAX_JOBS=2 across three servers starting 5 jobs each: never more than 2 agents alive, all " +
        "15 finish, each server's in order",
      async () => {
        const { stateDir, cwd, pids } = fixture();
        const servers = await Promise.all(
          [1, 2, 3].map(() => startServer(stateDir, { CLAUDE_DISPATCH_MAX_JOBS: "2" })),
        );
        let most = 0;
        let sampling = true;
        const sampler = (async () => {
          while (sampling) {
            most = Math.max(most, agentsIn(cwd));
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
        })();
        const ids = await Promise.all(
          servers.map(async (server, s) => {
            const mine: string[] = [];
            for (let k = 0; k < 5; k += 1)
              mine.push(
                (
                  await structured(server, "claude_start", {
                    prompt: `@pid ${pids}\n@sleep 200\nserver ${s} job ${k}`,
                    cwd,
                  })
                ).job_id,
              );
            return mine;
          }),
        );
        const reports = await Promise.all(
          servers.flatMap((server, s) =>
            (ids[s] ?? []).map((id) => structured(server, "claude_wait", { job_id: id, hold_ms: 60_000 })),
          ),
        );
        sampling = false;
        await sampler;
        assert.deepEqual(
          reports.map((report) => report.status),
          Array(15).fill("completed"),
          JSON.stringify(reports.filter((r) => r.status !== "completed").slice(0, 2)),
        );
        assert.equal(readPids(pids).length, 15, "every job ran once");
        assert.ok(most >= 1 && most <= 2, `at most 2 agents at once across the three servers, saw ${most}`);
        // One queue across the servers: another server may claim a queued job, and records its start a moment after
        // its claim, so only the jobs each server ran itself are compared by their start times.
        const pidsOfServers = servers.map((server) => server.child.pid);
        const runners = ids.flat().map((id) => readRecordFile(stateDir, id).owner?.pid);
        assert.ok(
          runners.every((pid) => pidsOfServers.includes(pid)),
          `every job's record names the server that ran it: ${runners.join(", ")}`,
        );
        for (const [s, mine] of ids.entries()) {
          const records = mine.map((id) => readRecordFile(stateDir, id));
          const own = records.filter((record) => record.owner?.pid === servers[s]?.child.pid);
          const started = own.map((record) => record.started_at as number);
          assert.deepEqual(
            [...started].sort((x, y) => x - y),
            started,
            "each server starts the jobs it runs in submission order",
          );
        }
      },
    );

    test(
      "a server SIGKILLed holding the only slot and a queued job: the next server takes both over, the slot comes " +
        "back, the queued job runs once",
      async () => {
        const { stateDir, cwd, gate, pids } = fixture();
        const queuedPids = `${pids}.queued`;
        const first = await startServer(stateDir, { CLAUDE_DISPATCH_MAX_JOBS: "1" });
        const { job_id: holder } = await structured(first, "claude_start", {
          prompt: `@pid ${pids}\n@wait-file ${gate}\nholds the slot`,
          cwd,
        });
        const { job_id: queued, status } = await structured(first, "claude_start", {
          prompt: `@pid ${queuedPids}\nwaits for it`,
          cwd,
        });
        assert.equal(status, "queued");
        await agentRecorded(stateDir, holder);
        await crash(first);
        writeFileSync(gate, "");
        const [agent] = readPids(pids) as [number];
        await waitFor(() => !isAlive(agent), "the slot holder's agent to finish with no server");

        const second = await startServer(stateDir, { CLAUDE_DISPATCH_MAX_JOBS: "1" });
        const report = await structured(second, "claude_wait", { job_id: queued, hold_ms: 30_000 });
        assert.equal(report.status, "completed");
        assert.equal((await structured(second, "claude_wait", { job_id: holder })).status, "completed");
        assert.equal(readPids(queuedPids).length, 1, "the queued job ran exactly once");
        second.endInput();
        await second.exited;
      },
    );

    test("killed through B: its whole tree is gone, and A, its owner, records it killed by claude_kill", async () => {
      const { stateDir, cwd, pids } = fixture();
      const a = await startServer(stateDir);
      const b = await startServer(stateDir);
      const { job_id: id } = await structured(a, "claude_start", {
        prompt: `@pid ${pids}\n@spawn ${pids} detached\n@sleep 60000`,
        cwd,
      });
      await waitFor(() => readPids(pids).length === 2, "the agent and its child in another session");
      await agentRecorded(stateDir, id);
      const tree = readPids(pids);

      const killed = await structured(b, "claude_kill", { job_id: id });
      assert.equal(killed.status, "killed");
      for (const pid of tree) await waitFor(() => !isAlive(pid), `process ${pid} to be gone`);
      const onA = await structured(a, "claude_wait", { job_id: id });
      assert.equal(onA.status, "killed");
      assert.match(String(readRecordFile(stateDir, id).outcome?.detail), /killed by claude_kill/);
      assert.equal(readRecordFile(stateDir, id).kill_reason, "claude_kill");
    });
  },
);
