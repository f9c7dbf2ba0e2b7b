/**
 * The prompt through the real server (PROTOCOL.md §15.2): the agent reads it
 * from prompt.txt, so it is whole or not there at all, and memory keeps only
 * its preview, however long the prompt and however many jobs are kept.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { isAlive, readPids, waitFor } from "./processes.js";
import { ServerProcess } from "./server-process.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-prompt-"));
const servers: ServerProcess[] = [];
const pidFiles: string[] = [];
after(() => {
  for (const server of servers) server.dispose();
  for (const file of pidFiles) for (const pid of readPids(file)) if (isAlive(pid)) process.kill(pid, "SIGKILL");
  rmSync(scratch, { recursive: true, force: true });
});

const MiB = 1024 * 1024;

describe("the prompt", { skip: process.platform !== "linux" && "the takeover reads /proc" }, () => {
  test("a server killed while the agent has not read its prompt yet: the agent still gets all of it", async () => {
    const base = path.join(scratch, "crash");
    const cwd = path.join(base, "work");
    mkdirSync(cwd, { recursive: true });
    const stateDir = path.join(base, "state");
    const stdinGate = path.join(base, "stdin-gate");
    const pids = path.join(base, "pids");
    pidFiles.push(pids);
    // The agent reads stdin only once the gate exists: by then its server is dead.
    const env = {
      CLAUDE_DISPATCH_STATE_DIR: stateDir,
      CLAUDE_DISPATCH_ON_EXIT: "keep",
      FAKE_CLAUDE_STDIN_GATE: stdinGate,
    };
    const first = new ServerProcess(env);
    servers.push(first);
    await first.initialize();
    // Far more than a pipe holds (64 KiB): a pipe would leave the agent with its start only.
    const prompt = `@pid ${pids}\n${"x".repeat(4 * MiB)}\nTHE END OF THE PROMPT`;
    const started = await first.callTool("claude_start", { prompt, cwd });
    const id = started.result?.structuredContent?.job_id as string;
    assert.ok(id, JSON.stringify(started).slice(0, 300));
    await waitFor(() => recordOf(stateDir, id).agent?.start_time !== undefined, "the agent's identity in its record");
    first.child.kill("SIGKILL");
    await first.exited;
    writeFileSync(stdinGate, "");

    const second = new ServerProcess(env);
    servers.push(second);
    await second.initialize();
    const report = (await second.callTool("claude_wait", { job_id: id, hold_ms: 30_000 })).result?.structuredContent;
    assert.equal(report?.status, "completed", JSON.stringify(report).slice(0, 300));
    assert.equal(
      report?.result_chars ?? report?.result?.length,
      `ECHO: ${prompt}`.length,
      "the agent read the whole prompt",
    );
    const page = (await second.callTool("claude_output", { job_id: id, offset: `ECHO: ${prompt}`.length - 21 })).result
      ?.structuredContent;
    assert.equal(page?.text, "THE END OF THE PROMPT");
    second.endInput();
    await second.exited;
  });

  test(
    "500 pipelined claude_list calls while a job with a 15 MiB prompt runs: the preview is " + "computed once",
    async () => {
      const base = path.join(scratch, "preview");
      const cwd = path.join(base, "work");
      mkdirSync(cwd, { recursive: true });
      // Recomputing the preview from the whole prompt on every call allocated 15
      // MiB strings by the hundred: out of memory here.
      const server = new ServerProcess({
        CLAUDE_DISPATCH_STATE_DIR: path.join(base, "state"),
        NODE_OPTIONS: "--max-old-space-size=128",
      });
      servers.push(server);
      await server.initialize();
      const gate = path.join(base, "gate");
      const died = server.exited.then((exit): never =>
        assert.fail(`the server died: ${JSON.stringify(exit)}; its stderr ends: ${server.stderr.slice(-300)}`),
      );
      const started = await Promise.race([
        server.callTool("claude_start", { prompt: `@wait-file ${gate}\n${"word ".repeat(3 * MiB)}`, cwd }),
        died,
      ]);
      const id = started.result?.structuredContent?.job_id as string;
      assert.ok(id, JSON.stringify(started).slice(0, 300));
      const lists = Array.from({ length: 500 }, (_, i) =>
        server.request("tools/call", { name: "claude_list", arguments: {} }, `preview-${i}`),
      );
      const answers = await Promise.race([Promise.all(lists), died]);
      assert.equal(
        answers[499]?.result?.structuredContent?.jobs?.[0]?.prompt_preview,
        `@wait-file ${gate} ${"word ".repeat(20)}`.slice(0, 80) + "…",
      );
      writeFileSync(gate, "");
      assert.equal(
        (await server.callTool("claude_wait", { job_id: id, hold_ms: 30_000 })).result?.structuredContent?.status,
        "completed",
      );
      server.endInput();
      await server.exited;
    },
  );

  test(
    "long prompts are not kept in memory: 8 jobs of 8 MiB and 500 pipelined claude_list calls in " + "a 64 MiB heap",
    async () => {
      const base = path.join(scratch, "memory");
      const cwd = path.join(base, "work");
      mkdirSync(cwd, { recursive: true });
      // A heap that holds a few such prompts at once, not all of them: kept prompts run it out of memory.
      const server = new ServerProcess({
        CLAUDE_DISPATCH_STATE_DIR: path.join(base, "state"),
        NODE_OPTIONS: "--max-old-space-size=64",
        CLAUDE_DISPATCH_MAX_JOBS: "2",
      });
      servers.push(server);
      await server.initialize();
      const died = server.exited.then((exit): never =>
        assert.fail(`the server died: ${JSON.stringify(exit)}; its stderr ends: ${server.stderr.slice(-500)}`),
      );
      const answered = <T>(request: Promise<T>): Promise<T> => Promise.race([request, died]);
      const ids: string[] = [];
      for (let i = 0; i < 8; i += 1) {
        // The agent answers with a short result, so only the prompt is large.
        const started = await answered(
          server.callTool("claude_start", { prompt: `job ${i}\n@big 10\n${"y ".repeat(4 * MiB)}`, cwd }),
        );
        const id = started.result?.structuredContent?.job_id as string;
        assert.ok(
          id,
          `job ${i}: ${JSON.stringify(started).slice(0, 300)}; server stderr ends: ${server.stderr.slice(-500)}`,
        );
        ids.push(id);
      }
      for (const id of ids) {
        const report = (await answered(server.callTool("claude_wait", { job_id: id, hold_ms: 60_000 }))).result
          ?.structuredContent;
        assert.equal(report?.status, "completed", JSON.stringify(report).slice(0, 300));
      }
      const lists = Array.from({ length: 500 }, (_, i) =>
        server.request("tools/call", { name: "claude_list", arguments: {} }, `list-${i}`),
      );
      const answers = await answered(Promise.all(lists));
      assert.equal(answers.length, 500);
      const jobs = answers[499]?.result?.structuredContent?.jobs as { job_id: string; prompt_preview: string }[];
      // The newest finished first (§5.7): two run at once, so in no fixed order.
      assert.deepEqual(
        jobs.map((job) => job.prompt_preview).sort(),
        ids.map((_, i) => `job ${i} @big 10 ${"y ".repeat(33)}…`).sort(),
        "each preview is the prompt's start, on one line, clipped",
      );
      server.endInput();
      assert.equal((await server.exited).code, 0);
    },
  );
});

function recordOf(stateDir: string, id: string): Record<string, any> {
  try {
    return JSON.parse(readFileSync(path.join(stateDir, "jobs", id, "record.json"), "utf8")) as Record<string, any>;
  } catch {
    return {};
  }
}
