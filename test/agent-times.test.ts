/**
 * Times are the agent's (PROTOCOL.md §8, §15.3): a job whose end is recorded late (its agent was not the server's
 * child) ends when its agent ended, as estimated from the liveness polls and its output files, not when a server
 * noticed; and it started when it was recorded to start.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { after, describe, test } from "node:test";

import type { ChildExit } from "../src/agent/host.js";
import { createProcessControl, type WindowsPlatform } from "../src/hosts/local/index.js";
import { parseFrame, type RemoteFrame } from "../src/hosts/remote/protocol.js";
import { RemoteAgent, type RemoteHostLink } from "../src/hosts/remote/remote-agent.js";
import { serveRemote, type RemoteSide } from "../src/hosts/remote/far-end.js";
import { createClaudeAgents, FakeClock, finishedChild, RecordingLogger } from "./helpers.js";
import { agentRecorded, isAlive, readPids, waitFor } from "./processes.js";
import { ServerProcess } from "./server-process.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-times-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

let counter = 0;
function freshDir(): string {
  counter += 1;
  const dir = path.join(scratch, `t${counter}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Sets a file's modification time, in ms since the epoch (utimes takes seconds). */
function touch(file: string, atMs: number): void {
  writeFileSync(file, "", { flag: "a" });
  utimesSync(file, atMs / 1000, atMs / 1000);
}

/** An agent an earlier server started, on a platform whose process table the test decides. */
function attachedAgent(options: { livenessMs?: { first: number; max: number } } = {}) {
  const dir = freshDir();
  const output = { stdoutPath: path.join(dir, "stdout.jsonl"), stderrPath: path.join(dir, "stderr.log") };
  writeFileSync(output.stdoutPath, "");
  const clock = new FakeClock();
  const state: { running: boolean; foundGoneAt?: number } = { running: true };
  const platform: WindowsPlatform = {
    kind: "windows",
    spawn: () => {
      throw new Error("nothing is spawned here");
    },
    // taskkill: the agent dies at once.
    runFile: async () => {
      state.running = false;
      return { exitCode: 0 };
    },
    env: {},
    fileExists: () => false,
    readTextFile: () => undefined,
    nodePath: "node",
    isRunning: () => {
      if (!state.running) state.foundGoneAt ??= clock.now();
      return state.running;
    },
  };
  const control = createProcessControl({
    platform,
    clock,
    logger: new RecordingLogger(),
    newMarker: () => "marker",
    defer: (fn) => void setImmediate(fn),
    killGraceMs: 0,
    killPollMs: 10,
    followMs: 10,
    ...options,
  });
  const onStdout = (): void => undefined;
  const request = { pid: 700, startTime: undefined, marker: undefined, output, onStdout, stderrTailBytes: 64 };
  const attach = () => control.attach(request);
  return { clock, state, output, control, attach, start: clock.now() };
}

