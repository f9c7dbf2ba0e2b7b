/**
 * The approver (PROTOCOL.md §18) as Claude Code runs it: the built program in
 * its approver mode, on stdio, fed the frames the pinned CLI was seen to send
 * (test/fixtures/permission-prompt.json). Each request is filed in the job's
 * folder and answered there; the answer text is what the CLI reads.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, watch } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import { StateStore } from "../src/store/state-store.js";
import type { JobRecord } from "../src/store/records.js";
import { minimalEnvironment, SERVER_MAIN } from "./server-process.js";

const FIXTURE = JSON.parse(readFileSync(new URL("./fixtures/permission-prompt.json", import.meta.url), "utf8")) as { frames: Array<Record<string, any>> };
const frame = (method: string): Record<string, any> => structuredClone(FIXTURE.frames.find((candidate) => candidate.method === method) ?? assert.fail(`no ${method} in the fixture`));

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-approver-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

let jobs = 0;
function jobInStore(): { store: StateStore; id: string; dir: string } {
  const dir = mkdtempSync(path.join(scratch, "state-"));
  const store = new StateStore(dir, { uid: process.getuid?.(), randomName: () => crypto.randomUUID() });
  store.open();
  const id = `00000000-0000-4000-8000-${String((jobs += 1)).padStart(12, "0")}`;
  const record: JobRecord = { format: 1, id, kind: "start", cwd: scratch, prompt_preview: "x", options: {}, status: "running", submitted_at: Date.now(), owner: { pid: process.pid }, generation: 0 };
  store.create(record, "x");
  return { store, id, dir };
}

class Approver {
  readonly child: ChildProcessWithoutNullStreams;
  private buffer = "";
  private readonly waiting = new Map<string, (message: Record<string, any>) => void>();
  readonly exited: Promise<number | null>;

  constructor(args: string[]) {
    this.child = spawn(process.execPath, [SERVER_MAIN, "approver", ...args], { env: minimalEnvironment(), stdio: ["pipe", "pipe", "pipe"] });
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk: string) => {
      this.buffer += chunk;
      for (let newline = this.buffer.indexOf("\n"); newline >= 0; newline = this.buffer.indexOf("\n")) {
        const message = JSON.parse(this.buffer.slice(0, newline)) as Record<string, any>;
        this.buffer = this.buffer.slice(newline + 1);
        this.waiting.get(JSON.stringify(message.id))?.(message);
      }
    });
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
  }

  send(message: Record<string, unknown>): Promise<Record<string, any>> {
    const answered = new Promise<Record<string, any>>((resolve) => this.waiting.set(JSON.stringify(message.id), resolve));
    this.child.stdin.write(`${JSON.stringify(message)}\n`);
    return answered;
  }

  notify(message: Record<string, unknown>): void {
    this.child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  /** The CLI's own handshake, as recorded. */
  async handshake(): Promise<void> {
    const discover = await this.send(frame("server/discover"));
    assert.equal(discover.error?.code, -32601, "the CLI falls back to initialize on -32601");
    const init = await this.send(frame("initialize"));
    assert.equal(init.result.protocolVersion, "2025-11-25");
    this.notify(frame("notifications/initialized"));
    const tools = await this.send(frame("tools/list"));
    assert.deepEqual(tools.result.tools.map((tool: { name: string }) => tool.name), ["approve"]);
  }
}

const approvers: Approver[] = [];
after(() => {
  for (const approver of approvers) approver.child.kill("SIGKILL");
});

function start(dir: string, id: string, waitMs = 600_000): Approver {
  const approver = new Approver([`--state-dir=${dir}`, `--wait-ms=${waitMs}`, id]);
  approvers.push(approver);
  return approver;
}

/** Resolves once the job's folder has request `n` on file. */
function requestFiled(store: StateStore, id: string, n: string): Promise<void> {
  return new Promise((resolve) => {
    const watcher = watch(store.jobDir(id), () => {
      if (store.approval(id, n)) {
        watcher.close();
        resolve();
      }
    });
    if (store.approval(id, n)) {
      watcher.close();
      resolve();
    }
  });
}

