/**
 * What the host's model reads (PROTOCOL.md §5, §5.7): claude_list, bounded and paged by a cursor however many
 * jobs are kept; and the tool listing itself, whose descriptions, input schemas and instructions every
 * conversation pays for.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { hostOffers, loadConfig, offeredAgents } from "../src/config.js";
import { machineOf } from "./host-fakes.js";
import type { JsonRpcResponse } from "../src/server/jsonrpc.js";
import { handlerHarness, settle, type HandlerHarness } from "./helpers.js";

interface Listed {
  job_id: string;
  status: string;
  cwd: string;
}
interface Page {
  status: string;
  jobs?: Listed[];
  total?: number;
  next_cursor?: string;
  next?: string;
  job_id?: string;
  error?: { code: string; detail: string };
}
interface ListResult {
  text: string;
  structured: Page;
  isError: boolean;
}

let requestId = 0;
async function call(h: HandlerHarness, name: string, args: Record<string, unknown>): Promise<ListResult> {
  const request = { jsonrpc: "2.0", id: (requestId += 1), method: "tools/call", params: { name, arguments: args } };
  const { result } = (await h.handle(request)) as JsonRpcResponse & {
    result: { content: Array<{ text: string }>; structuredContent: Page; isError?: true };
  };
  return {
    text: result.content[0]?.text ?? "",
    structured: result.structuredContent,
    isError: result.isError === true,
  };
}

/** Both halves of a page within the cap, as §5.7 promises. */
function assertWithin(page: ListResult, cap: number): void {
  assert.ok(page.text.length <= cap, `text of ${page.text.length} characters, cap ${cap}`);
  const structured = JSON.stringify(page.structured).length;
  assert.ok(structured <= cap, `structuredContent of ${structured} characters, cap ${cap}`);
}

/** Follows next_cursor, as next says, until the last page; every page checked against the cap. */
async function walk(
  h: HandlerHarness,
  first: Record<string, unknown>,
  cap: number,
): Promise<{ ids: string[]; pages: Page[] }> {
  const ids: string[] = [];
  const pages: Page[] = [];
  let args = first;
  while (pages.length < 400) {
    const page = await call(h, "claude_list", args);
    assert.equal(page.isError, false, page.text);
    assertWithin(page, cap);
    pages.push(page.structured);
    ids.push(...(page.structured.jobs ?? []).map((job) => job.job_id));
    const cursor = page.structured.next_cursor;
    if (cursor === undefined) {
      assert.equal(page.structured.next, undefined, "no next on the last page");
      return { ids, pages };
    }
    assert.ok((page.structured.jobs ?? []).length > 0, "a page with more after it is never empty");
    const more = (page.structured.total ?? 0) - ids.length;
    assert.equal(page.structured.next, `Call claude_list with cursor "${cursor}" for the next page (${more} more).`);
    assert.ok(page.text.endsWith(`[${page.structured.next}]`), page.text.slice(-300));
    args = { cursor };
  }
  throw new Error("the cursor never reached the end");
}

const LONG_CWD = `/home/someone/projects/${"nested-folder/".repeat(9)}app`;

/**
 * 300 jobs kept, at most 5 running at once: 285 finished (completed, failed and killed, in an order unlike their
 * submission), then 5 running and 10 queued.
 */
async function manyJobs(): Promise<{
  h: HandlerHarness;
  active: string[];
  finished: string[];
  byStatus: Map<string, string[]>;
}> {
  const h = handlerHarness({}, { maxRunning: 5 });
  const prompt = 'fix the "flaky" tests and explain why '.repeat(4);
  for (let i = 0; i < 300; i += 1) {
    await call(h, "claude_start", { prompt: `Job number ${i}: ${prompt}`, cwd: `${LONG_CWD}-${i}` });
    await h.clock.advance(10);
  }
  const finishedOrder: string[] = [];
  for (let done = 0; done < 285; done += 1) {
    // Not the oldest running one each time: the newest finished is not the newest submitted.
    const running = h.jobs.list().filter((job) => job.status === "running");
    const job = running[done % running.length];
    assert.ok(job);
    const agent = h.launcher.agents.find((candidate) => candidate.spec.cwd === job.cwd);
    assert.ok(agent);
    if (done % 7 === 3) await call(h, "claude_kill", { job_id: job.id });
    else if (done % 5 === 1) agent.finish({ ok: false, code: "AGENT_EXITED", detail: "it crashed" });
    else agent.succeed(`answer ${done}`);
    await settle();
    finishedOrder.push(job.id);
    await h.clock.advance(1_000);
  }
  const all = h.jobs.list();
  const active = all.filter((job) => job.status === "running" || job.status === "queued");
  active.sort((a, b) => a.submittedAt - b.submittedAt);
  assert.deepEqual(
    active.map((job) => job.status),
    [...Array(5).fill("running"), ...Array(10).fill("queued")],
  );
  const byStatus = new Map<string, string[]>();
  for (const job of all) byStatus.set(job.status, [...(byStatus.get(job.status) ?? []), job.id]);
  return { h, active: active.map((job) => job.id), finished: finishedOrder.reverse(), byStatus };
}

