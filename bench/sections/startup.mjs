/** (h) cold start and RSS on an empty state directory and on one holding 1000 finished jobs. */
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Server } from "../client.mjs";
import { ROOT, STATE_ROOT, SIZES, now, sleep, median, round2, log, procStatusKb } from "../shared.mjs";

/** Field 22 of /proc/<pid>/stat (start time in clock ticks after boot), as the server records an identity. */
function procStartTime(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
}

const RESULT_FILLER = "The state directory keeps each job in a folder of its own, named by its id. ";

/**
 * Fills <stateDir>/jobs with `count` finished jobs laid out as the server
 * writes them (PROTOCOL.md §15): a folder per job (0700) holding record.json
 * (a format-1 record of a completed job, as parseRecord in src/state.ts
 * requires), prompt.txt, result.txt (SIZES.finishedResultChars), an empty
 * stderr.log and stdout.jsonl: the agent's events, then extended with
 * ftruncate to SIZES.finishedStdoutBytes. That file is sparse: its apparent
 * size counts against the disk cap as a real one's would (the server sums
 * lstat sizes), but it takes almost no disk.
 *
 * All jobs were submitted and finished within the last hour, so retention
 * (7 days by default) keeps them; with the default caps (1000 finished jobs,
 * 1 GiB) nothing is pruned either. The owner is this process's identity and
 * the agent pids are made up: a finished job's owner and agent are never
 * looked up or signalled.
 */
function makeFinishedJobs(stateDir, count) {
  const jobsDir = path.join(stateDir, "jobs");
  fs.mkdirSync(jobsDir, { recursive: true, mode: 0o700 });
  fs.chmodSync(stateDir, 0o700);
  fs.chmodSync(jobsDir, 0o700);
  const owner = { pid: process.pid, start_time: procStartTime(process.pid) };
  const spanMs = 50 * 60_000;
  const firstSubmitted = Date.now() - spanMs;
  const write = (file, text) => fs.writeFileSync(file, text, { mode: 0o600, flag: "wx" });
  let apparentBytes = 0;
  let diskBytes = 0;
  for (let i = 0; i < count; i += 1) {
    const id = randomUUID();
    const sessionId = randomUUID();
    const dir = path.join(jobsDir, id);
    fs.mkdirSync(dir, { mode: 0o700 });
    const kind = i % 2 === 0 ? "run" : "start";
    const prompt = `Job ${i} of the startup bench.\nRead src/state.ts and explain, in one paragraph, how a finished ` +
      `job is kept on disk.\nChange nothing.\n`;
    const flat = prompt.replace(/\s+/g, " ").trim();
    const result = `Job ${i}: ${RESULT_FILLER.repeat(Math.ceil(SIZES.finishedResultChars / RESULT_FILLER.length))}`.slice(0, SIZES.finishedResultChars);
    // Spread over the last 50 minutes; the last one finished about a second ago.
    const submitted = firstSubmitted + Math.floor((i * spanMs) / count);
    const started = submitted + 4;
    const durationMs = 1200 + (i % 10) * 100;
    const finished = started + durationMs + 30;
    const costUsd = Math.round((0.01 + (i % 5) / 1000) * 10000) / 10000;
    const agentPid = 2 + ((owner.pid + 13 * (i + 1)) % 32000);
    const record = {
      format: 1,
      id,
      kind,
      cwd: ROOT,
      prompt_preview: flat.length > 80 ? `${flat.slice(0, 80)}…` : flat,
      options: {},
      status: "completed",
      submitted_at: submitted,
      owner,
      generation: 0,
      ...(kind === "run" ? { timeout_ms: 120_000 } : {}),
      started_at: started,
      finished_at: finished,
      agent: { tree_marker: randomUUID(), pid: agentPid, pgid: agentPid, start_time: String(Number(owner.start_time) + 10 * (i + 1)) },
      outcome: { ok: true, exit: { code: 0, signal: null }, result: { sessionId, costUsd, numTurns: 1, durationMs }, result_chars: result.length },
      turns: 1,
      cost_usd: costUsd,
    };
    const events = [
      { type: "system", subtype: "init", session_id: sessionId, cwd: ROOT, tools: ["Bash", "Edit", "Read"], model: "claude-fake-1" },
      { type: "assistant", message: { id: `msg_${i}`, type: "message", role: "assistant", content: [{ type: "text", text: result }] }, session_id: sessionId },
      {
        type: "result",
        subtype: "success",
        is_error: false,
        api_error_status: null,
        duration_ms: durationMs,
        num_turns: 1,
        result,
        stop_reason: "end_turn",
        session_id: sessionId,
        total_cost_usd: costUsd,
        permission_denials: [],
        terminal_reason: "completed",
      },
    ];
    write(path.join(dir, "prompt.txt"), prompt);
    write(path.join(dir, "stderr.log"), "");
    const fd = fs.openSync(path.join(dir, "stdout.jsonl"), "wx", 0o600);
    try {
      fs.writeSync(fd, events.map((event) => `${JSON.stringify(event)}\n`).join(""));
      fs.ftruncateSync(fd, SIZES.finishedStdoutBytes);
    } finally {
      fs.closeSync(fd);
    }
    write(path.join(dir, "result.txt"), result);
    // The final record last, as the server writes it.
    write(path.join(dir, "record.json"), `${JSON.stringify(record)}\n`);
    for (const name of fs.readdirSync(dir)) {
      const info = fs.lstatSync(path.join(dir, name));
      apparentBytes += info.size;
      diskBytes += info.blocks * 512;
    }
  }
  return { jobs: count, apparentBytes, diskBytes };
}

