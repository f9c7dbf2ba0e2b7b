/**
 * Permission requests forwarded to the caller (PROTOCOL.md §18), through the
 * handler over a real JobRegistry, a FakeClock, fake agents and the store in
 * memory, in which each test files requests as an agent's approver would:
 * input_required in claude_wait, claude_list, progress and tasks;
 * claude_respond and its races; elicitation (accept, decline, withdrawn);
 * a claude_run whose client cannot be asked. The approver process itself and
 * the real CLI are in approver.test.ts and approvals-real-cli.test.ts.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import type { JsonRpcResponse, RequestId } from "../src/server/jsonrpc.js";
import type { ApprovalRequest } from "../src/store/approvals.js";
import { UNASKABLE_MESSAGE } from "../src/server/approvals.js";
import { handlerHarness, settle, track, type HandlerHarness } from "./helpers.js";

const CWD = "/work/project";

interface ToolResult {
  content: Array<{ type: string; text: string }>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  structuredContent: Record<string, any>;
  isError?: boolean;
}

let nextId = 9000;

async function call(
  h: HandlerHarness,
  method: string,
  params: Record<string, unknown>,
  id: RequestId = (nextId += 1),
): Promise<JsonRpcResponse | null> {
  return h.handle({ jsonrpc: "2.0", id, method, params });
}

function resultOf(response: JsonRpcResponse | null): ToolResult {
  assert.ok(response && "result" in response, `expected a result, got ${JSON.stringify(response)}`);
  return response.result as ToolResult;
}

async function tool(
  h: HandlerHarness,
  name: string,
  args: Record<string, unknown>,
  meta?: Record<string, unknown>,
): Promise<ToolResult> {
  return resultOf(await call(h, "tools/call", { name, arguments: args, ...(meta ? { _meta: meta } : {}) }));
}

async function initialize(h: HandlerHarness, capabilities: Record<string, unknown>): Promise<void> {
  resultOf(
    await call(h, "initialize", {
      protocolVersion: "2025-11-25",
      capabilities,
      clientInfo: { name: "t", version: "1" },
    }),
  );
}

/** What the agent's approver files for a Bash call. */
function ask(h: HandlerHarness, jobId: string, command = "echo hi > out.txt"): ApprovalRequest {
  const now = h.clock.now();
  return h.store.fileApproval(jobId, {
    tool_name: "Bash",
    input: { command, description: "write a file" },
    preview: `Bash · ${command}`,
    asked_at: now,
    expires_at: now + 600_000,
  });
}

async function started(h: HandlerHarness): Promise<string> {
  const result = await tool(h, "claude_start", { prompt: "write a file", cwd: CWD });
  await settle();
  return result.structuredContent.job_id as string;
}

test("a waiting claude_wait returns at once with input_required when the agent asks", async () => {
  const h = handlerHarness();
  const jobId = await started(h);
  const waiting = track(tool(h, "claude_wait", { job_id: jobId, hold_ms: 60_000 }));
  await settle();
  assert.equal(waiting.done, false, "the wait holds while the agent works");
  ask(h, jobId);
  await settle();
  assert.equal(waiting.done, true, "the request ends the wait, without the clock moving");
  const report = (await waiting.promise).structuredContent;
  assert.equal(report.status, "input_required");
  assert.deepEqual(report.pending_approvals, [
    { request_id: "1", tool_name: "Bash", preview: "Bash · echo hi > out.txt", waited_s: 0, expires_in_s: 600 },
  ]);
  assert.match(report.next, /claude_respond with job_id "[^"]+", request_id "1" and decision "allow" or "deny"/);
  // Asked again before anyone answers: at once, the same.
  const again = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 60_000 });
  assert.equal(again.structuredContent.status, "input_required");
  assert.match(again.content[0]?.text ?? "", /request 1: Bash · echo hi > out\.txt/);
});

