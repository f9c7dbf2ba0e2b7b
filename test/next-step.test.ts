/**
 * The next step in structuredContent (PROTOCOL.md §5.5). Claude Code hands its
 * model only structuredContent when a result has both, so every report that
 * leaves something to do says what in `next`. These tests read nothing else:
 * they parse the call out of `next`, check its arguments are the real ones,
 * and make that call.
 */
import { memoryPersistence } from "../src/jobs/memory.js";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { JobRegistry } from "../src/jobs/registry.js";
import { isJobId } from "../src/store/records.js";
import { TOOL_NAMES, type ToolName } from "../src/tools/definitions.js";
import {
  FakeClock,
  FakeLauncher,
  RecordingLogger,
  handlerHarness,
  jobFinished,
  track,
  type HandlerHarness,
} from "./helpers.js";
import { bounded } from "./support/events.js";
import { callTool, request, startJob } from "./support/tool-calls.js";
import { homeOnly } from "./host-fakes.js";

const CWD = "/work/project";
const SESSION = "8f01635f-202a-449c-ab8a-05f75520788e";

type Structured = Record<string, unknown>;

interface ToolResult {
  text: string;
  structured: Structured;
  isError: boolean;
}

/** The harness of test/helpers.ts, but with real UUID job ids, as the server makes them. */
function uuidHarness(maxResultChars = 20_000, maxRunning = 1000): HandlerHarness {
  const clock = new FakeClock();
  const launcher = new FakeLauncher();
  const logger = new RecordingLogger();
  const jobs = new JobRegistry({
    launch: launcher.launch,
    clock,
    newId: () => randomUUID(),
    logger,
    retentionMs: 600_000,
    maxFinishedJobs: 1000,
    finishedTranscriptChars: 10_000_000,
    maxRunning,
    ...homeOnly(),
    persistence: memoryPersistence(),
  });
  return { ...handlerHarness({ jobs, clock, logger, maxResultChars }), jobs, clock, launcher, logger };
}

const schemas = new Map<
  string,
  { properties: Record<string, { type?: string; enum?: unknown[] }>; required: string[] }
>();

async function outputSchema(
  h: HandlerHarness,
  name: string,
): Promise<{ properties: Record<string, { type?: string; enum?: unknown[] }>; required: string[] }> {
  if (schemas.size === 0) {
    type Listed = { result: { tools: Array<{ name: string; outputSchema: never }> } };
    const listed = (await h.handle(request("tools/list"))) as Listed;
    for (const definition of listed.result.tools) schemas.set(definition.name, definition.outputSchema);
  }
  const schema = schemas.get(name);
  assert.ok(schema, `no outputSchema for ${name}`);
  return schema;
}

const JSON_TYPES: Record<string, (value: unknown) => boolean> = {
  string: (value) => typeof value === "string",
  integer: (value) => Number.isInteger(value),
  number: (value) => typeof value === "number",
  boolean: (value) => typeof value === "boolean",
  object: (value) => typeof value === "object" && value !== null && !Array.isArray(value),
  array: (value) => Array.isArray(value),
};

/**
 * What an SDK client checks of structuredContent, one level deep: every field
 * declared, of its type, required ones present.
 */
async function checkAgainstSchema(h: HandlerHarness, name: string, structured: Structured): Promise<void> {
  const schema = await outputSchema(h, name);
  for (const key of schema.required) assert.ok(key in structured, `${name}: required ${key} missing`);
  for (const [key, value] of Object.entries(structured)) {
    const property = schema.properties[key];
    assert.ok(property, `${name}: structuredContent.${key} is not declared in the outputSchema`);
    if (property.type)
      assert.ok(
        JSON_TYPES[property.type]?.(value),
        `${name}: ${key} should be ${property.type}, got ${JSON.stringify(value)}`,
      );
    if (property.enum)
      assert.ok(property.enum.includes(value), `${name}: ${key} ${JSON.stringify(value)} not in its enum`);
  }
}

async function tool(h: HandlerHarness, name: string, args: Structured): Promise<ToolResult> {
  const response = await callTool(h, name, args);
  assert.ok(response && "result" in response, `${name}: expected a result, got ${JSON.stringify(response)}`);
  const result = response.result as { content: Array<{ text: string }>; structuredContent: Structured; isError?: true };
  await checkAgainstSchema(h, name, result.structuredContent);
  return {
    text: result.content[0]?.text ?? "",
    structured: result.structuredContent,
    isError: result.isError === true,
  };
}

