/**
 * What permission requests guarantee at their edges (PROTOCOL.md §18, issue 24 items 4–6):
 * an answer present before its request was filed is never taken, and the record claims no
 * answerer it cannot know; a job's requests cost the server linear work, and a report lists a
 * bounded number of them; what the agent put in a request reaches no reader with its escape
 * sequences, controls or bidirectional overrides. The store, the handler over a JobRegistry and
 * a store in memory, the CLI in process, and the built approver and server.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, watch, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { permissionPreview } from "../src/runtimes/claude/permission-prompt.js";
import type { ApprovalRequest } from "../src/store/approvals.js";
import type { MemoryStore } from "../src/store/memory-store.js";
import type { JobRecord } from "../src/store/records.js";
import { StateStore } from "../src/store/state-store.js";
import { Approver, answerOf, frame, requestFiled } from "./approver-process.js";
import { newStateIn, runCliCaptured } from "./cli-harness.js";
import { handlerHarness, settle, type HandlerHarness } from "./helpers.js";
import { ServerProcess } from "./server-process.js";

const CWD = "/work/project";
const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-approval-guarantees-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Structured = Record<string, any>;
interface ToolResult {
  content: Array<{ type: string; text: string }>;
  structuredContent: Structured;
  isError?: boolean;
}

let nextId = 1;
async function tool(h: HandlerHarness, name: string, args: Record<string, unknown>): Promise<ToolResult> {
  const response = await h.handle({
    jsonrpc: "2.0",
    id: (nextId += 1),
    method: "tools/call",
    params: { name, arguments: args },
  });
  assert.ok(response && "result" in response, JSON.stringify(response));
  return response.result as ToolResult;
}

async function started(h: HandlerHarness): Promise<string> {
  const result = await tool(h, "claude_start", { prompt: "work", cwd: CWD });
  await settle();
  return result.structuredContent.job_id as string;
}

/** What an agent's approver files for a Bash call. */
function ask(
  store: Pick<MemoryStore, "fileApproval">,
  jobId: string,
  command: string,
  now: number,
  toolName = "Bash",
): ApprovalRequest {
  const preview = `${toolName} · ${command}`;
  return store.fileApproval(jobId, {
    tool_name: toolName,
    input: { command },
    preview,
    asked_at: now,
    expires_at: now + 600_000,
  });
}

/** A running job of this process's, in a fresh state directory as a server leaves it. */
function runningJob(): { store: StateStore; id: string; dir: string; stateDir: string } {
  const { dir: stateDir, store } = newStateIn(scratch);
  const id = randomUUID();
  const owner = { pid: process.pid };
  const base = {
    format: 1,
    runtime: "claude",
    host: "local",
    id,
    kind: "start",
    cwd: scratch,
    prompt_preview: "x",
    options: {},
    submitted_at: Date.now(),
    generation: 0,
  } as const;
  store.create({ ...base, status: "running", owner, agent: owner }, "x");
  return { store, id, dir: store.jobDir(id), stateDir };
}

/** Resolves once file is no longer there, woken by the folder's notifications; stops looking when `unless` settles. */
function gone(file: string, unless: Promise<unknown>): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (existsSync(file)) return;
      watcher.close();
      resolve();
    };
    const watcher = watch(path.dirname(file), check);
    void unless.finally(() => watcher.close());
    check();
  });
}