test(
  "claude_respond allows once; a second answer, an unknown request and a finished job are " + "clear errors",
  async () => {
    const h = handlerHarness();
    const jobId = await started(h);
    ask(h, jobId);
    await settle();
    const allowed = await tool(h, "claude_respond", { job_id: jobId, request_id: "1", decision: "allow" });
    assert.equal(allowed.isError, undefined, allowed.content[0]?.text);
    assert.equal(allowed.structuredContent.status, "answered");
    assert.equal(allowed.structuredContent.decision, "allow");
    assert.equal(allowed.structuredContent.job_status, "running");
    assert.deepEqual(
      h.store.approvals(jobId).map((approval) => [approval.answer?.decision, approval.answer?.by]),
      [["allow", "tool"]],
    );
    const second = await tool(h, "claude_respond", { job_id: jobId, request_id: 1, decision: "deny" });
    assert.equal(second.isError, true);
    assert.match(
      second.content[0]?.text ?? "",
      /^INVALID_ARGUMENT: request 1 of job .* was already answered: allow \(by tool\)/,
    );
    assert.equal(h.store.approvals(jobId)[0]?.answer?.decision, "allow", "the first answer stands");
    const unknown = await tool(h, "claude_respond", { job_id: jobId, request_id: "7", decision: "allow" });
    assert.match(unknown.content[0]?.text ?? "", /^INVALID_ARGUMENT: job .* has no request "7"; none is pending/);
    const bad = await tool(h, "claude_respond", { job_id: jobId, request_id: "x", decision: "maybe" });
    assert.match(bad.content[0]?.text ?? "", /^INVALID_ARGUMENT: "request_id" must be/);
    ask(h, jobId, "rm -rf build");
    await settle();
    h.launcher.last.succeed();
    await settle();
    const late = await tool(h, "claude_respond", { job_id: jobId, request_id: "2", decision: "allow" });
    assert.match(
      late.content[0]?.text ?? "",
      /^INVALID_ARGUMENT: job .* has finished \(completed\): request "2" is no longer pending/,
    );
  },
);

test("the record lists every request and who answered it", async () => {
  const h = handlerHarness();
  const jobId = await started(h);
  ask(h, jobId);
  await settle();
  await tool(h, "claude_respond", { job_id: jobId, request_id: "1", decision: "deny", message: "use a temp file" });
  const record = h.store.read(jobId);
  assert.equal(record?.approvals?.length, 1);
  assert.equal(record?.approvals?.[0]?.decision, "deny");
  assert.equal(record?.approvals?.[0]?.by, "tool");
  assert.equal(record?.approvals?.[0]?.message, "use a temp file");
});

