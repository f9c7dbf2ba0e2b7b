/**
 * (r) What a running job costs each second, and what the process table costs on a machine with many processes, as a
 * laptop has (issue 29): this VM runs about 65, a laptop with a browser several hundred, and the server reads the
 * table once a second while any agent runs, and after each agent exits. The far end of an SSH host (§21.3) follows
 * its job on that machine for as long as it runs, so it is measured too.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Server } from "../client.mjs";
import {
  AGENT_ARGS,
  FAKE_CLAUDE_SH,
  SERVER_MAIN,
  SIZES,
  STATE_ROOT,
  baseEnv,
  median,
  now,
  reapLeftovers,
  round2,
  track,
} from "../shared.mjs";

/**
 * A process's CPU time in ms, to the nanosecond: the sum over its threads of /proc/<pid>/task/<tid>/schedstat's
 * first field (the clock-tick figures of /proc/<pid>/stat are too coarse for a few ms a second).
 */
function cpuMs(pid) {
  let ns = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "latin1").split(" ")[0]);
    } catch {
      // A thread gone meanwhile: its time left with it, as it would from /proc/<pid>/stat.
    }
  }
  return ns / 1e6;
}

/** Processes on the machine, as /proc lists them. */
function processCount() {
  return fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).length;
}

/** `count` idle processes (sleep), tagged as the bench's; resolves once all have started. Stop them with stopIdle. */
async function startIdle(count) {
  const children = [];
  for (let k = 0; k < count; k += 1) {
    const child = spawn("/bin/sleep", ["3600"], { stdio: "ignore", env: baseEnv() });
    track(child);
    children.push(child);
  }
  await Promise.all(children.map((child) => new Promise((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", reject);
  })));
  return children;
}

async function stopIdle(children) {
  await Promise.all(children.map((child) => new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", resolve);
    child.kill("SIGKILL");
  })));
}

/** A server of its own for fn(server, cwd), its agents sleeping `sleep` seconds. */
async function withServer(dir, label, sleep, fn) {
  const cwd = fs.mkdtempSync(path.join(dir, `${label}-cwd-`));
  const stateDir = fs.mkdtempSync(path.join(dir, `${label}-state-`));
  const s = new Server({
    CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE_SH,
    CLAUDE_DISPATCH_STATE_DIR: stateDir,
    FAKE_CLAUDE_SLEEP: String(sleep),
  });
  try {
    await s.initialize();
    return await fn(s, cwd);
  } finally {
    await s.close();
  }
}

function checked(answer, prompt) {
  if (answer.structured?.result !== `ECHO: ${prompt}`)
    throw new Error(`r: "${prompt}" answered ${JSON.stringify(answer.structured ?? answer.result).slice(0, 300)}`);
}

/**
 * A job whose agent sleeps SIZES.busyAgentSeconds: the server's CPU a second from SIZES.busySettleMs after its start
 * to the wait's answer. Then, on another server, SIZES.busyRuns claude_run of an agent that exits at once, after
 * SIZES.busyWarmRuns unmeasured: its CPU a run.
 */
async function measure(dir, label) {
  const runningMsPerSecond = await withServer(dir, `${label}-running`, SIZES.busyAgentSeconds, async (s, cwd) => {
    const prompt = `busy ${label}`;
    const started = await s.callTool("claude_start", { prompt, cwd });
    const jobId = started.structured?.job_id;
    if (typeof jobId !== "string") throw new Error(`r: claude_start gave no job_id`);
    // Measured once the job's start is over: what a long job costs each second it runs.
    await new Promise((resolve) => setTimeout(resolve, SIZES.busySettleMs));
    const cpuBefore = cpuMs(s.pid);
    const t0 = now();
    const waited = await s.callTool("claude_wait", { job_id: jobId, hold_ms: 60_000 }, 90_000);
    const perSecond = (cpuMs(s.pid) - cpuBefore) / ((now() - t0) / 1000);
    checked(waited, prompt);
    return perSecond;
  });
  const farEndMsPerSecond = await farEnd(dir, label);
  const msPerRun = await withServer(dir, `${label}-runs`, 0, async (s, cwd) => {
    const run = async (prompt) => checked(await s.callTool("claude_run", { prompt, cwd }), prompt);
    // Unmeasured: the first runs load and compile what every later one uses.
    for (let k = 0; k < SIZES.busyWarmRuns; k += 1) await run(`busy ${label} warm ${k}`);
    const cpuBefore = cpuMs(s.pid);
    for (let k = 0; k < SIZES.busyRuns; k += 1) await run(`busy ${label} ${k}`);
    return (cpuMs(s.pid) - cpuBefore) / SIZES.busyRuns;
  });
  return { runningMsPerSecond, farEndMsPerSecond, msPerRun };
}

/**
 * `claude-dispatch remote` as ssh would run it, without ssh: a start of one agent sleeping SIZES.busyAgentSeconds,
 * its channel kept open; its CPU a second from SIZES.busySettleMs after the start to its end frame.
 */
