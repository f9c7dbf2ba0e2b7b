/**
 * Agents on another machine over SSH (PROTOCOL.md §21), end to end: the built server, a real sshd on 127.0.0.1
 * (test/sshd.ts), and on its far side a second claude-dispatch in remote mode with a state directory of its own,
 * running the fake agent. "Remote" is this machine, so pids and files there can be checked directly.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { commandLine, isAlive, readPids, readRecordFile, waitFor } from "./processes.js";
import { FAKE_CLAUDE, minimalEnvironment, runProgram, SERVER_MAIN, ServerProcess } from "./server-process.js";
import { sshSkipReason, startSshd, type Sshd } from "./sshd.js";

const skip = sshSkipReason("ssh hosts");

describe("jobs on another host over ssh", { skip }, () => {
  let sshd: Sshd;
  let scratch: string;
  let work: string;
  let remoteState: string;
  const servers: ServerProcess[] = [];
  const agentPids: number[] = [];

  before(async () => {
    sshd = await startSshd({ env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` } });
    scratch = mkdtempSync(path.join(tmpdir(), "cd-ssh-"));
    work = path.join(scratch, "work");
    mkdirSync(work);
    remoteState = path.join(scratch, "remote-state");
  });

  after(async () => {
    for (const server of servers) server.dispose();
    for (const pid of agentPids) if (isAlive(pid)) process.kill(pid, "SIGKILL");
    await sshd?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  function hostsSetting(alias = sshd.alias): string {
    return JSON.stringify({
      box: {
        ssh: alias,
        ssh_config: sshd.clientConfig,
        roots: [work],
        command: [process.execPath, SERVER_MAIN],
        state_dir: remoteState,
        programs: { claude: FAKE_CLAUDE },
      },
    });
  }

  function server(env: Record<string, string> = {}): ServerProcess {
    const started = new ServerProcess({ CLAUDE_DISPATCH_HOSTS: hostsSetting(), ...env });
    servers.push(started);
    return started;
  }

  /**
   * A job there whose agent writes its pid, then sleeps a minute; the pid
   * is killed after the suite if a test leaves it.
   */
  async function startSleeper(s: ServerProcess, name: string, before = ""): Promise<{ id: string; pidFile: string }> {
    const pidFile = path.join(scratch, `${name}.pids`);
    const started = await s.callTool("claude_start", {
      prompt: `@pid ${pidFile}\n${before ? `${before}\n` : ""}@sleep 60000`,
      cwd: work,
      host: "box",
    });
    await waitFor(() => readPids(pidFile).length === 1, "the agent");
    agentPids.push(...readPids(pidFile));
    return { id: started.result.structuredContent.job_id, pidFile };
  }

  function textOf(response: { result?: any }): string {
    return response.result?.content?.[0]?.text ?? "";
  }

  /** The remote job's files, byte for byte, against the local copy. */
  function sameOutput(localState: string, id: string): void {
    const remote = readFileSync(path.join(remoteState, "jobs", id, "stdout.jsonl"));
    const local = readFileSync(path.join(localState, "jobs", id, "stdout.jsonl"));
    assert.ok(remote.length > 0);
    assert.ok(local.equals(remote), `local copy ${local.length} bytes, remote ${remote.length}`);
  }

  test(
    "claude_run there: the result, the agent in that cwd at depth 1, and the job in that machine's " +
      "state directory",
    async () => {
      const s = server({ CLAUDE_DISPATCH_STATE_DIR: mkdtempSync(path.join(scratch, "run-state-")) });
      await s.initialize();
      const listed = await s.request("tools/list");
      const run = listed.result.tools.find((tool: { name: string }) => tool.name === "claude_run");
      assert.deepEqual(run.inputSchema.properties.host.enum, ["box"]);
      const recordFile = path.join(scratch, "recorded.json");
      const response = await s.callTool("claude_run", {
        prompt: `hello from afar\n@record ${recordFile}\n@tools 2 20`,
        cwd: work,
        host: "box",
      });
      const result = response.result.structuredContent;
      assert.equal(result.status, "completed", textOf(response));
      assert.match(result.result, /ECHO: hello from afar/);
      assert.equal(result.num_turns, 3);
      const recorded = JSON.parse(readFileSync(recordFile, "utf8"));
      assert.equal(recorded.cwd, work);
      assert.equal(recorded.depth, "1");
      // The local record names the host; the remote one is that machine's own job, finished there too.
      assert.equal(readRecordFile(s.stateDir, result.job_id).host, "box");
      const remoteRecord = readRecordFile(remoteState, result.job_id);
      assert.equal(remoteRecord.status, "completed");
      assert.equal(remoteRecord.host, "local");
      sameOutput(s.stateDir, result.job_id);
      const jobs = await runProgram(process.execPath, [SERVER_MAIN, "jobs", "--all"], {
        CLAUDE_DISPATCH_STATE_DIR: remoteState,
      });
      assert.ok(jobs.stdout.includes(result.job_id), jobs.stdout);
      // Here, the listing says where it ran.
      const here = await runProgram(process.execPath, [SERVER_MAIN, "jobs", "--all"], {
        CLAUDE_DISPATCH_STATE_DIR: s.stateDir,
      });
      assert.match(here.stdout, new RegExp(`${result.job_id}.*box:${work}`));
      const inList = await s.callTool("claude_list", {});
      assert.equal(
        inList.result.structuredContent.jobs.find((job: { job_id: string }) => job.job_id === result.job_id)?.host,
        "box",
      );
      // A resumed session continues there too.
      const again = await s.callTool("claude_run", {
        prompt: "and then?",
        cwd: work,
        host: "box",
        session_id: result.session_id,
      });
      assert.equal(again.result.structuredContent.status, "completed", textOf(again));
      assert.equal(again.result.structuredContent.session_id, result.session_id);
      // One shared connection, its socket in the state directory's private ssh folder; closed when the server stops.
      const sockets = path.join(s.stateDir, "ssh");
      assert.equal(statSync(sockets).mode & 0o777, 0o700);
      assert.equal(readdirSync(sockets).length, 1);
      await s.shutdown();
      assert.equal(readdirSync(sockets).length, 0);
    },
  );

  test("refused before anything runs there: a cwd outside the roots, an unknown host", async () => {
    // The host's key is refused: had anything been sent, the error would be HOST_FAILED, not these.
    const s = server({ CLAUDE_DISPATCH_HOSTS: hostsSetting(sshd.refusedAlias) });
    await s.initialize();
    const outside = await s.callTool("claude_run", { prompt: "x", cwd: "/etc", host: "box" });
    assert.match(textOf(outside), /^POLICY_DENIED: "cwd" is outside the host's roots/);
    const escape = await s.callTool("claude_run", { prompt: "x", cwd: `${work}/../..`, host: "box" });
    assert.match(textOf(escape), /^POLICY_DENIED/);
    const relative = await s.callTool("claude_run", { prompt: "x", cwd: "work", host: "box" });
    assert.match(textOf(relative), /^INVALID_ARGUMENT/);
    const unknown = await s.callTool("claude_run", { prompt: "x", cwd: work, host: "elsewhere" });
    assert.match(
      textOf(unknown),
      /^INVALID_ARGUMENT: "host" must be one of the hosts this server is configured with: box; got "elsewhere"/,
    );
    const noRepo = await s.callTool("claude_run", { prompt: "x", cwd: "/etc", host: "box", worktree: true });
    assert.match(textOf(noRepo), /^POLICY_DENIED/, "the roots come before the worktree");
    await s.shutdown();
  });

  test(
    "worktrees there: two jobs write one file, a diff each; the first merges there, the second conflicts and " +
      "is discarded",
    async () => {
      const repo = path.join(work, "repo");
      mkdirSync(repo);
      const gitEnv = minimalEnvironment({
        HOME: scratch,
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_AUTHOR_NAME: "t",
        GIT_AUTHOR_EMAIL: "t@localhost",
        GIT_COMMITTER_NAME: "t",
        GIT_COMMITTER_EMAIL: "t@localhost",
      });
      const git = (...args: string[]): string =>
        execFileSync("git", args, { cwd: repo, env: gitEnv, encoding: "utf8" });
      git("init", "--quiet", "-b", "main");
      writeFileSync(path.join(repo, "shared.txt"), "base\n");
      git("add", "-A");
      git("commit", "--quiet", "-m", "base");
      const s = server();
      await s.initialize();
      const ids: string[] = [];
      for (const text of ["from-a", "from-b"]) {
        const started = await s.callTool("claude_start", {
          prompt: `@write shared.txt ${text}\n${text}`,
          cwd: repo,
          host: "box",
          worktree: true,
        });
        assert.equal(started.result.structuredContent.status, "running", textOf(started));
        ids.push(started.result.structuredContent.job_id);
      }
      const [first = "", second = ""] = ids;
      for (const id of ids) {
        const done = (await s.callTool("claude_wait", { job_id: id, hold_ms: 30_000 })).result.structuredContent;
        assert.equal(done.status, "completed", JSON.stringify(done));
        assert.equal(
          done.worktree.path,
          path.join(remoteState, "worktrees", id),
          "made there, in that machine's worktree folder",
        );
        assert.equal(done.worktree.branch, `dispatch/${id}`);
        assert.deepEqual(done.worktree.changed_files, ["shared.txt"]);
      }
      // The command line here points to the server, or to that machine.
      const here = await runProgram(process.execPath, [SERVER_MAIN, "diff", first], {
        CLAUDE_DISPATCH_STATE_DIR: s.stateDir,
      });
      assert.match(here.stderr, /worktree is on host box: use claude_worktree through the server/);
      const diff = await s.callTool("claude_worktree", { job_id: first, action: "diff" });
      assert.match(diff.result.structuredContent.text, /\+from-a/);
      const merged = await s.callTool("claude_worktree", { job_id: first, action: "merge" });
      assert.equal(merged.result.structuredContent.status, "merged", textOf(merged));
      assert.equal(readFileSync(path.join(repo, "shared.txt"), "utf8"), "from-a\n");
      assert.equal(
        readRecordFile(remoteState, first).worktree?.state,
        "merged",
        "that machine's record knows, for its retention",
      );
      assert.equal(
        existsSync(path.join(remoteState, "worktrees", first)),
        false,
        "merged: its worktree is removed there",
      );
      assert.equal(
        git("branch", "--list", "--format=%(refname:short)", `dispatch/${first}`).trim(),
        `dispatch/${first}`,
        "its branch is kept",
      );
      const conflict = await s.callTool("claude_worktree", { job_id: second, action: "merge" });
      assert.equal(conflict.result.structuredContent.status, "not_merged", textOf(conflict));
      assert.deepEqual(conflict.result.structuredContent.conflicts, ["shared.txt"]);
      const discarded = await s.callTool("claude_worktree", { job_id: second, action: "discard" });
      assert.equal(discarded.result.structuredContent.status, "discarded", textOf(discarded));
      assert.equal(existsSync(path.join(remoteState, "worktrees", second)), false);
      const afterMerge = await s.callTool("claude_worktree", { job_id: first, action: "discard" });
      assert.match(textOf(afterMerge), /was merged already/);
      assert.equal(
        git("branch", "--list", `dispatch/${first}`).trim(),
        "",
        "discarded after its merge: its branch is gone",
      );
      await s.shutdown();
    },
  );

  test("a host that refuses the key: HOST_FAILED with ssh's reason", async () => {
    const s = server({ CLAUDE_DISPATCH_HOSTS: hostsSetting(sshd.refusedAlias) });
    await s.initialize();
    const response = await s.callTool("claude_run", { prompt: "x", cwd: work, host: "box" });
    assert.match(textOf(response), /^HOST_FAILED: cannot start it on host box: ssh failed: .*Permission denied/);
    await s.shutdown();
  });

  test(
    "claude_start, claude_wait, and claude_kill during a long tool call: nothing of the job " + "is left there",
    async () => {
      const s = server();
      await s.initialize();
      const pidFile = path.join(scratch, "kill.pids");
      const started = await s.callTool("claude_start", {
        prompt: `@pid ${pidFile}\n@spawn ${pidFile} detached\n@tools 1 10\n@sleep 60000`,
        cwd: work,
        host: "box",
      });
      const id = started.result.structuredContent.job_id;
      await waitFor(() => readPids(pidFile).length === 2, "the agent and its detached child");
      const pids = readPids(pidFile);
      agentPids.push(...pids);
      const early = await s.callTool("claude_wait", { job_id: id, hold_ms: 0 });
      assert.equal(early.result.structuredContent.status, "running");
      const killed = await s.callTool("claude_kill", { job_id: id });
      assert.equal(killed.result.structuredContent.status, "killed", textOf(killed));
      for (const pid of pids) assert.equal(isAlive(pid), false, `pid ${pid} survived`);
      await waitFor(() => readRecordFile(remoteState, id).status === "killed", "the remote record says killed");
      await s.shutdown();
    },
  );

  test("the connection killed mid-job: the agent runs on, the job completes with its whole output", async () => {
    const s = server();
    await s.initialize();
    const gate = path.join(scratch, "drop.gate");
    const started = await s.callTool("claude_start", {
      prompt: `@tools 3 10\n@wait-file ${gate}\ndropped`,
      cwd: work,
      host: "box",
    });
    const id = started.result.structuredContent.job_id;
    await waitFor(
      () =>
        existsSync(path.join(s.stateDir, "jobs", id, "stdout.jsonl")) &&
        readFileSync(path.join(s.stateDir, "jobs", id, "stdout.jsonl"), "utf8").split("\n").length > 4,
      "some output here",
    );
    assert.ok((await sshd.dropConnections()) >= 1);
    await waitFor(() => s.stderr.includes(`job ${id} on host box: the connection ended`), "the drop noticed");
    writeFileSync(gate, "");
    const done = await s.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
    assert.equal(done.result.structuredContent.status, "completed", textOf(done));
    assert.match(done.result.structuredContent.result, /ECHO: @tools 3 10/);
    assert.equal(done.result.structuredContent.num_turns, 4);
    sameOutput(s.stateDir, id);
    await s.shutdown();
  });

  test(
    "the far end's follower SIGKILLed mid-job, the connection intact: the next follow takes the job over there " +
      "and it completes",
    async () => {
      const s = server();
      await s.initialize();
      const gate = path.join(scratch, "follower.gate");
      const started = await s.callTool("claude_start", {
        prompt: `@tools 2 10\n@wait-file ${gate}\nfollower`,
        cwd: work,
        host: "box",
      });
      const id = started.result.structuredContent.job_id;
      await waitFor(() => readRecordFile(remoteState, id).agent?.start_time !== undefined, "the agent recorded there");
      const owner = readRecordFile(remoteState, id).owner.pid as number;
      assert.match(commandLine(owner), / remote /, "the record's owner there is the remote mode's follower");
      process.kill(owner, "SIGKILL");
      await waitFor(
        () => s.stderr.includes(`job ${id} on host box: the connection ended`),
        "the session's end noticed",
      );
      await waitFor(
        () => (readRecordFile(remoteState, id).generation ?? 0) >= 1,
        "a new follower there took the job over",
      );
      writeFileSync(gate, "");
      const done = await s.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
      assert.equal(done.result.structuredContent.status, "completed", textOf(done));
      assert.match(done.result.structuredContent.result, /ECHO: @tools 2 10/);
      assert.equal(readRecordFile(remoteState, id).status, "completed");
      sameOutput(s.stateDir, id);
      await s.shutdown();
    },
  );

  test("the local server SIGKILLed mid-job: the next one follows the remote job to its result", async () => {
    const localState = mkdtempSync(path.join(scratch, "local-state-"));
    const first = server({ CLAUDE_DISPATCH_STATE_DIR: localState, CLAUDE_DISPATCH_ON_EXIT: "keep" });
    await first.initialize();
    const gate = path.join(scratch, "restart.gate");
    const started = await first.callTool("claude_start", {
      prompt: `@tools 2 10\n@wait-file ${gate}\nrestarted`,
      cwd: work,
      host: "box",
    });
    const id = started.result.structuredContent.job_id;
    await waitFor(() => readRecordFile(remoteState, id).agent?.start_time !== undefined, "the agent recorded there");
    first.child.kill("SIGKILL");
    await first.exited;
    writeFileSync(gate, "");
    const second = server({ CLAUDE_DISPATCH_STATE_DIR: localState });
    await second.initialize();
    const done = await second.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
    assert.equal(done.result.structuredContent.status, "completed", textOf(done));
    assert.match(done.result.structuredContent.result, /ECHO: @tools 2 10/);
    assert.equal(readRecordFile(localState, id).generation, 1);
    sameOutput(localState, id);
    await second.shutdown();
  });

  test(
    "a second server on the same state directory follows the remote job, and its claude_kill reaches " +
      "the tree there",
    async () => {
      const localState = mkdtempSync(path.join(scratch, "shared-state-"));
      const owner = server({ CLAUDE_DISPATCH_STATE_DIR: localState });
      const other = server({ CLAUDE_DISPATCH_STATE_DIR: localState });
      await owner.initialize();
      await other.initialize();
      const { id, pidFile } = await startSleeper(owner, "shared", "@tools 2 10");
      const seen = await other.callTool("claude_wait", { job_id: id, hold_ms: 0 });
      assert.equal(seen.result.structuredContent.status, "running", textOf(seen));
      const killed = await other.callTool("claude_kill", { job_id: id });
      assert.equal(killed.result.structuredContent.status, "killed", textOf(killed));
      assert.equal(readPids(pidFile).some(isAlive), false);
      const ownerView = await owner.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
      assert.equal(ownerView.result.structuredContent.status, "killed");
      await other.shutdown();
      await owner.shutdown();
    },
  );

  test("doctor checks each host: reached, claude-dispatch and the agent there; a refused key fails", async () => {
    // doctor runs `claude --version`: node answers it at once, where the fake agent would wait for a prompt.
    const env = {
      CLAUDE_DISPATCH_STATE_DIR: path.join(scratch, "doctor-state"),
      CLAUDE_DISPATCH_CLAUDE_BIN: process.execPath,
    };
    const good = await runProgram(process.execPath, [SERVER_MAIN, "doctor", "--json"], {
      ...env,
      CLAUDE_DISPATCH_HOSTS: hostsSetting(),
    });
    const check = JSON.parse(good.stdout).checks.find((entry: { name: string }) => entry.name === "host box");
    assert.equal(check?.status, "ok", good.stdout);
    assert.match(
      check.detail,
      new RegExp(`claude-dispatch \\S+, state directory ${remoteState}, claude ${FAKE_CLAUDE}`),
    );
    const refused = await runProgram(process.execPath, [SERVER_MAIN, "doctor", "--json"], {
      ...env,
      CLAUDE_DISPATCH_HOSTS: hostsSetting(sshd.refusedAlias),
    });
    assert.equal(refused.code, 1);
    const failed = JSON.parse(refused.stdout).checks.find((entry: { name: string }) => entry.name === "host box");
    assert.equal(failed?.status, "fail");
    assert.match(failed.detail, /Permission denied/);
  });

  test(
    "claude-dispatch kill here, after the server died: the tree is killed there, and both " + "records say killed",
    async () => {
      const localState = mkdtempSync(path.join(scratch, "cli-kill-state-"));
      const s = server({ CLAUDE_DISPATCH_STATE_DIR: localState, CLAUDE_DISPATCH_ON_EXIT: "keep" });
      await s.initialize();
      const { id, pidFile } = await startSleeper(s, "cli-kill");
      s.child.kill("SIGKILL");
      await s.exited;
      const killed = await runProgram(process.execPath, [SERVER_MAIN, "kill", id], {
        CLAUDE_DISPATCH_STATE_DIR: localState,
        CLAUDE_DISPATCH_HOSTS: hostsSetting(),
      });
      assert.equal(killed.code, 0, killed.stderr + killed.stdout);
      assert.equal(readPids(pidFile).some(isAlive), false);
      // The command started a carrier in the dead server's place (§15.8), which records the kill.
      await waitFor(() => readRecordFile(localState, id).status === "killed", "the local record says killed");
      await waitFor(() => readRecordFile(remoteState, id).status === "killed", "the remote record says killed");
      // doctor here counts the job by its agent and where it ran.
      const doctor = await runProgram(process.execPath, [SERVER_MAIN, "doctor", "--json"], {
        CLAUDE_DISPATCH_STATE_DIR: localState,
        CLAUDE_DISPATCH_CLAUDE_BIN: process.execPath,
      });
      const jobs = JSON.parse(doctor.stdout).checks.find((check: { name: string }) => check.name === "jobs");
      assert.match(jobs.detail, /^1 \(0 running, 0 queued; claude on box 1\)/);
    },
  );

  test(
    "a host out of reach for a while: claude_kill is KILL_FAILED, and the kill is carried out " + "once it is back",
    async () => {
      // An ssh that fails as an unreachable host does while the flag file is there.
      const flag = path.join(scratch, "unreachable.flag");
      const wrapper = path.join(scratch, "flaky-ssh");
      writeFileSync(
        wrapper,
        `#!/bin/sh\nif [ -e '${flag}' ]; then echo "ssh: connect to host box port 22: Connection refused" >&2; exit 255; fi\nexec '${sshPath()}' "$@"\n`,
        { mode: 0o755 },
      );
      const s = server({ CLAUDE_DISPATCH_SSH_BIN: wrapper });
      await s.initialize();
      const { id, pidFile } = await startSleeper(s, "flaky");
      writeFileSync(flag, "");
      await sshd.dropConnections();
      const killed = await s.callTool("claude_kill", { job_id: id });
      assert.match(
        textOf(killed),
        /^KILL_FAILED: host box could not be reached .*Connection refused.*; it is still running, and is killed as soon as the host can be reached/,
      );
      assert.ok(readPids(pidFile).every(isAlive));
      rmSync(flag);
      const done = await s.callTool("claude_wait", { job_id: id, hold_ms: 30_000 });
      assert.equal(done.result.structuredContent.status, "killed", textOf(done));
      assert.equal(readPids(pidFile).some(isAlive), false);
      await s.shutdown();
    },
  );

  test("claude_kill when the host cannot be reached: KILL_FAILED, and the job still runs", async () => {
    const s = server({
      CLAUDE_DISPATCH_HOSTS: JSON.stringify({
        box: { ...JSON.parse(hostsSetting()).box, options: { ConnectTimeout: 5 } },
      }),
    });
    await s.initialize();
    const { id, pidFile } = await startSleeper(s, "unreachable");
    // The host goes away: its address refuses connections.
    await sshd.stop();
    const killed = await s.callTool("claude_kill", { job_id: id });
    assert.match(textOf(killed), /^KILL_FAILED: host box could not be reached/);
    const still = await s.callTool("claude_wait", { job_id: id, hold_ms: 0 });
    assert.equal(still.result.structuredContent.status, "running");
    assert.ok(readPids(pidFile).every(isAlive));
    // Killed there with that machine's own command line.
    const there = await runProgram(process.execPath, [SERVER_MAIN, "kill", id], {
      CLAUDE_DISPATCH_STATE_DIR: remoteState,
    });
    assert.equal(there.code, 0, there.stderr);
    await waitFor(() => !readPids(pidFile).some(isAlive), "the agent killed there");
    // Killed with its state directory removed: a server left behind leaves its folder in the temporary folder.
    s.dispose();
  });
});

/** The real ssh, by its path, for a wrapper around it. */
function sshPath(): string {
  const found = (process.env.PATH ?? "/usr/bin:/bin")
    .split(":")
    .map((dir) => path.join(dir, "ssh"))
    .find((file) => existsSync(file));
  return found ?? "/usr/bin/ssh";
}
