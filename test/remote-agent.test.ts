/**
 * Following a job on a remote host (src/hosts/remote/remote-agent.ts) over a scripted channel: a start whose channel
 * is cut before its acceptance comes back is sent again, since a start is idempotent there (PROTOCOL.md §21.3); a
 * host that refuses, or whose transport fails to reach it, is answered at once.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import type { ChildExit } from "../src/agent/host.js";
import type { RemoteFrame, RemoteRequest, StartRequest } from "../src/hosts/remote/protocol.js";
import { RemoteAgent, type RemoteHostLink } from "../src/hosts/remote/remote-agent.js";
import type { SessionEnd } from "../src/hosts/remote/session.js";
import { FakeClock, RecordingLogger } from "./helpers.js";

const JOB = "3a1f0c2e-7b4d-4e5f-8a9b-0c1d2e3f4a5b";
const dirs: string[] = [];
after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A session that brings these frames, then ends so. */
type Script = { frames: object[]; end: SessionEnd };

/** A host whose sessions follow `scripts` in turn; what each was asked. */
function scriptedHost(scripts: Script[], clock: FakeClock): { link: RemoteHostLink; asked: RemoteRequest[] } {
  const asked: RemoteRequest[] = [];
  const link: RemoteHostLink = {
    name: "box",
    clock,
    logger: new RecordingLogger(),
    backoffMs: { first: 10, max: 10 },
    open: (request, onFrame) => {
      asked.push(request);
      const script = scripts.shift() ?? assert.fail("a session more than scripted");
      for (const frame of script.frames) onFrame(frame as RemoteFrame);
      return { ended: Promise.resolve(script.end), stop: () => undefined };
    },
    kill: async () => ({ signalled: 0, survivors: [] }),
    answer: async () => true,
    describe: (closed) => (closed.signal ? `ended by ${closed.signal}` : `exited ${closed.exitCode}`),
  };
  return { link, asked };
}

const START: StartRequest = {
  op: "start",
  job_id: JOB,
  agent: "claude",
  cwd: "/work",
  roots: ["/work"],
  args: [],
  env: {},
  prompt: "hi",
  offset: 0,
};

const ENDED = { type: "end", outcome: { ok: true }, exit: { code: 0, signal: null }, stderr_tail: "", size: 0 };

async function run(scripts: Script[]): Promise<{ exit: ChildExit; asked: RemoteRequest[] }> {
  const dir = mkdtempSync(path.join(tmpdir(), "cd-remote-agent-"));
  dirs.push(dir);
  const output = { stdoutPath: path.join(dir, "stdout.jsonl"), stderrPath: path.join(dir, "stderr.log") };
  writeFileSync(output.stdoutPath, "");
  const clock = new FakeClock();
  const { link, asked } = scriptedHost(scripts, clock);
  const agent = new RemoteAgent(link, { kind: "start", request: START }, output, () => undefined);
  // The backoff between sessions runs on the fake clock.
  let settled = false;
  void agent.exited.then(() => (settled = true));
  while (!settled) await clock.advance(10);
  return { exit: await agent.exited, asked };
}

const cut = { exitCode: null, signal: "SIGKILL", stderr: "" };

test("a start whose channel is killed before its acceptance is sent again, and then followed to its end", async () => {
  const { exit, asked } = await run([
    { frames: [], end: cut },
    { frames: [{ type: "accepted" }, ENDED], end: { exitCode: 0, signal: null, stderr: "" } },
  ]);
  assert.equal(exit.failure, undefined, JSON.stringify(exit));
  assert.equal(exit.exitCode, 0);
  assert.deepEqual(
    asked.map((request) => request.op),
    ["start", "start"],
    "the same start, which the far end makes once",
  );
});

test("cut again and again, the start gives up: HOST_FAILED after three tries", async () => {
  const { exit, asked } = await run([
    { frames: [], end: cut },
    { frames: [], end: cut },
    { frames: [], end: cut },
  ]);
  assert.equal(exit.failure?.code, "HOST_FAILED");
  assert.equal(asked.length, 3);
});

test("a transport that exits, or a host silent past the bound, is HOST_FAILED at once", async () => {
  for (const end of [
    { exitCode: 255, signal: null, stderr: "ssh: connect to host box port 22: Connection refused" },
    { exitCode: null, signal: "SIGKILL", stderr: "", silentMs: 30_000 },
  ]) {
    const { exit, asked } = await run([{ frames: [], end }]);
    assert.equal(exit.failure?.code, "HOST_FAILED", JSON.stringify(end));
    assert.equal(asked.length, 1);
  }
});
