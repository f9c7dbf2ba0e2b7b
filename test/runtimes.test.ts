/**
 * The runtime seam (PROTOCOL.md §7): each runtime declares what it is, one list names them, and what every runtime
 * shares is written once: the reader scaffold (agent/json-lines.ts), the end without a result (agent/ending.ts),
 * and the approver's dispatch to the permission prompts of whichever runtime asks (§18).
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { endedWithoutResult, NO_RESULT_EVENT } from "../src/agent/ending.js";
import type { ChildExit } from "../src/agent/host.js";
import { JsonLinesReader } from "../src/agent/json-lines.js";
import type { PermissionPrompts, ReaderOptions } from "../src/agent/runtime.js";
import { createApprover, type ApprovalFiles } from "../src/approver/approver.js";
import { FakeClock, RecordingLogger } from "./helpers.js";
import type { ApprovalRequest } from "../src/store/approvals.js";
import { runtimeFor, sessionKeepers, sessionStore } from "../src/runtimes/all.js";
import { claudeConfigDir, claudeSessionFolder } from "../src/runtimes/claude/index.js";
import { AGENT_NAMES, PERMISSION_PROMPTS, RUNTIMES } from "../src/runtimes/index.js";

/* ------------------------------------------------------------------ *
 * What each runtime declares
 * ------------------------------------------------------------------ */

test("each runtime declares its program setting, its modes in its own words and its policy settings", () => {
  assert.deepEqual(AGENT_NAMES, ["claude", "codex", "gemini"]);
  for (const runtime of RUNTIMES) {
    const upper = runtime.name.toUpperCase();
    assert.equal(runtime.program.setting, `CLAUDE_DISPATCH_${upper}_BIN`, runtime.name);
    assert.equal(runtime.program.defaultBin, runtime.name);
    assert.match(runtime.program.install, /^install /);
    assert.ok(runtime.dangerousModes.length > 0, `${runtime.name} names the modes an operator must allow`);
    assert.ok(
      runtime.dangerousModes.every((mode) => runtime.permissionModes.includes(mode)),
      runtime.name,
    );
    assert.match(runtime.policySettings.modes, /^CLAUDE_DISPATCH_([A-Z]+_)?PERMISSION_MODES$/);
  }
  const settings = RUNTIMES.flatMap((runtime) => [runtime.program.setting, ...Object.values(runtime.policySettings)]);
  assert.equal(new Set(settings).size, settings.length, "no two runtimes share a setting");
});

test("the whole runtime of each name carries the traits it declared, so the two lists name the same runtimes", () => {
  for (const traits of RUNTIMES) {
    const whole = runtimeFor(traits.name, "/opt/bin/agent");
    assert.equal(whole.name, traits.name);
    assert.deepEqual(whole.permissionModes, traits.permissionModes);
    assert.deepEqual(whole.policySettings, traits.policySettings);
    assert.equal(whole.permissionPrompts, traits.permissionPrompts);
    assert.equal(whole.invocation({ prompt: "x", cwd: "/w" }).command, "/opt/bin/agent");
    assert.equal(runtimeFor(traits.name).invocation({ prompt: "x", cwd: "/w" }).command, traits.program.defaultBin);
  }
});

test("optional capabilities: one runtime lists its sessions, and forwarded prompts have one tool each", () => {
  assert.deepEqual(
    sessionKeepers().map((runtime) => runtime.name),
    ["claude"],
  );
  assert.deepEqual(
    PERMISSION_PROMPTS.map((prompts) => prompts.tool.name),
    ["approve"],
  );
  const names = PERMISSION_PROMPTS.map((prompts) => prompts.tool.name);
  assert.equal(new Set(names).size, names.length, "the approver tells the runtimes apart by their tool");
});

