#!/usr/bin/env node
/**
 * Benchmark for claude-dispatch. Plain Node ESM, built-ins only.
 *
 * It runs the BUILT server (node dist/main.js; run `npm run build` first) as a
 * host would, speaking raw JSON-RPC lines on stdin/stdout, with
 * CLAUDE_DISPATCH_CLAUDE_BIN pointing at test/fixtures/fake-claude.mjs.
 *
 *   node bench/bench.mjs [--rounds N] [--only a,b,...] [--out FILE] [--table]
 *
 * Sections (each figure is the median over --rounds rounds, default 5):
 *   a cold     spawn -> initialize result, next to a bare JSON-RPC server's
 *              (bench/fixtures/bare-server.mjs; each round: the median of 5 of each)
 *   b latency  sequential ping and tools/list, p50/p99 over 2000 each
 *   c pipeline 20000 tools/list written at once, with every agent and two hosts
 *              offered; requests per second, and with BENCH_REFERENCE_SERVER the
 *              earlier JavaScript server's in the same rounds
 *   d rss      VmRSS of a fresh server after initialize, next to the bare server's
 *   e jobs     100 concurrent claude_start of `@sleep 1000`, then claude_wait
 *              on all; wall time, next to 100 bare fake agents run directly
 *              (CLAUDE_DISPATCH_MAX_JOBS=100, so none of them queues)
 *   f big      20 concurrent jobs printing 5 MiB each; peak server RSS (VmHWM)
 *              (CLAUDE_DISPATCH_MAX_JOBS=20)
 *   g wait     agent exit (seen in /proc) -> claude_wait answer, p50/p99
 *   h startup  cold start (as a) and RSS after initialize (as d) on an empty
 *              state directory and on one holding 1000 finished jobs
 *   i jobcost  100 concurrent 1 s jobs of a SHELL fake agent (cheap to start,
 *              so the server's own cost shows): first claude_start -> last
 *              claude_wait answer, next to the same 100 shell agents spawned
 *              and awaited directly by a bare node script in the same round
 *              (stdin from a file, output to files, as the server does); the
 *              ratio, and the server's CPU time per job
 *              (CLAUDE_DISPATCH_MAX_JOBS=100); once with everything in
 *              os.tmpdir() (the headline), once on tmpfs (/dev/shm) if any
 *   j shared   g, with the wait on a second server of the same state directory
 *   k approvals permission requests (PROTOCOL.md §18): the state directory's
 *              endpoint asked, at the URL and with the token a running job's
 *              agent is given, the call Claude Code makes: the memory of every
 *              process but the agent and the server while it waits (what
 *              forwarding adds to a job); request sent -> claude_wait answers
 *              input_required (the wait already holding); claude_respond sent
 *              -> the endpoint answers; and, for comparison, the approver
 *              process other hosts still run: its start and peak RSS
 *   l worktrees what a worktree costs a job (PROTOCOL.md §19), in a git
 *              repository the bench makes: claude_start answered, and the
 *              claude_wait of the finished job (which reads what it
 *              changed), with worktree: true next to the same job without
 *   m ssh      what a job on another machine over ssh costs (PROTOCOL.md §21),
 *              through a real sshd on 127.0.0.1 (test/sshd-serve.ts): claude_run
 *              of "hi" over a warm shared connection next to the same here
 *              (p50/p90) and a bare `ssh <alias> true`, the first one over ssh
 *              on a fresh server (the handshake), and a job printing about
 *              8 MB over ssh next to here (wall time, the server's CPU);
 *              skipped, saying why, without sshd
 *   n approvalscale one job's permission requests as they add up (PROTOCOL.md
 *              §18): 100, then 400 requests filed through its approver (as
 *              in k), each seen by claude_wait and answered by claude_respond
 *              in turn; the server's CPU time for each size and the 400/100
 *              ratio (about 4 if each request costs the same, 16 if quadratic)
 *   o carrier  with no server (its host closed stdin): agent exit -> final record, p99;
 *              last record -> the headless carrier's exit
 *   p containers  claude_run "hi" here, in a running container and in a fresh
 *              sandbox per job, on a private podman (test/podman-serve.ts)
 *   q flat     1000 sequential claude_run, then 200 concurrent start+wait, of
 *              the shell agent on one server: VmRSS after 100 runs against
 *              the end (issue 29: within 10%), every answer checked
 *   r busy     CPU a second while one agent runs (the server, and the far end
 *              of an SSH host), and a warm claude_run's CPU, with 500 idle
 *              processes on the machine and without
 *
 * Every process it starts carries BENCH_RUN_ID=<uuid> in its environment (the
 * server passes its environment on to agents), so leftovers are found by that
 * tag and never confused with processes of a test run going on next to it.
 * Prints a table and writes bench/results.json. --table (which `npm run bench`
 * passes) then rewrites the current table of BENCHMARKS.md from it
 * (bench/table.mjs); it refuses a run that lacks a figure.
 *
 * NODE_EXTRA_CA_CERTS is left out of every child's environment (DROPPED_ENV).
 *
 * BENCH_SERVER_NODE_ARGS adds node flags to the server only (not to agents),
 * e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile a section.
 *
 * BENCH_SERVER_MAIN runs another build of the server instead of dist/main.js,
 * e.g. BENCH_SERVER_MAIN=/tmp/old/dist/main.js to measure an older commit's
 * build next to this one (results.json records which one ran). Copy the
 * package.json above dist/ with it: without its "type": "module", node parses
 * the bundle twice (as CommonJS first), and (a) and (d) grow (the bench refuses).
 *
 * Layout: this file parses the arguments and runs the sections, in the order of
 * sections/list.mjs; sections/*.mjs hold one section each (or a closely related
 * pair); table.mjs writes BENCHMARKS.md's table; shared.mjs holds what they
 * share (paths, sizes, environment, reaping, statistics, /proc readers, the
 * table) and client.mjs the Server class that speaks to the built server.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { benchColdStart, benchRss } from "./sections/cold.mjs";
import { benchLatency, benchPipeline } from "./sections/latency.mjs";
import { benchConcurrentJobs, benchBigOutput } from "./sections/jobs.mjs";
import { benchJobCost } from "./sections/jobcost.mjs";
import { benchWaitLatency } from "./sections/wait.mjs";
import { benchApprovals, benchApprovalScale } from "./sections/approvals.mjs";
import { benchWorktrees } from "./sections/worktrees.mjs";
import { benchSsh } from "./sections/ssh.mjs";
import { benchStartupWithJobs } from "./sections/startup.mjs";
import { benchCarrier } from "./sections/carrier.mjs";
import { benchContainers } from "./sections/containers.mjs";
import { benchMemoryFlat } from "./sections/memory.mjs";
import { benchBusyMachine } from "./sections/busy.mjs";
import { SECTION_LIST } from "./sections/list.mjs";
import { DOCUMENT, writeTable } from "./table.mjs";
import {
  ROOT,
  SERVER_MAIN,
  RUN_ID,
  SIZES,
  now,
  sleep,
  round2,
  log,
  loadAverage,
  DROPPED_ENV,
  taggedProcesses,
  killedLeftovers,
  reapLeftovers,
  liveChildren,
  printTable,
} from "./shared.mjs";

/* ------------------------------------------------------------------ *
 * Sections, one module each (or a closely related pair) under sections/,
 * in the order of sections/list.mjs. Each returns { rows, data }: table
 * rows and raw figures.
 * ------------------------------------------------------------------ */

