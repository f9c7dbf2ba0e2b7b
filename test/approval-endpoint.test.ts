/**
 * The approval endpoint (PROTOCOL.md §18, src/approver/endpoint.ts): every job's approver over HTTP on
 * 127.0.0.1, as Claude Code reaches it. Only the job's token is heard; a tool call is answered on an event
 * stream that names its request, and a stream cut by the holder is resumed at the next holder by that name.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import { approvalFilesOf, createApprover } from "../src/approver/approver.js";
import { ApprovalEndpoint, RESUME_AFTER_MS, tokenFor } from "../src/approver/endpoint.js";
import { StateStore } from "../src/store/state-store.js";
import { createRunningJob } from "./approver-process.js";
import { FakeClock, RecordingLogger, settle } from "./helpers.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-endpoint-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const SECRET = "a".repeat(64);
const JOB = "00000000-0000-4000-8000-000000000001";

function storeWithJob(): StateStore {
  const store = new StateStore(mkdtempSync(path.join(scratch, "state-")), {
    uid: process.getuid?.(),
    randomName: () => crypto.randomUUID(),
  });
  store.open();
  createRunningJob(store, JOB, scratch);
  return store;
}

const endpoints: ApprovalEndpoint[] = [];
after(async () => {
  for (const endpoint of endpoints) await endpoint.close();
});

function endpointOn(store: StateStore, clock = new FakeClock()): ApprovalEndpoint {
  const logger = new RecordingLogger();
  const approver = createApprover({ jobId: JOB, files: approvalFilesOf(store, JOB), clock, logger, waitMs: 600_000 });
  const endpoint = new ApprovalEndpoint({
    secret: SECRET,
    clock,
    logger,
    approverFor: (jobId) => (jobId === JOB ? approver : undefined),
  });
  endpoints.push(endpoint);
  return endpoint;
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One HTTP exchange with the endpoint; `onData` sees the body as it comes. */
function exchange(
  port: number,
  options: { method?: string; path?: string; headers?: Record<string, string>; body?: unknown },
  onData?: (soFar: string, request: http.ClientRequest) => void,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: "127.0.0.1",
        port,
        method: options.method ?? "POST",
        path: options.path ?? `/jobs/${JOB}`,
        headers: {
          authorization: `Bearer ${tokenFor(SECRET, JOB)}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...options.headers,
        },
      },
      (response) => {
        let body = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          body += chunk;
          onData?.(body, request);
        });
        response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
        response.on("error", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
      },
    );
    request.on("error", reject);
    request.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

const call = {
  jsonrpc: "2.0",
  id: 7,
  method: "tools/call",
  params: { name: "approve", arguments: { tool_name: "Bash", input: { command: "echo hi > out.txt" } } },
};

/** The events of a stream body: each one's id and data. */
function events(body: string): Array<{ id?: string; data?: string; retry?: string }> {
  return body
    .split("\n\n")
    .filter((block) => block.trim() !== "" && !block.startsWith(":"))
    .map((block) =>
      Object.fromEntries(block.split("\n").map((line) => [line.split(": ")[0], line.slice(line.indexOf(": ") + 2)])),
    );
}

test("only the job's own token, from no browser, through our own Host, is heard", async () => {
  const store = storeWithJob();
  const endpoint = endpointOn(store);
  const port = (await endpoint.listen(0)) as number;
  const ping = { jsonrpc: "2.0", id: 1, method: "ping" };
  assert.equal((await exchange(port, { body: ping })).status, 200);
  assert.equal((await exchange(port, { body: ping, headers: { authorization: "Bearer nope" } })).status, 401);
  const other = "00000000-0000-4000-8000-000000000002";
  const theirs = { authorization: `Bearer ${tokenFor(SECRET, other)}` };
  assert.equal((await exchange(port, { body: ping, path: `/jobs/${other}`, headers: theirs })).status, 404);
  assert.equal((await exchange(port, { body: ping, headers: { origin: "http://evil.example" } })).status, 403);
  assert.equal((await exchange(port, { body: ping, headers: { host: "evil.example" } })).status, 403);
  assert.equal((await exchange(port, { method: "GET" })).status, 405);
  assert.equal((await exchange(port, { method: "DELETE" })).status, 405);
  assert.equal((await exchange(port, { path: "/jobs/../x", body: ping })).status, 404);
  const initialized = await exchange(port, {
    body: { jsonrpc: "2.0", id: 2, method: "initialize", params: { protocolVersion: "2025-11-25" } },
  });
  assert.equal(JSON.parse(initialized.body).result.protocolVersion, "2025-11-25");
  assert.equal((await exchange(port, { body: { jsonrpc: "2.0", method: "notifications/initialized" } })).status, 202);
  assert.equal((await exchange(port, { body: "not json" })).status, 400);
});

test("a tool call is answered on a stream that names its request; the answer is the job's file", async () => {
  const store = storeWithJob();
  const endpoint = endpointOn(store);
  const port = (await endpoint.listen(0)) as number;
  let answered = false;
  const reply = await exchange(port, { body: call }, (soFar) => {
    if (answered || events(soFar).length === 0) return;
    answered = true;
    store.answerApproval(JOB, "1", { decision: "allow", by: "cli", at: Date.now() });
  });
  assert.equal(reply.headers["content-type"], "text/event-stream");
  const [primer, response] = events(reply.body);
  assert.equal(primer?.retry, String(RESUME_AFTER_MS));
  assert.ok(primer?.id, "the first event names the call");
  const answer = JSON.parse(response?.data ?? "{}");
  assert.equal(answer.id, 7);
  assert.deepEqual(JSON.parse(answer.result.content[0].text), {
    behavior: "allow",
    updatedInput: { command: "echo hi > out.txt" },
  });
  assert.equal(store.approval(JOB, "1")?.request.tool_name, "Bash");
});

test("a stream the holder cut is resumed at the next holder, on the same port, by the name it gave", async () => {
  const store = storeWithJob();
  const first = endpointOn(store);
  const port = (await first.listen(0)) as number;
  let token: string | undefined;
  await exchange(port, { body: call }, (soFar) => {
    token ??= events(soFar)[0]?.id;
    if (token) void first.close();
  });
  assert.ok(token);
  // The holder is gone; the answer is given meanwhile, as claude_respond would on another server.
  store.answerApproval(JOB, "1", { decision: "deny", by: "tool", at: Date.now(), message: "not now" });
  const next = endpointOn(store);
  assert.equal(await next.listen(port), port);
  const resumed = await exchange(port, { method: "GET", headers: { "last-event-id": token } });
  const response = events(resumed.body).find((event) => event.data?.startsWith("{"));
  const answer = JSON.parse(response?.data ?? "{}");
  assert.equal(answer.id, 7);
  assert.deepEqual(JSON.parse(answer.result.content[0].text), { behavior: "deny", message: "not now" });
  const forged = await exchange(port, { method: "GET", headers: { "last-event-id": `${token}x` } });
  assert.equal(forged.status, 404);
});

test("a stream the agent cut is withdrawn unless it comes back: the request is denied, by the server", async () => {
  const store = storeWithJob();
  const clock = new FakeClock();
  const endpoint = endpointOn(store, clock);
  const port = (await endpoint.listen(0)) as number;
  await exchange(port, { body: call }, (soFar, request) => {
    if (events(soFar).length > 0) request.destroy();
  }).catch(() => undefined);
  // The endpoint hears of the cut as an I/O event of its own: time moves on until the withdrawal it then sets fires.
  for (let round = 0; round < 50 && !store.approval(JOB, "1")?.answer; round += 1) {
    await settle();
    await clock.advance(RESUME_AFTER_MS * 3);
  }
  const answer = store.approval(JOB, "1")?.answer;
  assert.deepEqual([answer?.decision, answer?.by], ["deny", "server"]);
});

test("a port another process holds is reported in use, not taken", async () => {
  const store = storeWithJob();
  const holder = endpointOn(store);
  const port = (await holder.listen(0)) as number;
  assert.equal(await endpointOn(store).listen(port), "in use");
});
