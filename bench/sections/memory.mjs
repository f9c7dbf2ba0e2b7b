/** (q) memory stays flat over many jobs (issue 29). */
import fs from "node:fs";
import path from "node:path";
import { Server } from "../client.mjs";
import {
  AGENT_ARGS,
  FAKE_CLAUDE_SH,
  ROOT,
  SIZES,
  STATE_ROOT,
  baseEnv,
  procStatusKb,
  round2,
  runForJson,
} from "../shared.mjs";

/** Issue 29: RSS after all the jobs within 10% of RSS after the first 100 runs. */
const GROWTH_TARGET = 0.1;

/** A job's answer is right when it completed with its own prompt echoed back by the shell agent. */
function checked(report, prompt, what) {
  if (report?.status !== "completed" || report.result !== `ECHO: ${prompt}`)
    throw new Error(`q: ${what} answered ${JSON.stringify(report).slice(0, 300)}`);
}

/** The same job as simply as Node allows, without the server (bench/fixtures/minimal-jobs.mjs). */
const MINIMAL_JOBS = path.join(ROOT, "bench", "fixtures", "minimal-jobs.mjs");

/** (q)'s workload on the minimal job loop in a folder of its own: its VmRSS samples, taken as the server's are. */
async function minimalFlat() {
  const dir = fs.mkdtempSync(path.join(STATE_ROOT, "q-minimal-"));
  try {
    const args = [MINIMAL_JOBS, "--flat", FAKE_CLAUDE_SH, dir, String(SIZES.flatRuns), String(SIZES.flatConcurrent)];
    const { samplesKb, completed } = await runForJson([...args, ...AGENT_ARGS], {
      cwd: dir,
      env: baseEnv({ FAKE_CLAUDE_SLEEP: "0" }),
      what: "q: the minimal job loop",
    });
    const jobs = SIZES.flatRuns + SIZES.flatConcurrent;
    if (completed !== jobs) throw new Error(`q: the minimal job loop completed ${completed} of ${jobs} jobs`);
    return samplesKb;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const mib = (kb) => (kb / 1024).toFixed(1);

/** Growth from the first sample to the last, as a fraction of the first. */
function growthOf(samplesKb) {
  const first = samplesKb[0];
  return (samplesKb[samplesKb.length - 1] - first) / first;
}

/**
 * (q) One server runs SIZES.flatRuns claude_run of the shell agent one after another, then SIZES.flatConcurrent
 * claude_start at once, each followed by its claude_wait; every answer must be its own prompt echoed. VmRSS is read
 * after the first 100 runs, after each further 100, and at the end. One pass whatever --rounds says: it is long,
 * and a trend, not a median, is what it shows. The minimal job loop then takes the same workload, for information.
 */
export async function benchMemoryFlat() {
  const stateDir = fs.mkdtempSync(path.join(STATE_ROOT, "q-"));
  const cwd = fs.mkdtempSync(path.join(STATE_ROOT, "q-work-"));
  const s = new Server({
    CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE_SH,
    FAKE_CLAUDE_SLEEP: "0",
    CLAUDE_DISPATCH_STATE_DIR: stateDir,
    CLAUDE_DISPATCH_LOG_LEVEL: "warn",
  });
  const samples = [];
  try {
    await s.initialize();
    for (let i = 1; i <= SIZES.flatRuns; i += 1) {
      const prompt = `run ${i}`;
      checked((await s.callTool("claude_run", { prompt, cwd })).structured, prompt, `claude_run ${i}`);
      if (i % 100 === 0) samples.push({ after: `${i} runs`, kb: procStatusKb(s.pid, "VmRSS") });
    }
    const jobs = Array.from({ length: SIZES.flatConcurrent }, (_, k) => `job ${k}`);
    await Promise.all(
      jobs.map(async (prompt) => {
        const started = await s.callTool("claude_start", { prompt, cwd });
        const waited = await s.callTool("claude_wait", { job_id: started.structured.job_id, hold_ms: 60_000 }, 120_000);
        checked(waited.structured, prompt, `claude_wait of "${prompt}"`);
      }),
    );
    samples.push({ after: `${SIZES.flatConcurrent} concurrent`, kb: procStatusKb(s.pid, "VmRSS") });
  } finally {
    await s.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  }
  const first = samples[0].kb;
  const last = samples[samples.length - 1].kb;
  const growth = growthOf(samples.map((sample) => sample.kb));
  const peak = Math.max(...samples.map((sample) => sample.kb));
  const jobs = `${SIZES.flatRuns} sequential runs and ${SIZES.flatConcurrent} concurrent jobs`;
  // The floor under the target: what Node alone does on the same workload.
  const minimalKb = await minimalFlat();
  const minimalGrowth = growthOf(minimalKb);
  return {
    rows: [
      {
        metric: `q  RSS after ${jobs}, against after 100`,
        value: `${mib(last)} MiB against ${mib(first)} MiB: ${(growth * 100).toFixed(1)}%`,
        target: `<= ${GROWTH_TARGET * 100}%`,
        pass: growth <= GROWTH_TARGET,
        detail:
          `every answer its own prompt; peak of the samples ${mib(peak)} MiB; samples (MiB): ` +
          samples.map((sample) => mib(sample.kb)).join(", "),
      },
      {
        metric:
          "q  the same jobs on the minimal job loop of (i) (bench/fixtures/minimal-jobs.mjs --flat), against after 100",
        value:
          `${mib(minimalKb[minimalKb.length - 1])} MiB against ${mib(minimalKb[0])} MiB: ` +
          `${(minimalGrowth * 100).toFixed(1)}%`,
        target: "(info)",
        pass: undefined,
        detail:
          `the job of (i)'s minimal loop, its agents given the loop's environment; no protocol, slots, process tree ` +
          `or requests; samples (MiB): ${minimalKb.map(mib).join(", ")}`,
      },
    ],
    data: {
      samples,
      growth: round2(growth),
      firstKb: first,
      lastKb: last,
      minimal: { samplesKb: minimalKb, growth: round2(minimalGrowth) },
    },
  };
}
