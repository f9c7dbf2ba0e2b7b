/** (o) work going on with no server: the headless carrier (PROTOCOL.md §15.8). */
import fs from "node:fs";
import path from "node:path";
import { Server } from "../client.mjs";
import { ROOT, STATE_ROOT, SIZES, sleep, median, percentile, round2, taggedProcesses } from "../shared.mjs";

/**
 * (o) Work goes on with no server (PROTOCOL.md §15.8): a server with ON_EXIT=keep starts SIZES.carrierJobs jobs
 * (at most SIZES.carrierMaxJobs at once, the rest queued) of fake agents sleeping 0.3 to 1.5 s, and its host closes
 * stdin. For each job: from its agent's exit (the agent appends its own wall-clock end, @times) to its record saying
 * it finished, read every 10 ms; the agents running when the server left are the carrier's by adoption (their exit
 * is polled), the queued ones its own children. Then from the last record to the carrier's exit (its idle time).
 */
export async function benchCarrier(rounds) {
  const latencies = [];
  /** The first carrierMaxJobs jobs ran before the server left: the carrier adopted them. */
  const adopted = [];
  const idleExits = [];
  for (let round = 0; round < rounds; round += 1) {
    const stateDir = fs.mkdtempSync(path.join(STATE_ROOT, "o-"));
    const times = path.join(stateDir, "..", `${path.basename(stateDir)}-times`);
    const server = new Server({ CLAUDE_DISPATCH_STATE_DIR: stateDir, CLAUDE_DISPATCH_ON_EXIT: "keep", CLAUDE_DISPATCH_MAX_JOBS: String(SIZES.carrierMaxJobs) });
    await server.initialize();
    const ids = [];
    for (let i = 0; i < SIZES.carrierJobs; i += 1) {
      const sleepMs = 300 + ((i * 397 + round * 131) % 1200);
      const started = await server.callTool("claude_start", { prompt: `@times ${times} ${i}\n@sleep ` +
        `${sleepMs}\njob ${i}`, cwd: ROOT });
      const id = started.structured?.job_id;
      if (typeof id !== "string") throw new Error(`o: claude_start answered ${JSON.stringify(started).slice(0, 300)}`);
      ids.push(id);
    }
    await server.close();
    const seenFinal = new Map();
    const deadline = Date.now() + 60_000;
    while (seenFinal.size < ids.length) {
      if (Date.now() > deadline) throw new Error(`o: only ${seenFinal.size} of ${ids.length} jobs finished with no ` +
        `server within 60 s`);
      for (const [i, id] of ids.entries()) {
        if (seenFinal.has(i)) continue;
        let record;
        try {
          record = JSON.parse(fs.readFileSync(path.join(stateDir, "jobs", id, "record.json"), "utf8"));
        } catch {
          continue;
        }
        if (["completed", "failed", "killed", "lost"].includes(record.status)) {
          if (record.status !== "completed") throw new Error(`o: job ${i} ended ${record.status}: ` +
            `${JSON.stringify(record.outcome)}`);
          seenFinal.set(i, Date.now());
        }
      }
      await sleep(10);
    }
    const lastFinal = Math.max(...seenFinal.values());
    const ended = new Map(fs.readFileSync(times, "utf8").trim().split("\n").map((line) => JSON.parse(line)).map((run) => [Number(run.label), run.ended]));
    for (const [i, at] of seenFinal) {
      latencies.push(at - ended.get(i));
      if (i < SIZES.carrierMaxJobs) adopted.push(at - ended.get(i));
    }
    // The carrier, found by the state directory on its command line.
    const carriers = taggedProcesses().filter((p) => p.command.includes(`carrier --state-dir=${stateDir}`));
    while (taggedProcesses().some((p) => carriers.some((c) => c.pid === p.pid))) {
      if (Date.now() > lastFinal + 30_000) throw new Error("o: the carrier did not exit within 30 s of its last job");
      await sleep(20);
    }
    idleExits.push(Date.now() - lastFinal);
  }
  const p50 = percentile(latencies, 0.5);
  const p99 = percentile(latencies, 0.99);
  return {
    rows: [
      {
        metric: "o  agent exit -> final record, no server",
        value: `p99 ${p99.toFixed(0)} ms`,
        target: "p99 < 1500 ms",
        pass: p99 < 1500,
        detail:
          `p50 ${p50.toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms over ${latencies.length} jobs; the ` +
            `${adopted.length} adopted: ` +
          `${Math.min(...adopted).toFixed(0)} to ${Math.max(...adopted).toFixed(0)} ms, p50 ` +
            `${percentile(adopted, 0.5).toFixed(0)} ms`,
      },
      {
        metric: "o  last record -> carrier exit",
        value: `${median(idleExits).toFixed(0)} ms`,
        target: "info",
        detail: `the carrier's idle time is 2 s; max ${Math.max(...idleExits).toFixed(0)} ms`,
      },
    ],
    data: { latenciesMs: latencies, adoptedMs: adopted, p50Ms: round2(p50), p99Ms: round2(p99), idleExitMs: idleExits },
  };
}
