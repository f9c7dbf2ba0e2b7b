/**
 * Agents in a running container and in a pod (PROTOCOL.md §21), end to end: the built server here, and in a podman
 * container of the test's private engine (test/containers.ts) a second claude-dispatch in remote mode running the
 * fake agent, reached with `podman exec -i`. The pod transport runs through a stand-in kubectl
 * (test/fixtures/kubectl-standin.mjs) that turns `kubectl exec -i … POD -- …` into `podman exec -i POD …`: no cluster
 * can run here, so the pod transport has not met a real one. The work folder and the far end's state directory are
 * mounted at the same paths, so their files are checked from here.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  containerSkipReason,
  IMAGE_FAKE_CLAUDE,
  IMAGE_MAIN,
  processesNaming,
  startEngine,
  type Container,
  type Engine,
} from "./containers.js";
import { onPath, readPids, readRecordFile, waitFor } from "./processes.js";
import { runProgram, SERVER_MAIN, ServerProcess } from "./server-process.js";

const skip = containerSkipReason("container hosts");
const KUBECTL = fileURLToPath(new URL("./fixtures/kubectl-standin.mjs", import.meta.url));

describe("jobs in a container and in a pod", { skip }, () => {
  let engine: Engine;
  let container: Container;
  let scratch: string;
  let work: string;
  let remoteState: string;
  let podman: string;
  const servers: ServerProcess[] = [];

  before(async () => {
    scratch = mkdtempSync(path.join(tmpdir(), "cd-container-"));
    work = path.join(scratch, "work");
    remoteState = path.join(scratch, "remote-state");
    mkdirSync(work);
    mkdirSync(remoteState, { mode: 0o700 });
    engine = await startEngine();
    podman = onPath("podman", engine.env.PATH) ?? assert.fail("podman is not on the engine's PATH");
    const image = await engine.buildImage();
    container = await engine.runContainer({
      image,
      mounts: [
        { source: work, target: work },
        { source: remoteState, target: remoteState },
      ],
    });
  });

  after(async () => {
    for (const server of servers) server.dispose();
    await engine?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** The far end as every entry names it: claude-dispatch and the fake agent in the image, its state mounted. */
  const farEnd = () => ({
    roots: [work],
    command: ["/usr/bin/node", IMAGE_MAIN],
    state_dir: remoteState,
    programs: { claude: IMAGE_FAKE_CLAUDE },
  });

  function server(env: Record<string, string> = {}): ServerProcess {
    const hosts = {
      dev: {
        container: container.name,
        engine: "podman",
        engine_bin: podman,
        ...farEnd(),
        // The container is the boundary: there, and only there, Claude Code may skip its prompts.
        permission_modes: { claude: ["bypassPermissions", "default"] },
      },
    };
    // The engine's variables reach podman; the server passes podman nothing else of its own.
    const started = new ServerProcess({ ...engine.env, CLAUDE_DISPATCH_HOSTS: JSON.stringify(hosts), ...env });
    servers.push(started);
    return started;
  }

  /** The fake agents running in the container now. */
  async function agentsInside(): Promise<string[]> {
    return (await engine.processesIn(container)).filter((line) => line.includes(IMAGE_FAKE_CLAUDE));
  }

  test("claude_run there: the result, the agent run in the container, the job in the far end's state", async () => {
    const s = server();
    await s.initialize();
    const recordFile = path.join(work, "recorded.json");
    const response = await s.callTool("claude_run", {
      prompt: `hello from the box\n@record ${recordFile}\n@tools 2 20`,
      cwd: work,
      host: "dev",
    });
    const result = response.result.structuredContent;
    assert.equal(result.status, "completed", JSON.stringify(response.result));
    assert.match(result.result, /ECHO: hello from the box/);
    // The agent's program is a path only the image has: it ran there, in the cwd asked for, at depth 1.
    const recorded = JSON.parse(readFileSync(recordFile, "utf8"));
    assert.equal(recorded.cwd, work);
    assert.equal(recorded.depth, "1");
    assert.equal(readRecordFile(s.stateDir, result.job_id).host, "dev");
    assert.equal(readRecordFile(remoteState, result.job_id).status, "completed");
    const remote = readFileSync(path.join(remoteState, "jobs", result.job_id, "stdout.jsonl"));
    const local = readFileSync(path.join(s.stateDir, "jobs", result.job_id, "stdout.jsonl"));
    assert.ok(remote.length > 0 && local.equals(remote), "the output here is the far end's, byte for byte");
    await s.shutdown();
  });

  test("a cwd outside the container host's roots is refused before anything runs there", async () => {
    const s = server();
    await s.initialize();
    const response = await s.callTool("claude_run", { prompt: "no", cwd: "/etc", host: "dev" });
    assert.equal(response.result.isError, true);
    assert.match(response.result.content[0].text, /^POLICY_DENIED: /);
    assert.deepEqual(await agentsInside(), []);
    await s.shutdown();
  });

  test("bypassPermissions: refused here, run in the container, whose entry allows it, and only its modes", async () => {
    const s = server();
    await s.initialize();
    const here = await s.callTool("claude_run", { prompt: "x", cwd: work, permission_mode: "bypassPermissions" });
    assert.equal(here.result.isError, true);
    assert.match(
      here.result.content[0].text,
      /^POLICY_DENIED: permission_mode "bypassPermissions" is not allowed here/,
    );
    const recordFile = path.join(work, "bypass.json");
    const there = await s.callTool("claude_run", {
      prompt: `@record ${recordFile}`,
      cwd: work,
      host: "dev",
      permission_mode: "bypassPermissions",
    });
    assert.equal(there.result.structuredContent.status, "completed", JSON.stringify(there.result));
    assert.ok(JSON.parse(readFileSync(recordFile, "utf8")).argv.includes("--permission-mode=bypassPermissions"));
    const plan = await s.callTool("claude_run", { prompt: "x", cwd: work, host: "dev", permission_mode: "plan" });
    assert.match(plan.result.content[0].text, /^POLICY_DENIED: permission_mode "plan" is not allowed on host dev/);
    await s.shutdown();
  });

  test("claude_kill leaves no process of the agent in the container", async () => {
    const s = server();
    await s.initialize();
    const pidFile = path.join(work, "killed.pids");
    const started = await s.callTool("claude_start", {
      prompt: `@pid ${pidFile}\n@spawn ${pidFile}\n@sleep 60000`,
      cwd: work,
      host: "dev",
    });
    const id = started.result.structuredContent.job_id;
    await waitFor(() => readPids(pidFile).length === 2, "the agent and its child in the container");
    assert.equal((await agentsInside()).length, 1);
    const killed = await s.callTool("claude_kill", { job_id: id });
    assert.equal(killed.result.structuredContent.status, "killed", JSON.stringify(killed.result));
    const inside = await engine.processesIn(container);
    assert.deepEqual(
      inside.filter((line) => line.includes(IMAGE_FAKE_CLAUDE) || line.includes("setInterval")),
      [],
      `left in the container: ${inside.join(" | ")}`,
    );
    await s.shutdown();
  });

  test("this server SIGKILLed mid-job: the next one follows the job there to its end, whole", async () => {
    const state = mkdtempSync(path.join(scratch, "state-"));
    const first = server({ CLAUDE_DISPATCH_STATE_DIR: state, CLAUDE_DISPATCH_ON_EXIT: "keep" });
    await first.initialize();
    const gate = path.join(work, "restart.gate");
    const started = await first.callTool("claude_start", {
      prompt: `survive\n@tools 2 10\n@wait-file ${gate}`,
      cwd: work,
      host: "dev",
    });
    const id = started.result.structuredContent.job_id;
    await waitFor(() => (readRecordFile(remoteState, id).status ?? "") === "running", "the job running there");
    first.child.kill("SIGKILL");
    await first.exited;
    writeFileSync(gate, "");
    const second = server({ CLAUDE_DISPATCH_STATE_DIR: state });
    await second.initialize();
    const report = await second.waitForJob(id);
    assert.equal(report.status, "completed", JSON.stringify(report));
    assert.match(report.result, /ECHO: survive/);
    assert.equal(report.num_turns, 3);
    const remote = readFileSync(path.join(remoteState, "jobs", id, "stdout.jsonl"));
    assert.ok(readFileSync(path.join(state, "jobs", id, "stdout.jsonl")).equals(remote));
    await second.shutdown();
  });

  test("the engine's exec killed mid-job: the channel is opened again and the job completes", async () => {
    const s = server();
    await s.initialize();
    const gate = path.join(work, "exec.gate");
    const started = await s.callTool("claude_start", {
      prompt: `dropped\n@tools 1 10\n@wait-file ${gate}`,
      cwd: work,
      host: "dev",
    });
    const id = started.result.structuredContent.job_id;
    // Mid-job: its output is coming in here, so the start was accepted (a start cut short is another test's).
    const output = path.join(s.stateDir, "jobs", id, "stdout.jsonl");
    await waitFor(() => existsSync(output) && readFileSync(output, "utf8").includes("tool_use"), "a turn here");
    // The podman exec that carries this job's channel: killing it drops the pipe, not the agent inside.
    const execs = processesNaming(container.name).filter((pid) => commandOf(pid).includes(`${IMAGE_MAIN}\0remote`));
    assert.ok(execs.length > 0, "a podman exec of the far end");
    for (const pid of execs) process.kill(pid, "SIGKILL");
    writeFileSync(gate, "");
    const report = await s.waitForJob(id);
    assert.equal(report.status, "completed", JSON.stringify(report));
    assert.match(report.result, /ECHO: dropped/);
    assert.match(s.stderr, /the connection ended/);
    await s.shutdown();
  });

  test("the container restarted mid-job: its agent goes with it: the job ends lost, not running for ever", async () => {
    const s = server();
    await s.initialize();
    const started = await s.callTool("claude_start", { prompt: "@sleep 60000", cwd: work, host: "dev" });
    const id = started.result.structuredContent.job_id;
    await waitFor(() => (readRecordFile(remoteState, id).status ?? "") === "running", "the job running there");
    const restarted = await engine.podman(["restart", "--time", "0", container.name]);
    assert.equal(restarted.code, 0, restarted.stderr);
    const report = await s.waitForJob(id);
    assert.equal(report.status, "lost", JSON.stringify(report));
    assert.equal(report.error?.code, "AGENT_LOST");
    await s.shutdown();
  });

  test("doctor reaches the container host and names it as the engine's container", async () => {
    const hosts = {
      dev: {
        container: container.name,
        engine_bin: podman,
        ...farEnd(),
        permission_modes: { claude: ["bypassPermissions"] },
      },
    };
    const env = {
      ...engine.env,
      CLAUDE_DISPATCH_HOSTS: JSON.stringify(hosts),
      CLAUDE_DISPATCH_STATE_DIR: mkdtempSync(path.join(scratch, "doctor-")),
    };
    const doctor = await runProgram(process.execPath, [SERVER_MAIN, "doctor"], env, 60_000);
    const line = doctor.stdout.split("\n").find((each) => each.includes("host dev:")) ?? doctor.stdout;
    assert.match(line, new RegExp(`^ok +host dev: podman container ${container.name}: claude-dispatch `));
    assert.match(
      doctor.stdout,
      /^warn +host dev modes: claude bypassPermissions \(bypassPermissions lets an agent$/m,
    );
  });

  describe("a pod, through the stand-in kubectl", () => {
    let kubeconfig: string;
    let log: string;

    before(() => {
      log = path.join(scratch, "kubectl.log");
      kubeconfig = path.join(scratch, "kubeconfig.json");
      writeFileSync(kubeconfig, JSON.stringify({ podman, env: engine.env, log }));
    });

    function podServer(pod: string): ServerProcess {
      const hosts = {
        cluster: { pod, namespace: "ci", container: "agent", context: "test", kubectl_bin: KUBECTL, ...farEnd() },
      };
      const started = new ServerProcess({ KUBECONFIG: kubeconfig, CLAUDE_DISPATCH_HOSTS: JSON.stringify(hosts) });
      servers.push(started);
      return started;
    }

    test("claude_run in the pod: kubectl is given the context, namespace, container and pod, then --", async () => {
      const s = podServer(container.name);
      await s.initialize();
      const response = await s.callTool("claude_run", { prompt: "from the pod", cwd: work, host: "cluster" });
      const result = response.result.structuredContent;
      assert.equal(result.status, "completed", JSON.stringify(response.result));
      assert.match(result.result, /ECHO: from the pod/);
      const [first] = readFileSync(log, "utf8").trim().split("\n");
      assert.deepEqual(JSON.parse(first ?? "[]").slice(0, 10), [
        "--context",
        "test",
        "exec",
        "-i",
        "--namespace",
        "ci",
        "--container",
        "agent",
        container.name,
        "--",
      ]);
      await s.shutdown();
    });

    test("a pod kubectl cannot find: HOST_FAILED with what kubectl said", async () => {
      const s = podServer("missing-pod");
      await s.initialize();
      const response = await s.callTool("claude_run", { prompt: "nowhere", cwd: work, host: "cluster" });
      assert.equal(response.result.isError, true);
      assert.match(
        response.result.content[0].text,
        /^HOST_FAILED: .*kubectl failed: Error from server \(NotFound\): pods "missing-pod" not found/,
      );
      await s.shutdown();
    });
  });
});

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1");
  } catch {
    return "";
  }
}