describe("the end of an agent that was not our child is estimated (§15.3)", () => {
  test("seen alive, then gone: the later of the last poll that saw it alive and its output's last write", async () => {
    const agent = attachedAgent();
    const { start } = agent;
    touch(agent.output.stdoutPath, start + 200);
    touch(agent.output.stderrPath, start + 50);
    const handle = agent.attach();
    await agent.clock.advance(100);
    agent.state.running = false;
    await agent.clock.advance(500);
    const exit = await handle.exited;
    assert.equal(exit.unobserved, true);
    assert.equal(exit.endedAt, start + 200, "its output was written after the last poll that saw it alive");
    await agent.control.idle();
  });

  test("seen alive after its last write: the last poll that saw it alive", async () => {
    const agent = attachedAgent();
    const { start } = agent;
    touch(agent.output.stdoutPath, start - 5000);
    const handle = agent.attach();
    await agent.clock.advance(1200);
    agent.state.running = false;
    await agent.clock.advance(500);
    assert.equal((await handle.exited).endedAt, start + 1000, "the poll at +1000 saw it alive, the next found it gone");
    await agent.control.idle();
  });

  test("already gone at the first poll: its output's last write alone", async () => {
    const agent = attachedAgent();
    touch(agent.output.stdoutPath, agent.start - 100);
    touch(agent.output.stderrPath, agent.start - 900);
    agent.state.running = false;
    const exit = await agent.attach().exited;
    assert.equal(exit.endedAt, agent.start - 100);
    await agent.control.idle();
  });

  test("a last write in the future (the clock was set back) counts as now", async () => {
    const agent = attachedAgent();
    touch(agent.output.stdoutPath, agent.start + 60_000);
    agent.state.running = false;
    assert.equal((await agent.attach().exited).endedAt, agent.start);
    await agent.control.idle();
  });

  test("killed: its end is not earlier than the kill", async () => {
    const agent = attachedAgent();
    touch(agent.output.stdoutPath, agent.start - 1000);
    const handle = agent.attach();
    await agent.clock.advance(300);
    await handle.killTree();
    await agent.clock.advance(0);
    assert.equal((await handle.exited).endedAt, agent.start + 300);
    await agent.control.idle();
  });

  test("by default an adopted agent's exit is noticed within 500 ms, however long it ran", async () => {
    const agent = attachedAgent();
    const handle = agent.attach();
    await agent.clock.advance(4100);
    agent.state.running = false;
    const diedAt = agent.clock.now();
    await agent.clock.advance(3000);
    await handle.exited;
    const noticedAfter = (agent.state.foundGoneAt ?? Infinity) - diedAt;
    assert.ok(noticedAfter <= 500, `no back-off past 500 ms between polls: noticed ${noticedAfter} ms after`);
    await agent.control.idle();
  });

  test("the launcher puts the estimate on the outcome, for an attached agent only", async () => {
    const event = { type: "result", subtype: "success", is_error: false, result: "done", session_id: "s" };
    const result = `${JSON.stringify(event)}\n`;
    const exit: Partial<ChildExit> = { exitCode: null, unobserved: true, endedAt: 123_456 };
    const agents = createClaudeAgents({
      start: (request) => finishedChild(request.onStdout, result),
      attach: (request) => finishedChild(request.onStdout, result, exit),
      bin: "claude",
      env: {},
      maxLineBytes: 1 << 20,
      transcriptChars: 10_000,
      stderrTailBytes: 4096,
    });
    const output = { stdoutPath: "/nonexistent/stdout", stderrPath: "/nonexistent/stderr" };
    const attached = await agents.attach({ pid: 1, startTime: undefined, marker: undefined, output }).outcome;
    assert.equal(attached.ok, true);
    assert.equal(attached.endedAt, 123_456);
    const launched = await agents.launch({ prompt: "hi", cwd: "/tmp" }).outcome;
    assert.equal(launched.endedAt, undefined, "our own child's end is when we saw it");
  });
});

describe("an agent on another machine that ended while nothing followed it (§21.3)", () => {
  const JOB = "0b8c2a4e-1f3d-4c5b-9a6e-7d8f9a0b1c2d";
  type RemoteExit = { code: 0; signal: null };

  /** The far end's frames for a follow of a job that finished there at finishedAt, as it would send them. */
  async function farEndFrames(clock: FakeClock, finishedAt: number, exit?: RemoteExit): Promise<RemoteFrame[]> {
    const frames: RemoteFrame[] = [];
    const outcome = () => ({ ok: true, ...(exit ? { exit } : {}) });
    const view = { id: JOB, done: Promise.resolve(), outcome, finishedAt: () => finishedAt };
    const unused = async (): Promise<never> => {
      throw new Error("not asked");
    };
    const side: RemoteSide = {
      start: unused,
      find: async () => view,
      kill: unused,
      check: unused,
      readOutput: () => Buffer.alloc(0),
      stderrTail: async () => "",
      lookUpApproval: () => undefined,
      watchApprovals: () => undefined,
      answer: () => undefined,
      worktree: unused,
      leave: async () => undefined,
    };
    // Open while it answers: a closed input is a local server gone, which gets no end frame.
    const input = new PassThrough();
    input.write(`${JSON.stringify({ op: "follow", job_id: JOB, offset: 0 })}\n`);
    const write = async (line: string): Promise<void> => void frames.push(parseFrame(line.trim()) as RemoteFrame);
    assert.equal(await serveRemote({ input, clock, write }, side), 0);
    input.end();
    return frames;
  }

  test("the far end says how long ago the job ended, when it did not see its agent exit", async () => {
    const clock = new FakeClock();
    const unseen = (await farEndFrames(clock, clock.now() - 7000)).at(-1);
    assert.equal(unseen?.type === "end" && unseen.ended_ms_ago, 7000);
    const seen = (await farEndFrames(clock, clock.now() - 7000, { code: 0, signal: null })).at(-1);
    assert.equal(seen?.type === "end" && seen.ended_ms_ago, undefined, "an exit it saw is as late as the frame");
  });

  test("here, that age is taken on this machine's clock as the agent's end", async () => {
    const dir = freshDir();
    const output = { stdoutPath: path.join(dir, "stdout.jsonl"), stderrPath: path.join(dir, "stderr.log") };
    writeFileSync(output.stdoutPath, "");
    const clock = new FakeClock();
    const end = { type: "end", outcome: { ok: true }, stderr_tail: "", size: 0, ended_ms_ago: 7000 };
    const link: RemoteHostLink = {
      name: "box",
      clock,
      logger: new RecordingLogger(),
      backoffMs: { first: 100, max: 100 },
      open: (_request, onFrame) => {
        for (const line of [{ type: "accepted" }, end]) onFrame(parseFrame(JSON.stringify(line)) as RemoteFrame);
        return { ended: Promise.resolve({ exitCode: 0, signal: null, stderr: "" }), stop: () => undefined };
      },
      kill: async () => ({ signalled: 0, survivors: [] }),
      answer: async () => true,
      describe: () => "ended",
    };
    const exit = await new RemoteAgent(link, { kind: "follow", jobId: JOB }, output, () => undefined).exited;
    assert.equal(exit.unobserved, true);
    assert.equal(exit.endedAt, clock.now() - 7000);
  });
});

