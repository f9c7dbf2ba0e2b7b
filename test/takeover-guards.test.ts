/**
 * Who may take a job over, and what an adopted agent's record may make a
 * server follow or signal (PROTOCOL.md §7.4, §15.3), through the real server.
 * Agents wait on gate files, so nothing here depends on timing.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { isAlive, procStartTime, readPids, waitFor } from "./processes.js";
import { SERVER_MAIN, ServerProcess } from "./server-process.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-takeover-"));
let counter = 0;
const pidFiles: string[] = [];
const servers: ServerProcess[] = [];

function fixture(): { stateDir: string; cwd: string; base: string; pids: string } {
  counter += 1;
  const base = path.join(scratch, `t${counter}`);
  const cwd = path.join(base, "work");
  mkdirSync(cwd, { recursive: true });
  const pids = path.join(base, "pids");
  pidFiles.push(pids);
  return { stateDir: path.join(base, "state"), cwd, base, pids };
}

after(() => {
  for (const server of servers) server.dispose();
  for (const file of pidFiles) for (const pid of readPids(file)) if (isAlive(pid)) process.kill(pid, "SIGKILL");
  rmSync(scratch, { recursive: true, force: true });
});

async function startServer(stateDir: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const server = new ServerProcess({ CLAUDE_DISPATCH_STATE_DIR: stateDir, CLAUDE_DISPATCH_ON_EXIT: "keep", ...env });
  servers.push(server);
  await server.initialize();
  return server;
}

function readRecord(stateDir: string, id: string): Record<string, any> {
  return JSON.parse(readFileSync(path.join(stateDir, "jobs", id, "record.json"), "utf8")) as Record<string, any>;
}

function writeRecord(stateDir: string, id: string, record: Record<string, unknown>): void {
  writeFileSync(path.join(stateDir, "jobs", id, "record.json"), JSON.stringify(record));
}

/** A job whose server and agent were both SIGKILLed: its record is left for the next server to take over. */
async function orphanedJob(prompt: string): Promise<{ stateDir: string; pids: string; id: string }> {
  const { stateDir, cwd, base, pids } = fixture();
  const first = await startServer(stateDir);
  const id = structured(
    await first.callTool("claude_start", {
      prompt: `@pid ${pids}\n@wait-file ${path.join(base, "finish")}\n${prompt}`,
      cwd,
    }),
  ).job_id as string;
  await waitFor(() => readRecord(stateDir, id).agent?.start_time !== undefined, "the agent's identity in its record");
  await waitFor(() => readPids(pids).length === 1, "the agent to start");
  first.child.kill("SIGKILL");
  await first.exited;
  const [agent] = readPids(pids) as [number];
  process.kill(agent, "SIGKILL");
  await waitFor(() => !isAlive(agent), "the agent to be gone");
  return { stateDir, pids, id };
}

const structured = (response: { result?: any }): Record<string, any> =>
  response.result?.structuredContent as Record<string, any>;

