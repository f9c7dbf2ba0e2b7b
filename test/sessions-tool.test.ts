/**
 * claude_sessions (PROTOCOL.md §20) through the built server: a HOME whose
 * Claude Code store holds a recorded session (test/fixtures/sessions/), the
 * fake agent resuming it so a job is linked, and the checks a cwd gets. The
 * reader itself is in sessions.test.ts; a real CLI's worktree session is in
 * worktrees.test.ts. `claude-dispatch sessions` lists what the tool lists,
 * the sessions of jobs that ran in worktrees included.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, test } from "node:test";
import { fileURLToPath } from "node:url";

import { claudeProjectFolder } from "../src/runtimes/claude/index.js";
import { gitEnvironment, gitRunner } from "./git-repos.js";
import { minimalEnvironment, SERVER_MAIN, ServerProcess, type RpcResponse } from "./server-process.js";

const scratch = realpathSync(mkdtempSync(path.join(tmpdir(), "claude-dispatch-sessions-tool-")));
after(() => rmSync(scratch, { recursive: true, force: true }));

const SESSION = "2a75f637-486e-4841-a14d-bdef0c499406";
const FIXTURE = fileURLToPath(new URL("./fixtures/sessions/three-prompts-2.1.332.jsonl", import.meta.url));
const BARE_SESSION = "93bb56f6-7d85-4b29-920b-8d323031721e";
const BARE = fileURLToPath(new URL("./fixtures/sessions/bare-2.1.332.jsonl", import.meta.url));

const servers: ServerProcess[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.shutdown();
});

const report = (response: RpcResponse): Record<string, any> => response.result.structuredContent;

test(
  "a directory's sessions from Claude Code's store, with the jobs that used them; the cwd is checked like any other",
  { skip: process.platform === "win32" && "the fake agent is an .mjs file run directly" },
  async () => {
    const home = path.join(scratch, "home");
    const project = path.join(scratch, "project");
    const outside = path.join(scratch, "outside");
    mkdirSync(project, { recursive: true });
    mkdirSync(outside, { recursive: true });
    const folder = claudeProjectFolder(path.join(home, ".claude"), project);
    mkdirSync(folder, { recursive: true });
    copyFileSync(FIXTURE, path.join(folder, `${SESSION}.jsonl`));
    const server = new ServerProcess({ HOME: home, CLAUDE_DISPATCH_ROOTS: project });
    servers.push(server);
    await server.initialize();

    const resumed = report(await server.callTool("claude_run", { prompt: "go on", cwd: project, session_id: SESSION }));
    assert.equal(resumed.status, "completed");
    const listed = await server.callTool("claude_sessions", { cwd: project });
    assert.equal(listed.result.isError, undefined, listed.result.content[0].text);
    const sessions = report(listed).sessions as Array<Record<string, any>>;
    assert.equal(sessions.length, 1);
    assert.equal(sessions[0]?.session_id, SESSION);
    assert.equal(sessions[0]?.first_prompt, "Find why the parser test fails and fix it");
    assert.equal(sessions[0]?.prompts, 3);
    assert.equal(sessions[0]?.prompts_exact, true);
    assert.deepEqual(sessions[0]?.job_ids, [resumed.job_id]);
    assert.match(
      report(listed).next,
      new RegExp(`call claude_start with cwd "${project}" and its session_id, such as "${SESSION}"`),
    );

    // A second session: limit keeps the most recently active one.
    copyFileSync(BARE, path.join(folder, `${BARE_SESSION}.jsonl`));
    const both = report(await server.callTool("claude_sessions", { cwd: project }));
    assert.equal(both.sessions.length, 2);
    const limited = report(await server.callTool("claude_sessions", { cwd: project, limit: 1 }));
    assert.equal(limited.sessions.length, 1);
    assert.equal(limited.sessions[0].session_id, both.sessions[0].session_id);
    const denied = await server.callTool("claude_sessions", { cwd: outside });
    assert.match(denied.result.content[0].text, /^POLICY_DENIED: "cwd" is outside the allowed roots/);
    const badLimit = await server.callTool("claude_sessions", { cwd: project, limit: 0 });
    assert.match(badLimit.result.content[0].text, /^INVALID_ARGUMENT: "limit" must be between 1 and 200, got 0/);
    const unknown = await server.callTool("claude_sessions", { cwd: project, job_id: "x" });
    assert.match(unknown.result.content[0].text, /^INVALID_ARGUMENT: unknown argument "job_id"/);
  },
);

test(
  "claude-dispatch sessions lists what claude_sessions lists, with the sessions of jobs that ran in worktrees",
  { skip: process.platform === "win32" && "the fake agent is an .mjs file run directly" },
  async () => {
    const home = path.join(scratch, "home-worktrees");
    const repo = path.join(scratch, "repository");
    const git = gitRunner(gitEnvironment(home));
    mkdirSync(repo, { recursive: true });
    git(repo, "init", "--quiet", "-b", "main");
    writeFileSync(path.join(repo, "a.txt"), "a\n");
    git(repo, "add", "-A");
    git(repo, "commit", "--quiet", "-m", "base");
    const server = new ServerProcess({ HOME: home, CLAUDE_DISPATCH_WORKTREE_DIR: path.join(scratch, "worktrees") });
    servers.push(server);
    await server.initialize();
    const run = report(
      await server.callTool("claude_run", { prompt: "@write a.txt changed", cwd: repo, worktree: true }),
    );
    assert.equal(run.status, "completed", JSON.stringify(run));
    // Claude Code files a job's session under the folder it ran in: the
    // worktree's. One session of the repository itself too.
    const inWorktree = claudeProjectFolder(path.join(home, ".claude"), run.worktree.path);
    mkdirSync(inWorktree, { recursive: true });
    copyFileSync(FIXTURE, path.join(inWorktree, `${run.session_id}.jsonl`));
    const inRepo = claudeProjectFolder(path.join(home, ".claude"), repo);
    mkdirSync(inRepo, { recursive: true });
    copyFileSync(BARE, path.join(inRepo, `${BARE_SESSION}.jsonl`));

    const tool = report(await server.callTool("claude_sessions", { cwd: repo }));
    const listed = (sessions: Array<Record<string, any>>) =>
      sessions.map((session) => ({ id: session.session_id, worktree: session.worktree, jobs: session.job_ids }));
    assert.deepEqual(
      listed(tool.sessions).sort((a, b) => a.id.localeCompare(b.id)),
      [
        { id: run.session_id, worktree: run.worktree.path, jobs: [run.job_id] },
        { id: BARE_SESSION, worktree: undefined, jobs: [] },
      ].sort((a, b) => a.id.localeCompare(b.id)),
    );
    const env = minimalEnvironment({ HOME: home, CLAUDE_DISPATCH_STATE_DIR: server.stateDir });
    const cli = spawnSync(process.execPath, [SERVER_MAIN, "sessions", repo, "--json"], { env, encoding: "utf8" });
    assert.equal(cli.status, 0, cli.stderr);
    assert.deepEqual(listed(JSON.parse(cli.stdout).sessions), listed(tool.sessions));
    const table = spawnSync(process.execPath, [SERVER_MAIN, "sessions", repo], { env, encoding: "utf8" });
    assert.equal(table.status, 0, table.stderr);
    assert.ok(
      table.stdout.includes(run.session_id) && table.stdout.includes(`worktree: ${run.worktree.path}`),
      table.stdout,
    );
  },
);