describe(
  "item 4: an answer counts only for the request it answers, and the record claims no more " + "than is known",
  () => {
    test("an answer file written before its request, or naming another request, is no answer to it", () => {
      const { store, id, dir } = runningJob();
      writeFileSync(
        path.join(dir, "approval.1.answer.json"),
        `${JSON.stringify({ decision: "allow", by: "cli", at: 1 })}\n`,
      );
      const first = ask(store, id, "rm -rf build", 1);
      assert.equal(typeof first.nonce, "string", "a request names an unguessable nonce");
      assert.equal(store.approval(id, "1")?.answer, undefined, "the planted allow is not an answer");
      assert.equal(store.approvals(id)[0]?.answer, undefined);
      const second = ask(store, id, "git push", 2);
      // An answer of the first request, copied: it names the first request's nonce, not the second's.
      assert.equal(
        store.answerApproval(id, "1", { decision: "allow", by: "tool", at: 3 })?.won,
        undefined,
        "the planted file is in the way",
      );
      assert.notEqual(first.nonce, second.nonce);
      rmSync(path.join(dir, "approval.1.answer.json"));
      assert.equal(store.answerApproval(id, "1", { decision: "allow", by: "tool", at: 3 })?.won, true);
      copyFileSync(path.join(dir, "approval.1.answer.json"), path.join(dir, "approval.2.answer.json"));
      assert.deepEqual(store.approval(id, "1")?.answer, { decision: "allow", by: "tool", at: 3 });
      assert.equal(store.approval(id, "2")?.answer, undefined);
    });

    test("a request and an answer of an earlier version, without nonces, still load", () => {
      const { store, id, dir } = runningJob();
      const request = {
        id: "1",
        tool_name: "Bash",
        input: { command: "ls" },
        preview: "Bash · ls",
        asked_at: 1,
        expires_at: 2,
      };
      writeFileSync(path.join(dir, "approval.1.json"), `${JSON.stringify(request)}\n`);
      writeFileSync(
        path.join(dir, "approval.1.answer.json"),
        `${JSON.stringify({ decision: "deny", by: "timeout", at: 2 })}\n`,
      );
      assert.deepEqual(store.approvals(id), [{ request, answer: { decision: "deny", by: "timeout", at: 2 } }]);
    });

    test(
      "the record says by whom only for answers this server gave; what another process wrote " + "is claimed_by",
      async () => {
        const h = handlerHarness();
        const jobId = await started(h);
        ask(h.store, jobId, "npm test", h.clock.now());
        ask(h.store, jobId, "npm publish", h.clock.now());
        await settle();
        await tool(h, "claude_respond", { job_id: jobId, request_id: "1", decision: "allow" });
        // Another process (the CLI, or anything running as the user) writes an answer file saying who it is.
        h.store.answerApproval(jobId, "2", { decision: "allow", by: "cli", at: h.clock.now() });
        await settle();
        const record = h.store.read(jobId);
        assert.deepEqual(
          record?.approvals?.map(({ id, decision, by, claimed_by }) => ({ id, decision, by, claimed_by })),
          [
            { id: "1", decision: "allow", by: "tool", claimed_by: undefined },
            { id: "2", decision: "allow", by: undefined, claimed_by: "cli" },
          ],
        );
        const page = await tool(h, "claude_output", { job_id: jobId, view: "approvals" });
        assert.match(page.structuredContent.text, /request 1 · Bash · allow \(by tool\)/);
        assert.match(page.structuredContent.text, /request 2 · Bash · allow \(its answer file says by cli\)/);
        const again = await tool(h, "claude_respond", { job_id: jobId, request_id: "2", decision: "deny" });
        const refused =
          /^INVALID_ARGUMENT: request 2 of job \S+ was already answered: allow \(its answer file says by cli\)/;
        assert.match(again.content[0]?.text ?? "", refused);
      },
    );

    describe("through the built approver and server", () => {
      const approvers: Approver[] = [];
      const servers: ServerProcess[] = [];
      after(async () => {
        for (const approver of approvers) approver.child.kill("SIGKILL");
        for (const server of servers) await server.shutdown();
      });

      test(
        "a planted allow is never taken: the request is asked, and the person's answer is what " + "the agent gets",
        async () => {
          const server = new ServerProcess();
          servers.push(server);
          await server.initialize();
          const started = await server.callTool("claude_start", { prompt: "@sleep 60000", cwd: scratch });
          const jobId = started.result.structuredContent.job_id as string;
          const dir = path.join(server.stateDir, "jobs", jobId);
          // The agent's shell plants an allow for the request it is about to make.
          writeFileSync(
            path.join(dir, "approval.1.answer.json"),
            `${JSON.stringify({ decision: "allow", by: "cli", at: Date.now() })}\n`,
          );
          const approver = new Approver([`--state-dir=${server.stateDir}`, "--wait-ms=600000", jobId]);
          approvers.push(approver);
          await approver.handshake();
          const answered = approver.send({ ...frame("tools/call"), id: 21 });
          const waited = server.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 });
          const first = await Promise.race([
            answered.then((response) => `the approver answered ${JSON.stringify(answerOf(response))}`),
            waited.then(() => "the server asked"),
          ]);
          assert.equal(first, "the server asked", "the planted answer was taken");
          const report = (await waited).result.structuredContent;
          assert.equal(report.status, "input_required", JSON.stringify(report));
          assert.equal(report.pending_approvals[0].request_id, "1");
          // Until the approver has removed the planted file, an answer is refused with "try again" (§18).
          await gone(path.join(dir, "approval.1.answer.json"), answered);
          const denied = await server.callTool("claude_respond", {
            job_id: jobId,
            request_id: "1",
            decision: "deny",
            message: "not now",
          });
          assert.equal(denied.result.isError, undefined, denied.result.content[0].text);
          assert.deepEqual(answerOf(await answered), { behavior: "deny", message: "not now" });

          // An earlier request's answer, copied into the place of the next one's
          // before it is filed: not its answer either.
          copyFileSync(path.join(dir, "approval.1.answer.json"), path.join(dir, "approval.2.answer.json"));
          const second = approver.send({ ...frame("tools/call"), id: 22 });
          const waitedAgain = (await server.callTool("claude_wait", { job_id: jobId, hold_ms: 30_000 })).result
            .structuredContent;
          assert.equal(waitedAgain.status, "input_required", JSON.stringify(waitedAgain));
          assert.equal(waitedAgain.pending_approvals[0].request_id, "2");
          await gone(path.join(dir, "approval.2.answer.json"), second);
          await server.callTool("claude_respond", { job_id: jobId, request_id: "2", decision: "allow" });
          assert.equal(answerOf(await second).behavior, "allow");
          const record = JSON.parse(readFileSync(path.join(dir, "record.json"), "utf8")) as JobRecord;
          assert.deepEqual(
            record.approvals?.map(({ decision, by }) => [decision, by]),
            [
              ["deny", "tool"],
              ["allow", "tool"],
            ],
          );
          await server.callTool("claude_kill", { job_id: jobId });
        },
      );

      test(
        "the approver takes only an answer naming its request, and clears a planted one " + "out of the way",
        async () => {
          const { store, id, dir } = runningJob();
          const approver = new Approver([`--state-dir=${store.root}`, "--wait-ms=600000", id]);
          approvers.push(approver);
          await approver.handshake();
          const guessed = { decision: "allow", by: "tool", at: Date.now(), nonce: "guessed" };
          writeFileSync(path.join(dir, "approval.1.answer.json"), `${JSON.stringify(guessed)}\n`);
          const answered = approver.send({ ...frame("tools/call"), id: 5 });
          await requestFiled(store, id, "1");
          const first = await Promise.race([
            gone(path.join(dir, "approval.1.answer.json"), answered).then(() => "the approver cleared it"),
            answered.then((response) => `the approver answered ${JSON.stringify(answerOf(response))}`),
          ]);
          assert.equal(first, "the approver cleared it", "the planted answer was taken");
          // Answered as claude_respond or the CLI would, now that the planted file is out of the way.
          const result = store.answerApproval(id, "1", { decision: "deny", by: "cli", at: Date.now(), message: "no" });
          assert.equal(result?.won, true);
          assert.deepEqual(answerOf(await answered), { behavior: "deny", message: "no" });
          assert.equal(existsSync(path.join(dir, "approval.1.answer.json")), true);
        },
      );
    });
  },
);