test("the sessions capability reads the store where the CLI keeps it, and says what to set when it cannot tell", () => {
  const env = { CLAUDE_CONFIG_DIR: "/cfg" };
  const store = sessionStore(env, undefined);
  assert.equal(store.folderOf("/no/such/dir"), claudeSessionFolder(claudeConfigDir(env, ""), "/no/such/dir"));
  assert.deepEqual(store.list("/no/such/dir", 5), [], "a missing folder is no sessions");
  assert.throws(
    () => sessionStore({}, undefined),
    /INVALID_ARGUMENT|no home directory to find ~\/\.claude in; set CLAUDE_CONFIG_DIR/,
  );
});

/* ------------------------------------------------------------------ *
 * The reader scaffold
 * ------------------------------------------------------------------ */

/** A runtime's reader is its event handling: here, "turn" events and a "done" one. */
class FourthReader extends JsonLinesReader {
  done = false;
  protected onEvent(event: Record<string, unknown>): void {
    if (event.type === "turn") this.summary.turns += 1;
    if (event.type === "done") this.done = true;
    this.transcript.append(`[${String(event.type)}]`);
  }
  hasResult(): boolean {
    return this.done;
  }
  forgetResult(): void {}
}

function fourthReader(options: Partial<ReaderOptions> = {}): {
  reader: FourthReader;
  malformed: string[];
  overflows: number[];
} {
  const malformed: string[] = [];
  const overflows: number[] = [];
  const reader = new FourthReader({
    maxLineBytes: 64,
    transcriptChars: 10_000,
    onOverflow: () => overflows.push(1),
    onMalformedLine: (line) => malformed.push(line),
    ...options,
  });
  return { reader, malformed, overflows };
}

test("the scaffold splits lines, counts events, keeps the output's start and tells listeners once a line", () => {
  const { reader, malformed } = fourthReader();
  let heard = 0;
  const stop = reader.onActivity(() => (heard += 1));
  reader.push(Buffer.from('{"type":"turn"}\nnot json\n[1,2]\n{"type":'));
  reader.push(Buffer.from('"turn"}\n{"type":"done"}'));
  assert.equal(reader.hasResult(), false, "the last line waits for the end");
  reader.end();
  stop();
  assert.deepEqual(malformed, ["not json", "[1,2]"], "one JSON object a line; anything else is reported and skipped");
  assert.deepEqual(reader.live(), { turns: 2, events: 3 });
  assert.equal(heard, 3);
  assert.equal(reader.hasResult(), true);
  assert.ok(reader.printedStart().startsWith('{"type":"turn"}\nnot json'));
  assert.match(reader.transcript.page(0, 1000).text, /\[turn\]\n\[turn\]\n\[done\]/);
});

test("the scaffold stops the agent once however many lines pass the bound, and reads on after them", () => {
  const { reader, overflows } = fourthReader();
  reader.push(Buffer.from(`{"type":"${"x".repeat(100)}"}\n{"type":"turn"}\n{"type":"${"y".repeat(100)}"}\n`));
  reader.end();
  assert.equal(reader.overflow, true);
  assert.deepEqual(overflows, [1]);
  assert.equal(reader.live().turns, 1);
});

/* ------------------------------------------------------------------ *
 * The end without a result
 * ------------------------------------------------------------------ */

const exit = (overrides: Partial<ChildExit>): ChildExit => ({
  exitCode: 0,
  signal: null,
  stderrTail: "",
  ...overrides,
});