interface ParsedCall {
  tool: ToolName;
  args: Record<string, string | number>;
}

/** Every tool call `next` names, in order, with the arguments written after each: what a model would read out of it. */
function callsIn(next: unknown): ParsedCall[] {
  assert.equal(typeof next, "string", "structuredContent.next should be a sentence");
  const sentence = next as string;
  const names = [...sentence.matchAll(/\bclaude_[a-z]+\b/g)];
  return names.map((match, index) => {
    const name = match[0] as ToolName;
    assert.ok(TOOL_NAMES.includes(name), `${name} is not a tool`);
    const start = (match.index ?? 0) + name.length;
    const segment = sentence.slice(start, names[index + 1]?.index ?? sentence.length);
    const args: Record<string, string | number> = {};
    for (const [, key, value] of segment.matchAll(/\b(job_id|session_id|view) "([^"]*)"/g))
      if (key && value !== undefined) args[key] = value;
    const offset = /\boffset (\d+)/.exec(segment)?.[1];
    if (offset !== undefined) args.offset = Number(offset);
    return { tool: name, args };
  });
}

function firstCall(structured: Structured): ParsedCall {
  const [call] = callsIn(structured.next);
  assert.ok(call, `next names no tool: ${JSON.stringify(structured.next)}`);
  return call;
}

/** Makes the call a model would make from `next` alone. */
function follow(h: HandlerHarness, call: ParsedCall): Promise<ToolResult> {
  return tool(h, call.tool, call.tool === "claude_wait" ? { ...call.args, hold_ms: 0 } : call.args);
}

/** A started job's id, which is a UUID, as the server makes them. */
async function startUuidJob(h: HandlerHarness, prompt = "Fix the tests"): Promise<string> {
  const id = await startJob(h, { prompt, cwd: CWD });
  assert.ok(isJobId(id), `job_id should be a UUID, got ${JSON.stringify(id)}`);
  return id;
}

test("a running job: next names claude_wait with its job_id, from claude_start and from claude_wait", async () => {
  const h = uuidHarness();
  const started = await tool(h, "claude_start", { prompt: "Fix the tests", cwd: CWD });
  const id = started.structured.job_id as string;
  assert.ok(isJobId(id), `job_id should be a UUID, got ${JSON.stringify(id)}`);
  assert.equal(started.structured.status, "running");
  assert.deepEqual(firstCall(started.structured), { tool: "claude_wait", args: { job_id: id } });

  const waited = await tool(h, "claude_wait", { job_id: id, hold_ms: 0 });
  assert.equal(waited.structured.status, "running");
  assert.deepEqual(
    callsIn(waited.structured.next).map((call) => call.tool),
    ["claude_wait", "claude_kill"],
  );
  assert.deepEqual(firstCall(waited.structured).args, { job_id: id });
  assert.ok(waited.text.includes(waited.structured.next as string), "the text gives the same hint");

  const followed = await follow(h, firstCall(waited.structured));
  assert.equal(followed.structured.job_id, id);
});

test("a queued job: next names claude_wait with its job_id", async () => {
  const h = uuidHarness(20_000, 1);
  await startUuidJob(h, "hog the only slot");
  const started = await tool(h, "claude_start", { prompt: "wait your turn", cwd: CWD });
  const id = started.structured.job_id as string;
  assert.equal(started.structured.status, "queued");
  assert.deepEqual(firstCall(started.structured), { tool: "claude_wait", args: { job_id: id } });

  const waited = await tool(h, "claude_wait", { job_id: id, hold_ms: 0 });
  assert.equal(waited.structured.status, "queued");
  assert.deepEqual(firstCall(waited.structured), { tool: "claude_wait", args: { job_id: id } });
  assert.ok(waited.text.includes(waited.structured.next as string), "the text gives the same hint");

  // Its empty result page says to wait, too.
  const page = await tool(h, "claude_output", { job_id: id });
  assert.deepEqual(firstCall(page.structured), { tool: "claude_wait", args: { job_id: id } });
});

