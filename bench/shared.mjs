/**
 * What every section of bench/bench.mjs shares: the paths and sizes, the environment and tag of everything
 * it starts, leftover reaping, medians and percentiles, the /proc readers and the table printer. The client
 * that speaks to the server is in client.mjs.
 */
import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** The built server; BENCH_SERVER_MAIN=/path/to/other/dist/main.js measures another build. */
export const SERVER_MAIN = process.env.BENCH_SERVER_MAIN
  ? path.resolve(process.env.BENCH_SERVER_MAIN)
  : path.join(ROOT, "dist", "main.js");
/**
 * BENCH_REFERENCE_SERVER=/path/to/server.mjs adds, to (i), another MCP server with claude_start and
 * claude_wait that runs `claude` from PATH (the earlier JavaScript server this project replaces; it is not
 * part of the repository). It must resolve its own imports from where it lies, e.g. a copy under this
 * repository's node_modules/. Its ratio to the same rounds' floor is reported beside ours.
 */
export const REFERENCE_SERVER = process.env.BENCH_REFERENCE_SERVER
  ? path.resolve(process.env.BENCH_REFERENCE_SERVER)
  : undefined;
export const FAKE_CLAUDE = path.join(ROOT, "test", "fixtures", "fake-claude.mjs");
/** (i): a POSIX sh agent, so that the agents' own start-up does not hide the server's cost. */
export const FAKE_CLAUDE_SH = path.join(ROOT, "test", "fixtures", "fake-claude.sh");
export const RUN_ID = randomUUID();
export const STATE_ROOT = fs.mkdtempSync(path.join(os.tmpdir(), "claude-dispatch-bench-state-"));
process.on("exit", () => fs.rmSync(STATE_ROOT, { recursive: true, force: true }));
const TAG = `BENCH_RUN_ID=${RUN_ID}`;
/**
 * Extra node flags for the server only, e.g.
 * BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile it.
 */