describe(
  "takeover guards through the real server",
  { skip: process.platform !== "linux" && "the liveness checks read /proc" },
  () => {
    test(
      "a copy of the server inside an agent (depth 1) takes over nothing: a later server " + "serves the job",
      async () => {
        const { stateDir, cwd, base, pids } = fixture();
        const gate = path.join(base, "gate");
        const ready = path.join(base, "ready");
        const finish = path.join(base, "finish");
        const host = await startServer(stateDir);
        const started = await host.callTool("claude_start", {
          prompt: `@pid ${pids}\n@nested-server ${gate} ${ready}\n@wait-file ${finish}\nnested`,
          cwd,
        });
        const id = structured(started).job_id as string;
        await waitFor(() => readPids(pids).length === 1, "the agent to start");
        await waitFor(
          () => readRecord(stateDir, id).agent?.start_time !== undefined,
          "the agent's identity in its record",
        );
        // A short-lived host's server is gone before the agent has started its own MCP servers. Killed, so that it
        // leaves no carrier (§15.8): then only the nested server could touch the job.
        host.child.kill("SIGKILL");
        await host.exited;
        writeFileSync(gate, "");
        await waitFor(() => existsSync(ready), "the nested server to answer tools/list");
        assert.deepEqual(JSON.parse(readFileSync(ready, "utf8")), { tools: 0 }, "the nested server offers no tools");
        assert.equal(readRecord(stateDir, id).generation, 0, "the nested server claimed nothing");
        assert.deepEqual(
          readdirNames(path.join(stateDir, "jobs", id)).filter((name) => name.startsWith("claim")),
          [],
          "no claim file was written",
        );

        const later = await startServer(stateDir);
        const running = structured(await later.callTool("claude_wait", { job_id: id, hold_ms: 0 }));
        assert.equal(running.status, "running", JSON.stringify(running));
        const listed = structured(await later.callTool("claude_list", {}));
        assert.deepEqual(
          listed.jobs.map((job: { job_id: string }) => job.job_id),
          [id],
        );
        writeFileSync(finish, "");
        const done = structured(await later.callTool("claude_wait", { job_id: id, hold_ms: 30_000 }));
        assert.equal(done.status, "completed", JSON.stringify(done));
        assert.match(String(done.result), /nested/);
        later.endInput();
        await later.exited;
      },
    );

    test("a record naming the server's own pid is never followed, and its kill answers at once", async () => {
      const { stateDir, id } = await orphanedJob("self");

      // The next server's pid and start time are planted as the agent's before it starts: it must not follow itself.
      const second = new ServerProcess({
        CLAUDE_DISPATCH_STATE_DIR: stateDir,
        CLAUDE_DISPATCH_ON_EXIT: "keep",
        CLAUDE_DISPATCH_LOG_LEVEL: "debug",
      });
      servers.push(second);
      const selfPid = second.child.pid as number;
      const record = readRecord(stateDir, id);
      await waitFor(() => procStartTime(selfPid) !== undefined, "the server's start time");
      writeRecord(stateDir, id, {
        ...record,
        agent: { ...record.agent, pid: selfPid, pgid: selfPid, start_time: procStartTime(selfPid) },
      });
      await second.initialize();
      const killed = await second.callTool("claude_kill", { job_id: id });
      const report = structured(killed);
      assert.ok(report.status !== "running", `the kill answered at once: ${JSON.stringify(report)}`);
      const waited = structured(await second.callTool("claude_wait", { job_id: id, hold_ms: 30_000 }));
      assert.notEqual(waited.status, "running", "the job is not followed for ever");
      assert.equal(second.child.exitCode, null, "the server did not signal itself");
      second.endInput();
      await second.exited;
    });

    test("a record naming an unrelated process with its real start time does not get it killed", async () => {
      const { stateDir, pids, id } = await orphanedJob("unrelated");

      // A bystander: not started by claude-dispatch, so it carries no tree marker.
      const bystander = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], {
        detached: true,
        stdio: "ignore",
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      });
      const bystanderPid = bystander.pid as number;
      writeFileSync(pids, `${bystanderPid}\n`, { flag: "a" });
      await waitFor(() => procStartTime(bystanderPid) !== undefined, "the bystander's start time");
      const record = readRecord(stateDir, id);
      writeRecord(stateDir, id, {
        ...record,
        agent: { ...record.agent, pid: bystanderPid, pgid: bystanderPid, start_time: procStartTime(bystanderPid) },
      });

      const cli = await runCli(["kill", id, "--json"], stateDir);
      assert.ok(isAlive(bystanderPid), `the bystander was not killed by claude-dispatch kill: ${cli}`);

      const second = await startServer(stateDir);
      const report = structured(await second.callTool("claude_kill", { job_id: id }));
      assert.ok(report.status !== "running", JSON.stringify(report));
      assert.ok(isAlive(bystanderPid), "the bystander was not killed by claude_kill");
      second.endInput();
      await second.exited;
      assert.ok(isAlive(bystanderPid), "nor by the server's cleanup");
      process.kill(bystanderPid, "SIGKILL");
    });
  },
);

function readdirNames(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function runCli(args: string[], stateDir: string): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SERVER_MAIN, ...args], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", CLAUDE_DISPATCH_STATE_DIR: stateDir },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.once("exit", () => resolve(output));
  });
}