describe("item 6: linear work, and a bounded report", () => {
  /** Counts the request and answer files the server reads, and the bytes of the records it writes. */
  function counted(h: HandlerHarness): { reads: number; recordBytes: number } {
    const counts = { reads: 0, recordBytes: 0 };
    const store = h.store as unknown as Record<string, (...args: unknown[]) => unknown>;
    for (const name of ["approvals", "approval", "lookUpApproval"]) {
      const original = store[name]?.bind(h.store);
      if (!original) continue;
      store[name] = (...args: unknown[]) => {
        const found = original(...args);
        counts.reads += Array.isArray(found) ? Math.max(1, found.length) : 1;
        return found;
      };
    }
    const write = h.store.write.bind(h.store);
    h.store.write = (record) => {
      counts.recordBytes += JSON.stringify(record).length;
      return write(record);
    };
    return counts;
  }

  async function workFor(requests: number): Promise<{ reads: number; recordBytes: number }> {
    const h = handlerHarness();
    const jobId = await started(h);
    const counts = counted(h);
    for (let n = 1; n <= requests; n += 1) {
      ask(h.store, jobId, `echo ${n} > out.txt`, h.clock.now());
      if (n % 2 === 0) await tool(h, "claude_respond", { job_id: jobId, request_id: String(n), decision: "allow" });
      else h.store.answerApproval(jobId, String(n), { decision: "deny", by: "cli", at: h.clock.now() });
    }
    await settle();
    assert.equal(h.jobs.get(jobId)?.approvals.length, requests);
    return counts;
  }

  test("a job that files N requests, answered one by one, costs the server O(N) reads and record bytes", async () => {
    const small = await workFor(50);
    const large = await workFor(200);
    const readRatio = large.reads / small.reads;
    const byteRatio = large.recordBytes / small.recordBytes;
    // Four times the requests: about 4 when linear, about 16 when quadratic.
    assert.ok(readRatio < 6, `reads grew ${readRatio.toFixed(1)}× (${small.reads} → ${large.reads})`);
    assert.ok(
      byteRatio < 6,
      `record bytes grew ${byteRatio.toFixed(1)}× (${small.recordBytes} → ${large.recordBytes})`,
    );
    assert.ok(large.reads <= 10 * 200, `${large.reads} reads for 200 requests`);
  });

  test(
    "a running job's record lists its latest 20 requests, so each write costs the same; the " + "final record all",
    async () => {
      const h = handlerHarness();
      const jobId = await started(h);
      for (let n = 1; n <= 30; n += 1) {
        ask(h.store, jobId, `echo ${n}`, h.clock.now());
        await tool(h, "claude_respond", { job_id: jobId, request_id: String(n), decision: "allow" });
      }
      const ids = (): string[] | undefined => h.store.read(jobId)?.approvals?.map((approval) => approval.id);
      assert.deepEqual(
        ids(),
        Array.from({ length: 20 }, (_, index) => String(index + 11)),
      );
      h.launcher.last.succeed("done");
      await settle();
      assert.equal(h.store.read(jobId)?.status, "completed");
      assert.deepEqual(
        ids(),
        Array.from({ length: 30 }, (_, index) => String(index + 1)),
      );
    },
  );

  test(
    "a report lists at most 5 pending requests, counts them all, and points at the approvals view " + "for the rest",
    async () => {
      const h = handlerHarness();
      const jobId = await started(h);
      for (let n = 1; n <= 12; n += 1) ask(h.store, jobId, `echo ${n} > out.txt`, h.clock.now());
      await settle();
      const waited = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
      const report = waited.structuredContent;
      assert.equal(report.status, "input_required");
      assert.deepEqual(
        report.pending_approvals.map((pending: { request_id: string }) => pending.request_id),
        ["1", "2", "3", "4", "5"],
      );
      assert.equal(report.pending_total, 12);
      assert.match(report.next, /12 requests wait/);
      assert.match(report.next, /claude_output with job_id "[^"]+" and view "approvals"/);
      assert.match(waited.content[0]?.text ?? "", /request 5: Bash · echo 5 > out\.txt[^\n]*\n {2}… and 7 more/);
      const responded = await tool(h, "claude_respond", { job_id: jobId, request_id: "1", decision: "allow" });
      assert.equal(responded.structuredContent.pending_approvals.length, 5);
      assert.equal(responded.structuredContent.pending_total, 11);
      const page = await tool(h, "claude_output", { job_id: jobId, view: "approvals" });
      for (let n = 1; n <= 12; n += 1) assert.match(page.structuredContent.text, new RegExp(`request ${n} · Bash · `));
    },
  );
});