const onLinuxOnly = { skip: process.platform !== "linux" && "liveness reads /proc" };
describe("through the built server: an agent that ended while no server ran", onLinuxOnly, () => {
  const servers: ServerProcess[] = [];
  const agents: number[] = [];
  after(() => {
    for (const server of servers) server.dispose();
    for (const pid of agents) if (isAlive(pid)) process.kill(pid, "SIGKILL");
  });

  async function startServer(stateDir: string): Promise<ServerProcess> {
    const server = new ServerProcess({ CLAUDE_DISPATCH_STATE_DIR: stateDir, CLAUDE_DISPATCH_ON_EXIT: "keep" });
    servers.push(server);
    await server.initialize();
    return server;
  }

  const readRecord = (stateDir: string, id: string): Record<string, any> =>
    JSON.parse(readFileSync(path.join(stateDir, "jobs", id, "record.json"), "utf8")) as Record<string, any>;

  test("adopted seconds after it ended: finished_at is when it ended, started_at when it started", async () => {
    const dir = freshDir();
    const [stateDir, cwd, gate, pids] = ["state", "work", "gate", "pids"].map((name) => path.join(dir, name));
    assert.ok(stateDir && cwd && gate && pids);
    mkdirSync(cwd);
    const first = await startServer(stateDir);
    const prompt = `@pid ${pids}\n@wait-file ${gate}\nend alone`;
    const started = await first.callTool("claude_start", { prompt, cwd });
    const id = started.result?.structuredContent?.job_id as string;
    assert.ok(id, JSON.stringify(started));
    await waitFor(() => readPids(pids).length === 1, "the agent to start");
    await agentRecorded(stateDir, id);
    const [agent] = readPids(pids) as [number];
    agents.push(agent);
    const startedAt = readRecord(stateDir, id).started_at as number;
    first.child.kill("SIGKILL");
    await first.exited;

    writeFileSync(gate, "");
    const gateAt = Date.now();
    await waitFor(() => !isAlive(agent), "the agent to finish on its own");
    const endedBy = Date.now();
    // The gap between the agent's end and the next server's start is no part of the job: its end is before that start.
    const secondStartedAt = Date.now();
    const second = await startServer(stateDir);
    const waited = await second.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
    const report = waited.result?.structuredContent as Record<string, any>;
    assert.equal(report.status, "completed");
    const record = readRecord(stateDir, id);
    assert.equal(record.started_at, startedAt, "the start is the one the first server recorded");
    const finishedAt = record.finished_at as number;
    const times = `finished_at ${finishedAt - gateAt} ms after the gate opened, the agent gone ${endedBy - gateAt} ms`;
    assert.ok(finishedAt >= gateAt - 1000 && finishedAt <= endedBy + 1000, times);
    assert.ok(finishedAt < secondStartedAt, `${times}, the next server started ${secondStartedAt - gateAt} ms`);
    const took = `took ${finishedAt - startedAt} ms, the agent ran ${endedBy - startedAt} ms`;
    assert.ok(finishedAt - startedAt <= endedBy - startedAt + 1000, took);
    assert.ok(report.elapsed_s <= Math.ceil((endedBy - startedAt + 1000) / 1000), `elapsed_s ${report.elapsed_s}`);
    await second.shutdown();
  });
});
