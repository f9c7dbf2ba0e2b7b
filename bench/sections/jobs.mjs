/** (e) 100 concurrent jobs and (f) 20 jobs printing a big result. */
import fs from "node:fs";
import { Server } from "../client.mjs";
import {
  FAKE_CLAUDE,
  AGENT_ARGS,
  SIZES,
  now,
  median,
  round2,
  log,
  procStatusKb,
  procCpuMs,
  reapLeftovers,
  makeWorkDir,
  runToExit,
} from "../shared.mjs";

/** 100 bare fake agents, run directly in parallel: the machine's floor for (e). */
async function bareAgents(cwd, count, prompt) {
  const startedAt = now();
  const runs = [];
  for (let i = 0; i < count; i += 1) runs.push(runToExit([FAKE_CLAUDE, ...AGENT_ARGS], { cwd, stdin: prompt }));
  const results = await Promise.all(runs);
  const failed = results.filter((r) => r.code !== 0).length;
  if (failed > 0) throw new Error(`${failed} bare agents failed`);
  return Math.max(...results.map((r) => r.endedAt)) - startedAt;
}

/** (e) 100 concurrent claude_start of a 1 s job, then claude_wait on each as soon as it started. */
export async function benchConcurrentJobs(rounds) {
  const cwd = makeWorkDir();
  const count = SIZES.concurrentJobs;
  const prompt = `@sleep ${SIZES.jobSleepMs}`;
  const walls = [];
  const startPhases = [];
  const floors = [];
  const serverCpu = [];
  const notCompleted = [];
  const failures = [];
  try {
    for (let i = 0; i < rounds; i += 1) {
      // All at once: the default limit (the CPUs, at least 2) would queue the rest, by design (§8).
      const s = new Server({ CLAUDE_DISPATCH_MAX_JOBS: String(count) });
      await s.initialize();
      const startedAt = now();
      const tasks = [];
      for (let k = 0; k < count; k += 1) {
        tasks.push(
          s.callTool("claude_start", { prompt, cwd }).then(async (started) => {
            const jobId = started.structured?.job_id;
            if (typeof jobId !== "string") throw new Error(`claude_start gave no job_id: ` +
              `${JSON.stringify(started.result).slice(0, 300)}`);
            const waited = await s.callTool("claude_wait", { job_id: jobId, hold_ms: 60_000 }, 90_000);
            return { startAt: started.at, waitAt: waited.at, status: waited.structured?.status, error: waited.structured?.error };
          }),
        );
      }
      const done = await Promise.all(tasks);
      walls.push(Math.max(...done.map((d) => d.waitAt)) - startedAt);
      serverCpu.push(procCpuMs(s.pid));
      startPhases.push(Math.max(...done.map((d) => d.startAt)) - startedAt);
      const bad = done.filter((d) => d.status !== "completed");
      notCompleted.push(bad.length);
      for (const d of bad) {
        failures.push({ round: i, status: d.status, error: d.error ?? null });
        log(`e: a job ended ${d.status}: ${JSON.stringify(d.error ?? null).slice(0, 400)}`);
      }
      await s.close();
      await reapLeftovers();
      floors.push(await bareAgents(cwd, count, prompt));
    }
  } finally {
    fs.rmSync(cwd, { recursive: true, force: true });
  }
  const wall = median(walls) / 1000;
  const floor = median(floors) / 1000;
  const bad = notCompleted.reduce((x, y) => x + y, 0);
  return {
    rows: [
      {
        metric: `e  ${count} concurrent 1 s jobs (MAX_JOBS=${count}): first start -> last wait answer`,
        value: `${wall.toFixed(2)} s`,
        target: "<= 1.25 s (ideal 1 s)",
        pass: wall <= 1.25 && bad === 0,
        detail:
          `floor: ${count} bare fake agents in parallel ${floor.toFixed(2)} s (server/floor ` +
            `${(wall / floor).toFixed(2)}x); ` +
          `all ${count} starts answered after ${(median(startPhases) / 1000).toFixed(2)} s; server CPU ` +
            `${(median(serverCpu) / 1000).toFixed(2)} s` +
          (bad > 0 ? `; ${bad} jobs not completed!` : ""),
      },
    ],
    data: {
      wallS: round2(wall),
      floorS: round2(floor),
      startPhaseS: round2(median(startPhases) / 1000),
      serverCpuS: round2(median(serverCpu) / 1000),
      perRound: { wallMs: walls.map(Math.round), floorMs: floors.map(Math.round), startPhaseMs: startPhases.map(Math.round), serverCpuMs: serverCpu.map(Math.round), notCompleted },
      failures,
    },
  };
}

