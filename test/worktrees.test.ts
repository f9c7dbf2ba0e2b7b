/**
 * A git worktree per job (PROTOCOL.md §19), through the built server, the fake
 * agent (its @write and @commit directives) and real git, in repositories
 * this test makes: parallel jobs on one file without a clash, diff, merge
 * (clean, conflicting, refused on a dirty checkout), discard, and the rules
 * around them; and one job of the real Claude Code CLI against the mock API.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, describe, test } from "node:test";

import { cliPath, mockedCliEnvironment, realCliVersion } from "./claude-cli.js";
import { waitFor } from "./processes.js";
import { gitEnvironment, gitRunner } from "./git-repos.js";
import { minimalEnvironment, SERVER_MAIN, ServerProcess, type RpcResponse } from "./server-process.js";
// @ts-expect-error: a plain ESM fixture without type declarations
import { startMockAnthropic } from "./fixtures/mock-anthropic.mjs";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-worktrees-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const GIT_ENV = gitEnvironment(scratch);
const git = gitRunner(GIT_ENV);

let repos = 0;
/** A repository with one commit: shared.txt "base", and a folder lib/. */
function makeRepo(): string {
  const repo = path.join(scratch, `repo-${(repos += 1)}`);
  mkdirSync(path.join(repo, "lib"), { recursive: true });
  git(repo, "init", "--quiet", "-b", "main");
  writeFileSync(path.join(repo, "shared.txt"), "base\n");
  writeFileSync(path.join(repo, "lib", "util.txt"), "util\n");
  git(repo, "add", "-A");
  git(repo, "commit", "--quiet", "-m", "base");
  return repo;
}

const report = (response: RpcResponse): Record<string, any> => response.result.structuredContent;
const text = (response: RpcResponse): string => response.result.content[0].text;

