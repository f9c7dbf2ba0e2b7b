/** (g) agent exit -> claude_wait answer, and (j) the same through a second server. */
import fs from "node:fs";
import path from "node:path";
import { Server } from "../client.mjs";
import { SIZES, now, sleep, median, percentile, round2, procAlive, reapLeftovers, makeWorkDir } from "../shared.mjs";

/**
 * (g) agent exit -> claude_wait answer, one job at a time, with the wait
 * already pending when the agent exits. The fake agent cannot report when it
 * exits, so two clocks are read, both CLOCK_MONOTONIC:
 *  - "exit()": a preload (--require, through NODE_OPTIONS in the server's
 *    environment, which agents inherit) records the time of the agent's
 *    process 'exit' event, i.e. its process.exit() call, just before the
 *    process ends;
 *  - "/proc": the bench polls /proc/<pid>/stat every ~1 ms and records when
 *    the agent is a zombie or gone (resolution about 1 ms, so this reads up
 *    to ~1 ms low). This is the headline: it is when the server can know.
 *
 * (j) the same, with two servers on one state directory: the job is started
 * on one and waited on through the other, which learns of its end from the
 * owner's final record (PROTOCOL.md §15.6).
 */
export async function benchWaitLatency(rounds, shared = false) {
  const dir = makeWorkDir();
  const exitDir = path.join(dir, "exits");
  fs.mkdirSync(exitDir);
  const hook = path.join(dir, "exit-hook.cjs");
  fs.writeFileSync(
    hook,
    `"use strict";
if (process.argv[1] && process.argv[1].endsWith("fake-claude.mjs") && process.env.BENCH_EXIT_DIR) {
  const fs = require("node:fs");
  process.on("exit", () => {
    try { fs.writeFileSync(process.env.BENCH_EXIT_DIR + "/" + process.pid, String(process.hrtime.bigint())); } catch {}
  });
}
`,
  );
  const nodeOptions = `${process.env.NODE_OPTIONS ?? ""} --require ${JSON.stringify(hook)}`.trim();
  const perRound = [];
  const all = { hook: [], proc: [] };
  try {
    for (let i = 0; i < rounds; i += 1) {
      const stateDir = path.join(dir, `state-${i}`);
      const s = new Server({ NODE_OPTIONS: nodeOptions, BENCH_EXIT_DIR: exitDir, CLAUDE_DISPATCH_STATE_DIR: stateDir });
      await s.initialize();
      // The server that waits: the same one, or another on the same state directory.
      const w = shared ? new Server({ CLAUDE_DISPATCH_STATE_DIR: stateDir }) : s;
      if (shared) await w.initialize();
      const hookLat = [];
      const procLat = [];
      for (let k = 0; k < SIZES.waitSamples; k += 1) {
        const pidFile = path.join(dir, `pid-${i}-${k}`);
        const started = await s.callTool("claude_start", { prompt: `@pid ${pidFile}\n@sleep ` +
          `${SIZES.waitSleepMs}`, cwd: dir });
        const waited = w.callTool("claude_wait", { job_id: started.structured.job_id, hold_ms: 60_000 }, 90_000);
        // The agent writes its pid before sleeping.
        let pid;
        const pidDeadline = now() + 10_000;
        while (pid === undefined) {
          try {
            pid = Number(fs.readFileSync(pidFile, "utf8").trim()) || undefined;
          } catch {
            // not yet
          }
          if (pid === undefined) {
            if (now() > pidDeadline) throw new Error("the agent never wrote its pid");
            await sleep(1);
          }
        }
        let goneAt;
        let answer;
        waited.then((r) => (answer = r)).catch(() => undefined);
        while (goneAt === undefined && answer === undefined) {
          if (!procAlive(pid)) goneAt = now();
          else await sleep(1);
        }
        const response = await waited;
        if (response.structured?.status !== "completed") throw new Error(`wait answered ` +
          `${JSON.stringify(response.structured).slice(0, 300)}`);
        const exitNs = fs.readFileSync(path.join(exitDir, String(pid)), "utf8");
        hookLat.push(response.at - Number(exitNs) / 1e6);
        // The answer can arrive before the poll saw the agent go; then the gap is at most one poll interval.
        procLat.push(goneAt === undefined ? 0 : response.at - goneAt);
      }
      await s.close();
      if (shared) await w.close();
      await reapLeftovers();
      all.hook.push(...hookLat);
      all.proc.push(...procLat);
      perRound.push({
        exitHook: { p50: round2(percentile(hookLat, 0.5)), p99: round2(percentile(hookLat, 0.99)), max: round2(Math.max(...hookLat)) },
        procGone: { p50: round2(percentile(procLat, 0.5)), p99: round2(percentile(procLat, 0.99)), max: round2(Math.max(...procLat)) },
      });
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  // The headline is measured from the agent's death as /proc shows it: the
  // exit() figure also holds the agent's own Node teardown, which under load
  // can take tens of ms and is not the server's doing.
  const p50 = median(perRound.map((r) => r.procGone.p50));
  const p99 = median(perRound.map((r) => r.procGone.p99));
  const hookP50 = median(perRound.map((r) => r.exitHook.p50));
  const hookP99 = median(perRound.map((r) => r.exitHook.p99));
  const pooled = { p50: percentile(all.proc, 0.5), p99: percentile(all.proc, 0.99), max: Math.max(...all.proc) };
  const pooledHook = { p50: percentile(all.hook, 0.5), p99: percentile(all.hook, 0.99), max: Math.max(...all.hook) };
  return {
    rows: [
      {
        metric: shared
          ? `j  wait latency across servers: agent gone (/proc) -> claude_wait answer on another server (${SIZES.waitSamples}/round)`
          : `g  wait latency: agent gone (/proc, 1 ms poll) -> claude_wait answer (${SIZES.waitSamples}/round)`,
        value: `p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms`,
        target: shared ? "p99 < 250 ms (issue 13)" : "p99 <= 10 ms",
        pass: shared ? p99 < 250 : p99 <= 10,
        detail:
          `pooled over ${all.proc.length}: p50 ${pooled.p50.toFixed(2)}, p99 ${pooled.p99.toFixed(2)}, max ` +
            `${pooled.max.toFixed(2)} ms; ` +
          `from the agent's process.exit() call (adds its own Node teardown): p50 ${hookP50.toFixed(2)}, p99 ` +
            `${hookP99.toFixed(2)} ms, pooled max ${pooledHook.max.toFixed(2)} ms; ` +
          (Math.max(pooled.max, pooledHook.max) >= 250 ? "the 250 ms exit drain was hit" : "the 250 ms exit drain " +
            "was never hit"),
      },
    ],
    data: {
      procGone: { p50Ms: round2(p50), p99Ms: round2(p99) },
      exitHook: { p50Ms: round2(hookP50), p99Ms: round2(hookP99) },
      pooled: {
        count: all.proc.length,
        procGone: { p50Ms: round2(pooled.p50), p99Ms: round2(pooled.p99), maxMs: round2(pooled.max) },
        exitHook: { p50Ms: round2(pooledHook.p50), p99Ms: round2(pooledHook.p99), maxMs: round2(pooledHook.max) },
      },
      perRound,
      samplesMs: { procGone: all.proc.map(round2), exitHook: all.hook.map(round2) },
    },
  };
}