/** (f) 20 concurrent jobs each printing a 5 MiB result: peak server RSS and total time. */
export async function benchBigOutput(rounds) {
  const cwd = makeWorkDir();
  const count = SIZES.bigJobs;
  const prompt = `@big ${SIZES.bigBytes}`;
  const hwm = [];
  const rssAfter = [];
  const times = [];
  const serverCpu = [];
  const notCompleted = [];
  const failures = [];
  try {
    for (let i = 0; i < rounds; i += 1) {
      // All 20 at once (the default limit would queue them, §8); 16 MiB lines, since each result line is over 5 MiB.
      const s = new Server({ CLAUDE_DISPATCH_MAX_OUTPUT_BYTES: String(16 * 1024 * 1024), CLAUDE_DISPATCH_MAX_JOBS: String(count) });
      await s.initialize();
      const startedAt = now();
      const tasks = [];
      for (let k = 0; k < count; k += 1) {
        tasks.push(
          s.callTool("claude_start", { prompt, cwd }).then(async (started) => {
            const waited = await s.callTool("claude_wait", { job_id: started.structured.job_id, hold_ms: 60_000 }, 90_000);
            return { at: waited.at, status: waited.structured?.status, chars: waited.structured?.result_chars, error: waited.structured?.error };
          }),
        );
      }
      const done = await Promise.all(tasks);
      times.push(Math.max(...done.map((d) => d.at)) - startedAt);
      const bad = done.filter((d) => d.status !== "completed" || d.chars !== SIZES.bigBytes);
      notCompleted.push(bad.length);
      for (const d of bad) {
        failures.push({ round: i, status: d.status, resultChars: d.chars, error: d.error ?? null });
        log(`f: a job ended ${d.status} with ${d.chars} result characters: ` +
          `${JSON.stringify(d.error ?? null).slice(0, 400)}`);
      }
      hwm.push(procStatusKb(s.pid, "VmHWM"));
      rssAfter.push(procStatusKb(s.pid, "VmRSS"));
      serverCpu.push(procCpuMs(s.pid));
      await s.close();
      await reapLeftovers();
    }
  } finally {
    fs.rmSync(cwd, { recursive: true, force: true });
  }
  const peak = median(hwm) / 1024;
  const bad = notCompleted.reduce((x, y) => x + y, 0);
  return {
    rows: [
      {
        metric: `f  ${count} concurrent jobs x ${SIZES.bigBytes / 1048576} MiB output: peak server RSS (VmHWM)`,
        value: `${peak.toFixed(0)} MiB`,
        target: "<= 120 MiB (durable-jobs goal)",
        pass: peak <= 120 && bad === 0,
        detail:
          `total ${(median(times) / 1000).toFixed(2)} s; VmRSS once all answered ` +
            `${(median(rssAfter) / 1024).toFixed(0)} MiB; server CPU ${(median(serverCpu) / 1000).toFixed(2)} s` +
          (bad > 0 ? `; ${bad} jobs not completed with the full result!` : ""),
      },
    ],
    data: {
      peakRssMiB: round2(peak),
      rssAfterMiB: round2(median(rssAfter) / 1024),
      totalS: round2(median(times) / 1000),
      serverCpuS: round2(median(serverCpu) / 1000),
      perRound: { vmHwmKb: hwm, vmRssKb: rssAfter, totalMs: times.map(Math.round), serverCpuMs: serverCpu.map(Math.round), notCompleted },
      failures,
    },
  };
}