const answerOf = (response: Record<string, any>): Record<string, unknown> => JSON.parse(response.result.content[0].text);

test("the recorded call is filed with its whole input; an allow answers with the input unchanged", async () => {
  const { store, id, dir } = jobInStore();
  const approver = start(dir, id);
  await approver.handshake();
  const call = frame("tools/call");
  const answered = approver.send(call);
  await requestFiled(store, id, "1");
  const filed = store.approval(id, "1");
  assert.equal(filed?.request.tool_name, "Bash");
  assert.deepEqual(filed?.request.input, call.params.arguments.input);
  assert.equal(filed?.request.tool_use_id, call.params.arguments.tool_use_id);
  assert.equal(filed?.request.preview, "Bash · echo hi > out.txt");
  assert.equal((filed?.request.expires_at ?? 0) - (filed?.request.asked_at ?? 0), 600_000);
  assert.equal(filed?.answer, undefined);
  store.answerApproval(id, "1", { decision: "allow", by: "tool", at: Date.now() });
  assert.deepEqual(answerOf(await answered), { behavior: "allow", updatedInput: call.params.arguments.input });
});

test("a denial carries its message; without one, a sentence saying who denied", async () => {
  const { store, id, dir } = jobInStore();
  const approver = start(dir, id);
  await approver.handshake();
  const first = approver.send({ ...frame("tools/call"), id: 10 });
  await requestFiled(store, id, "1");
  store.answerApproval(id, "1", { decision: "deny", by: "cli", at: Date.now(), message: "use a temp file" });
  assert.deepEqual(answerOf(await first), { behavior: "deny", message: "use a temp file" });
  const second = approver.send({ ...frame("tools/call"), id: 11 });
  await requestFiled(store, id, "2");
  store.answerApproval(id, "2", { decision: "deny", by: "tool", at: Date.now() });
  assert.deepEqual(answerOf(await second), { behavior: "deny", message: "The person supervising this job denied this tool call." });
});

test("unanswered, a request is denied at the timeout, and the denial is on file", async () => {
  const { store, id, dir } = jobInStore();
  const approver = start(dir, id, 1000);
  await approver.handshake();
  const answer = answerOf(await approver.send(frame("tools/call")));
  assert.equal(answer.behavior, "deny");
  assert.match(String(answer.message), /No one answered this permission request within 1 seconds, so it was denied/);
  assert.equal(store.approval(id, "1")?.answer?.by, "timeout");
});

test("a call the CLI withdraws is denied on file, so nobody is asked about it any longer", async () => {
  const { store, id, dir } = jobInStore();
  const approver = start(dir, id);
  await approver.handshake();
  const call = { ...frame("tools/call"), id: 42 };
  const answered = approver.send(call);
  await requestFiled(store, id, "1");
  approver.notify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 42 } });
  assert.equal(answerOf(await answered).behavior, "deny");
  assert.deepEqual([store.approval(id, "1")?.answer?.by, store.approval(id, "1")?.answer?.message], ["server", "The agent withdrew this request."]);
});

test("a job folder that is not there is denied at once, filing nothing", async () => {
  const { dir } = jobInStore();
  const approver = start(dir, "00000000-0000-4000-8000-999999999999");
  await approver.handshake();
  const answer = answerOf(await approver.send(frame("tools/call")));
  assert.equal(answer.behavior, "deny");
  assert.match(String(answer.message), /approvals cannot be filed/);
});

test("malformed arguments are a tool error; bad argv exits 2; SIGINT (the CLI's way to end it) exits 0", async () => {
  const { id, dir } = jobInStore();
  const approver = start(dir, id);
  await approver.handshake();
  const bad = await approver.send({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "approve", arguments: { input: {} } } });
  assert.equal(bad.result.isError, true);
  const other = await approver.send({ jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "claude_run", arguments: {} } });
  assert.equal(other.result.isError, true);
  approver.child.kill("SIGINT");
  assert.equal(await approver.exited, 0);
  const usage = new Approver(["--state-dir=/x", id]);
  approvers.push(usage);
  assert.equal(await usage.exited, 2);
});
