/**
 * What the state directory can and cannot do to a server (PROTOCOL.md §9, §15): nothing planted
 * there blocks it (a FIFO, socket or device in place of any file is refused with STATE_ERROR), a
 * record naming a process of the server's own tree is never adopted, a full disk is STATE_ERROR
 * everywhere, and INTERNAL_ERROR never carries an exception's own text to the model.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { INTERNAL_ERROR_DETAIL } from "../src/core/errors.js";
import { indexProcesses, ownTree } from "../src/hosts/local/posix/process-table.js";
import type { ProcessInfo } from "../src/hosts/local/types.js";
import { JobRegistry } from "../src/jobs/registry.js";
import { memoryPersistence } from "../src/jobs/memory.js";
import { openForAppending, openForReading, openForWriting, readTextFile } from "../src/store/files.js";
import { StateError } from "../src/store/records.js";
import { FakeAgent, FakeClock, RecordingLogger, handlerHarness, settle } from "./helpers.js";
import { isAlive, procStartTime, readPids, readRecordFile, waitFor } from "./processes.js";
import { ServerProcess, type RpcResponse } from "./server-process.js";
import { homeOnly } from "./host-fakes.js";

const linux = process.platform === "linux";
const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-guarantees-"));
const servers: ServerProcess[] = [];
const pidFiles: string[] = [];
after(() => {
  for (const server of servers) server.dispose();
  for (const file of pidFiles) for (const pid of readPids(file)) if (isAlive(pid)) process.kill(pid, "SIGKILL");
  if (!noTmpfs) spawnSync("umount", ["-l", tmpfsDir]);
  rmSync(scratch, { recursive: true, force: true });
});

let counter = 0;
function fixture(): { base: string; cwd: string; stateDir: string } {
  counter += 1;
  const base = path.join(scratch, `t${counter}`);
  const cwd = path.join(base, "work");
  mkdirSync(cwd, { recursive: true });
  return { base, cwd, stateDir: path.join(base, "state") };
}

async function startServer(stateDir: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const server = new ServerProcess({ CLAUDE_DISPATCH_STATE_DIR: stateDir, ...env });
  servers.push(server);
  await within(server.initialize(), "initialize");
  return server;
}

/** The promise, or a failure naming what did not answer: a server blocked on a FIFO never answers at all. */
async function within<T>(promise: Promise<T>, what: string, ms = 15_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`no answer to ${what} within ${ms} ms`)), ms)),
  );
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

function call(server: ServerProcess, name: string, args: Record<string, unknown>): Promise<RpcResponse> {
  return within(server.callTool(name, args), `${name} ${JSON.stringify(args).slice(0, 80)}`);
}

const structured = (response: RpcResponse): Record<string, any> =>
  response.result?.structuredContent as Record<string, any>;
const textOf = (response: RpcResponse): string => (response.result?.content?.[0]?.text as string | undefined) ?? "";

function assertStateError(response: RpcResponse, names: string): void {
  assert.equal(response.result?.isError, true, JSON.stringify(response.result));
  assert.match(textOf(response), /^STATE_ERROR: /, textOf(response));
  assert.ok(textOf(response).includes(names), `${textOf(response)} names ${names}`);
}

function mkfifo(file: string): void {
  rmSync(file, { force: true });
  const made = spawnSync("mkfifo", ["-m", "600", file]);
  assert.equal(made.status, 0, `mkfifo ${file}: ${String(made.stderr)}`);
}

function jobFile(stateDir: string, id: string, name: string): string {
  return path.join(stateDir, "jobs", id, name);
}

describe(
  "files of the state directory are opened without blocking (item 7)",
  { skip: !linux && "FIFOs and /dev are POSIX" },
  () => {
    test("a FIFO, a socket or a device is refused at once, with StateError naming what it is", async () => {
      const dir = path.join(scratch, "special");
      mkdirSync(dir, { recursive: true });
      const fifo = path.join(dir, "fifo");
      mkfifo(fifo);
      const socketPath = path.join(dir, "socket");
      const listener = createServer();
      await new Promise<void>((resolve) => listener.listen(socketPath, resolve));
      try {
        for (const open of [openForReading, openForAppending, openForWriting]) {
          assert.throws(
            () => open(fifo),
            (error: unknown) =>
              error instanceof StateError &&
              /is a FIFO, not a regular file/.test(error.message) &&
              error.message.includes(fifo),
          );
          assert.throws(
            () => open("/dev/null"),
            (error: unknown) => error instanceof StateError && /is a device, not a regular file/.test(error.message),
          );
        }
        assert.throws(
          () => openForReading(socketPath),
          (error: unknown) => error instanceof StateError && /is a socket/.test(error.message),
        );
        assert.equal(readTextFile(fifo), undefined, "a FIFO reads as no file");
      } finally {
        listener.close();
      }
    });
  },
);

