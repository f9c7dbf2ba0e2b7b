/**
 * Messages a model and a person can act on (issue 26, item 5), in process: a unique start of a job id names
 * its job in every tool, as on the command line; JOB_NOT_FOUND says what is true; a request that never existed
 * is not "no longer pending"; the log uses the tools' codes.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { loadConfig, offeredAgents } from "../src/config.js";
import { machineOf } from "./host-fakes.js";
import { handlerHarness, settle } from "./helpers.js";
import { callTool } from "./support/tool-calls.js";

const SESSION_FOR_HINT = "8f01635f-202a-449c-ab8a-05f75520788e";

const A = "3e1e0a00-0000-4000-8000-000000000001";
const B = "3e1e0b00-0000-4000-8000-000000000002";

async function call(h: ReturnType<typeof handlerHarness>, name: string, args: Record<string, unknown>) {
  const response = await h.handle({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } });
  return (
    response as {
      result: { isError?: boolean; content: Array<{ text: string }>; structuredContent: Record<string, any> };
    }
  ).result;
}

test("a unique start of a job id, 8 hex digits or more, names its job in the tools", async () => {
  const h = handlerHarness();
  h.jobs.start({ prompt: "a", cwd: "/w" }, "start", undefined, A);
  h.jobs.start({ prompt: "b", cwd: "/w" }, "start", undefined, B);
  await settle();
  const waited = await call(h, "claude_wait", { job_id: "3e1e0a00", hold_ms: 0 });
  assert.equal(waited.isError, undefined, waited.content[0]?.text);
  assert.equal(waited.structuredContent.job_id, A, "the report names the whole id");
  const killed = await call(h, "claude_kill", { job_id: B.slice(0, 13) });
  assert.equal(killed.structuredContent.job_id, B);
  const short = await call(h, "claude_wait", { job_id: "3e1e0a0", hold_ms: 0 });
  assert.equal(short.isError, true);
  assert.match(short.content[0]?.text ?? "", /^JOB_NOT_FOUND: /, "under 8 digits, not taken for a prefix");
});

test("a start that begins two ids is INVALID_ARGUMENT asking for more of it", async () => {
  const h = handlerHarness();
  const first = "77770000-0000-4000-8000-00000000000a";
  const second = "77770000-1111-4000-8000-00000000000b";
  h.jobs.start({ prompt: "a", cwd: "/w" }, "start", undefined, first);
  h.jobs.start({ prompt: "b", cwd: "/w" }, "start", undefined, second);
  await settle();
  const result = await call(h, "claude_wait", { job_id: "77770000", hold_ms: 0 });
  assert.equal(result.isError, true);
  assert.equal(result.content[0]?.text, `INVALID_ARGUMENT: "job_id" "77770000" starts 2 job ids: give more of it`);
});

test(
  "JOB_NOT_FOUND says to check the id and how long finished jobs are kept, never that another " + "server serves it",
  async () => {
    const h = handlerHarness();
    const result = await call(h, "claude_wait", { job_id: "1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9", hold_ms: 0 });
    assert.equal(
      result.content[0]?.text,
      'JOB_NOT_FOUND: no job with id "1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9" in this state directory: check the id ' +
        "(claude_list lists the jobs); a finished job is forgotten 10 minutes after it ends",
    );
  },
);

test("claude_respond to a finished job: a request it never filed is not 'no longer pending'", async () => {
  const h = handlerHarness();
  h.jobs.start({ prompt: "a", cwd: "/w" }, "start", undefined, A);
  await settle();
  h.launcher.last.finish({ ok: true, result: { text: "done" } });
  await settle();
  const result = await call(h, "claude_respond", { job_id: A, request_id: "7", decision: "deny" });
  assert.equal(result.isError, true);
  assert.equal(result.content[0]?.text, `INVALID_ARGUMENT: job ${A} has no request "7"`);
});

test("the log names a job's end with the tools' code and grammar", async () => {
  const h = handlerHarness();
  h.jobs.start({ prompt: "a", cwd: "/w" }, "start", undefined, A);
  await settle();
  await call(h, "claude_kill", { job_id: A });
  assert.ok(h.logger.lines.includes(`info job ${A} killed (KILLED)`), h.logger.lines.join("\n"));
  assert.ok(!h.logger.lines.some((line) => line.includes("AGENT_EXITED")));
  assert.ok(!h.logger.lines.some((line) => line.includes("pid none")));
});

test("a missing argument is 'required'; an unknown one is met with only what this server offers", async () => {
  const h = handlerHarness();
  const missing = await call(h, "claude_respond", { job_id: A, decision: "allow" });
  assert.equal(missing.content[0]?.text, 'INVALID_ARGUMENT: "request_id" is required');
  const action = await call(h, "claude_worktree", { job_id: A });
  assert.equal(action.content[0]?.text, 'INVALID_ARGUMENT: "action" is required');
  const unknown = await call(h, "claude_run", { prompt: "hi", cwd: "/w", timeout: 5 });
  const text = unknown.content[0]?.text ?? "";
  assert.match(
    text,
    /^INVALID_ARGUMENT: unknown argument "timeout"; expected only prompt, cwd, session_id, timeout_ms, /,
  );
  // Claude Code alone, and no hosts: neither "agent" nor "host" is a choice here.
  assert.doesNotMatch(text, /\bagent\b|\bhost\b/);
  // Both are still accepted, as earlier versions took them.
  const named = await call(h, "claude_start", { prompt: "hi", cwd: "/w", agent: "claude" });
  assert.equal(named.isError, undefined, named.content[0]?.text);
});

test("a failed job's next step names its own agent, not Claude Code (§7)", async () => {
  // Its program found, so the call makes a job (a missing one is refused before any exists, §7.5).
  const env = { CLAUDE_DISPATCH_AGENTS: "claude,codex", CLAUDE_DISPATCH_CODEX_BIN: process.execPath };
  const config = loadConfig(env, machineOf());
  const policy = { ...config.policy, roots: undefined, agents: offeredAgents(config, {}, machineOf()) };
  const h = handlerHarness({ policy });
  const started = callTool(h, "claude_run", { prompt: "hi", cwd: "/w", agent: "codex", session_id: SESSION_FOR_HINT });
  await h.launcher.launched(1);
  h.launcher.last.finish({ ok: false, code: "SESSION_NOT_FOUND", detail: "codex has no session like that" });
  const response = (await started) as { result: { structuredContent: { next?: string } } };
  const next = response.result.structuredContent.next ?? "";
  assert.match(next, /codex does not know that session/);
  assert.doesNotMatch(next, /Claude Code/);
});