describe(
  "a worktree per job",
  { skip: process.platform === "win32" && "the fake agent is an .mjs file run directly" },
  () => {
    const servers: ServerProcess[] = [];
    afterEach(async () => {
      for (const server of servers.splice(0)) await server.shutdown();
    });

    function startServer(env: Record<string, string> = {}): ServerProcess {
      const server = new ServerProcess({
        HOME: scratch,
        CLAUDE_DISPATCH_WORKTREE_DIR: path.join(scratch, `worktrees-${servers.length}-${repos}`),
        ...env,
      });
      servers.push(server);
      return server;
    }

    test(
      "three jobs on one file: no clash, a diff each, the first merges, the second conflicts and changes nothing, " +
        "the third is discarded",
      async () => {
        const repo = makeRepo();
        const server = startServer();
        await server.initialize();
        const ids: string[] = [];
        for (const n of [1, 2, 3]) {
          const started = await server.callTool("claude_start", {
            prompt: `@write shared.txt version-${n}`,
            cwd: repo,
            worktree: true,
          });
          assert.equal(started.result.isError, undefined, text(started));
          ids.push(report(started).job_id);
        }
        const results = await Promise.all(ids.map((id) => server.waitForJob(id)));
        const branches = results.map((result) => result.worktree.branch);
        assert.deepEqual(
          branches,
          ids.map((id) => `dispatch/${id}`),
        );
        for (const [index, result] of results.entries()) {
          assert.equal(result.status, "completed", JSON.stringify(result));
          assert.deepEqual(result.worktree.changed_files, ["shared.txt"]);
          assert.equal(result.worktree.uncommitted, true);
          assert.equal(result.worktree.state, "active");
          assert.equal(readFileSync(path.join(result.worktree.path, "shared.txt"), "utf8"), `version-${index + 1}\n`);
          assert.ok(!result.worktree.path.startsWith(repo), "the worktree is outside the user's checkout");
        }
        assert.equal(readFileSync(path.join(repo, "shared.txt"), "utf8"), "base\n", "the user's checkout is untouched");

        for (const [index, id] of ids.entries()) {
          const diff = report(await server.callTool("claude_worktree", { job_id: id, action: "diff" }));
          assert.equal(diff.status, "diff");
          assert.match(diff.text, /^diff --git a\/shared\.txt b\/shared\.txt$/m);
          assert.match(diff.text, new RegExp(`^-base\\n\\+version-${index + 1}$`, "m"));
        }
        const before = git(repo, "rev-parse", "HEAD").trim();
        const merged = report(await server.callTool("claude_worktree", { job_id: ids[0], action: "merge" }));
        assert.equal(merged.status, "merged", JSON.stringify(merged));
        assert.equal(merged.into, "main");
        assert.equal(readFileSync(path.join(repo, "shared.txt"), "utf8"), "version-1\n");
        assert.notEqual(git(repo, "rev-parse", "HEAD").trim(), before);
        assert.deepEqual(
          merged.operations.map((operation: string) => operation.split(" ").slice(3, 4)[0] ?? operation),
          ["merge-tree", "update-ref", "merge", "worktree"],
        );

        const head = git(repo, "rev-parse", "HEAD").trim();
        const conflictingResponse = await server.callTool("claude_worktree", { job_id: ids[1], action: "merge" });
        const conflicting = report(conflictingResponse);
        assert.equal(conflicting.status, "not_merged", JSON.stringify(conflicting));
        assert.deepEqual(conflicting.conflicts, ["shared.txt"]);
        // The job left its work uncommitted: the commit to merge by hand is the one holding all of it, not its branch.
        const byHand = /`git merge ([0-9a-f]{40})`/.exec(conflicting.next)?.[1];
        assert.ok(byHand, conflicting.next);
        assert.equal(git(repo, "show", `${byHand}:shared.txt`), "version-2\n");
        assert.ok(text(conflictingResponse).includes(`in ${repo}: \`git merge ${byHand}\``), text(conflictingResponse));
        assert.ok(conflicting.next.includes(`\`claude-dispatch discard ${ids[1]}\``), conflicting.next);
        assert.equal(git(repo, "rev-parse", "HEAD").trim(), head, "nothing changed");
        assert.equal(readFileSync(path.join(repo, "shared.txt"), "utf8"), "version-1\n");
        assert.equal(git(repo, "status", "--porcelain"), "");
        assert.equal(
          git(results[1]?.worktree.path, "status", "--porcelain").trim(),
          "M shared.txt",
          "the job's worktree is as it was",
        );

        const third = results[2]?.worktree;
        const discarded = report(await server.callTool("claude_worktree", { job_id: ids[2], action: "discard" }));
        assert.equal(discarded.status, "discarded");
        assert.equal(existsSync(third.path), false);
        assert.equal(git(repo, "branch", "--list", third.branch).trim(), "");
        const again = await server.callTool("claude_worktree", { job_id: ids[2], action: "diff" });
        assert.match(text(again), /^INVALID_ARGUMENT: job .* worktree was discarded already/);
        const record = JSON.parse(
          readFileSync(path.join(server.stateDir, "jobs", ids[0] ?? "", "record.json"), "utf8"),
        );
        assert.equal(record.worktree.state, "merged");
      },
    );

    test(
      "a merge removes the worktree at once and names the branch it keeps; its commit has a short subject; " +
        "discard then removes the rest",
      async () => {
        const repo = makeRepo();
        const server = startServer();
        await server.initialize();
        const firstLine =
          "Fix the parser so that it accepts every input it is \u001b[31mgiven\u001b[0m, and then some more besides";
        const started = report(
          await server.callTool("claude_start", {
            prompt: `${firstLine}\nThe rest of the prompt.\n@write lib/parser.txt fixed`,
            cwd: repo,
            worktree: true,
          }),
        );
        const id = started.job_id as string;
        const done = await server.waitForJob(id);
        const response = await server.callTool("claude_worktree", { job_id: id, action: "merge" });
        const merged = report(response);
        assert.equal(merged.status, "merged", JSON.stringify(merged));
        assert.equal(merged.branch, `dispatch/${id}`);
        assert.equal(merged.worktree.state, "merged");
        assert.match(
          text(response),
          new RegExp(`its worktree ${done.worktree.path} is removed; its branch dispatch/${id} is kept`),
        );
        assert.equal(existsSync(done.worktree.path), false, "the merged worktree's folder is gone at once");
        assert.equal(
          git(repo, "branch", "--list", "--format=%(refname:short)", `dispatch/${id}`).trim(),
          `dispatch/${id}`,
        );
        const recordFile = path.join(server.stateDir, "jobs", id, "record.json");
        assert.equal(JSON.parse(readFileSync(recordFile, "utf8")).worktree.state, "merged");
        const subject = git(repo, "log", "-1", "--format=%s").trim();
        // The first line only, cleaned (its escape sequences gone) and cut at about 60 characters.
        const short = new RegExp(
          `^claude-dispatch: (Fix the parser so that it accepts every input it is given.*…) \\(job ` +
            `${id.slice(0, 8)}…\\)$`,
        ).exec(subject)?.[1];
        assert.ok(short !== undefined && short.length <= 61, subject);
        assert.match(git(repo, "log", "-1", "--format=%b"), new RegExp(`job ${id}`));
        const again = await server.callTool("claude_worktree", { job_id: id, action: "diff" });
        assert.match(text(again), /^INVALID_ARGUMENT: job .* worktree was merged already/);

        const discarded = await server.callTool("claude_worktree", { job_id: id, action: "discard" });
        assert.equal(discarded.result.isError, undefined, text(discarded));
        assert.equal(report(discarded).status, "discarded");
        assert.equal(
          report(discarded).worktree.state,
          "merged",
          "its work reached the checkout: the record still says merged",
        );
        assert.match(
          text(discarded),
          new RegExp(`was merged already.*removed what was left of it.*branch dispatch/${id}`, "s"),
        );
        assert.equal(git(repo, "branch", "--list", `dispatch/${id}`).trim(), "");
        assert.equal(
          readFileSync(path.join(repo, "lib", "parser.txt"), "utf8"),
          "fixed\n",
          "the merged work stays in the checkout",
        );
        assert.equal(JSON.parse(readFileSync(recordFile, "utf8")).worktree.state, "merged");
      },
    );

    test("a conflict names at most 20 of its files, cleaned, and the commands that resolve it by hand", async () => {
      const repo = makeRepo();
      // The user's git prints paths as they are: the merge's list of conflicts is cleaned here.
      git(repo, "config", "core.quotePath", "false");
      const names = [
        "a\u202etxt.exe",
        ...Array.from({ length: 24 }, (_, index) => `f${String(index).padStart(2, "0")}.txt`),
      ];
      const server = startServer();
      await server.initialize();
      const writes = names.map((name) => `@write ${name} the job's`).join("\n");
      const started = report(
        await server.callTool("claude_start", {
          prompt: `${writes}\n@commit the job's files`,
          cwd: repo,
          worktree: true,
        }),
      );
      const id = started.job_id as string;
      assert.equal((await server.waitForJob(id)).worktree.uncommitted, false);
      for (const name of names) writeFileSync(path.join(repo, name), "the user's\n");
      git(repo, "add", "-A");
      git(repo, "commit", "--quiet", "-m", "the user's files");
      const head = git(repo, "rev-parse", "HEAD");
      const response = await server.callTool("claude_worktree", { job_id: id, action: "merge" });
      const refused = report(response);
      assert.equal(refused.status, "not_merged", JSON.stringify(refused));
      assert.equal(refused.conflicts.length, 20);
      assert.equal(refused.conflicts_total, 25);
      assert.equal(refused.conflicts[0], "a\ufffdtxt.exe");
      assert.ok(
        !JSON.stringify(response.result).includes("\\u202e") && !text(response).includes("\u202e"),
        "a bidi override reaches the reader",
      );
      assert.match(
        text(response),
        /merging would conflict with main: a\ufffdtxt\.exe, f00\.txt, .*, f18\.txt and 5 more\./,
      );
      assert.ok(
        refused.next.includes(`in ${repo}: \`git merge dispatch/${id}\`, resolve the conflicts, \`git commit\``),
        refused.next,
      );
      assert.ok(refused.next.includes(`\`claude-dispatch discard ${id}\``), refused.next);
      assert.ok(text(response).includes(refused.next));
      assert.equal(git(repo, "rev-parse", "HEAD"), head, "nothing changed");
      assert.equal(git(repo, "status", "--porcelain"), "");
    });

    test("a merge is refused on a dirty checkout, and a job's commits are reported and merged", async () => {
      const repo = makeRepo();
      const server = startServer();
      await server.initialize();
      const started = report(
        await server.callTool("claude_start", {
          prompt: "@write lib/new.txt added\n@commit add new.txt",
          cwd: repo,
          worktree: true,
        }),
      );
      const done = await server.waitForJob(started.job_id);
      assert.deepEqual(done.worktree.changed_files, ["lib/new.txt"]);
      assert.deepEqual(
        done.worktree.commits.map((commit: { subject: string }) => commit.subject),
        ["add new.txt"],
      );
      assert.equal(done.worktree.uncommitted, false);
      writeFileSync(path.join(repo, "shared.txt"), "edited by hand\n");
      const refused = report(await server.callTool("claude_worktree", { job_id: started.job_id, action: "merge" }));
      assert.equal(refused.status, "not_merged");
      assert.match(refused.reason, /uncommitted changes/);
      assert.deepEqual(refused.conflicts, ["shared.txt"]);
      assert.equal(existsSync(path.join(repo, "lib", "new.txt")), false);
      git(repo, "checkout", "--quiet", "--", "shared.txt");
      const merged = report(await server.callTool("claude_worktree", { job_id: started.job_id, action: "merge" }));
      assert.equal(merged.status, "merged", JSON.stringify(merged));
      assert.equal(readFileSync(path.join(repo, "lib", "new.txt"), "utf8"), "added\n");
    });

    test(
      "a cwd below the top runs in the same folder of the worktree; uncommitted changes left " + "behind are said",
      async () => {
        const repo = makeRepo();
        writeFileSync(path.join(repo, "shared.txt"), "not committed\n");
        const server = startServer();
        await server.initialize();
        const record = path.join(scratch, `argv-${repos}`);
        const started = report(
          await server.callTool("claude_start", {
            prompt: `@record ${record}`,
            cwd: path.join(repo, "lib"),
            worktree: true,
          }),
        );
        const done = await server.waitForJob(started.job_id);
        assert.equal(JSON.parse(readFileSync(record, "utf8")).cwd, path.join(done.worktree.path, "lib"));
        assert.equal(done.worktree.left_behind, true);
        assert.equal(
          readFileSync(path.join(done.worktree.path, "shared.txt"), "utf8"),
          "base\n",
          "the worktree starts from HEAD",
        );
        assert.deepEqual(done.worktree.changed_files, []);
      },
    );

    test("while its job runs a worktree is neither merged nor discarded", async () => {
      const repo = makeRepo();
      const server = startServer();
      await server.initialize();
      const started = report(
        await server.callTool("claude_start", {
          prompt: "@write shared.txt busy\n@sleep 60000",
          cwd: repo,
          worktree: true,
        }),
      );
      for (const action of ["merge", "discard"]) {
        const refused = await server.callTool("claude_worktree", { job_id: started.job_id, action });
        assert.match(
          text(refused),
          /^INVALID_ARGUMENT: job .* is still running: its worktree is merged or discarded only once it has finished/,
        );
      }
      assert.ok(existsSync(started.worktree.path));
      await server.callTool("claude_kill", { job_id: started.job_id });
      const killed = report(await server.callTool("claude_wait", { job_id: started.job_id, hold_ms: 0 }));
      assert.equal(killed.status, "killed");
      assert.ok(existsSync(killed.worktree.path), "a killed job's worktree is kept for the user to decide on");
    });

    test("claude-dispatch diff, merge and discard at a terminal", async () => {
      const repo = makeRepo();
      const worktreeDir = path.join(scratch, `cli-${repos}`);
      const server = startServer({ CLAUDE_DISPATCH_WORKTREE_DIR: worktreeDir });
      await server.initialize();
      const kept = report(
        await server.callTool("claude_run", {
          prompt: "@write shared.txt from-the-cli-job",
          cwd: repo,
          worktree: true,
        }),
      );
      const dropped = report(
        await server.callTool("claude_run", { prompt: "@write lib/util.txt dropped", cwd: repo, worktree: true }),
      );
      const cli = (...args: string[]): { status: number | null; stdout: string; stderr: string } => {
        const env = minimalEnvironment({
          HOME: scratch,
          CLAUDE_DISPATCH_STATE_DIR: server.stateDir,
          CLAUDE_DISPATCH_WORKTREE_DIR: worktreeDir,
        });
        const result = spawnSync(process.execPath, [SERVER_MAIN, ...args], { env, encoding: "utf8" });
        return { status: result.status, stdout: result.stdout, stderr: result.stderr };
      };
      const diff = cli("diff", kept.job_id.slice(0, 8));
      assert.equal(diff.status, 0, diff.stderr);
      assert.match(diff.stdout, /^\+from-the-cli-job$/m);
      const merged = cli("merge", kept.job_id);
      assert.equal(merged.status, 0, merged.stderr);
      assert.match(merged.stdout, /^Merged job .* into main/m);
      assert.equal(readFileSync(path.join(repo, "shared.txt"), "utf8"), "from-the-cli-job\n");
      const discarded = cli("discard", dropped.job_id);
      assert.equal(discarded.status, 0, discarded.stderr);
      assert.equal(existsSync(dropped.worktree.path), false);
      assert.match(
        merged.stdout,
        new RegExp(`its worktree ${kept.worktree.path} is removed; its branch dispatch/${kept.job_id} is kept`),
      );
      assert.equal(existsSync(kept.worktree.path), false);
      assert.match(
        git(repo, "log", "-1", "--format=%s").trim(),
        new RegExp(`^claude-dispatch: @write shared.txt from-the-cli-job \\(job ${kept.job_id.slice(0, 8)}…\\)$`),
      );
      const again = cli("merge", kept.job_id);
      assert.equal(again.status, 1);
      assert.match(again.stderr, /worktree was merged already/);
      const afterMerge = cli("discard", kept.job_id);
      assert.equal(afterMerge.status, 0, afterMerge.stderr);
      assert.match(
        afterMerge.stdout,
        new RegExp(`was merged already.*removed what was left of it.*branch dispatch/${kept.job_id}`, "s"),
      );
      assert.equal(git(repo, "branch", "--list", `dispatch/${kept.job_id}`).trim(), "");
      assert.equal(readFileSync(path.join(repo, "shared.txt"), "utf8"), "from-the-cli-job\n");
      const seen = report(await server.callTool("claude_worktree", { job_id: dropped.job_id, action: "diff" }));
      assert.equal(seen.status, "error", "the server finds the worktree the command line discarded gone");
    });

    test(
      "retention removes a worktree with no changes and keeps one with changes, which jobs " + "and doctor list",
      async () => {
        const repo = makeRepo();
        const worktreeDir = path.join(scratch, `retention-${repos}`);
        const server = startServer({
          CLAUDE_DISPATCH_JOB_RETENTION_MS: "0",
          CLAUDE_DISPATCH_WORKTREE_DIR: worktreeDir,
        });
        await server.initialize();
        const changed = report(
          await server.callTool("claude_run", { prompt: "@write shared.txt changed", cwd: repo, worktree: true }),
        );
        const unchanged = report(
          await server.callTool("claude_run", { prompt: "nothing to change", cwd: repo, worktree: true }),
        );
        assert.equal(changed.status, "completed");
        assert.equal(unchanged.status, "completed");
        // Retention 0: each is pruned at the next lookup; its worktree is looked after then, in the background.
        await server.callTool("claude_list", {});
        await waitFor(
          () => git(repo, "branch", "--list", `dispatch/${unchanged.job_id}`).trim() === "",
          "the unchanged job's branch to go",
        );
        assert.equal(existsSync(path.join(worktreeDir, unchanged.job_id)), false, "no changes: removed with its job");
        assert.equal(
          existsSync(path.join(server.stateDir, "jobs", changed.job_id)),
          false,
          "the job itself was pruned",
        );
        assert.equal(
          readFileSync(path.join(worktreeDir, changed.job_id, "shared.txt"), "utf8"),
          "changed\n",
          "its unmerged change is kept",
        );
        const cliEnv = minimalEnvironment({
          HOME: scratch,
          CLAUDE_DISPATCH_STATE_DIR: server.stateDir,
          CLAUDE_DISPATCH_WORKTREE_DIR: worktreeDir,
        });
        const jobs = execFileSync(process.execPath, [SERVER_MAIN, "jobs"], { env: cliEnv, encoding: "utf8" });
        assert.match(
          jobs,
          new RegExp(
            `worktree ${worktreeDir}/${changed.job_id}, branch dispatch/${changed.job_id}, kept with changes after its job was pruned`,
          ),
        );
        // Only the agent given here: a Codex or Gemini CLI found on the runner's PATH is not logged in, a doctor fail.
        const doctorEnv = { ...cliEnv, CLAUDE_DISPATCH_CLAUDE_BIN: process.execPath, CLAUDE_DISPATCH_AGENTS: "claude" };
        const doctor = JSON.parse(
          execFileSync(process.execPath, [SERVER_MAIN, "doctor", "--json"], { env: doctorEnv, encoding: "utf8" }),
        );
        const check = doctor.checks.find((candidate: { name: string }) => candidate.name === "worktrees");
        assert.equal(check.status, "warn");
        assert.match(check.detail, /1 kept with changes nobody merged or discarded/);
      },
    );

    test(
      "a queued worktree job outlives a SIGKILLed server under CLAUDE_DISPATCH_ROOTS: the next server starts it " +
        "in its worktree",
      async () => {
        const repo = makeRepo();
        const stateDir = mkdtempSync(path.join(scratch, "restart-state-"));
        // The roots hold the repository, not the worktrees: the queued job is checked again at the restart.
        const env = {
          CLAUDE_DISPATCH_STATE_DIR: stateDir,
          CLAUDE_DISPATCH_ROOTS: repo,
          CLAUDE_DISPATCH_MAX_JOBS: "1",
          CLAUDE_DISPATCH_ON_EXIT: "keep",
        };
        const first = startServer(env);
        await first.initialize();
        const gate = path.join(scratch, `restart-gate-${repos}`);
        const holder = report(
          await first.callTool("claude_start", {
            prompt: `@wait-file ${gate}\nhold the slot`,
            cwd: repo,
            worktree: true,
          }),
        );
        const queued = report(
          await first.callTool("claude_start", {
            prompt: "@write shared.txt after-restart\nqueued",
            cwd: repo,
            worktree: true,
          }),
        );
        assert.equal(queued.status, "queued", JSON.stringify(queued));
        first.child.kill("SIGKILL");
        await first.exited;
        writeFileSync(gate, "");
        const second = startServer({ ...env, CLAUDE_DISPATCH_ON_EXIT: "kill" });
        await second.initialize();
        assert.equal((await second.waitForJob(holder.job_id)).status, "completed");
        const done = await second.waitForJob(queued.job_id);
        assert.equal(done.status, "completed", JSON.stringify(done));
        assert.equal(readFileSync(path.join(done.worktree.path, "shared.txt"), "utf8"), "after-restart\n");
        assert.equal(readFileSync(path.join(repo, "shared.txt"), "utf8"), "base\n", "the user's checkout is untouched");
      },
    );

    test(
      "outside a repository, a clear INVALID_ARGUMENT; the operator's policy decides the default and can " +
        "require worktrees",
      async () => {
        const notRepo = mkdtempSync(path.join(scratch, "plain-"));
        const server = startServer({ CLAUDE_DISPATCH_WORKTREE: "required" });
        await server.initialize();
        const outside = await server.callTool("claude_start", { prompt: "x", cwd: notRepo });
        assert.match(text(outside), /^INVALID_ARGUMENT: "worktree" needs cwd inside a git repository/);
        const refused = await server.callTool("claude_start", { prompt: "x", cwd: makeRepo(), worktree: false });
        assert.match(text(refused), /^POLICY_DENIED: "worktree" false is not allowed here/);
        const bad = await server.callTool("claude_run", { prompt: "x", cwd: notRepo, worktree: "yes" });
        assert.match(text(bad), /^INVALID_ARGUMENT: "worktree" must be true or false/);
        const noWorktree = report(
          await server.callTool("claude_run", { prompt: "x", cwd: makeRepo(), worktree: true }),
        );
        assert.equal(noWorktree.status, "completed");
        const plain = await server.callTool("claude_worktree", {
          job_id: "00000000-0000-4000-8000-000000000000",
          action: "diff",
        });
        assert.match(text(plain), /^JOB_NOT_FOUND/);
      },
    );
  },
);