test("claude_list and claude_output show a job that waits for approval", async () => {
  const h = handlerHarness();
  const jobId = await started(h);
  ask(h, jobId);
  await settle();
  const listed = await tool(h, "claude_list", {});
  assert.equal(listed.structuredContent.jobs[0].status, "input_required");
  const page = await tool(h, "claude_output", { job_id: jobId, view: "approvals" });
  assert.equal(page.structuredContent.status, "input_required");
  assert.match(page.structuredContent.text, /request 1 · Bash · pending\n\{\n {2}"command": "echo hi > out\.txt"/);
});

test("a claude_run's progress says that it waits for approval, while its client's form is open", async () => {
  const h = handlerHarness();
  await initialize(h, { elicitation: {} });
  const run = track(tool(h, "claude_run", { prompt: "write a file", cwd: CWD }, { progressToken: "p1" }));
  await settle();
  const jobId = h.jobs.list()[0]?.id ?? "";
  ask(h, jobId);
  await settle();
  await h.clock.advance(500);
  const progress = h.notifications
    .filter((notification) => notification.method === "notifications/progress")
    .map((notification) => String(notification.params?.message));
  assert.match(
    progress.at(-1) ?? "",
    /waits for approval \(request 1\): Bash · echo hi > out\.txt/,
    progress.join("\n"),
  );
  const form = h.requests.at(-1);
  assert.ok(form);
  await h.handle({ jsonrpc: "2.0", id: form.id, result: { action: "accept", content: { decision: "allow" } } });
  await settle();
  assert.deepEqual(
    [h.store.approvals(jobId)[0]?.answer?.decision, h.store.approvals(jobId)[0]?.answer?.by],
    ["allow", "elicitation"],
  );
  h.launcher.last.succeed("written");
  assert.equal((await run.promise).structuredContent.status, "completed");
});

test("with elicitation, the client is asked with a form, and its answer is the request's", async () => {
  const h = handlerHarness();
  await initialize(h, { elicitation: { form: {} } });
  const jobId = await started(h);
  ask(h, jobId);
  await settle();
  const form = h.requests.find((request) => request.method === "elicitation/create");
  assert.ok(form, "an elicitation/create was sent");
  const params = form.params as {
    message: string;
    requestedSchema: { properties: Record<string, { enum?: string[] }>; required: string[] };
  };
  assert.match(params.message, /asks to use Bash:\nBash · echo hi > out\.txt/);
  assert.deepEqual(params.requestedSchema.properties.decision?.enum, ["allow", "deny"]);
  assert.deepEqual(params.requestedSchema.required, ["decision"]);
  assert.equal(
    await h.handle({
      jsonrpc: "2.0",
      id: form.id,
      result: { action: "accept", content: { decision: "deny", message: "not in this repo" } },
    }),
    null,
  );
  await settle();
  const answer = h.store.approvals(jobId)[0]?.answer;
  assert.deepEqual([answer?.decision, answer?.by, answer?.message], ["deny", "elicitation", "not in this repo"]);
  const waited = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
  assert.equal(waited.structuredContent.status, "running");
});

test("a declined form denies; a form answered first by claude_respond is withdrawn", async () => {
  const h = handlerHarness();
  await initialize(h, { elicitation: {} });
  const jobId = await started(h);
  ask(h, jobId);
  await settle();
  const first = h.requests.at(-1);
  assert.ok(first);
  await h.handle({ jsonrpc: "2.0", id: first.id, result: { action: "decline" } });
  await settle();
  assert.deepEqual(
    [h.store.approvals(jobId)[0]?.answer?.decision, h.store.approvals(jobId)[0]?.answer?.by],
    ["deny", "elicitation"],
  );

  ask(h, jobId, "make deploy");
  await settle();
  const second = h.requests.at(-1);
  assert.ok(second && second.id !== first.id);
  await tool(h, "claude_respond", { job_id: jobId, request_id: "2", decision: "allow" });
  await settle();
  const withdrawn = h.notifications.find((notification) => notification.method === "notifications/cancelled");
  assert.equal(withdrawn?.params?.requestId, second.id);
  // The form's late answer changes nothing.
  await h.handle({ jsonrpc: "2.0", id: second.id, result: { action: "accept", content: { decision: "deny" } } });
  await settle();
  assert.deepEqual(
    [h.store.approvals(jobId)[1]?.answer?.decision, h.store.approvals(jobId)[1]?.answer?.by],
    ["allow", "tool"],
  );
});

test(
  "a claude_run whose client cannot be asked is denied at once, and its result says to use " + "claude_start",
  async () => {
    const h = handlerHarness();
    await initialize(h, {});
    const run = track(tool(h, "claude_run", { prompt: "write a file", cwd: CWD }));
    await settle();
    const jobId = h.jobs.list()[0]?.id ?? "";
    ask(h, jobId);
    await settle();
    const answer = h.store.approvals(jobId)[0]?.answer;
    assert.deepEqual([answer?.decision, answer?.by], ["deny", "server"]);
    // What the agent is told: not to retry, since nobody can be asked in this call.
    assert.equal(answer?.message, UNASKABLE_MESSAGE);
    assert.match(answer?.message ?? "", /Approval is not available in this call/);
    assert.equal(h.requests.length, 0, "nothing was asked");
    h.launcher.last.succeed("could not write it");
    const result = await run.promise;
    assert.equal(result.structuredContent.status, "completed");
    assert.match(result.structuredContent.next, /use claude_start, then claude_wait and claude_respond/);
  },
);

test("a claude_start job of a client that cannot be asked waits for an answer", async () => {
  const h = handlerHarness();
  await initialize(h, {});
  const jobId = await started(h);
  ask(h, jobId);
  await settle();
  assert.equal(h.store.approvals(jobId)[0]?.answer, undefined);
  await h.clock.advance(60_000);
  assert.equal(h.store.approvals(jobId)[0]?.answer, undefined, "only the approver's timeout denies it");
});

test("a request nobody answered by its expiry is denied by the job's owner 5 s later, if no approver did", async () => {
  const h = handlerHarness();
  const jobId = await started(h);
  ask(h, jobId);
  await settle();
  await h.clock.advance(600_000 + 4_999);
  assert.equal(h.store.approvals(jobId)[0]?.answer, undefined, "the approver denies at expiry; the owner waits 5 s");
  assert.equal(
    (await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 })).structuredContent.status,
    "input_required",
  );
  await h.clock.advance(1);
  await settle();
  assert.deepEqual(h.store.approvals(jobId)[0]?.answer, { decision: "deny", by: "timeout", at: h.clock.now() });
  const report = (await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 })).structuredContent;
  assert.equal(report.status, "running");
  assert.equal(report.pending_approvals, undefined);

  // An approver that denied at expiry, as it does, is the answer that stands: the owner writes nothing.
  ask(h, jobId, "echo two");
  await settle();
  await h.clock.advance(600_000);
  h.store.answerApproval(jobId, "2", { decision: "deny", by: "timeout", at: h.clock.now() });
  const approverAt = h.clock.now();
  await h.clock.advance(10_000);
  await settle();
  assert.deepEqual(h.store.approvals(jobId)[1]?.answer, { decision: "deny", by: "timeout", at: approverAt });
});