const RUNS = {
  cold: benchColdStart,
  latency: benchLatency,
  pipeline: benchPipeline,
  rss: benchRss,
  jobs: benchConcurrentJobs,
  big: benchBigOutput,
  wait: benchWaitLatency,
  startup: benchStartupWithJobs,
  jobcost: benchJobCost,
  shared: (rounds) => benchWaitLatency(rounds, true),
  approvals: benchApprovals,
  worktrees: benchWorktrees,
  ssh: benchSsh,
  approvalscale: benchApprovalScale,
  carrier: benchCarrier,
  containers: benchContainers,
  flat: benchMemoryFlat,
  busy: benchBusyMachine,
};
const SECTIONS = SECTION_LIST.map((section) => ({ ...section, run: RUNS[section.name] }));

/* ------------------------------------------------------------------ *
 * Main
 * ------------------------------------------------------------------ */

function parseArgs(argv) {
  const options = { rounds: 5, only: SECTIONS.map((s) => s.key), out: path.join(ROOT, "bench", "results.json") };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    const value = () => {
      const v = arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === "--rounds" || arg.startsWith("--rounds=")) {
      options.rounds = Number(value());
      if (!Number.isInteger(options.rounds) || options.rounds < 1)
        throw new Error("--rounds must be a " + "positive integer");
    } else if (arg === "--only" || arg.startsWith("--only=")) {
      options.only = value()
        .split(",")
        .map((name) => name.trim())
        .filter(Boolean)
        .map((name) => {
          const section = SECTIONS.find((s) => s.key === name || s.name === name);
          if (!section)
            throw new Error(
              `unknown section ${JSON.stringify(name)}; use ${SECTIONS.map((s) => `${s.key}/${s.name}`).join(", ")}`,
            );
          return section.key;
        });
    } else if (arg === "--out" || arg.startsWith("--out=")) {
      options.out = path.resolve(value());
    } else if (arg === "--table") {
      options.table = true;
    } else if (arg === "--help" || arg === "-h") {
      const names = SECTIONS.map((s) => s.name).join(",");
      process.stdout.write(
        `usage: node bench/bench.mjs [--rounds N] [--only a,b,...|${names}] [--out ` + `FILE] [--table]\n`,
      );
      process.exit(0);
    } else {
      throw new Error(`unknown argument ${arg}`);
    }
  }
  return options;
}