export const SERVER_NODE_ARGS = (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(/\s+/).filter(Boolean);
/** The argv the server gives the agent (PROTOCOL.md §7.1), for agents run directly. */
export const AGENT_ARGS = ["-p", "--output-format", "stream-json", "--verbose"];

export const SIZES = {
  coldPairsPerRound: 5,
  latencyRequests: 2000,
  latencyWarmup: 300,
  pipelineRequests: 20000,
  concurrentJobs: 100,
  jobSleepMs: 1000,
  bigJobs: 20,
  bigBytes: 5 * 1024 * 1024,
  waitSamples: 20,
  waitSleepMs: 200,
  /** (h): finished jobs kept in the full state directory, and the apparent size of each one's sparse stdout.jsonl. */
  finishedJobs: 1000,
  finishedStdoutBytes: 1024 * 1024,
  finishedResultChars: 1024,
  /** (i): concurrent shell agents, each sleeping 1 s. */
  jobCostJobs: 100,
  /** (k): permission requests asked and answered per round. */
  approvalSamples: 20,
  /** (n): permission requests of one job, filed and answered one by one, at each of two sizes. */
  approvalScale: [100, 400],
  /** (r): idle processes added to the machine; how long the one agent runs; claude_run in a row, after warm ones. */
  busyIdleProcesses: 500,
  busyAgentSeconds: 8,
  busySettleMs: 2000,
  busyRuns: 100,
  busyWarmRuns: 20,
  /** (q): sequential runs, then concurrent start+wait, on one server. */
  flatRuns: 1000,
  flatConcurrent: 200,
  /** (l): jobs per round with a worktree and without. */
  worktreeSamples: 10,
  /** (m): claude_run "hi" per round here and over ssh (each), and jobs of a big result per round of each. */
  sshStartSamples: 20,
  sshBigSamples: 2,
  sshBigChars: 4_000_000,
  /** (o): jobs per round left to the carrier, at most this many running at once. */
  carrierJobs: 12,
  carrierMaxJobs: 4,
  /** (p): claude_run "hi" per round here, in a running container and in a fresh sandbox (each). */
  containerSamples: 5,
};

/** Milliseconds on CLOCK_MONOTONIC: the same clock in every process, so agent and bench times compare. */
export const now = () => Number(process.hrtime.bigint()) / 1e6;
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function median(values) {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((x, y) => x - y);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Nearest-rank percentile. */
export function percentile(values, p) {
  const sorted = [...values].sort((x, y) => x - y);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

export const round2 = (x) => Math.round(x * 100) / 100;

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function log(message) {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** A field of /proc/<pid>/status in kB, or NaN. */
export function procStatusKb(pid, field) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/status`, "latin1");
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text);
    return match ? Number(match[1]) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

export const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim()) || 100;

/** CPU time (user + system) a process has used so far, in ms, from /proc/<pid>/stat; NaN when gone. */
export function procCpuMs(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS) * 1000;
  } catch {
    return Number.NaN;
  }
}

/** True while /proc/<pid> exists and is not a zombie. */
export function procAlive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

export function loadAverage() {
  return os.loadavg().map((x) => round2(x));
}

/**
 * Left out of the environment of everything we start. NODE_EXTRA_CA_CERTS
 * makes Node 20 read and parse the certificate file at every process start
 * (about 37 ms on the reference machine, against 16 ms for the rest of a bare
 * start), which would swamp (a) and (e) with a cost that is neither the
 * server's nor the agent's. Nothing here uses TLS.
 */
export const DROPPED_ENV = ["NODE_EXTRA_CA_CERTS"];

/**
 * The environment for everything we start: ours, minus any
 * CLAUDE_DISPATCH_* of the caller and DROPPED_ENV, plus the tag.
 */
export function baseEnv(extra = {}) {
  const env = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (
      key.startsWith("CLAUDE_DISPATCH_") ||
      key === "CLAUDECODE" ||
      key === "CLAUDE_CODE_ENTRYPOINT" ||
      DROPPED_ENV.includes(key)
    )
      continue;
    env[key] = value;
  }
  // Each server keeps jobs in a fresh state directory (a full one would slow
  // its start), unless the caller names one (h),
  // and kills its agents when it stops.
  const stateDir = extra.CLAUDE_DISPATCH_STATE_DIR ?? fs.mkdtempSync(path.join(STATE_ROOT, "s-"));
  return {
    ...env,
    BENCH_RUN_ID: RUN_ID,
    CLAUDE_DISPATCH_STATE_DIR: stateDir,
    CLAUDE_DISPATCH_ON_EXIT: "kill",
    ...extra,
  };
}

/** Every live process carrying our tag (servers, agents, bare agents), except this one. */
export function taggedProcesses() {
  const found = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    let environ;
    try {
      environ = fs.readFileSync(`/proc/${name}/environ`, "latin1");
    } catch {
      continue;
    }
    if (!environ.includes(TAG) || !procAlive(Number(name))) continue;
    let command = "";
    try {
      command = fs.readFileSync(`/proc/${name}/cmdline`, "latin1").split("\0").join(" ").trim();
    } catch {
      // gone meanwhile
    }
    found.push({ pid: Number(name), command });
  }
  return found;
}

/** Every process reapLeftovers had to kill, over the whole run. */
export const killedLeftovers = [];

/**
 * Waits up to 3 s for our tagged processes to go, then SIGKILLs (by pid) any that remain and reports them.
 * spare(pid): true for a process still meant to run (m: the sshd of the section, between rounds).
 */
export async function reapLeftovers(spare = () => false) {
  const deadline = now() + 3000;
  const tagged = () => taggedProcesses().filter((p) => !spare(p.pid));
  let left = tagged();
  while (left.length > 0 && now() < deadline) {
    await sleep(50);
    left = tagged();
  }
  if (left.length > 0)
    log(`killing ${left.length} leftover processes: ` + `${left.map((p) => `${p.pid} ${p.command}`).join("; ")}`);
  killedLeftovers.push(...left);
  for (const { pid } of left) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  return left;
}

/** Children we spawned that may still run: killed if the bench itself is interrupted. */
export const liveChildren = new Set();

export function track(child) {
  liveChildren.add(child);
  child.once("exit", () => liveChildren.delete(child));
  return child;
}

export function makeWorkDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), "claude-dispatch-bench-"));
}

/** Runs one node process to its exit; resolves with { ms, code }. */
export function runToExit(args, { env = baseEnv(), cwd = ROOT, stdin } = {}) {
  const startedAt = now();
  const child = track(spawn(process.execPath, args, { cwd, env, stdio: ["pipe", "pipe", "pipe"] }));
  child.stdout.resume();
  child.stderr.resume();
  child.stdin.on("error", () => undefined);
  child.stdin.end(stdin ?? "");
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code, signal) => resolve({ ms: now() - startedAt, endedAt: now(), code, signal }));
  });
}

/** Runs `node ARGS` in `cwd` to its exit and parses what it printed; `what` names it in an error. */
export async function runForJson(args, { cwd, env, what }) {
  const child = track(spawn(process.execPath, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] }));
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (text) => (out += text));
  child.stderr.setEncoding("utf8").on("data", (text) => (err += text));
  const code = await new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", resolve);
  });
  if (code !== 0) throw new Error(`${what} exited ${code}: ${err.slice(-2000)}`);
  return JSON.parse(out);
}

export function printTable(rows) {
  const header = { metric: "metric", value: "value", target: "target", verdict: "verdict" };
  const lines = rows.map((r) => ({ ...r, verdict: r.pass === undefined ? "info" : r.pass ? "PASS" : "MISS" }));
  const width = (key) => Math.max(header[key].length, ...lines.map((l) => String(l[key]).length));
  const w = { metric: width("metric"), value: width("value"), target: width("target"), verdict: width("verdict") };
  const format = (l) =>
    `${String(l.metric).padEnd(w.metric)}  ${String(l.value).padEnd(w.value)}  ` +
    `${String(l.target).padEnd(w.target)}  ${l.verdict}`;
  const out = [format(header), "-".repeat(w.metric + w.value + w.target + w.verdict + 6)];
  for (const l of lines) {
    out.push(format(l));
    if (l.detail) out.push(`${" ".repeat(4)}${l.detail}`);
  }
  process.stdout.write(`${out.join("\n")}\n`);
}

export const TSX_CLI = path.join(ROOT, "node_modules", ".bin", "tsx");

/**
 * A test/*-serve.ts helper (test/sshd-serve.ts, test/podman-serve.ts) started through tsx and its one JSON line read:
 * { info, pid, stop }. info is what it serves, or {missing: reason} when what it needs is not there (the script has
 * exited then). stop() closes its stdin, which makes it stop everything it started, and waits for its exit (then
 * SIGTERM, which does the same, then SIGKILL).
 */
export async function startServing(script, what) {
  const file = path.join(ROOT, "test", script);
  const options = { cwd: ROOT, env: baseEnv(), stdio: ["pipe", "pipe", "pipe"] };
  const child = track(spawn(process.execPath, [TSX_CLI, file], options));
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text) => {
    stderr = (stderr + text).slice(-4096);
  });
  child.stdin.on("error", () => undefined);
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const stop = async () => {
    child.stdin.end();
    // SIGTERM stops what it serves too; SIGKILL would leave it running.
    for (const [signal, ms] of [
      ["SIGTERM", 20_000],
      ["SIGKILL", 5_000],
    ]) {
      try {
        return await withTimeout(exited, ms, `test/${script} stopping`);
      } catch {
        child.kill(signal);
      }
    }
    return exited;
  };
  let buffered = "";
  const line = new Promise((resolve, reject) => {
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (text) => {
      buffered += text;
      if (buffered.includes("\n")) resolve(buffered.slice(0, buffered.indexOf("\n")));
    });
    exited.then(({ code, signal }) =>
      reject(
        new Error(`test/${script} exited (code ${code}, signal ${signal}) ` + `before its line; stderr:\n${stderr}`),
      ),
    );
  });
  try {
    const info = JSON.parse(await withTimeout(line, 120_000, `test/${script} starting ${what}`));
    return { info, pid: child.pid, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