async function farEnd(dir, label) {
  const cwd = fs.mkdtempSync(path.join(dir, `${label}-far-cwd-`));
  const stateDir = fs.mkdtempSync(path.join(dir, `${label}-far-state-`));
  const env = baseEnv({
    CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE_SH,
    FAKE_CLAUDE_SLEEP: String(SIZES.busyAgentSeconds),
  });
  const far = spawn(process.execPath, [SERVER_MAIN, "remote", `--state-dir=${stateDir}`], {
    env,
    stdio: ["pipe", "pipe", "ignore"],
  });
  track(far);
  const exited = new Promise((resolve) => far.once("exit", resolve));
  let frames = "";
  far.stdout.setEncoding("utf8");
  const ended = new Promise((resolve, reject) => {
    far.stdout.on("data", (text) => {
      frames += text;
      if (/"type":"end"/.test(frames)) resolve();
    });
    far.once("exit", () => reject(new Error(`r: the far end exited before its end frame: ${frames.slice(0, 300)}`)));
  });
  ended.catch(() => undefined);
  const prompt = `busy ${label} far`;
  const request = {
    op: "start",
    job_id: randomUUID(),
    agent: "claude",
    cwd,
    roots: [cwd],
    args: AGENT_ARGS,
    env: {},
    prompt,
    offset: 0,
  };
  far.stdin.write(`${JSON.stringify(request)}\n`);
  try {
    await new Promise((resolve) => setTimeout(resolve, SIZES.busySettleMs));
    const cpuBefore = cpuMs(far.pid);
    const t0 = now();
    await ended;
    const perSecond = (cpuMs(far.pid) - cpuBefore) / ((now() - t0) / 1000);
    const output = frames
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line))
      .filter((frame) => frame.type === "output");
    const printed = Buffer.concat(output.map((frame) => Buffer.from(frame.data, "base64"))).toString("utf8");
    if (!printed.includes(`"result":"ECHO: ${prompt}"`))
      throw new Error(`r: the far end's job printed ${printed.slice(0, 300)}`);
    return perSecond;
  } finally {
    far.stdin.end();
    await exited;
  }
}

/**
 * (r) Each round measures a server with SIZES.busyIdleProcesses idle processes added to the machine and one
 * without, in alternating order. Information: there is no target.
 */
export async function benchBusyMachine(rounds) {
  const dir = fs.mkdtempSync(path.join(STATE_ROOT, "r-busy-"));
  const perRound = { quiet: [], busy: [], quietProcesses: [], busyProcesses: [] };
  try {
    const busyRound = async (k) => {
      const idle = await startIdle(SIZES.busyIdleProcesses);
      try {
        perRound.busyProcesses.push(processCount());
        perRound.busy.push(await measure(dir, `busy-${k}`));
      } finally {
        await stopIdle(idle);
      }
    };
    const quietRound = async (k) => {
      perRound.quietProcesses.push(processCount());
      perRound.quiet.push(await measure(dir, `quiet-${k}`));
    };
    for (let k = 0; k < rounds; k += 1) {
      if (k % 2 === 0) {
        await busyRound(k);
        await quietRound(k);
      } else {
        await quietRound(k);
        await busyRound(k);
      }
      await reapLeftovers();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const of = (which, key) => median(perRound[which].map((m) => m[key]));
  const list = (which, key, digits) => perRound[which].map((m) => m[key].toFixed(digits)).join(", ");
  const both = (key, digits) => `${of("busy", key).toFixed(digits)} against ${of("quiet", key).toFixed(digits)}`;
  const perRoundText = (key, digits) =>
    `per round, busy: ${list("busy", key, digits)}; quiet: ${list("quiet", key, digits)}`;
  const machines = `${median(perRound.busyProcesses)} processes against ${median(perRound.quietProcesses)}`;
  return {
    rows: [
      {
        metric: `r  server CPU a second while one agent runs (${SIZES.busyAgentSeconds} s), ${machines} (schedstat)`,
        value: `${both("runningMsPerSecond", 1)} ms/s`,
        target: "(info)",
        pass: undefined,
        detail: `${perRoundText("runningMsPerSecond", 1)} ms/s`,
      },
      {
        metric: `r  the far end of an SSH host (claude-dispatch remote) following its agent, CPU a second, ${machines}`,
        value: `${both("farEndMsPerSecond", 1)} ms/s`,
        target: "(info)",
        pass: undefined,
        detail: `${perRoundText("farEndMsPerSecond", 1)} ms/s; run without ssh, its channel a pipe`,
      },
      {
        metric:
          `r  server CPU a claude_run of an agent that exits at once (${SIZES.busyRuns} in a row, warm), ` + machines,
        value: `${both("msPerRun", 2)} ms`,
        target: "(info)",
        pass: undefined,
        detail: `${perRoundText("msPerRun", 2)} ms`,
      },
    ],
    data: {
      idleProcessesAdded: SIZES.busyIdleProcesses,
      ...Object.fromEntries(
        ["runningMsPerSecond", "farEndMsPerSecond", "msPerRun"].map((key) => [
          key,
          { busy: round2(of("busy", key)), quiet: round2(of("quiet", key)) },
        ]),
      ),
      perRound,
    },
  };
}