test(
  "a request that waited before the client connected is asked once it declares elicitation, " + "and only once",
  async () => {
    const h = handlerHarness();
    const jobId = await started(h);
    ask(h, jobId);
    await settle();
    assert.equal(h.requests.length, 0, "no client has declared elicitation yet");
    await initialize(h, { elicitation: {} });
    await settle();
    assert.deepEqual(
      h.requests.map((request) => request.method),
      ["elicitation/create"],
    );
    await initialize(h, { elicitation: {} });
    await settle();
    assert.equal(h.requests.length, 1, "the same request is not asked again");
  },
);

test("a 2025-11-25 task shows input_required and says so in a status notification", async () => {
  const h = handlerHarness();
  await initialize(h, {});
  const created = resultOf(
    await call(h, "tools/call", { name: "claude_start", arguments: { prompt: "write", cwd: CWD }, task: {} }),
  ) as unknown as { task: { taskId: string } };
  await settle();
  const taskId = created.task.taskId;
  ask(h, taskId);
  await settle();
  const task = resultOf(await call(h, "tasks/get", { taskId })) as unknown as { status: string };
  assert.equal(task.status, "input_required");
  const statuses = h.notifications
    .filter((notification) => notification.method === "notifications/tasks/status")
    .map((notification) => notification.params?.status);
  assert.deepEqual(statuses, ["input_required"]);
  await tool(h, "claude_respond", { job_id: taskId, request_id: "1", decision: "allow" });
  await settle();
  const after = resultOf(await call(h, "tasks/get", { taskId })) as unknown as { status: string };
  assert.equal(after.status, "working");
});

test("with approvals off, nothing is watched or announced", async () => {
  const h = handlerHarness({}, { approvals: false });
  await initialize(h, { elicitation: {} });
  const jobId = await started(h);
  ask(h, jobId);
  await settle();
  assert.equal(h.requests.length, 0);
  const waited = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
  assert.equal(waited.structuredContent.status, "running");
});
