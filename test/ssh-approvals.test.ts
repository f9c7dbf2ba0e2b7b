/**
 * Permission requests of an agent on another machine (PROTOCOL.md §18, §21.3): the pinned Claude Code CLI runs
 * there in its default permission mode against the mock Messages API, asks the approver there, and the request
 * reaches this server's caller as a local one does; the answer goes back over ssh. "There" is a real sshd on
 * 127.0.0.1 (test/sshd.ts) with a second claude-dispatch and its own state directory.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, before, describe, test } from "node:test";

import { cliPath, mockedCliEnvironment, realCliVersion } from "./claude-cli.js";
import { readRecordFile, waitFor } from "./processes.js";
import { minimalEnvironment, SERVER_MAIN, ServerProcess, type RpcResponse } from "./server-process.js";
import { sshSkipReason, startSshd, type Sshd } from "./sshd.js";
// @ts-expect-error: a plain ESM fixture without type declarations
import { startMockAnthropic } from "./fixtures/mock-anthropic.mjs";

interface Mock {
  url: string;
  close(): Promise<void>;
}

const COMMAND = "echo approved > out.txt";
const PROMPT = `MOCK:BASH ${COMMAND}`;
const version = realCliVersion("ssh approvals");
const skip = sshSkipReason("ssh approvals") ?? (version ? undefined : "no working Claude Code CLI");

describe(`permission requests from another host (${version ?? "missing"})`, { skip }, () => {
  let mock: Mock;
  let sshd: Sshd;
  let scratch: string;
  let remoteState: string;
  const servers: ServerProcess[] = [];

  before(async () => {
    mock = (await startMockAnthropic()) as Mock;
    scratch = mkdtempSync(path.join(tmpdir(), "cd-ssh-approvals-"));
    const home = path.join(scratch, "home");
    const tmp = path.join(scratch, "tmp");
    for (const dir of [home, tmp]) mkdirSync(dir, { recursive: true });
    remoteState = path.join(scratch, "remote-state");
    // That machine's own environment: a HOME with no settings (so a redirection needs approval) and the mock.
    sshd = await startSshd({
      env: { ...mockedCliEnvironment(home, tmp, mock.url), PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` },
    });
  });

  afterEach(async () => {
    // Ended as a host ends them: CLAUDE_DISPATCH_ON_EXIT=kill takes any agent a failed test left waiting, there too.
    for (const server of servers.splice(0)) await server.shutdown();
  });

  after(async () => {
    await sshd?.stop();
    await mock?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  function startServer(): ServerProcess {
    const hosts = {
      box: {
        ssh: sshd.alias,
        ssh_config: sshd.clientConfig,
        roots: [scratch],
        command: [process.execPath, SERVER_MAIN],
        state_dir: remoteState,
        programs: { claude: cliPath },
      },
    };
    const server = new ServerProcess({
      CLAUDE_DISPATCH_HOSTS: JSON.stringify(hosts),
      CLAUDE_DISPATCH_KILL_GRACE_MS: "1000",
    });
    servers.push(server);
    return server;
  }

  const project = (): string => mkdtempSync(path.join(scratch, "project-"));
  const report = (response: RpcResponse): Record<string, any> => response.result.structuredContent;

  async function startAsking(
    server: ServerProcess,
    cwd: string,
  ): Promise<{ jobId: string; waited: Record<string, any> }> {
    await server.initialize();
    const jobId = report(await server.callTool("claude_start", { prompt: PROMPT, cwd, host: "box" })).job_id as string;
    return { jobId, waited: await server.waitForJob(jobId) };
  }

  test("input_required here for the agent there; claude_respond allow runs the command there", async () => {
    const server = startServer();
    const cwd = project();
    const { jobId, waited } = await startAsking(server, cwd);
    assert.equal(waited.status, "input_required", JSON.stringify(waited));
    assert.equal(waited.pending_approvals[0].tool_name, "Bash");
    assert.equal(waited.pending_approvals[0].preview, `Bash · ${COMMAND}`);
    assert.equal(existsSync(path.join(cwd, "out.txt")), false, "nothing ran before the answer");
    const answered = await server.callTool("claude_respond", {
      job_id: jobId,
      request_id: waited.pending_approvals[0].request_id,
      decision: "allow",
    });
    assert.equal(report(answered).status, "answered", answered.result.content[0].text);
    const done = await server.waitForJob(jobId);
    assert.equal(done.status, "completed", JSON.stringify(done));
    assert.equal(readFileSync(path.join(cwd, "out.txt"), "utf8"), "approved\n");
    const decisions = (record: Record<string, any>) =>
      record.approvals?.map((approval: Record<string, unknown>) => [
        approval.tool_name,
        approval.decision,
        approval.by,
      ]);
    assert.deepEqual(decisions(readRecordFile(server.stateDir, jobId)), [["Bash", "allow", "tool"]]);
    // There, the request and the answer are in that job's own folder.
    assert.ok(existsSync(path.join(remoteState, "jobs", jobId, "approval.1.answer.json")));
  });

  test("deny with a message: nothing runs there, and the agent reads the message", async () => {
    const server = startServer();
    const cwd = project();
    const { jobId, waited } = await startAsking(server, cwd);
    assert.equal(waited.status, "input_required", JSON.stringify(waited));
    await server.callTool("claude_respond", {
      job_id: jobId,
      request_id: waited.pending_approvals[0].request_id,
      decision: "deny",
      message: "use a temporary file instead",
    });
    const done = await server.waitForJob(jobId);
    assert.equal(done.status, "completed", JSON.stringify(done));
    assert.equal(existsSync(path.join(cwd, "out.txt")), false);
    const answer = JSON.parse(readFileSync(path.join(remoteState, "jobs", jobId, "approval.1.answer.json"), "utf8"));
    assert.equal(answer.message, "use a temporary file instead");
  });

  test(
    "answered there, with that machine's claude-dispatch approve: recorded here as its answer file says, the " +
      "command line's",
    async () => {
      const server = startServer();
      const cwd = project();
      const { jobId, waited } = await startAsking(server, cwd);
      assert.equal(waited.status, "input_required", JSON.stringify(waited));
      const approve = await new Promise<{ code: number; stderr: string }>((resolve) =>
        execFile(
          process.execPath,
          [SERVER_MAIN, "approve", jobId],
          { env: minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: remoteState }) },
          (error, _stdout, stderr) => resolve({ code: error ? 1 : 0, stderr }),
        ),
      );
      assert.equal(approve.code, 0, approve.stderr);
      // Mirrored here within a follow's tick or two; until then the job is still input_required here.
      await waitFor(
        () => readRecordFile(server.stateDir, jobId).approvals?.[0]?.decision === "allow",
        "the answer there recorded here",
      );
      const done = await server.waitForJob(jobId);
      assert.equal(done.status, "completed", JSON.stringify(done));
      assert.equal(readFileSync(path.join(cwd, "out.txt"), "utf8"), "approved\n");
      // Written there by another process: recorded as its answer file says, not as a fact known here (§18).
      assert.deepEqual(
        [
          readRecordFile(server.stateDir, jobId).approvals?.[0]?.by,
          readRecordFile(server.stateDir, jobId).approvals?.[0]?.claimed_by,
        ],
        [undefined, "cli"],
      );
    },
  );
});
