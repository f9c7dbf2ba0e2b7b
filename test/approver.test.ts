/**
 * The approver (PROTOCOL.md §18) as Claude Code runs it: the built program in
 * its approver mode, on stdio, fed the frames the pinned CLI was seen to send
 * (test/fixtures/permission-prompt.json). Each request is filed in the job's
 * folder and answered there; the answer text is what the CLI reads.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import { StateStore } from "../src/store/state-store.js";
import { Approver, answerOf, createRunningJob, frame, requestFiled } from "./approver-process.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-approver-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

let jobs = 0;
function jobInStore(): { store: StateStore; id: string; dir: string } {
  const dir = mkdtempSync(path.join(scratch, "state-"));
  const store = new StateStore(dir, { uid: process.getuid?.(), randomName: () => crypto.randomUUID() });
  store.open();
  const id = `00000000-0000-4000-8000-${String((jobs += 1)).padStart(12, "0")}`;
  createRunningJob(store, id, scratch);
  return { store, id, dir };
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
  assert.deepEqual(answerOf(await second), {
    behavior: "deny",
    message: "The person supervising this job denied this tool call.",
  });
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
  assert.deepEqual(
    [store.approval(id, "1")?.answer?.by, store.approval(id, "1")?.answer?.message],
    ["server", "The agent withdrew this request."],
  );
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
  const bad = await approver.send({
    jsonrpc: "2.0",
    id: 7,
    method: "tools/call",
    params: { name: "approve", arguments: { input: {} } },
  });
  assert.equal(bad.result.isError, true);
  const other = await approver.send({
    jsonrpc: "2.0",
    id: 8,
    method: "tools/call",
    params: { name: "claude_run", arguments: {} },
  });
  assert.equal(other.result.isError, true);
  approver.child.kill("SIGINT");
  assert.equal(await approver.exited, 0);
  const usage = new Approver(["--state-dir=/x", id]);
  approvers.push(usage);
  assert.equal(await usage.exited, 2);
});