test(
  "claude_list with 300 jobs: one call stays within the cap; the active jobs come first, then the " + "newest finished",
  async () => {
    const { h, active, finished } = await manyJobs();
    const page = await call(h, "claude_list", {});
    assert.equal(page.isError, false, page.text);
    assertWithin(page, 20_000);
    assert.deepEqual(
      page.structured.jobs?.map((job) => job.job_id),
      [...active, ...finished].slice(0, 20),
      "20 by default: the 15 active jobs in submission order, then the 5 newest finished",
    );
    assert.equal(page.structured.total, 300);
    assert.match(page.text, /^Jobs 1–20 of 300, the active first, then the newest finished:\n/);
  },
);

test(
  "claude_list: the cursor walks every one of 300 jobs exactly once, in order, every page " + "within the cap",
  async () => {
    const { h, active, finished } = await manyJobs();
    const expected = [...active, ...finished];
    const byDefault = await walk(h, {}, 20_000);
    assert.deepEqual(byDefault.ids, expected);
    assert.equal(byDefault.pages.length, 15);
    const widest = await walk(h, { limit: 100 }, 20_000);
    assert.deepEqual(widest.ids, expected);
    // 100 jobs in directories of about 150 characters exceed the cap: the pages hold fewer.
    assert.ok(widest.pages.length > 3, `${widest.pages.length} pages`);
  },
);

test(
  "claude_list: at the smallest cap, with hostile directories and prompts, every page holds a " + "job and fits",
  async () => {
    const h = handlerHarness({ maxResultChars: 1_000 });
    const ids: string[] = [];
    const cwdOf = (i: number): string => `/${'"\\'.repeat(3_000)}${i}`;
    for (let i = 0; i < 4; i += 1) {
      // Quotes and backslashes: each is two characters in JSON.
      const started = await call(h, "claude_start", { prompt: '"\\'.repeat(200), cwd: cwdOf(i) });
      ids.push(String(started.structured.job_id));
      await h.clock.advance(10);
    }
    const every = ["running", "queued", "input_required", "completed", "failed", "killed", "lost"];
    const { ids: walked, pages } = await walk(h, { limit: 100, status: every }, 1_000);
    assert.deepEqual(walked, ids);
    assert.equal(
      pages[0]?.jobs?.[0]?.cwd,
      `${cwdOf(0).slice(0, 20)}…${cwdOf(0).slice(-20)}`,
      "cut to 40 characters in its middle",
    );
  },
);

test("claude_list: status filters, one or several; the cursor keeps the filter and the limit", async () => {
  const { h, active, byStatus } = await manyJobs();
  const queued = await call(h, "claude_list", { status: "queued" });
  assert.deepEqual(
    queued.structured.jobs?.map((job) => job.job_id),
    active.slice(5),
  );
  assert.equal(queued.structured.total, 10);
  assert.equal(queued.structured.next_cursor, undefined);
  const ended = [...(byStatus.get("failed") ?? []), ...(byStatus.get("killed") ?? [])];
  const { ids } = await walk(h, { status: ["failed", "killed"], limit: 7 }, 20_000);
  assert.deepEqual(new Set(ids), new Set(ended));
  assert.equal(ids.length, ended.length);
  const none = await call(h, "claude_list", { status: ["lost"] });
  assert.deepEqual(none.structured, { status: "listed", jobs: [], total: 0 });
  assert.equal(none.text, "No lost jobs.");
});