test(
  "a truncated result: next names claude_output with the job_id and the offset where it was cut, and following it " +
    "reads the rest",
  async () => {
    const h = uuidHarness(100);
    const id = await startUuidJob(h);
    const whole = Array.from({ length: 250 }, (_, index) => String.fromCharCode(65 + (index % 26))).join("");
    h.launcher.last.succeed(whole, SESSION);
    await jobFinished(h, id);

    const waited = await tool(h, "claude_wait", { job_id: id, hold_ms: 0 });
    assert.equal(waited.structured.status, "completed");
    assert.equal(waited.structured.truncated, true);
    const call = firstCall(waited.structured);
    assert.deepEqual(call, {
      tool: "claude_output",
      args: { job_id: id, offset: (waited.structured.result as string).length },
    });
    assert.equal(call.args.offset, 100);
    assert.ok(waited.text.includes(waited.structured.next as string), "the text gives the same hint");

    // Page on, from next alone, until nothing is left.
    let read = waited.structured.result as string;
    let page = await follow(h, call);
    for (;;) {
      read += page.structured.text as string;
      if (page.structured.next_offset === undefined) break;
      const onward = firstCall(page.structured);
      assert.deepEqual(onward, {
        tool: "claude_output",
        args: { job_id: id, offset: page.structured.next_offset as number },
      });
      assert.ok(page.text.includes(page.structured.next as string), "the page's text gives the same hint");
      page = await follow(h, onward);
    }
    assert.equal(read, whole);
    assert.equal(page.structured.next, undefined, "the last page has no next step");
  },
);

test("a transcript page with more to read: next keeps view transcript", async () => {
  const h = uuidHarness();
  const id = await startUuidJob(h);
  for (let turn = 1; turn <= 5; turn += 1)
    h.launcher.last.report({ turns: turn, lastActivity: "text" }, `assistant: turn ${turn} of the work`);
  const page = await tool(h, "claude_output", { job_id: id, view: "transcript", limit: 20 });
  assert.equal(typeof page.structured.next_offset, "number");
  assert.deepEqual(firstCall(page.structured), {
    tool: "claude_output",
    args: { job_id: id, view: "transcript", offset: page.structured.next_offset as number },
  });
  const onward = await follow(h, firstCall(page.structured));
  assert.equal(onward.structured.view, "transcript");
  assert.equal(onward.structured.offset, page.structured.next_offset);
});

test("a completed job that fits needs no next step", async () => {
  const h = uuidHarness();
  const id = await startUuidJob(h);
  h.launcher.last.succeed("all done", SESSION);
  await jobFinished(h, id);
  const waited = await tool(h, "claude_wait", { job_id: id, hold_ms: 0 });
  assert.equal(waited.structured.status, "completed");
  assert.equal(waited.structured.next, undefined);
  assert.equal((await tool(h, "claude_output", { job_id: id })).structured.next, undefined);
});

test(
  "a failed job: next names claude_output with its job_id and the transcript, then claude_start with " +
    "its session_id",
  async () => {
    const h = uuidHarness();
    const id = await startUuidJob(h);
    h.launcher.last.report({ sessionId: SESSION, turns: 1, lastActivity: "text" }, "assistant: trying");
    h.launcher.last.finish({
      ok: false,
      code: "AGENT_ERROR",
      detail: "API Error: 500",
      result: { text: "API Error: 500", sessionId: SESSION },
    });
    await jobFinished(h, id);

    const waited = await tool(h, "claude_wait", { job_id: id, hold_ms: 0 });
    assert.equal(waited.structured.status, "failed");
    assert.equal(waited.isError, true);
    const [look, resume] = callsIn(waited.structured.next);
    assert.deepEqual(look, { tool: "claude_output", args: { job_id: id, view: "transcript" } });
    assert.deepEqual(resume, { tool: "claude_start", args: { session_id: SESSION } });
    const transcript = await follow(h, look as ParsedCall);
    assert.match(transcript.structured.text as string, /assistant: trying/);
  },
);

test("a lost job: next names claude_output with its job_id", async () => {
  const h = uuidHarness();
  const id = await startUuidJob(h);
  h.launcher.last.finish({ ok: false, code: "AGENT_LOST", detail: "the agent ended without a result" });
  await jobFinished(h, id);
  const waited = await tool(h, "claude_wait", { job_id: id, hold_ms: 0 });
  assert.equal(waited.structured.status, "lost");
  assert.deepEqual(firstCall(waited.structured), { tool: "claude_output", args: { job_id: id, view: "transcript" } });
});