/** True when the package.json nearest to file (the one node reads) says "type": "module". */
function declaredModule(file) {
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, "package.json");
    if (fs.existsSync(manifest)) return JSON.parse(fs.readFileSync(manifest, "utf8")).type === "module";
    if (path.dirname(dir) === dir) return false;
  }
}

/** The newest modification time among dist/*.js: a rebuild during the run makes its figures mixed. */
function distStamp() {
  let newest = 0;
  for (const name of fs.readdirSync(path.dirname(SERVER_MAIN))) {
    if (name.endsWith(".js"))
      newest = Math.max(newest, fs.statSync(path.join(path.dirname(SERVER_MAIN), name)).mtimeMs);
  }
  return new Date(newest).toISOString();
}

function machine() {
  const cpu =
    /^model name\s*:\s*(.*)$/m.exec(fs.readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? os.cpus()[0]?.model ?? "unknown";
  const git = spawnSync("git", ["describe", "--always", "--dirty"], { cwd: ROOT, encoding: "utf8" });
  return {
    nproc: os.availableParallelism?.() ?? os.cpus().length,
    cpu,
    node: process.version,
    kernel: os.release(),
    platform: `${process.platform}-${process.arch}`,
    memTotalMiB: Math.round(os.totalmem() / 1048576),
    commit: git.status === 0 ? git.stdout.trim() : "unknown",
  };
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`bench: ${error.message}\n`);
    process.exit(2);
  }
  if (!fs.existsSync(SERVER_MAIN)) throw new Error(`${SERVER_MAIN} is missing: run npm run build first`);
  if (!declaredModule(SERVER_MAIN)) throw new Error(`no package.json with "type": "module" above ${SERVER_MAIN}`);
  if (process.platform !== "linux") throw new Error("the benchmark reads /proc: Linux only");
  const info = machine();
  const distBuilt = distStamp();
  const began = now();
  log(
    `node ${info.node}, ${info.nproc} cpus (${info.cpu}), kernel ${info.kernel}, commit ${info.commit}; load ` +
      `${loadAverage().join(" ")}`,
  );
  log(`rounds ${options.rounds}; sections ${options.only.join(",")}; run id ${RUN_ID}`);
  if (process.env.BENCH_SERVER_MAIN)
    log(`server: ${SERVER_MAIN} (BENCH_SERVER_MAIN; the commit above is this ` + `tree's, not that build's)`);

  const dropped = DROPPED_ENV.filter((key) => process.env[key] !== undefined);
  if (dropped.length > 0) log(`left out of the children's environment: ${dropped.join(", ")}`);
  const results = {
    date: new Date().toISOString(),
    machine: info,
    server: SERVER_MAIN,
    distBuilt,
    rounds: options.rounds,
    sizes: SIZES,
    droppedEnv: dropped,
    sections: {},
  };
  const rows = [];
  let failed = false;
  for (const section of SECTIONS.filter((s) => options.only.includes(s.key))) {
    const loadBefore = loadAverage();
    const startedAt = new Date().toISOString();
    const t0 = now();
    log(`${section.key} ${section.name} ...`);
    try {
      const { rows: sectionRows, data } = await section.run(options.rounds);
      rows.push(...sectionRows);
      const seconds = round2((now() - t0) / 1000);
      results.sections[section.name] = { ...data, startedAt, seconds, loadBefore, loadAfter: loadAverage() };
    } catch (error) {
      failed = true;
      log(`${section.key} ${section.name} FAILED: ${error?.stack ?? error}`);
      rows.push({
        metric: `${section.key}  ${section.name}`,
        value: "ERROR",
        target: "",
        pass: false,
        detail: String(error?.message ?? error).split("\n")[0],
      });
      results.sections[section.name] = { error: String(error?.message ?? error), startedAt, loadBefore };
      for (const child of liveChildren) child.kill("SIGTERM");
      await sleep(500);
    }
    const before = killedLeftovers.length;
    await reapLeftovers();
    const left = killedLeftovers.slice(before);
    if (left.length > 0) (results.sections[section.name] ??= {}).leftovers = left;
    log(`${section.key} ${section.name} done in ${((now() - t0) / 1000).toFixed(1)} s`);
  }

  if (distStamp() !== distBuilt) {
    results.distChangedDuringRun = true;
    log(`WARNING: dist/ was rebuilt during the run (${distBuilt} -> ${distStamp()}); the figures mix two builds`);
  }
  const remaining = taggedProcesses();
  results.leftoverProcesses = remaining;
  results.killedLeftovers = killedLeftovers;
  results.totalSeconds = round2((now() - began) / 1000);
  results.table = rows.map(({ metric, value, target, pass, detail }) => ({
    metric,
    value,
    target,
    verdict: pass === undefined ? "info" : pass ? "PASS" : "MISS",
    detail,
  }));
  fs.mkdirSync(path.dirname(options.out), { recursive: true });
  fs.writeFileSync(options.out, `${JSON.stringify(results, null, 2)}\n`);

  process.stdout.write(
    `\nclaude-dispatch benchmark, ${options.rounds} rounds (medians), ${info.nproc} cpus, node ` +
      `${info.node}, load ${loadAverage().join(" ")}\n\n`,
  );
  printTable(rows);
  process.stdout.write(
    `\nleftover fake-claude/server processes: ` +
      `${remaining.length === 0 ? "none" : remaining.map((p) => p.pid).join(", ")}` +
      `${killedLeftovers.length > 0 ? ` (the bench had to kill ${killedLeftovers.length} along the way)` : " (none had to be killed)"}\n` +
      `total ${results.totalSeconds} s; results written to ` +
      `${path.relative(process.cwd(), options.out) || options.out}\n`,
  );
  if (options.table) failed = !updateTable(results) || failed;
  if (failed || remaining.length > 0 || killedLeftovers.length > 0) process.exitCode = 1;
}

/** --table: BENCHMARKS.md's current table from this run's results; false, saying why, if it cannot be. */
function updateTable(results) {
  try {
    writeTable(results, DOCUMENT);
    log(`the table of ${path.relative(process.cwd(), DOCUMENT) || DOCUMENT} is rewritten from this run`);
    return true;
  } catch (error) {
    log(`the table of BENCHMARKS.md is left as it was: ${error?.message ?? error}`);
    return false;
  }
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, () => {
    // Servers kill their agents' trees on SIGTERM (PROTOCOL.md §3); bare agents just stop.
    for (const child of liveChildren) child.kill("SIGTERM");
    setTimeout(() => process.exit(130), 1000).unref();
  });
}

main().catch((error) => {
  log(`failed: ${error?.stack ?? error}`);
  for (const child of liveChildren) child.kill("SIGTERM");
  process.exitCode = 1;
});