describe(
  "a FIFO in place of any file the server reads (item 7)",
  { skip: !linux && "FIFOs and /proc are Linux's" },
  () => {
    test(
      "finished jobs: result.txt, stdout.jsonl, record.json, the finished index and a slot; everything " +
        "else answers",
      async () => {
        const { cwd, stateDir } = fixture();
        const first = await startServer(stateDir);
        const a = structured(await call(first, "claude_run", { prompt: "alpha", cwd }));
        const b = structured(await call(first, "claude_run", { prompt: "bravo", cwd }));
        assert.equal(a.status, "completed");
        assert.equal(b.status, "completed");
        await first.shutdown();

        const c = randomUUID();
        mkdirSync(path.join(stateDir, "jobs", c), { mode: 0o700 });
        mkfifo(jobFile(stateDir, c, "record.json"));
        mkfifo(jobFile(stateDir, a.job_id, "result.txt"));
        mkfifo(jobFile(stateDir, b.job_id, "stdout.jsonl"));
        mkfifo(path.join(stateDir, "finished.jsonl"));
        // A holder file above every real one: slot 0 looks held, and the only slot there is (MAX_JOBS 1).
        mkfifo(path.join(stateDir, "slots", "0.999"));

        const second = await startServer(stateDir, { CLAUDE_DISPATCH_MAX_JOBS: "1" });
        assert.ok((await within(second.request("tools/list"), "tools/list")).result?.tools?.length > 0);
        const listed = structured(await call(second, "claude_list", {}));
        assert.deepEqual(
          new Set(listed.jobs.map((job: { job_id: string }) => job.job_id)),
          new Set([a.job_id, b.job_id]),
        );
        assertStateError(await call(second, "claude_wait", { job_id: a.job_id }), "result.txt");
        assertStateError(await call(second, "claude_output", { job_id: a.job_id, view: "result" }), "result.txt");
        assertStateError(await call(second, "claude_output", { job_id: b.job_id, view: "transcript" }), "stdout.jsonl");
        assertStateError(await call(second, "claude_wait", { job_id: c }), "record.json");
        assert.match(String(structured(await call(second, "claude_wait", { job_id: b.job_id })).result), /ECHO: bravo/);
        const fresh = structured(await call(second, "claude_run", { prompt: "charlie", cwd }));
        assert.equal(fresh.status, "completed", JSON.stringify(fresh));
        await second.shutdown();
      },
    );

    test("running and queued jobs: the kill request, an approval file, stderr.log and prompt.txt", async () => {
      const { base, cwd, stateDir } = fixture();
      const gate = path.join(base, "gate");
      const pids = path.join(base, "pids");
      pidFiles.push(pids);
      const server = await startServer(stateDir, { CLAUDE_DISPATCH_MAX_JOBS: "1" });
      const running = structured(
        await call(server, "claude_start", { prompt: `@pid ${pids}\n@wait-file ${gate}\nnovember`, cwd }),
      ).job_id as string;
      await waitFor(
        () => readPids(pids).length === 1 && readRecordFile(stateDir, running).agent?.start_time !== undefined,
        "the agent to start",
      );
      const queued = structured(await call(server, "claude_start", { prompt: "quebec", cwd }));
      assert.equal(queued.status, "queued");

      mkfifo(jobFile(stateDir, running, "kill"));
      mkfifo(jobFile(stateDir, running, "approval.1.json"));
      mkfifo(jobFile(stateDir, running, "stderr.log"));
      mkfifo(jobFile(stateDir, queued.job_id, "prompt.txt"));
      assert.equal(structured(await call(server, "claude_wait", { job_id: running, hold_ms: 300 })).status, "running");
      await call(server, "claude_list", {});

      writeFileSync(gate, "");
      const done = structured(await call(server, "claude_wait", { job_id: running, hold_ms: 30_000 }));
      assert.equal(done.status, "completed", JSON.stringify(done));
      const next = await call(server, "claude_wait", { job_id: queued.job_id, hold_ms: 30_000 });
      assert.equal(structured(next).status, "failed", JSON.stringify(structured(next)));
      assert.equal(structured(next).error?.code, "STATE_ERROR");
      assert.match(structured(next).error?.detail, /prompt\.txt/);
      assert.ok((await within(server.request("tools/list"), "tools/list")).result?.tools?.length > 0);
      await server.shutdown();
    });

    test("a claim file: the job is taken over by the next claim slot, and startup goes on", async () => {
      const { base, cwd, stateDir } = fixture();
      const pids = path.join(base, "pids");
      pidFiles.push(pids);
      const first = await startServer(stateDir, { CLAUDE_DISPATCH_ON_EXIT: "keep" });
      const id = structured(
        await call(first, "claude_start", {
          prompt: `@pid ${pids}\n@wait-file ${path.join(base, "never")}\norphan`,
          cwd,
        }),
      ).job_id as string;
      await waitFor(
        () => readPids(pids).length === 1 && readRecordFile(stateDir, id).agent?.start_time !== undefined,
        "the agent to start",
      );
      first.child.kill("SIGKILL");
      await first.exited;
      const [agent] = readPids(pids) as [number];
      process.kill(agent, "SIGKILL");
      await waitFor(() => !isAlive(agent), "the agent to be gone");
      mkfifo(jobFile(stateDir, id, "claim.1"));

      const second = await startServer(stateDir);
      const waited = structured(await call(second, "claude_wait", { job_id: id, hold_ms: 10_000 }));
      assert.equal(waited.status, "lost", JSON.stringify(waited));
      await second.shutdown();
    });
  },
);