describe("a worktree job of the real Claude Code CLI", { skip: !realCliVersion("worktrees") }, () => {
  test(
    "its Bash tool writes a file in the worktree, the diff shows it, and the user's checkout " + "is untouched",
    async () => {
      const mock = (await startMockAnthropic()) as { url: string; close(): Promise<void> };
      const home = mkdtempSync(path.join(scratch, "home-"));
      mkdirSync(path.join(home, ".claude"));
      writeFileSync(path.join(home, ".claude", "settings.json"), JSON.stringify({ permissions: { allow: ["Bash"] } }));
      mkdirSync(path.join(home, "tmp"));
      const server = new ServerProcess(
        mockedCliEnvironment(home, path.join(home, "tmp"), mock.url, {
          CLAUDE_DISPATCH_CLAUDE_BIN: cliPath,
          CLAUDE_DISPATCH_WORKTREE_DIR: path.join(home, "worktrees"),
        }),
        {},
      );
      try {
        await server.initialize();
        const repo = makeRepo();
        const run = report(
          await server.callTool("claude_run", {
            prompt: "MOCK:BASH echo from-the-agent > agent.txt",
            cwd: repo,
            worktree: true,
          }),
        );
        assert.equal(run.status, "completed", JSON.stringify(run));
        assert.deepEqual(run.worktree.changed_files, ["agent.txt"]);
        assert.equal(readFileSync(path.join(run.worktree.path, "agent.txt"), "utf8"), "from-the-agent\n");
        assert.equal(existsSync(path.join(repo, "agent.txt")), false);
        const diff = report(await server.callTool("claude_worktree", { job_id: run.job_id, action: "diff" }));
        assert.match(diff.text, /^\+\+\+ b\/agent\.txt$/m);
        assert.match(diff.text, /^\+from-the-agent$/m);
        // The CLI filed the session under the worktree's path; claude_sessions of the repository finds it there (§20).
        const sessions = report(await server.callTool("claude_sessions", { cwd: repo }));
        assert.equal(sessions.status, "listed", JSON.stringify(sessions));
        const found = sessions.sessions.find(
          (session: { session_id: string }) => session.session_id === run.session_id,
        );
        assert.ok(found, JSON.stringify(sessions));
        assert.equal(found.worktree, run.worktree.path);
        assert.deepEqual(found.job_ids, [run.job_id]);
        assert.match(found.first_prompt, /MOCK:BASH echo from-the-agent > agent\.txt/);
        // The command line lists it too, by the same code.
        const cliEnv = minimalEnvironment({ HOME: home, CLAUDE_DISPATCH_STATE_DIR: server.stateDir });
        const listed = JSON.parse(
          execFileSync(process.execPath, [SERVER_MAIN, "sessions", repo, "--json"], { env: cliEnv, encoding: "utf8" }),
        );
        const byCli = listed.sessions.find((session: { session_id: string }) => session.session_id === run.session_id);
        assert.equal(byCli?.worktree, run.worktree.path, JSON.stringify(listed));
        assert.deepEqual(byCli?.job_ids, [run.job_id]);
        // Resuming it runs in that worktree again: a session is tied to its folder.
        const resumed = report(
          await server.callTool("claude_run", { prompt: "and then?", cwd: repo, session_id: run.session_id }),
        );
        assert.equal(resumed.status, "completed", JSON.stringify(resumed));
        assert.equal(resumed.session_id, run.session_id);
        assert.equal(resumed.worktree.path, run.worktree.path);
      } finally {
        await server.shutdown();
        await mock.close();
      }
    },
  );
});
