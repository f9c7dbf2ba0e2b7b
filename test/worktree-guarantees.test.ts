/**
 * Worktrees with a hostile agent (PROTOCOL.md §19.2): real git, real
 * repositories made here, the agent's side played by writing into the
 * worktree as an agent could. The server's git never runs a program the agent
 * planted (a replaced .git link, a .git folder of its own with a config, hooks
 * under a relative core.hooksPath, filter and diff drivers chosen by its
 * .gitattributes); a merge never replaces or removes a file git does not track
 * in the user's checkout; a merge whose commit step fails leaves the worktree
 * as it was. One test goes through the built server.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, describe, test } from "node:test";

import { DispatchError } from "../src/core/errors.js";
import { createGitRunner } from "../src/hosts/local/git.js";
import { GitWorktrees } from "../src/worktrees/git-worktrees.js";
import type { WorktreeRecord } from "../src/agent/worktree.js";
import { gitEnvironment, gitRunner } from "./git-repos.js";
import { SERVER_MAIN, ServerProcess, type RpcResponse } from "./server-process.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-hostile-worktrees-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const GIT_ENV = gitEnvironment(scratch);
const git = gitRunner(GIT_ENV);

let made = 0;
function fresh(name: string): string {
  const folder = path.join(scratch, `${name}-${(made += 1)}`);
  mkdirSync(folder, { recursive: true });
  return folder;
}

/** A repository with one commit: shared.txt, and a .gitignore that ignores .env and build/. */
function makeRepo(): string {
  const repo = fresh("repo");
  git(repo, "init", "--quiet", "-b", "main");
  writeFileSync(path.join(repo, "shared.txt"), "base\n");
  writeFileSync(path.join(repo, ".gitignore"), ".env\nbuild\n");
  git(repo, "add", "-A");
  git(repo, "commit", "--quiet", "-m", "base");
  return repo;
}

/** A script that leaves a marker file when run: the proof that a planted program ran. */
function plantedProgram(folder: string, marker: string): string {
  const script = path.join(folder, "planted.sh");
  writeFileSync(script, `#!/bin/sh\ntouch '${marker}'\ncat\n`);
  chmodSync(script, 0o755);
  return script;
}

function worktrees(): GitWorktrees {
  return new GitWorktrees({
    git: createGitRunner({ env: GIT_ENV, platform: process.platform }),
    root: fresh("worktrees"),
    branchPrefix: "dispatch/",
  });
}

let jobs = 0;
async function makeWorktree(repo: string): Promise<{ git: GitWorktrees; worktree: WorktreeRecord }> {
  const gitWorktrees = worktrees();
  const id = `00000000-0000-4000-8000-${String((jobs += 1)).padStart(12, "0")}`;
  const { worktree } = await gitWorktrees.create(repo, id);
  return { git: gitWorktrees, worktree };
}

async function rejectsWithGitFailed(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof DispatchError, String(error));
    assert.equal(error.code, "GIT_FAILED");
    assert.match(error.message, pattern);
    return true;
  });
}