test("claude_list refuses a bad status, limit or cursor, naming the argument", async () => {
  const h = handlerHarness();
  const refusals: Array<[Record<string, unknown>, string]> = [
    [{ status: "done" }, "status"],
    [{ status: [] }, "status"],
    [{ status: ["running", "nope"] }, "status"],
    [{ status: 5 }, "status"],
    [{ limit: 0 }, "limit"],
    [{ limit: 101 }, "limit"],
    [{ limit: 2.5 }, "limit"],
    [{ limit: "20" }, "limit"],
    [{ cursor: "abc" }, "cursor"],
    [{ cursor: 7 }, "cursor"],
    [{ verbose: true }, "verbose"],
  ];
  for (const [args, name] of refusals) {
    const result = await call(h, "claude_list", args);
    assert.equal(result.isError, true, JSON.stringify(args));
    assert.equal(result.structured.error?.code, "INVALID_ARGUMENT", JSON.stringify(args));
    assert.ok(
      result.structured.error?.detail.includes(`"${name}"`),
      `${JSON.stringify(args)}: ${result.structured.error?.detail}`,
    );
  }
  assert.equal(
    (await call(h, "claude_list", { status: null, limit: null, cursor: null })).isError,
    false,
    "null means not given",
  );
});

/* ------------------------------------------------------------------ *
 * The tool listing the host's model reads
 * ------------------------------------------------------------------ */

/**
 * What a model is shown of this server in every conversation: each tool's name,
 * description and input schema, and the instructions.
 */
const MODEL_VISIBLE_LIMIT_BYTES = 6_144;

test(
  `the model-visible listing, with every agent and two hosts offered, is at most ` +
    `${MODEL_VISIBLE_LIMIT_BYTES} bytes`,
  async () => {
    const hosts = {
      box: { ssh: "me@build-box", roots: ["/srv/repos", "/home/me/src"], agents: ["claude", "codex"] },
      gpu: {
        ssh: "gpu.example.org",
        roots: ["/data/work"],
        agents: ["claude", "codex", "gemini"],
        permission_modes: { claude: ["bypassPermissions", "acceptEdits"] },
      },
    };
    const config = loadConfig(
      {
        CLAUDE_DISPATCH_AGENTS: "claude,codex,gemini",
        CLAUDE_DISPATCH_HOSTS: JSON.stringify(hosts),
      },
      machineOf(),
    );
    const policy = {
      ...config.policy,
      roots: undefined,
      agents: offeredAgents(config, {}, machineOf()),
      hosts: hostOffers(config),
    };
    const h = handlerHarness({ policy });
    const params = { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } };
    const init = (await h.handle({ jsonrpc: "2.0", id: 1, method: "initialize", params })) as {
      result: { instructions: string };
    };
    const listed = (await h.handle({ jsonrpc: "2.0", id: 2, method: "tools/list" })) as {
      result: { tools: Array<{ name: string; description: string; inputSchema: Record<string, unknown> }> };
    };
    const tools = listed.result.tools;
    const run = tools.find((tool) => tool.name === "claude_run")?.inputSchema.properties as Record<
      string,
      { enum?: string[] }
    >;
    assert.deepEqual(run.agent?.enum, ["claude", "codex", "gemini"], "every agent is offered");
    assert.deepEqual(run.host?.enum, ["box", "gpu"], "both hosts are offered");
    // The mode only gpu allows is offered, and said to be gpu's.
    const mode = run.permission_mode as { enum?: string[]; description?: string };
    assert.ok(mode.enum?.includes("bypassPermissions"), "a host's own mode is in the enum");
    assert.match(mode.description ?? "", /claude on gpu: bypassPermissions, acceptEdits\./);
    const bytes = (text: string): number => new TextEncoder().encode(text).length;
    const perTool = tools.map(({ name, description, inputSchema }) =>
      bytes(JSON.stringify({ name, description, inputSchema })),
    );
    const instructions = bytes(init.result.instructions);
    const total = perTool.reduce((sum, size) => sum + size, 0) + instructions;
    const parts = tools.map((tool, i) => `${tool.name} ${perTool[i]}`).join(", ");
    assert.ok(total <= MODEL_VISIBLE_LIMIT_BYTES, `${total} bytes: ${parts}, instructions ${instructions}`);
  },
);