describe(
  "a record naming a process of the server's own tree is never adopted (item 11)",
  { skip: !linux && "the liveness checks read /proc" },
  () => {
    test(
      "its parent, itself, another job's agent and that agent's child: lost at once, and claude_kill " +
        "signals nothing",
      async () => {
        const { base, cwd, stateDir } = fixture();
        const gate = path.join(base, "gate");
        const pids = path.join(base, "pids");
        pidFiles.push(pids);
        const server = await startServer(stateDir);
        const serverPid = server.child.pid as number;
        const live = structured(
          await call(server, "claude_start", { prompt: `@pid ${pids}\n@spawn ${pids}\n@wait-file ${gate}\nlima`, cwd }),
        ).job_id as string;
        await waitFor(
          () => readPids(pids).length === 2 && readRecordFile(stateDir, live).agent?.start_time !== undefined,
          "the agent and its child",
        );
        const liveAgent = readRecordFile(stateDir, live).agent as {
          pid: number;
          start_time: string;
          tree_marker: string;
        };
        const [, child] = readPids(pids) as [number, number];
        await waitFor(() => procStartTime(child) !== undefined, "the child's start time");

        // Owned by a process that is gone: the server takes each one over at its first lookup.
        const gone = spawnSync(process.execPath, ["-e", ""]).pid as number;
        const named = {
          parent: { pid: process.pid, pgid: process.pid, start_time: procStartTime(process.pid) },
          itself: { pid: serverPid, start_time: procStartTime(serverPid), tree_marker: randomUUID() },
          "another job's agent": { ...liveAgent },
          "that agent's child": { pid: child, start_time: procStartTime(child) },
        };
        for (const [who, agent] of Object.entries(named)) {
          const id = randomUUID();
          mkdirSync(path.join(stateDir, "jobs", id), { mode: 0o700 });
          const now = Date.now();
          const record = {
            format: 1,
            runtime: "claude",
            host: "local",
            id,
            kind: "start",
            cwd,
            prompt_preview: who,
            options: {},
            status: "running",
            submitted_at: now,
            started_at: now,
            owner: { pid: gone, start_time: "1" },
            generation: 0,
            agent,
          };
          writeFileSync(jobFile(stateDir, id, "record.json"), JSON.stringify(record), { mode: 0o600 });
          const waited = structured(await call(server, "claude_wait", { job_id: id, hold_ms: 0 }));
          assert.equal(waited.status, "lost", `${who}: ${JSON.stringify(waited)}`);
          assert.equal(waited.error?.code, "AGENT_LOST", who);
          // Recognised as not its agent: a record without a marker would
          // otherwise also end lost, found gone a moment later.
          assert.match(String(waited.error?.detail), /not this job's agent/, `${who}: ${JSON.stringify(waited.error)}`);
          const killed = await call(server, "claude_kill", { job_id: id });
          assert.notEqual(structured(killed).status, "running", `${who}: ${JSON.stringify(structured(killed))}`);
        }
        assert.ok(isAlive(liveAgent.pid), "the other job's agent was not signalled");
        assert.ok(isAlive(child), "nor its child");
        assert.equal(server.child.exitCode, null, "the server did not signal itself");
        writeFileSync(gate, "");
        const done = structured(await call(server, "claude_wait", { job_id: live, hold_ms: 30_000 }));
        assert.equal(done.status, "completed", JSON.stringify(done));
        await server.shutdown();
      },
    );
  },
);

describe("this server's own tree (item 11)", () => {
  test("itself, every ancestor (past its group's leader), its group and session, its descendants; nothing else", () => {
    const info = (pid: number, ppid: number, pgid: number, sid: number): ProcessInfo => ({
      pid,
      ppid,
      pgid,
      sid,
      startTime: String(pid),
      zombie: false,
    });
    const table = indexProcesses(
      [
        info(1, 0, 1, 1),
        info(10, 1, 10, 10), // a login shell: the grandparent, leading its own session
        info(20, 10, 20, 20), // a terminal's session leader: the parent, leading the server's group and session
        info(30, 20, 20, 20), // the server
        info(31, 20, 20, 20), // a sibling in its group
        info(40, 30, 40, 40), // an agent (detached)
        info(41, 40, 41, 41), // the agent's tool, in a session of its own
        info(50, 1, 50, 50), // an agent an earlier server started, orphaned to init
        info(51, 50, 50, 50),
      ],
      30,
    );
    assert.deepEqual(
      [...ownTree(table, 30)].filter((pid) => pid > 1).sort((a, b) => a - b),
      [10, 20, 30, 31, 40, 41],
    );
  });
});

/** A small tmpfs at dir, or why there cannot be one here; the caller skips loudly, or fails under CI. */
function mountTmpfs(dir: string, bytes: number): string | undefined {
  if (!linux) return "tmpfs is Linux's";
  if (process.getuid?.() !== 0) return "mounting a tmpfs needs root";
  mkdirSync(dir, { recursive: true });
  const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${bytes},mode=0700`, "tmpfs", dir], {
    encoding: "utf8",
  });
  return mounted.status === 0 ? undefined : `mount -t tmpfs failed: ${mounted.stderr.trim() || mounted.error?.message}`;
}

const tmpfsDir = path.join(scratch, "tmpfs");
const noTmpfs = mountTmpfs(tmpfsDir, 6 * 1024 * 1024);
if (noTmpfs && process.env.CI === "true" && linux)
  test("a tmpfs can be mounted for the full-disk test", () => assert.fail(noTmpfs));
else if (noTmpfs) process.stderr.write(`\n!!! SKIPPING the full-disk test (item 12): ${noTmpfs}.\n\n`);

describe(
  "a full disk is a STATE_ERROR everywhere (item 12)",
  { skip: noTmpfs !== undefined && "see the line above" },
  () => {
    test(
      "agents fill the state directory's disk: every call answers, none INTERNAL_ERROR or a raw ENOSPC; freed, " +
        "it works again",
      async () => {
        const stateDir = path.join(tmpfsDir, "state");
        const cwd = path.join(scratch, "full-disk-work");
        mkdirSync(cwd, { recursive: true });
        const gate = path.join(scratch, "full-disk-gate");
        const server = await startServer(stateDir, { CLAUDE_DISPATCH_MAX_JOBS: "2" });
        const before = structured(await call(server, "claude_run", { prompt: "before", cwd }));
        assert.equal(before.status, "completed");
        const running = structured(await call(server, "claude_start", { prompt: `@wait-file ${gate}\nrunning`, cwd }))
          .job_id as string;
        await waitFor(
          () => readRecordFile(stateDir, running).agent?.start_time !== undefined,
          "the running job's agent",
        );

        // Most of the disk taken by something else; an agent's output takes the rest.
        const filler = path.join(tmpfsDir, "filler");
        writeFileSync(filler, Buffer.alloc(4 * 1024 * 1024));
        const flooded = structured(await call(server, "claude_run", { prompt: "@long-line 8000000\nflood", cwd }));
        assert.equal(flooded.status, "failed", JSON.stringify(flooded));
        assert.equal(flooded.error?.code, "STATE_ERROR", JSON.stringify(flooded));
        assert.match(flooded.error?.detail, /disk .*is full/);

        const answers: [string, RpcResponse][] = [];
        const ask = async (name: string, args: Record<string, unknown>): Promise<RpcResponse> => {
          const response = await call(server, name, args);
          answers.push([name, response]);
          return response;
        };
        const refused = await ask("claude_start", { prompt: "while full", cwd });
        assertStateError(refused, "disk is full");
        await ask("claude_run", { prompt: "while full", cwd });
        await ask("claude_list", {});
        await ask("claude_wait", { job_id: before.job_id });
        await ask("claude_output", { job_id: before.job_id, view: "result" });
        await ask("claude_output", { job_id: flooded.job_id, view: "transcript" });
        await ask("claude_kill", { job_id: before.job_id });
        assert.equal(structured(await ask("claude_wait", { job_id: running, hold_ms: 0 })).status, "running");
        assert.equal(structured(await ask("claude_kill", { job_id: running })).status, "killed");
        await ask("claude_respond", { job_id: before.job_id, request_id: "1", decision: "allow" });
        for (const [name, response] of answers) {
          const text = JSON.stringify(response.result);
          assert.ok(!/INTERNAL_ERROR|ENOSPC|no space left/i.test(text), `${name}: ${text}`);
        }

        rmSync(filler);
        const after = structured(await call(server, "claude_run", { prompt: "after", cwd }));
        assert.equal(after.status, "completed", JSON.stringify(after));
        assert.match(String(after.result), /ECHO: after/);
        // The records the full disk held back are written once a write gets through again.
        await waitFor(
          () => readRecordFile(stateDir, flooded.job_id).status === "failed",
          "the flooded job's final record",
        );
        assert.equal(readRecordFile(stateDir, flooded.job_id).outcome?.code, "STATE_ERROR");
        assert.equal(readRecordFile(stateDir, running).status, "killed");
        await server.shutdown();
        assert.deepEqual(
          readdirSync(path.join(stateDir, "slots")).filter(
            (name) => !name.endsWith(".free") && !existsSync(path.join(stateDir, "slots", `${name}.free`)),
          ),
          [],
        );
      },
    );
  },
);

describe("INTERNAL_ERROR carries no exception text to the model (item 13)", () => {
  const SECRET = "secret-detail-7f3a /home/someone/.ssh/id_ed25519";

  test(
    "a tool call whose dependency throws: a fixed sentence to the model, the message and " + "stack in the log",
    async () => {
      const h = handlerHarness({
        checkDirectory: async () => {
          throw new Error(SECRET);
        },
      });
      const response = await h.handle({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "claude_start", arguments: { prompt: "p", cwd: "/work" } },
      });
      const result = (
        response as {
          result: { isError: boolean; content: { text: string }[]; structuredContent: Record<string, any> };
        }
      ).result;
      assert.equal(result.isError, true);
      assert.equal(result.content[0]?.text, `INTERNAL_ERROR: ${INTERNAL_ERROR_DETAIL}`);
      assert.ok(!JSON.stringify(result).includes("secret-detail"), JSON.stringify(result));
      assert.equal(result.structuredContent.error?.code, "INTERNAL_ERROR");
      const logged = h.logger.lines.filter((line) => line.startsWith("error ") && line.includes(SECRET));
      assert.equal(logged.length, 1, h.logger.lines.join("\n"));
      assert.match(logged[0] as string, /at /, "the stack is logged too");
    },
  );

  test(
    "an agent whose outcome throws: the job fails INTERNAL_ERROR with the fixed sentence; the log " + "has the rest",
    async () => {
      const logger = new RecordingLogger();
      const jobs = new JobRegistry({
        launch: (spec) => Object.assign(new FakeAgent(spec), { outcome: Promise.reject(new Error(SECRET)) }),
        clock: new FakeClock(),
        newId: () => "job-1",
        logger,
        retentionMs: 600_000,
        maxFinishedJobs: 10,
        finishedTranscriptChars: 1000,
        maxRunning: 1,
        ...homeOnly(),
        persistence: memoryPersistence(),
      });
      const job = jobs.start({ prompt: "p", cwd: "/work" }, "start");
      await job.done;
      await settle();
      assert.equal(job.status, "failed");
      assert.deepEqual(job.outcome, { ok: false, code: "INTERNAL_ERROR", detail: INTERNAL_ERROR_DETAIL });
      assert.ok(
        logger.lines.some((line) => line.startsWith("error ") && line.includes(SECRET)),
        logger.lines.join("\n"),
      );
    },
  );
});