/** Throws unless every one of the `count` job folders is still there with its record: the server pruned none. */
function checkJobsKept(stateDir, count, when) {
  const jobsDir = path.join(stateDir, "jobs");
  const kept = fs.readdirSync(jobsDir).filter((name) => fs.existsSync(path.join(jobsDir, name, "record.json"))).length;
  if (kept !== count) {
    throw new Error(`h: ${when}, ${kept} of the ${count} finished job folders are left in ${stateDir}: the server ` +
      `removed some, so the figures are not of ${count} jobs`);
  }
}

/** Lines in a file, or 0 when it is missing. */
function countLines(file) {
  try {
    return fs.readFileSync(file, "utf8").split("\n").filter(Boolean).length;
  } catch {
    return 0;
  }
}

/**
 * (h) Startup with many finished jobs kept: cold start (spawn -> initialize
 * result, as in a) and VmRSS 200 ms after initialize (as in d), on an empty
 * state directory and on one holding SIZES.finishedJobs finished jobs. Both
 * directories are made once and reused by every server (named through
 * CLAUDE_DISPATCH_STATE_DIR, where baseEnv would make a fresh one each time).
 * Before any timing, one untimed server starts on the full directory, lists
 * the jobs (all must be there, completed) and stops: that first start reads
 * every record and writes the index of finished jobs (finished.jsonl), as a
 * server does the first time it meets them.
 */