describe(
  "the server's git on a hostile worktree",
  { skip: process.platform === "win32" && "POSIX shell scripts as planted programs" },
  () => {
    test(
      "a .git link pointing at a repository of the agent's: every operation refuses, nothing planted runs, " +
        "discard still works",
      async () => {
        const repo = makeRepo();
        const { git: gitWorktrees, worktree } = await makeWorktree(repo);
        const marker = path.join(fresh("marker"), "ran");
        const evil = fresh("evil");
        git(evil, "init", "--quiet");
        git(evil, "config", "core.fsmonitor", plantedProgram(evil, marker));
        writeFileSync(path.join(worktree.path, "work.txt"), "the agent's\n");
        writeFileSync(path.join(worktree.path, ".git"), `gitdir: ${path.join(evil, ".git")}\n`);
        await rejectsWithGitFailed(gitWorktrees.changes(worktree), /changed \.git link/);
        await rejectsWithGitFailed(gitWorktrees.diff(worktree), /changed \.git link/);
        await rejectsWithGitFailed(gitWorktrees.merge(worktree, "merge it"), /changed \.git link/);
        assert.equal(existsSync(marker), false, "the agent's fsmonitor ran");
        await gitWorktrees.discard(worktree);
        assert.equal(existsSync(worktree.path), false);
        assert.equal(git(repo, "branch", "--list", worktree.branch).trim(), "");
        assert.equal(existsSync(marker), false);
      },
    );

    test(
      "a .git folder of the agent's own in place of the link, with a planted config: refused, " + "nothing runs",
      async () => {
        const repo = makeRepo();
        const { git: gitWorktrees, worktree } = await makeWorktree(repo);
        const marker = path.join(fresh("marker"), "ran");
        rmSync(path.join(worktree.path, ".git"));
        git(worktree.path, "init", "--quiet");
        git(worktree.path, "config", "core.fsmonitor", plantedProgram(fresh("evil"), marker));
        await rejectsWithGitFailed(gitWorktrees.changes(worktree), /no \.git link file/);
        await rejectsWithGitFailed(gitWorktrees.merge(worktree, "merge it"), /no \.git link file/);
        assert.equal(existsSync(marker), false, "the agent's fsmonitor ran");
        assert.equal(git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", worktree.base));
      },
    );

    test(
      "hooks under a relative core.hooksPath, written in the worktree, never run; a merge that changes " +
        "them is refused",
      async () => {
        const repo = makeRepo();
        git(repo, "config", "core.hooksPath", ".githooks");
        const { git: gitWorktrees, worktree } = await makeWorktree(repo);
        const marker = path.join(fresh("marker"), "ran");
        mkdirSync(path.join(worktree.path, ".githooks"));
        for (const hook of [
          "post-index-change",
          "reference-transaction",
          "post-commit",
          "pre-commit",
          "post-merge",
          "pre-auto-gc",
        ]) {
          writeFileSync(path.join(worktree.path, ".githooks", hook), `#!/bin/sh\ntouch '${marker}'\n`);
          chmodSync(path.join(worktree.path, ".githooks", hook), 0o755);
        }
        writeFileSync(path.join(worktree.path, "shared.txt"), "the agent's\n");
        const changes = await gitWorktrees.changes(worktree);
        assert.deepEqual(changes.files, [
          ".githooks/post-commit",
          ".githooks/post-index-change",
          ".githooks/post-merge",
          ".githooks/pre-auto-gc",
          ".githooks/pre-commit",
          ".githooks/reference-transaction",
          "shared.txt",
        ]);
        assert.match(await gitWorktrees.diff(worktree), /the agent's/);
        const outcome = await gitWorktrees.merge(worktree, "merge it");
        assert.equal(outcome.merged, false);
        assert.match(outcome.merged ? "" : outcome.reason, /hooks/);
        assert.equal(existsSync(marker), false, "a hook the agent wrote ran");
        assert.equal(readFileSync(path.join(repo, "shared.txt"), "utf8"), "base\n");
        assert.equal(existsSync(path.join(repo, ".githooks")), false);
      },
    );

    test(
      "filter and diff drivers chosen by the worktree's .gitattributes, and an fsmonitor in the shared " +
        "config, never run",
      async () => {
        const repo = makeRepo();
        const marker = path.join(fresh("marker"), "ran");
        const program = plantedProgram(fresh("programs"), marker);
        const { git: gitWorktrees, worktree } = await makeWorktree(repo);
        // `git config` in the worktree, as the agent can run it, writes the
        // repository's config: the server's git runs none of it.
        git(worktree.path, "config", "filter.evil.clean", program);
        git(worktree.path, "config", "filter.evil.smudge", program);
        git(worktree.path, "config", "filter.evil.required", "true");
        git(worktree.path, "config", "diff.evil.textconv", program);
        git(worktree.path, "config", "core.fsmonitor", program);
        writeFileSync(path.join(worktree.path, ".gitattributes"), "* filter=evil diff=evil\n");
        writeFileSync(path.join(worktree.path, "shared.txt"), "the agent's\n");
        writeFileSync(path.join(worktree.path, "new.txt"), "new\n");
        const changes = await gitWorktrees.changes(worktree);
        assert.deepEqual(changes.files, [".gitattributes", "new.txt", "shared.txt"]);
        assert.match(await gitWorktrees.diff(worktree), /\+the agent's/);
        assert.equal(existsSync(marker), false, "a driver or fsmonitor the server's git ran");
      },
    );
  },
);

describe(
  "a merge and the files git does not track in the user's checkout",
  { skip: process.platform === "win32" && "POSIX paths" },
  () => {
    test("an ignored .env the job would replace: nothing changes, the file is reported", async () => {
      const repo = makeRepo();
      writeFileSync(path.join(repo, ".env"), "SECRET=the user's\n");
      const { git: gitWorktrees, worktree } = await makeWorktree(repo);
      writeFileSync(path.join(worktree.path, ".gitignore"), "build\n");
      writeFileSync(path.join(worktree.path, ".env"), "SECRET=the agent's\n");
      const head = git(repo, "rev-parse", "HEAD");
      const outcome = await gitWorktrees.merge(worktree, "merge it");
      assert.equal(outcome.merged, false);
      assert.deepEqual(outcome.merged ? [] : outcome.conflicts, [".env"]);
      assert.match(outcome.merged ? "" : outcome.reason, /does not track/);
      assert.equal(readFileSync(path.join(repo, ".env"), "utf8"), "SECRET=the user's\n");
      assert.equal(git(repo, "rev-parse", "HEAD"), head);
      assert.equal(readFileSync(path.join(repo, ".gitignore"), "utf8"), ".env\nbuild\n");
    });

    test(
      "an ignored folder where the job puts a file, and an untracked file it would replace: both reported, " +
        "nothing changes",
      async () => {
        const repo = makeRepo();
        mkdirSync(path.join(repo, "build"));
        writeFileSync(path.join(repo, "build", "out.bin"), "the user's build\n");
        writeFileSync(path.join(repo, "notes.txt"), "the user's notes\n");
        const { git: gitWorktrees, worktree } = await makeWorktree(repo);
        writeFileSync(path.join(worktree.path, ".gitignore"), ".env\n");
        writeFileSync(path.join(worktree.path, "build"), "a file now\n");
        writeFileSync(path.join(worktree.path, "notes.txt"), "the agent's notes\n");
        const statusBefore = git(worktree.path, "status", "--porcelain");
        const outcome = await gitWorktrees.merge(worktree, "merge it");
        assert.equal(outcome.merged, false);
        assert.deepEqual(outcome.merged ? [] : outcome.conflicts, ["build/", "notes.txt"]);
        assert.equal(readFileSync(path.join(repo, "build", "out.bin"), "utf8"), "the user's build\n");
        assert.equal(readFileSync(path.join(repo, "notes.txt"), "utf8"), "the user's notes\n");
        // A refused merge leaves the worktree as it was too: the job's work is still uncommitted there.
        assert.equal(git(worktree.path, "status", "--porcelain"), statusBefore);
        assert.equal(git(worktree.path, "rev-parse", "HEAD"), git(repo, "rev-parse", "HEAD"));
      },
    );

    test("a merge whose commit step fails leaves the worktree as it was and the checkout untouched", async () => {
      const repo = makeRepo();
      const { git: gitWorktrees, worktree } = await makeWorktree(repo);
      writeFileSync(path.join(worktree.path, "new.txt"), "new\n");
      writeFileSync(path.join(worktree.path, "shared.txt"), "changed\n");
      const statusBefore = git(worktree.path, "status", "--porcelain");
      const branchBefore = git(repo, "rev-parse", worktree.branch);
      // A lock on the job's branch, as a concurrent git would hold: the commit step cannot move it.
      const lock = path.join(repo, ".git", "refs", "heads", `${worktree.branch}.lock`);
      writeFileSync(lock, "");
      await rejectsWithGitFailed(gitWorktrees.merge(worktree, "merge it"), /update-ref/);
      assert.equal(git(worktree.path, "status", "--porcelain"), statusBefore);
      assert.equal(git(repo, "rev-parse", worktree.branch), branchBefore);
      assert.equal(readFileSync(path.join(repo, "shared.txt"), "utf8"), "base\n");
      rmSync(lock);
      const outcome = await gitWorktrees.merge(worktree, "merge it");
      assert.equal(outcome.merged, true, JSON.stringify(outcome));
      assert.equal(readFileSync(path.join(repo, "new.txt"), "utf8"), "new\n");
      assert.equal(outcome.merged && outcome.removed, true, "merged: its worktree is removed");
      assert.equal(existsSync(worktree.path), false);
      assert.equal(
        git(repo, "rev-parse", worktree.branch),
        git(repo, "rev-parse", "HEAD"),
        "its branch is kept, merged",
      );
    });
  },
);

describe(
  "through the server",
  { skip: process.platform === "win32" && "the fake agent is an .mjs file run directly" },
  () => {
    const servers: ServerProcess[] = [];
    afterEach(async () => {
      for (const server of servers.splice(0)) await server.shutdown();
    });
    const report = (response: RpcResponse): Record<string, any> => response.result.structuredContent;

    test(
      "claude_worktree merge of a job that wrote an ignored .env: not merged, the user's .env " + "kept and named",
      async () => {
        const repo = makeRepo();
        writeFileSync(path.join(repo, ".env"), "SECRET=the user's\n");
        const server = new ServerProcess({ HOME: scratch, CLAUDE_DISPATCH_WORKTREE_DIR: fresh("server-worktrees") });
        servers.push(server);
        await server.initialize();
        const started = report(
          await server.callTool("claude_start", {
            prompt: "@write .gitignore build\n@write .env SECRET=the agent's",
            cwd: repo,
            worktree: true,
          }),
        );
        const done = await server.waitForJob(started.job_id);
        assert.deepEqual(done.worktree.changed_files, [".env", ".gitignore"]);
        const refused = await server.callTool("claude_worktree", { job_id: started.job_id, action: "merge" });
        assert.equal(report(refused).status, "not_merged", JSON.stringify(report(refused)));
        assert.deepEqual(report(refused).conflicts, [".env"]);
        assert.equal(readFileSync(path.join(repo, ".env"), "utf8"), "SECRET=the user's\n");
      },
    );
  },
);

describe(
  "one merge or discard at a time, across servers and the command line",
  { skip: process.platform === "win32" && "the fake agent is an .mjs file run directly" },
  () => {
    const servers: ServerProcess[] = [];
    afterEach(async () => {
      for (const server of servers.splice(0)) await server.shutdown();
    });
    const report = (response: RpcResponse): Record<string, any> => response.result.structuredContent;

    async function twoServers(): Promise<[ServerProcess, ServerProcess]> {
      const worktreeDir = fresh("shared-worktrees");
      const first = new ServerProcess({ HOME: scratch, CLAUDE_DISPATCH_WORKTREE_DIR: worktreeDir });
      const second = new ServerProcess({
        HOME: scratch,
        CLAUDE_DISPATCH_WORKTREE_DIR: worktreeDir,
        CLAUDE_DISPATCH_STATE_DIR: first.stateDir,
      });
      servers.push(first, second);
      await Promise.all([first.initialize(), second.initialize()]);
      return [first, second];
    }

    async function finishedJob(server: ServerProcess, repo: string, file: string): Promise<string> {
      const started = report(
        await server.callTool("claude_start", { prompt: `@write ${file} the job's`, cwd: repo, worktree: true }),
      );
      await server.waitForJob(started.job_id);
      return started.job_id as string;
    }

    test(
      "a hold by a live process refuses the other server's merge and the CLI's discard; a dead " +
        "holder's is cleared",
      async () => {
        const repo = makeRepo();
        const [first, second] = await twoServers();
        const id = await finishedJob(first, repo, "held.txt");
        const lock = path.join(first.stateDir, "jobs", id, "worktree.lock.0");
        // This test's own process, alive: as a merge of the other server or of the CLI under way.
        writeFileSync(lock, JSON.stringify({ pid: process.pid }));
        const refused = await second.callTool("claude_worktree", { job_id: id, action: "merge" });
        assert.equal(refused.result.isError, true);
        assert.match(
          refused.result.content[0].text,
          /^INVALID_ARGUMENT: another merge or discard of job .* is under way \(process \d+\)/,
        );
        assert.equal(existsSync(path.join(repo, "held.txt")), false);
        const cli = spawnSync(process.execPath, [SERVER_MAIN, "discard", id], {
          env: { ...GIT_ENV, CLAUDE_DISPATCH_STATE_DIR: first.stateDir },
          encoding: "utf8",
        });
        assert.notEqual(cli.status, 0, cli.stdout);
        assert.match(cli.stderr, /under way/);
        assert.equal(
          git(repo, "for-each-ref", "--format=%(refname)", `refs/heads/dispatch/${id}`).trim(),
          `refs/heads/dispatch/${id}`,
        );
        // A holder that is gone (pid 2^22 + 1 is above Linux's pid_max) holds nothing.
        writeFileSync(lock, JSON.stringify({ pid: 4194305 }));
        const merged = report(await second.callTool("claude_worktree", { job_id: id, action: "merge" }));
        assert.equal(merged.status, "merged", JSON.stringify(merged));
        assert.equal(existsSync(lock), false);
        assert.equal(
          JSON.parse(readFileSync(path.join(first.stateDir, "jobs", id, "record.json"), "utf8")).worktree.state,
          "merged",
        );
      },
    );

    test(
      "two servers merging and discarding the same jobs at once: the first decides, and the record says what " +
        "reached the checkout",
      async () => {
        const repo = makeRepo();
        const [first, second] = await twoServers();
        for (const round of [1, 2, 3, 4]) {
          const id = await finishedJob(first, repo, `race-${round}.txt`);
          const [merge, discard] = await Promise.all([
            first.callTool("claude_worktree", { job_id: id, action: "merge" }),
            second.callTool("claude_worktree", { job_id: id, action: "discard" }),
          ]);
          const seen = `round ${round}: ${JSON.stringify([report(merge), report(discard)])}`;
          // A discard after the merge is no error: it removes what was left and says the work was merged.
          const mergedFirst = merge.result.isError === undefined;
          const discarded = discard.result.isError === undefined;
          assert.ok(mergedFirst || discarded, seen);
          if (mergedFirst && discarded) assert.equal(report(discard).worktree.state, "merged", seen);
          const state = JSON.parse(readFileSync(path.join(first.stateDir, "jobs", id, "record.json"), "utf8")).worktree
            .state;
          const reached = existsSync(path.join(repo, `race-${round}.txt`));
          assert.equal(
            state,
            reached ? "merged" : "discarded",
            `round ${round}: the record says ${state}, the file is ${reached ? "" : "not "}in the checkout`,
          );
        }
      },
    );
  },
);