test("an end the output says nothing about reads alike for every runtime, in its own words", () => {
  const fourth = { agent: "fourth", printed: "" };
  const full = endedWithoutResult(exit({ exitCode: 1 }), { dir: "/state/jobs/j", freeBytes: 10 }, fourth);
  assert.ok(!full.ok && full.code === "STATE_ERROR" && full.detail.includes("10 bytes free in /state/jobs/j"));
  const lost = endedWithoutResult(exit({ unobserved: true, exitCode: null, stderrTail: "bye" }), undefined, fourth);
  assert.deepEqual(lost, {
    ok: false,
    code: "AGENT_LOST",
    detail:
      "fourth ended without printing a result; it was started by an earlier server, so its exit status is unknown; " +
      "its stderr ends: bye",
  });
  const known = endedWithoutResult(exit({ exitCode: 41 }), undefined, {
    ...fourth,
    knownExits: { 41: "fourth cannot sign in" },
  });
  assert.deepEqual(known, { ok: false, code: "AGENT_ERROR", detail: "fourth cannot sign in" });
  const killed = endedWithoutResult(exit({ exitCode: null, signal: "SIGKILL" }), undefined, fourth);
  assert.deepEqual(killed, {
    ok: false,
    code: "AGENT_EXITED",
    detail: "fourth was killed by SIGKILL and printed no result",
  });
  const missing = { ...NO_RESULT_EVENT, printed: "printed no answer" };
  const bad = endedWithoutResult(exit({}), undefined, { agent: "fourth", printed: "hello", missing });
  assert.deepEqual(bad, { ok: false, code: "BAD_OUTPUT", detail: "fourth printed no answer: hello" });
  assert.deepEqual(endedWithoutResult(exit({}), undefined, fourth), {
    ok: false,
    code: "BAD_OUTPUT",
    detail: "fourth exited 0 and printed nothing",
  });
});

/* ------------------------------------------------------------------ *
 * The approver asks the runtimes for their permission prompts
 * ------------------------------------------------------------------ */

/** Another CLI's side of the approver's protocol: a tool of its own, and its own answer text. */
const FOURTH_PROMPTS: PermissionPrompts = {
  tool: { name: "fourth_permission", description: "asks for the fourth CLI", inputSchema: { type: "object" } },
  expected: "{action}",
  read: (args) => {
    const action = (args as { action?: unknown } | undefined)?.action;
    return typeof action === "string" ? { toolName: "shell", input: { action } } : undefined;
  },
  preview: (request) => `shell · ${String((request.input as { action: string }).action)}`,
  answerText: (decision) => (decision === "allow" ? "yes" : "no"),
};

function approvalFiles(): ApprovalFiles & { filed: ApprovalRequest[] } {
  const filed: ApprovalRequest[] = [];
  return {
    filed,
    usable: () => true,
    file: (request, from) => {
      const made = { ...request, id: String(from), nonce: "n" } as ApprovalRequest;
      filed.push(made);
      return made;
    },
    answerTo: () => ({ answer: { decision: "allow", by: "tool", at: 0 } }),
    answer: () => undefined,
    watch: () => undefined,
    request: (id) => filed.find((request) => request.id === id),
  };
}

test("the approver lists and answers the tool of each runtime that forwards its prompts, by name", async () => {
  const files = approvalFiles();
  const prompts = [...PERMISSION_PROMPTS, FOURTH_PROMPTS];
  const approver = createApprover({
    jobId: "j",
    files,
    clock: new FakeClock(),
    logger: new RecordingLogger(),
    waitMs: 60_000,
    prompts,
  });
  const handle = (message: unknown) => approver.handle(message);
  const listed = (await handle({ jsonrpc: "2.0", id: 1, method: "tools/list" })) as {
    result: { tools: Array<{ name: string }> };
  };
  assert.deepEqual(
    listed.result.tools.map((tool) => tool.name),
    ["approve", "fourth_permission"],
  );
  const call = {
    jsonrpc: "2.0",
    id: 2,
    method: "tools/call",
    params: { name: "fourth_permission", arguments: { action: "rm -rf build" } },
  };
  const answered = (await handle(call)) as { result: { content: Array<{ text: string }> } };
  assert.equal(answered.result.content[0]?.text, "yes");
  assert.equal(files.filed[0]?.preview, "shell · rm -rf build");
  const wrong = { ...call, id: 3, params: { name: "fourth_permission", arguments: {} } };
  const refused = (await handle(wrong)) as { result: { content: Array<{ text: string }>; isError: boolean } };
  assert.deepEqual(refused.result, {
    content: [{ type: "text", text: "INVALID_ARGUMENT: expected {action}" }],
    isError: true,
  });
  const unknown = (await handle({ ...call, id: 4, params: { name: "other" } })) as {
    result: { content: Array<{ text: string }> };
  };
  assert.equal(
    unknown.result.content[0]?.text,
    "INVALID_ARGUMENT: the approver has the tools, approve, fourth_permission",
  );
});