export async function benchStartupWithJobs(rounds) {
  const count = SIZES.finishedJobs;
  const emptyDir = fs.mkdtempSync(path.join(STATE_ROOT, "h-empty-"));
  const fullDir = fs.mkdtempSync(path.join(STATE_ROOT, "h-full-"));
  try {
    const madeAt = now();
    const fixture = makeFinishedJobs(fullDir, count);
    const makeMs = now() - madeAt;
    // Under the default disk cap (1 GiB; finished.jsonl adds under 100 bytes a job), so that the server prunes nothing.
    if (fixture.apparentBytes + 100 * count >= 1024 ** 3) throw new Error(`h: the jobs made take ` +
      `${fixture.apparentBytes} bytes, over the 1 GiB disk cap`);
    log(
      `h: ${count} finished jobs made in ${(makeMs / 1000).toFixed(1)} s: ` +
        `${(fixture.apparentBytes / 1048576).toFixed(0)} MiB apparent, ` +
        `${(fixture.diskBytes / 1048576).toFixed(1)} MiB on disk`,
    );

    const first = new Server({ CLAUDE_DISPATCH_STATE_DIR: fullDir });
    await first.initialize();
    // claude_list pages its jobs (§5.7): its total counts every completed one.
    const listed = await first.callTool("claude_list", { status: "completed", limit: 1 });
    await first.close();
    const completed = Number.isInteger(listed.structured?.total) ? listed.structured.total : Number.NaN;
    if (completed !== count) {
      throw new Error(`h: the first server lists ${completed} completed jobs of the ${count} made; its stderr ` +
        `ends:\n${first.stderrTail.slice(-2000)}`);
    }
    checkJobsKept(fullDir, count, "after the first, untimed start");
    const indexLines = countLines(path.join(fullDir, "finished.jsonl"));

    const env = (dir) => ({ CLAUDE_DISPATCH_STATE_DIR: dir });
    const cold = async (dir) => {
      const s = new Server(env(dir));
      const response = await s.initialize();
      await s.close();
      return response.at - s.spawnedAt;
    };
    const rss = async (dir) => {
      const s = new Server(env(dir));
      await s.initialize();
      await sleep(200); // as (d): let startup work and the initialize response settle
      const kb = procStatusKb(s.pid, "VmRSS");
      await s.close();
      return kb;
    };
    // One unmeasured start of each first, so both run with warm file caches.
    await cold(emptyDir);
    await cold(fullDir);
    const perRound = { emptyMs: [], fullMs: [], emptyRssKb: [], fullRssKb: [] };
    let servers = 3;
    for (let i = 0; i < rounds; i += 1) {
      // As (a): the median of a few pairs per round, in alternating order.
      const roundEmpty = [];
      const roundFull = [];
      for (let k = 0; k < SIZES.coldPairsPerRound; k += 1) {
        if (k % 2 === 0) roundEmpty.push(await cold(emptyDir));
        roundFull.push(await cold(fullDir));
        if (k % 2 === 1) roundEmpty.push(await cold(emptyDir));
      }
      perRound.emptyMs.push(round2(median(roundEmpty)));
      perRound.fullMs.push(round2(median(roundFull)));
      // As (d): one fresh server of each per round, the order alternating by round.
      if (i % 2 === 0) perRound.emptyRssKb.push(await rss(emptyDir));
      perRound.fullRssKb.push(await rss(fullDir));
      if (i % 2 === 1) perRound.emptyRssKb.push(await rss(emptyDir));
      servers += 2 * SIZES.coldPairsPerRound + 2;
    }
    checkJobsKept(fullDir, count, `after ${servers} servers`);

    const emptyMs = median(perRound.emptyMs);
    const fullMs = median(perRound.fullMs);
    const coldLimit = 1.15 * emptyMs + 5;
    const emptyMiB = median(perRound.emptyRssKb) / 1024;
    const fullMiB = median(perRound.fullRssKb) / 1024;
    const rssLimit = emptyMiB + 8;
    return {
      rows: [
        {
          metric: `h  cold start, ${count} finished jobs kept`,
          value: `${fullMs.toFixed(1)} ms`,
          target: `<= 1.15 x empty + 5 = ${coldLimit.toFixed(1)} ms`,
          pass: fullMs <= coldLimit,
          detail: `empty: ${emptyMs.toFixed(1)} ms; ratio ${(fullMs / emptyMs).toFixed(2)}x`,
        },
        {
          metric: `h  RSS after initialize, ${count} finished jobs kept`,
          value: `${fullMiB.toFixed(1)} MiB`,
          target: `<= empty + 8 = ${rssLimit.toFixed(1)} MiB`,
          pass: fullMiB <= rssLimit,
          detail:
            `empty: ${emptyMiB.toFixed(1)} MiB (+${(fullMiB - emptyMiB).toFixed(1)} MiB); ` +
            `${count} jobs, ${(fixture.apparentBytes / 1048576).toFixed(0)} MiB apparent ` +
              `(${(fixture.diskBytes / 1048576).toFixed(1)} MiB on disk), ` +
            `finished.jsonl ${indexLines > 0 ? `${indexLines} lines` : "not written"}; all ${count} still there ` +
              `after ${servers} servers`,
        },
      ],
      data: {
        jobs: count,
        emptyMs: round2(emptyMs),
        fullMs: round2(fullMs),
        ratio: round2(fullMs / emptyMs),
        coldLimitMs: round2(coldLimit),
        emptyRssMiB: round2(emptyMiB),
        fullRssMiB: round2(fullMiB),
        rssLimitMiB: round2(rssLimit),
        stateDir: { ...fixture, makeMs: Math.round(makeMs), indexLines, serversStarted: servers },
        perRound,
      },
    };
  } finally {
    fs.rmSync(fullDir, { recursive: true, force: true });
    fs.rmSync(emptyDir, { recursive: true, force: true });
  }
}
