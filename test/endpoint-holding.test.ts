/**
 * When a process of ours holds the state directory's approval endpoint (PROTOCOL.md §18): from its first job call,
 * or from the moment it takes jobs over, and not before. A server a host starts and never asks for a job opens no
 * port and loads no HTTP server (BENCHMARKS.md (d)); its agents, and those it carries for a server that died, are
 * given the endpoint all the same. Through the built server, with the fake agent.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, describe, test } from "node:test";

import { ServerProcess } from "./server-process.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-endpoint-holding-"));
const servers: ServerProcess[] = [];
/** Files a waiting fake agent ends on: written after each test, so an agent a failing test left goes too. */
const releases: string[] = [];
afterEach(async () => {
  for (const release of releases.splice(0)) writeFileSync(release, "");
  await Promise.all(servers.splice(0).map((server) => server.shutdown()));
});
after(() => rmSync(scratch, { recursive: true, force: true }));

function startServer(env: Record<string, string> = {}): ServerProcess {
  const server = new ServerProcess({ CLAUDE_DISPATCH_ON_EXIT: "keep", ...env });
  servers.push(server);
  return server;
}

function recordedPort(stateDir: string): number | undefined {
  const file = path.join(stateDir, "approvals-endpoint.json");
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")).port as number) : undefined;
}

/** Whether something answers HTTP on the port: any status will do, a refused connection is false. */
function answersHttp(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const asked = request({ host: "127.0.0.1", port, path: "/", timeout: 5000 }, (response) => {
      response.resume();
      resolve(true);
    });
    asked.on("timeout", () => asked.destroy());
    asked.on("error", () => resolve(false));
    asked.end();
  });
}

/** Resolves once the server's stderr holds `text`; fails after `ms` (a bound, not a pace). */
function logged(server: ServerProcess, text: string, ms = 15_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (!server.stderr.includes(text)) return;
      clearTimeout(timer);
      server.child.stderr.off("data", check);
      resolve();
    };
    const timer = setTimeout(() => {
      server.child.stderr.off("data", check);
      reject(new Error(`not logged within ${ms} ms: ${text}\n${server.stderr.slice(-2000)}`));
    }, ms);
    // After the ServerProcess's own listener, which appends the chunk to server.stderr.
    server.child.stderr.on("data", check);
    check();
  });
}

describe("the approval endpoint is held from a process's first job on (§18)", { timeout: 60_000 }, () => {
  test("a server asked for no job holds no port; its first job call takes one, and its agent asks there", async () => {
    const server = startServer();
    await server.initialize();
    // Answered by the whole handler: the job layer is up, and the state directory opened.
    const listed = await server.request("tools/list");
    assert.ok(Array.isArray(listed.result.tools));
    assert.equal(recordedPort(server.stateDir), undefined);
    assert.doesNotMatch(server.stderr, /approval endpoint on/);

    const cwd = mkdtempSync(path.join(scratch, "cwd-"));
    const environment = path.join(scratch, `env-${servers.length}`);
    const run = await server.callTool("claude_run", {
      prompt: `@env ${environment} CLAUDE_DISPATCH_APPROVER_TOKEN`,
      cwd,
    });
    assert.equal(run.result.structuredContent.status, "completed", run.result.content[0].text);
    const port = recordedPort(server.stateDir);
    assert.ok(port !== undefined && port > 0, `a port is recorded: ${port}`);
    assert.match(server.stderr, new RegExp(`approval endpoint on 127\\.0\\.0\\.1:${port}`));
    assert.equal(await answersHttp(port), true);
    // The agent was given the endpoint's token: it asks there, with no approver process of its own.
    assert.match(JSON.parse(readFileSync(environment, "utf8")).CLAUDE_DISPATCH_APPROVER_TOKEN, /^[0-9a-f]{64}$/);
  });

  test("an idle server that carries the job of a server that died takes the endpoint over for its agent", async () => {
    const owner = startServer();
    await owner.initialize();
    const idle = startServer({ CLAUDE_DISPATCH_STATE_DIR: owner.stateDir });
    await idle.initialize();
    await idle.request("tools/list");
    const cwd = mkdtempSync(path.join(scratch, "cwd-"));
    const release = path.join(scratch, `release-${servers.length}`);
    releases.push(release);
    const started = await owner.callTool("claude_start", { prompt: `@wait-file ${release}`, cwd });
    const jobId = started.result.structuredContent.job_id as string;
    const port = recordedPort(owner.stateDir);
    assert.ok(port !== undefined && port > 0);
    await logged(owner, `approval endpoint on 127.0.0.1:${port}`);
    // Nothing of the idle server's listens yet: the owner holds the port, and the idle one was asked for no job.
    assert.doesNotMatch(idle.stderr, /approval endpoint on/);

    owner.child.kill("SIGKILL");
    await owner.exited;
    await logged(idle, "carrying 1 job(s) of a server that went");
    await logged(idle, `approval endpoint on 127.0.0.1:${port}`);
    assert.equal(await answersHttp(port), true);

    // The agent goes on under the idle server, and ends there.
    writeFileSync(release, "");
    const done = await idle.waitForJob(jobId);
    assert.equal(done.status, "completed", JSON.stringify(done));
  });
});
