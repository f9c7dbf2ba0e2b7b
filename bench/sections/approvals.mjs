/** (k) permission requests through the approver, and (n) how their cost adds up. */
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { Server } from "../client.mjs";
import {
  SERVER_MAIN,
  SIZES,
  now,
  median,
  percentile,
  round2,
  procStatusKb,
  procCpuMs,
  reapLeftovers,
  makeWorkDir,
  taggedProcesses,
} from "../shared.mjs";

/** The job's agent: its pid once recorded, and where its --mcp-config and environment say to ask (§18). */
async function agentOf(stateDir, jobId) {
  const recordFile = path.join(stateDir, "jobs", jobId, "record.json");
  for (let tries = 0; tries < 500; tries += 1) {
    const pid = JSON.parse(fs.readFileSync(recordFile, "utf8")).agent?.pid;
    if (pid) {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const environ = fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      const config = argv.find((arg) => arg.startsWith("--mcp-config="));
      const server = JSON.parse(config.slice("--mcp-config=".length)).mcpServers.dispatch_approver;
      const token = environ.find((entry) => entry.startsWith("CLAUDE_DISPATCH_APPROVER_TOKEN="))?.split("=")[1];
      if (server.type !== "http" || !token) throw new Error(`the agent was not pointed at the endpoint: ${config}`);
      return { pid, url: server.url, token };
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error("the agent's pid was never recorded");
}

/** What Claude Code sends the endpoint for one permission prompt; resolves with the answer's text when it comes. */
function askEndpoint({ url, token }, k) {
  const body = JSON.stringify({
    jsonrpc: "2.0",
    id: k + 1,
    method: "tools/call",
    params: {
      name: "approve",
      arguments: { tool_name: "Bash", input: { command: `echo ${k} > out.txt` }, tool_use_id: `toolu_bench_${k}` },
    },
  });
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk) => {
          text += chunk;
          const data = /^data: (\{.*)$/m.exec(text)?.[1];
          if (data) resolve({ at: now(), text: JSON.parse(data).result.content[0].text });
        });
        response.on("end", () => reject(new Error(`the stream ended without an answer: ${text.slice(0, 300)}`)));
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

/**
 * (k) permission requests (PROTOCOL.md §18). A fake agent sleeps as the running job; the bench asks the state
 * directory's endpoint what Claude Code asks, at the URL and with the token the job's --mcp-config and environment
 * give its agent. Measured, with that request pending: the memory of every process of this run but the agent and
 * the server, which is what forwarding adds to a job (issue 29: at most 10 MiB); then, 20 times, request sent ->
 * the claude_wait already holding answers input_required, and claude_respond sent -> the answer reaches the agent.
 * For comparison, the approver process still run where there is no endpoint (another host), spawned as an agent
 * there spawns it: its start and peak RSS.
 */
export async function benchApprovals(rounds) {
  const dir = makeWorkDir();
  const perRound = [];
  const all = { start: [], hwm: [], added: [], request: [], answer: [] };
  try {
    for (let i = 0; i < rounds; i += 1) {
      const stateDir = path.join(dir, `state-${i}`);
      const s = new Server({ CLAUDE_DISPATCH_STATE_DIR: stateDir });
      await s.initialize();
      const started = await s.callTool("claude_start", { prompt: "@sleep 120000", cwd: dir });
      const jobId = started.structured.job_id;
      const agent = await agentOf(stateDir, jobId);
      const requestLat = [];
      const answerLat = [];
      let added;
      for (let k = 0; k < SIZES.approvalSamples; k += 1) {
        const waited = s.callTool("claude_wait", { job_id: jobId, hold_ms: 60_000 }, 90_000);
        // The wait must be holding before the request is filed: a reply to a ping sent after it says it is.
        await s.request("ping");
        const asked = askEndpoint(agent, k);
        const askedAt = now();
        const seen = await waited;
        if (seen.structured?.status !== "input_required")
          throw new Error(`claude_wait answered ` + `${JSON.stringify(seen.structured).slice(0, 300)}`);
        requestLat.push(seen.at - askedAt);
        // One job, waiting on a permission request: whatever else runs is what forwarding adds.
        added ??= taggedProcesses().filter(({ pid }) => pid !== s.pid && pid !== agent.pid);
        const respondedAt = now();
        const responded = await s.callTool("claude_respond", {
          job_id: jobId,
          request_id: seen.structured.pending_approvals[0].request_id,
          decision: "allow",
        });
        if (responded.structured?.status !== "answered")
          throw new Error(`claude_respond answered ` + `${JSON.stringify(responded.structured).slice(0, 300)}`);
        const answer = await asked;
        if (!answer.text.includes('"behavior":"allow"')) throw new Error(`the endpoint answered ${answer.text}`);
        answerLat.push(answer.at - respondedAt);
      }
      const addedKb = added.reduce((sum, { pid }) => sum + (procStatusKb(pid, "VmRSS") ?? 0), 0);
      const approver = new Server({}, SERVER_MAIN, ["approver", `--state-dir=${stateDir}`, "--wait-ms=600000", jobId]);
      const init = await approver.initialize();
      const startMs = init.at - approver.spawnedAt;
      await approver.request("tools/list");
      const hwm = procStatusKb(approver.pid, "VmHWM");
      await approver.close();
      await s.callTool("claude_kill", { job_id: jobId });
      await s.close();
      await reapLeftovers();
      all.start.push(startMs);
      all.hwm.push(hwm);
      all.added.push(addedKb);
      all.request.push(...requestLat);
      all.answer.push(...answerLat);
      perRound.push({
        addedProcesses: added.map(({ command }) => command.slice(0, 120)),
        addedKb,
        approverStartMs: round2(startMs),
        approverHwmKb: hwm,
        request: { p50: round2(percentile(requestLat, 0.5)), p99: round2(percentile(requestLat, 0.99)) },
        answer: { p50: round2(percentile(answerLat, 0.5)), p99: round2(percentile(answerLat, 0.99)) },
      });
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const startMs = median(all.start);
  const hwmMiB = median(all.hwm) / 1024;
  const addedMiB = Math.max(...all.added) / 1024;
  const request = { p50: median(perRound.map((r) => r.request.p50)), p99: median(perRound.map((r) => r.request.p99)) };
  const answer = { p50: median(perRound.map((r) => r.answer.p50)), p99: median(perRound.map((r) => r.answer.p99)) };
  const addedCount = Math.max(...perRound.map((r) => r.addedProcesses.length));
  return {
    rows: [
      {
        metric: "k  memory forwarding adds to a job waiting on a permission request (beyond agent and server)",
        value: `${addedMiB.toFixed(1)} MiB, ${addedCount} process(es)`,
        target: "<= 10 MiB",
        pass: addedMiB <= 10,
        detail:
          "VmRSS of every process of this run but the server and the agent, the most over the rounds; the " +
          "request asked of the state directory's endpoint in the server",
      },
      {
        metric: `k  permission request sent -> claude_wait answers input_required (${SIZES.approvalSamples}/round)`,
        value: `p50 ${request.p50.toFixed(2)} ms, p99 ${request.p99.toFixed(2)} ms`,
        target: "p99 < 250 ms",
        pass: request.p99 < 250,
        detail:
          `pooled over ${all.request.length}: p50 ${percentile(all.request, 0.5).toFixed(2)}, max ` +
          `${Math.max(...all.request).toFixed(2)} ms`,
      },
      {
        metric: `k  claude_respond sent -> the endpoint answers the agent (${SIZES.approvalSamples}/round)`,
        value: `p50 ${answer.p50.toFixed(2)} ms, p99 ${answer.p99.toFixed(2)} ms`,
        target: "p99 < 250 ms",
        pass: answer.p99 < 250,
        detail:
          `pooled over ${all.answer.length}: p50 ${percentile(all.answer, 0.5).toFixed(2)}, max ` +
          `${Math.max(...all.answer).toFixed(2)} ms`,
      },
      {
        metric: "k  the approver process (other hosts): spawn -> initialize answered; peak RSS (VmHWM)",
        value: `${startMs.toFixed(1)} ms; ${hwmMiB.toFixed(1)} MiB`,
        target: "info",
        detail:
          "what every Claude job cost before the endpoint: a node process beside the agent, this build's " +
          "main bundle in its approver mode",
      },
    ],
    data: {
      addedMiB: round2(addedMiB),
      approverStartMs: round2(startMs),
      approverHwmMiB: round2(hwmMiB),
      requestToInputRequired: { p50Ms: round2(request.p50), p99Ms: round2(request.p99) },
      respondToAnswer: { p50Ms: round2(answer.p50), p99Ms: round2(answer.p99) },
      perRound,
      samplesMs: { request: all.request.map(round2), answer: all.answer.map(round2) },
    },
  };
}

/**
 * (n) what a job's permission requests cost the server as they add up (PROTOCOL.md §18): one job, its approver
 * spawned as in (k), and N requests filed one after another through it, each seen by a claude_wait (input_required)
 * and answered by claude_respond before the next; the server's CPU time (utime + stime) from the first request to
 * the last answer, for N = 100 and N = 400 on fresh servers. The 400/100 ratio is about 4 when each request costs
 * the same, about 16 when each costs as much as all before it (re-reading every request file on each change).
 */
async function approvalScaleRun(dir, count) {
  const stateDir = fs.mkdtempSync(path.join(dir, "state-"));
  const s = new Server({ CLAUDE_DISPATCH_STATE_DIR: stateDir });
  await s.initialize();
  const jobId = (await s.callTool("claude_start", { prompt: "@sleep 600000", cwd: dir })).structured.job_id;
  const approver = new Server({}, SERVER_MAIN, ["approver", `--state-dir=${stateDir}`, "--wait-ms=600000", jobId]);
  await approver.initialize();
  const cpuBefore = procCpuMs(s.pid);
  const approverBefore = procCpuMs(approver.pid);
  const t0 = now();
  for (let k = 1; k <= count; k += 1) {
    const asked = approver.request("tools/call", {
      name: "approve",
      arguments: { tool_name: "Bash", input: { command: `echo ${k} > out.txt` }, tool_use_id: `toolu_scale_${k}` },
    });
    const seen = await s.callTool("claude_wait", { job_id: jobId, hold_ms: 60_000 }, 90_000);
    const pending = seen.structured?.pending_approvals ?? [];
    if (seen.structured?.status !== "input_required" || pending.length !== 1 || pending[0].request_id !== String(k)) {
      throw new Error(`request ${k}: claude_wait answered ${JSON.stringify(seen.structured).slice(0, 300)}`);
    }
    const responded = await s.callTool("claude_respond", { job_id: jobId, request_id: String(k), decision: "allow" });
    if (responded.structured?.status !== "answered")
      throw new Error(`claude_respond answered ` + `${JSON.stringify(responded.structured).slice(0, 300)}`);
    const answer = await asked;
    if (!answer.message.result.content[0].text.includes('"behavior":"allow"'))
      throw new Error(`the approver ` + `answered ${answer.message.result.content[0].text}`);
  }
  const figures = {
    wallMs: now() - t0,
    serverCpuMs: procCpuMs(s.pid) - cpuBefore,
    approverCpuMs: procCpuMs(approver.pid) - approverBefore,
  };
  await approver.close();
  await s.callTool("claude_kill", { job_id: jobId });
  await s.close();
  await reapLeftovers();
  return figures;
}

export async function benchApprovalScale(rounds) {
  const dir = makeWorkDir();
  const perRound = [];
  try {
    for (let i = 0; i < rounds; i += 1) {
      // Alternated, so that a slower stretch of the machine does not fall on one size only.
      const sizes = i % 2 === 0 ? SIZES.approvalScale : [...SIZES.approvalScale].reverse();
      const round = {};
      for (const count of sizes) round[count] = await approvalScaleRun(dir, count);
      perRound.push(round);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const [small, large] = SIZES.approvalScale;
  const of = (count, key) => median(perRound.map((round) => round[count][key]));
  const ratio = median(perRound.map((round) => round[large].serverCpuMs / round[small].serverCpuMs));
  const wallRatio = median(perRound.map((round) => round[large].wallMs / round[small].wallMs));
  return {
    rows: [
      {
        metric:
          `n  server CPU for one job's ${small} and ${large} permission requests, each asked, seen and ` +
          `answered in turn`,
        value: `${of(small, "serverCpuMs").toFixed(0)} ms and ${of(large, "serverCpuMs").toFixed(0)} ms: ${large}/${small} ratio ${ratio.toFixed(2)}`,
        target:
          `ratio < ${((large / small) * 1.5).toFixed(0)} (linear: ${large / small}; quadratic: ` +
          `${(large / small) ** 2})`,
        pass: ratio < (large / small) * 1.5,
        detail:
          `per request ${(of(small, "serverCpuMs") / small).toFixed(2)} and ` +
          `${(of(large, "serverCpuMs") / large).toFixed(2)} ms; wall ${of(small, "wallMs").toFixed(0)} and ` +
          `${of(large, "wallMs").toFixed(0)} ms (ratio ${wallRatio.toFixed(2)}); the approver's CPU ` +
          `${of(small, "approverCpuMs").toFixed(0)} and ${of(large, "approverCpuMs").toFixed(0)} ms`,
      },
    ],
    data: {
      sizes: SIZES.approvalScale,
      serverCpuRatio: round2(ratio),
      wallRatio: round2(wallRatio),
      medians: Object.fromEntries(
        SIZES.approvalScale.map((count) => [
          count,
          {
            serverCpuMs: round2(of(count, "serverCpuMs")),
            approverCpuMs: round2(of(count, "approverCpuMs")),
            wallMs: round2(of(count, "wallMs")),
          },
        ]),
      ),
      perRound: perRound.map((round) =>
        Object.fromEntries(
          Object.entries(round).map(([count, figures]) => [
            count,
            Object.fromEntries(Object.entries(figures).map(([key, value]) => [key, round2(value)])),
          ]),
        ),
      ),
    },
  };
}