describe("item 5: what the agent put in a request reaches no reader with escapes, controls or bidi overrides", () => {
  const HOSTILE =
    "echo \u001b[31mred\u001b[0m \u202eevil\u202c \u0007bell\r\u009b2J \u001b]0;title\u0007done > out.txt";
  const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

  /** Every string in a value, keys included, free of escape sequences and unsafe characters. */
  function assertClean(value: unknown, where: string): void {
    if (typeof value === "string") assert.doesNotMatch(value, UNSAFE, `${where}: ${JSON.stringify(value)}`);
    else if (Array.isArray(value)) value.forEach((item, index) => assertClean(item, `${where}[${index}]`));
    else if (value !== null && typeof value === "object") {
      for (const [key, item] of Object.entries(value)) assertClean(item, `${where}.${key}`);
    }
  }

  test("the approver's preview of a tool call is clean", () => {
    const preview = permissionPreview({ toolName: "Bash", input: { command: HOSTILE } });
    assertClean(preview, "preview");
    assert.match(preview, /^Bash · echo red /);
  });

  test("reports, the form, the approvals view and claude_respond show a hostile request cleaned", async () => {
    const h = handlerHarness();
    const params = {
      protocolVersion: "2025-11-25",
      capabilities: { elicitation: {} },
      clientInfo: { name: "t", version: "1" },
    };
    const initialized = await h.handle({ jsonrpc: "2.0", id: "init", method: "initialize", params });
    assert.ok(initialized && "result" in initialized);
    const jobId = await started(h);
    // As a request file planted, or filed by an earlier version, could hold it: nothing cleaned yet.
    ask(h.store, jobId, HOSTILE, h.clock.now(), "Ba\u001b[8msh\u202e");
    await settle();
    const waited = await tool(h, "claude_wait", { job_id: jobId, hold_ms: 0 });
    assert.equal(waited.structuredContent.status, "input_required");
    assertClean(waited, "claude_wait");
    assertClean(
      h.requests.map((request) => request.params),
      "the elicitation form",
    );
    assert.ok(h.requests.length > 0, "the client was asked");
    const page = await tool(h, "claude_output", { job_id: jobId, view: "approvals" });
    assertClean(page, "the approvals view");
    const listed = await tool(h, "claude_list", {});
    assertClean(listed, "claude_list");
    const answered = await tool(h, "claude_respond", {
      job_id: jobId,
      request_id: "1",
      decision: "deny",
      message: "no \u001b[2J\u202e",
    });
    assertClean(answered, "claude_respond");
    const answeredPage = await tool(h, "claude_output", { job_id: jobId, view: "approvals" });
    assertClean(answeredPage, "the approvals view, answered");
    assertClean(h.logger.lines, "the log");
  });

  test("claude-dispatch approve and deny print a hostile request cleaned", async () => {
    const { store, id, stateDir: dir } = runningJob();
    const now = Date.now();
    ask(store, id, HOSTILE, now);
    ask(store, id, HOSTILE, now);
    const unnamed = await runCliCaptured(["approve", id], { stateDir: dir });
    assert.equal(unnamed.code, 1);
    assertClean(unnamed, "approve with two pending");
    const approved = await runCliCaptured(["approve", id, "1"], { stateDir: dir });
    assert.equal(approved.code, 0, approved.stderr);
    assertClean(approved, "approve");
    const denied = await runCliCaptured(["deny", id, "2", "--message", "no \u202eway\u001b[0m"], { stateDir: dir });
    assert.equal(denied.code, 0, denied.stderr);
    assertClean(denied, "deny");
  });
});
