/**
 * A fresh container per job (PROTOCOL.md §21.1), end to end: the built server here makes each job's container from
 * the test image of a private podman (test/containers.ts), with only the job's directory mounted, runs the fake agent
 * there under claude-dispatch's remote mode, and removes the container once the job's end is read.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { cliPath, realCliVersion } from "./claude-cli.js";
import { containerSkipReason, IMAGE_FAKE_CLAUDE, IMAGE_MAIN, startEngine, type Engine } from "./containers.js";
// @ts-expect-error: a plain ESM fixture, without types
import { startMockAnthropic } from "./fixtures/mock-anthropic.mjs";
import { onPath, readPids, waitFor } from "./processes.js";
import { minimalEnvironment, runProgram, SERVER_MAIN, ServerProcess } from "./server-process.js";

const skip = containerSkipReason("sandbox hosts");
const version = skip ? undefined : realCliVersion("sandbox hosts");

describe("a fresh sandbox per job", { skip }, () => {
  let engine: Engine;
  let image: string;
  let podman: string;
  let scratch: string;
  let root: string;
  let canary: string;
  const servers: ServerProcess[] = [];

  before(async () => {
    scratch = mkdtempSync(path.join(tmpdir(), "cd-sandbox-"));
    root = path.join(scratch, "projects");
    mkdirSync(path.join(root, "app"), { recursive: true });
    // Something of the user's that no sandbox mounts: the agent must not read it.
    mkdirSync(path.join(scratch, "home"));
    canary = path.join(scratch, "home", "canary.txt");
    writeFileSync(canary, "the user's secret\n");
    engine = await startEngine();
    podman = onPath("podman", engine.env.PATH) ?? assert.fail("podman is not on the engine's PATH");
    image = await engine.buildImage();
  });

  after(async () => {
    for (const server of servers) server.dispose();
    await engine?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  function server(env: Record<string, string> = {}): ServerProcess {
    const hosts = {
      sandbox: {
        image,
        engine_bin: podman,
        roots: [root],
        command: ["/usr/bin/node", IMAGE_MAIN],
        programs: { claude: IMAGE_FAKE_CLAUDE },
        env: ["SANDBOX_TOKEN"],
        permission_modes: { claude: ["bypassPermissions", "default"] },
      },
    };
    const started = new ServerProcess({
      ...engine.env,
      SANDBOX_TOKEN: "given by name",
      OTHER_SECRET: "never given",
      CLAUDE_DISPATCH_HOSTS: JSON.stringify(hosts),
      ...env,
    });
    servers.push(started);
    return started;
  }

  async function containerOf(jobId: string): Promise<boolean> {
    return (await engine.podman(["container", "exists", `claude-dispatch-${jobId}`])).code === 0;
  }

  test("claude_run sees its directory and the variables listed, and no more; then its container goes", async () => {
    const cwd = path.join(root, "app");
    const s = server();
    await s.initialize();
    const response = await s.callTool("claude_run", {
      prompt: [
        "boxed",
        "@write made.txt from the sandbox",
        `@probe ${canary} probe.txt`,
        "@env env.json SANDBOX_TOKEN OTHER_SECRET",
      ].join("\n"),
      cwd,
      host: "sandbox",
      permission_mode: "bypassPermissions",
    });
    const result = response.result.structuredContent;
    assert.equal(result.status, "completed", JSON.stringify(response.result));
    assert.match(result.result, /ECHO: boxed/);
    assert.equal(
      readFileSync(path.join(cwd, "made.txt"), "utf8"),
      "from the sandbox\n",
      "written where the user sees it",
    );
    assert.equal(
      readFileSync(path.join(cwd, "probe.txt"), "utf8"),
      "unreadable:ENOENT\n",
      "the user's home is not there",
    );
    assert.deepEqual(JSON.parse(readFileSync(path.join(cwd, "env.json"), "utf8")), {
      SANDBOX_TOKEN: "given by name",
      OTHER_SECRET: null,
    });
    assert.equal(await containerOf(result.job_id), false, "the container went with the job's end");
    await s.shutdown();
  });

  test("bypassPermissions is the sandbox's only: refused here, on this machine", async () => {
    const s = server();
    await s.initialize();
    const here = await s.callTool("claude_run", {
      prompt: "x",
      cwd: path.join(root, "app"),
      permission_mode: "bypassPermissions",
    });
    assert.match(
      here.result.content[0].text,
      /^POLICY_DENIED: permission_mode "bypassPermissions" is not allowed here/,
    );
    await s.shutdown();
  });

  test("claude_kill removes the container, with everything the agent started in it", async () => {
    const cwd = path.join(root, "app");
    const s = server();
    await s.initialize();
    const started = await s.callTool("claude_start", {
      prompt: `@pid pids.txt\n@spawn pids.txt\n@sleep 60000`,
      cwd,
      host: "sandbox",
    });
    const id = started.result.structuredContent.job_id;
    await waitFor(() => readPids(path.join(cwd, "pids.txt")).length === 2, "the agent and its child in the sandbox");
    assert.equal(await containerOf(id), true);
    const killed = await s.callTool("claude_kill", { job_id: id });
    assert.equal(killed.result.structuredContent.status, "killed", JSON.stringify(killed.result));
    assert.equal(await containerOf(id), false);
    rmSync(path.join(cwd, "pids.txt"));
    await s.shutdown();
  });

  test("this server SIGKILLed mid-job: the next follows the job in its container to the end, removing it", async () => {
    const cwd = path.join(root, "app");
    const state = mkdtempSync(path.join(scratch, "state-"));
    const first = server({ CLAUDE_DISPATCH_STATE_DIR: state, CLAUDE_DISPATCH_ON_EXIT: "keep" });
    await first.initialize();
    const gate = path.join(cwd, "sandbox.gate");
    const started = await first.callTool("claude_start", {
      prompt: `survive\n@tools 2 10\n@wait-file ${gate}`,
      cwd,
      host: "sandbox",
    });
    const id = started.result.structuredContent.job_id;
    await waitFor(() => existsSync(path.join(state, "jobs", id, "stdout.jsonl")), "the job's output here");
    await waitFor(
      () => readFileSync(path.join(state, "jobs", id, "stdout.jsonl"), "utf8").includes("tool_use"),
      "a turn",
    );
    first.child.kill("SIGKILL");
    await first.exited;
    assert.equal(await containerOf(id), true, "the sandbox outlives the server");
    writeFileSync(gate, "");
    const second = server({ CLAUDE_DISPATCH_STATE_DIR: state });
    await second.initialize();
    const report = await second.waitForJob(id);
    assert.equal(report.status, "completed", JSON.stringify(report));
    assert.equal(report.num_turns, 3);
    assert.equal(await containerOf(id), false);
    await second.shutdown();
  });

  test("doctor: the engine has the image, and claude-dispatch answers in a container made for the check", async () => {
    const doctor = await runProgram(
      process.execPath,
      [SERVER_MAIN, "doctor"],
      {
        ...engine.env,
        CLAUDE_DISPATCH_HOSTS: JSON.stringify({
          sandbox: {
            image,
            engine_bin: podman,
            roots: [root],
            command: ["/usr/bin/node", IMAGE_MAIN],
            programs: { claude: IMAGE_FAKE_CLAUDE },
          },
        }),
        CLAUDE_DISPATCH_STATE_DIR: mkdtempSync(path.join(scratch, "doctor-")),
      },
      60_000,
    );
    // At 80 columns the detail wraps after the host's description.
    assert.match(
      doctor.stdout,
      /^ok +host sandbox: podman sandboxes of localhost\/dispatch-test:1:\n +claude-dispatch \d+\.\d+\.\d+, /m,
    );
    const missing = await runProgram(
      process.execPath,
      [SERVER_MAIN, "doctor"],
      {
        ...engine.env,
        CLAUDE_DISPATCH_HOSTS: JSON.stringify({
          sandbox: { image: "localhost/none:1", engine_bin: podman, roots: [root] },
        }),
        CLAUDE_DISPATCH_STATE_DIR: mkdtempSync(path.join(scratch, "doctor-")),
      },
      60_000,
    );
    assert.match(missing.stdout, /^fail +host sandbox: podman sandboxes of localhost\/none:1: podman has no image/m);
  });

  test("a cwd outside the sandbox's roots, or led out of them by a link, is refused before any container", async () => {
    const s = server();
    await s.initialize();
    const outside = await s.callTool("claude_run", { prompt: "x", cwd: path.join(scratch, "home"), host: "sandbox" });
    assert.match(outside.result.content[0].text, /^POLICY_DENIED: "cwd" /);
    symlinkSync(path.join(scratch, "home"), path.join(root, "home-link"));
    const linked = await s.callTool("claude_run", { prompt: "x", cwd: path.join(root, "home-link"), host: "sandbox" });
    assert.match(linked.result.content[0].text, /^POLICY_DENIED: "cwd" /);
    const made = await engine.podman([
      "ps",
      "--all",
      "--filter",
      "label=io.claude-dispatch.job",
      "--format",
      "{{.Names}}",
    ]);
    assert.equal(made.stdout.trim(), "", "no container was made");
    await s.shutdown();
  });

  test("a directory holding the state directory never goes into a sandbox", async () => {
    const state = path.join(root, "app", "state");
    const s = server({ CLAUDE_DISPATCH_STATE_DIR: state });
    await s.initialize();
    const response = await s.callTool("claude_run", { prompt: "x", cwd: path.join(root, "app"), host: "sandbox" });
    assert.equal(response.result.isError, true);
    assert.match(response.result.content[0].text, /^POLICY_DENIED: "cwd" holds the state directory/);
    await s.shutdown();
    rmSync(state, { recursive: true, force: true });
  });

  test("a worktree job: its worktree is mounted, and its changes merge into the user's checkout", async () => {
    const repo = path.join(root, "repo");
    mkdirSync(repo);
    const git = (...args: string[]) =>
      execFileSync("git", args, {
        cwd: repo,
        env: minimalEnvironment({
          GIT_AUTHOR_NAME: "t",
          GIT_AUTHOR_EMAIL: "t@localhost",
          GIT_COMMITTER_NAME: "t",
          GIT_COMMITTER_EMAIL: "t@localhost",
        }),
        encoding: "utf8",
      });
    git("init", "--quiet", "--initial-branch=main");
    writeFileSync(path.join(repo, "README"), "hello\n");
    git("add", "-A");
    git("commit", "--quiet", "-m", "first");
    const s = server();
    await s.initialize();
    const run = await s.callTool("claude_run", {
      prompt: "@write feature.txt made in a sandboxed worktree",
      cwd: repo,
      host: "sandbox",
      worktree: true,
    });
    const result = run.result.structuredContent;
    assert.equal(result.status, "completed", JSON.stringify(run.result));
    assert.equal(existsSync(path.join(repo, "feature.txt")), false, "not in the checkout before the merge");
    const diff = await s.callTool("claude_worktree", { job_id: result.job_id, action: "diff" });
    assert.match(diff.result.content[0].text, /\+made in a sandboxed worktree/);
    const merged = await s.callTool("claude_worktree", { job_id: result.job_id, action: "merge" });
    assert.equal(merged.result.structuredContent.worktree?.state, "merged", JSON.stringify(merged.result));
    assert.equal(readFileSync(path.join(repo, "feature.txt"), "utf8"), "made in a sandboxed worktree\n");
    await s.shutdown();
  });

  describe(
    `the real Claude Code CLI (${version ?? "missing"}) in a sandbox, against a mock API here`,
    { skip: !version },
    () => {
      let mock: { url: string; close(): Promise<void> };

      before(async () => {
        mock = await startMockAnthropic();
      });

      after(async () => {
        await mock?.close();
      });

      test("bypassPermissions in the box: its Bash tool writes the job's folder; the answer comes back", async () => {
        const cwd = path.join(root, "real");
        mkdirSync(cwd, { recursive: true });
        // The image's unprivileged user writes there.
        chownSync(cwd, 1000, 1000);
        // The pinned CLI is one native program: mounted read-only with the one library the image lacks.
        const program = path.resolve(cliPath);
        const librt = "/lib/x86_64-linux-gnu/librt.so.1";
        const hosts = {
          real: {
            image,
            engine_bin: podman,
            roots: [root],
            command: ["/usr/bin/node", IMAGE_MAIN],
            programs: { claude: "/opt/claude/claude" },
            mounts: [
              { source: program, target: "/opt/claude/claude" },
              ...(existsSync(librt) ? [{ source: librt, target: librt }] : []),
            ],
            // The mock listens on this machine's loopback.
            network: "host",
            user: "agent",
            env: ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER"],
            permission_modes: { claude: ["bypassPermissions"] },
          },
        };
        const s = new ServerProcess({
          ...engine.env,
          ANTHROPIC_BASE_URL: mock.url,
          ANTHROPIC_API_KEY: "dummy",
          DISABLE_TELEMETRY: "1",
          DISABLE_AUTOUPDATER: "1",
          CLAUDE_DISPATCH_HOSTS: JSON.stringify(hosts),
        });
        servers.push(s);
        await s.initialize();
        const response = await s.callTool("claude_run", {
          prompt: "MOCK:BASH echo from-the-box > proof.txt",
          cwd,
          host: "real",
          permission_mode: "bypassPermissions",
        });
        const result = response.result.structuredContent;
        assert.equal(result.status, "completed", JSON.stringify(response.result));
        assert.match(result.result, /^MOCK-DONE/);
        const transcript = await s.callTool("claude_output", { job_id: result.job_id, view: "transcript" });
        assert.equal(
          existsSync(path.join(cwd, "proof.txt")) && readFileSync(path.join(cwd, "proof.txt"), "utf8"),
          "from-the-box\n",
          `${JSON.stringify(result)}\n${transcript.result.structuredContent.text}`,
        );
        assert.equal(await containerOf(result.job_id), false);
        await s.shutdown();
      });
    },
  );
});