test("a claude_run that timed out: next says to go on with claude_start and the session it saw", async () => {
  const h = uuidHarness();
  const run = track(tool(h, "claude_run", { prompt: "slow", cwd: CWD, timeout_ms: 1000 }));
  const agent = await h.launcher.launched(1);
  agent.report({ sessionId: SESSION, turns: 2, lastActivity: "tool", lastTool: "Bash · npm test" });
  await h.clock.advance(1000);
  const result = await run.promise;
  assert.equal(result.structured.status, "failed");
  assert.equal((result.structured.error as { code: string }).code, "TIMEOUT");
  const id = result.structured.job_id;
  const [look, resume] = callsIn(result.structured.next);
  assert.deepEqual(look, { tool: "claude_output", args: { job_id: id as string, view: "transcript" } });
  assert.deepEqual(resume, { tool: "claude_start", args: { session_id: SESSION } });
});

test("a claude_run killed from elsewhere is its failure, and says where to look", async () => {
  const h = uuidHarness();
  const run = track(tool(h, "claude_run", { prompt: "doomed", cwd: CWD }));
  await h.launcher.launched(1);
  const listed = (await tool(h, "claude_list", {})).structured.jobs as Array<{ job_id: string }>;
  const jobId = listed[0]?.job_id as string;
  const killed = await tool(h, "claude_kill", { job_id: jobId });
  assert.equal(killed.structured.status, "killed");
  const result = await bounded("the run to answer", run.promise);
  assert.equal((result.structured.error as { code: string }).code, "KILLED");
  assert.deepEqual(firstCall(result.structured), {
    tool: "claude_output",
    args: { job_id: jobId, view: "transcript" },
  });
});

test("JOB_NOT_FOUND: next names claude_list, and following it lists the jobs", async () => {
  const h = uuidHarness();
  const id = await startUuidJob(h);
  const missing = randomUUID();
  const result = await tool(h, "claude_wait", { job_id: missing, hold_ms: 0 });
  assert.equal(result.isError, true);
  assert.equal((result.structured.error as { code: string }).code, "JOB_NOT_FOUND");
  assert.equal(result.structured.job_id, missing, "a well-formed id is echoed");
  assert.deepEqual(callsIn(result.structured.next), [{ tool: "claude_list", args: {} }]);
  const listed = await follow(h, firstCall(result.structured));
  assert.deepEqual(
    (listed.structured.jobs as Array<{ job_id: string }>).map((job) => job.job_id),
    [id],
  );
});

test("a failure echoes job_id only when it is a well-formed job id", async () => {
  const h = uuidHarness();
  for (const malformed of ["nope", "x".repeat(1 << 20), ` ${SESSION} `, SESSION.toUpperCase()]) {
    for (const name of ["claude_wait", "claude_kill", "claude_output"]) {
      const result = await tool(h, name, { job_id: malformed });
      assert.equal(result.isError, true);
      assert.ok(
        !("job_id" in result.structured),
        `${name} echoed a malformed job_id of ${malformed.length} characters`,
      );
    }
  }
});

test("INVALID_ARGUMENT: next names the argument to fix", async () => {
  const h = uuidHarness();
  const id = await startUuidJob(h);
  const result = await tool(h, "claude_wait", { job_id: id, hold_ms: -1 });
  assert.equal((result.structured.error as { code: string }).code, "INVALID_ARGUMENT");
  assert.equal(result.structured.job_id, id);
  assert.match(result.structured.next as string, /^Fix "hold_ms" /);
  const unknown = await tool(h, "claude_list", { verbose: true });
  assert.match(unknown.structured.next as string, /^Call the same tool again without the unknown argument/);
});

test("SHUTTING_DOWN: next says to retry later", async () => {
  const h = uuidHarness();
  await h.jobs.shutdown();
  const result = await tool(h, "claude_start", { prompt: "too late", cwd: CWD });
  assert.equal((result.structured.error as { code: string }).code, "SHUTTING_DOWN");
  assert.match(result.structured.next as string, /call the same tool again in a moment/i);
});

test("every output schema declares next", async () => {
  const h = uuidHarness();
  for (const name of TOOL_NAMES) {
    const schema = await outputSchema(h, name);
    assert.equal(schema.properties.next?.type, "string", `${name}'s outputSchema does not declare next`);
  }
});
