/** (m) SSH hosts: a real sshd on 127.0.0.1 (test/sshd.ts, through test/sshd-serve.ts). */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Server } from "../client.mjs";
import {
  ROOT,
  SERVER_MAIN,
  FAKE_CLAUDE,
  SIZES,
  now,
  sleep,
  median,
  percentile,
  round2,
  withTimeout,
  log,
  CLOCK_TICKS,
  procCpuMs,
  procAlive,
  baseEnv,
  killedLeftovers,
  reapLeftovers,
  track,
  TSX_CLI,
  startServing,
} from "../shared.mjs";


/** The parent pid of a process, from /proc/<pid>/stat, or undefined when it is gone. */
function procParent(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

/**
 * True for `root` and the processes it started itself (tsx's node and its esbuild service): their ancestors lead
 * to `root` without passing through an sshd process. What runs on the far side (under sshd) is not spared.
 */
function inOwnTree(root, pid) {
  for (let at = pid, hops = 0; at !== undefined && at > 1 && hops < 64; at = procParent(at), hops += 1) {
    if (at === root) return true;
    let comm = "";
    try {
      comm = fs.readFileSync(`/proc/${at}/comm`, "latin1").trim();
    } catch {
      return false;
    }
    if (comm.startsWith("sshd")) return false;
  }
  return false;
}

/**
 * Live processes whose command line names the shared-connection folder: the ssh master (which retitles itself
 * "ssh: <socket> [mux]") and the session clients (-o ControlPath=<folder>/%C) of one server.
 */
function sshClientsOf(controlDir) {
  const found = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let command;
    try {
      command = fs.readFileSync(`/proc/${name}/cmdline`, "latin1").split("\0").join(" ").trim();
    } catch {
      continue;
    }
    if (command.includes(`${controlDir}/`) && procAlive(Number(name))) found.push({ pid: Number(name), command });
  }
  return found;
}

/** CPU time (user + system) of a process's reaped children, in ms, from /proc/<pid>/stat (cutime + cstime). */
function procChildrenCpuMs(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS) * 1000;
  } catch {
    return Number.NaN;
  }
}

/**
 * (m) what running a job on another machine over ssh costs (PROTOCOL.md §21), against the same job here. The
 * "other machine" is a real sshd on 127.0.0.1 (test/sshd.ts, started through test/sshd-serve.ts), running this
 * build in its remote mode with a state directory of its own and the fake agent: no network, so what shows is
 * ssh's own cost (handshake, session, encryption) and the far end's remote-mode process, both on this machine's
 * cores. A fresh server each round, configured with the host, its state directory short enough that its
 * shared-connection sockets live in it (§21.2). Per round: one unmeasured local claude_run (the process layer
 * loads); the first claude_run over ssh (no shared connection yet: the handshake); then SIZES.sshStartSamples
 * times, in turn, claude_run "hi" here, the same over ssh, and a bare `ssh <alias> true` through the server's
 * shared connection (what a session costs before claude-dispatch runs there: sshd and the login shell); then
 * SIZES.sshBigSamples pairs of a job whose agent prints a 4 MB result twice (assistant text and result: about
 * 8 MB of stdout), with the server's CPU time, its reaped children's (the agent here; ssh's session clients for a
 * host) and the ssh master's.
 */
export async function benchSsh(rounds) {
  const skipped = (why) => ({
    rows: [{ metric: "m  ssh hosts", value: "skipped", target: "(no target)", pass: undefined, detail: why }],
    data: { skipped: why },
  });
  if (!fs.existsSync(TSX_CLI)) return skipped(`${path.relative(ROOT, TSX_CLI)} is missing (npm install): ` +
    `test/sshd-serve.ts cannot run`);
  const sshd = await startServing("sshd-serve.ts", "sshd");
  if (sshd.info.missing !== undefined) {
    await sshd.stop();
    return skipped(`no sshd for the bench: ${sshd.info.missing}`);
  }
  // Short: <dir>/s-<i>/ssh must fit a socket path (§21.2), or the server
  // would share one folder in the temporary directory.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cdb-m-"));
  const work = path.join(dir, "work");
  fs.mkdirSync(work);
  const remoteState = path.join(dir, "remote");
  const { alias, clientConfig } = sshd.info;
  const hosts = JSON.stringify({
    box: { ssh: alias, ssh_config: clientConfig, roots: [work], command: [process.execPath, SERVER_MAIN], state_dir: remoteState, programs: { claude: FAKE_CLAUDE } },
  });
  const bigPrompt = `@big ${SIZES.sshBigChars}`;
  const sshEnv = baseEnv();
  /** `ssh <alias> true` through the server's shared connection (never a master of its own): spawn -> exit, in ms. */
  const bareSession = (controlDir) => {
    const startedAt = now();
    const args = ["-T", "-o", "BatchMode=yes", "-o", "ControlMaster=no", "-o", `ControlPath=${controlDir}/%C`, "-F", clientConfig, "--", alias, "true"];
    const child = track(spawn("ssh", args, { env: sshEnv, stdio: ["ignore", "ignore", "pipe"] }));
    let stderr = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (text) => (stderr += text));
    return new Promise((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", (code) => (code === 0 ? resolve(now() - startedAt) : reject(new Error(`m: ssh ${alias} true ` +
        `exited ${code}: ${stderr.trim()}`))));
    });
  };
  const kinds = ["local", "ssh"];
  const samples = { cold: [], start: { local: [], ssh: [], bare: [] }, startCpu: { local: [], ssh: [] }, big: { local: [], ssh: [] } };
  const perRound = [];
  let s;
  try {
    for (let i = 0; i < rounds; i += 1) {
      const stateDir = path.join(dir, `s-${i}`);
      const controlDir = path.join(stateDir, "ssh");
      s = new Server({ CLAUDE_DISPATCH_HOSTS: hosts, CLAUDE_DISPATCH_STATE_DIR: stateDir });
      await s.initialize();
      /**
       * One claude_run here or over ssh: its wall time, and the CPU time of the server, of its
       * reaped children and (withMasters) of the ssh master.
       */
      const run = async (where, prompt, withMasters = false) => {
        const masters = withMasters ? sshClientsOf(controlDir).map((p) => ({ pid: p.pid, cpu: procCpuMs(p.pid) })) : [];
        const cpuBefore = procCpuMs(s.pid);
        const childrenBefore = procChildrenCpuMs(s.pid);
        const response = await s.callTool("claude_run", { prompt, cwd: work, ...(where === "ssh" ? { host: "box" } : {}) }, 120_000);
        const serverCpuMs = procCpuMs(s.pid) - cpuBefore;
        const childrenCpuMs = procChildrenCpuMs(s.pid) - childrenBefore;
        const masterCpuMs = masters.reduce((sum, p) => sum + Math.max(0, (procCpuMs(p.pid) || p.cpu) - p.cpu), 0);
        const report = response.structured;
        if (report?.status !== "completed") throw new Error(`m: claude_run ${where} answered ` +
          `${JSON.stringify(response.result).slice(0, 400)}`);
        return { ms: response.at - response.sentAt, serverCpuMs, childrenCpuMs, masterCpuMs, report };
      };
      const hi = async (where) => {
        const measured = await run(where, "hi");
        if (measured.report.result !== "ECHO: hi") throw new Error(`m: claude_run ${where} gave the result ` +
          `${JSON.stringify(measured.report.result).slice(0, 200)}`);
        return measured;
      };
      // The first job loads the process layer: one here first, so that the first over ssh pays for ssh only.
      await hi("local");
      if (sshClientsOf(controlDir).length > 0) throw new Error(`m: an ssh connection in ${controlDir} before the ` +
        `first job over ssh`);
      const coldMs = (await hi("ssh")).ms;
      const shared = sshClientsOf(controlDir).length > 0;
      const start = { local: [], ssh: [], bare: [] };
      const startCpu = { local: [], ssh: [] };
      for (let k = 0; k < SIZES.sshStartSamples; k += 1) {
        // The three in turn, each one first as often as the others.
        for (let j = 0; j < 3; j += 1) {
          const where = ["local", "ssh", "bare"][(k + j) % 3];
          if (where === "bare") {
            if (shared) start.bare.push(await bareSession(controlDir));
          } else {
            const { ms, serverCpuMs } = await hi(where);
            start[where].push(ms);
            startCpu[where].push(serverCpuMs);
          }
        }
      }
      const big = { local: [], ssh: [] };
      for (let k = 0; k < SIZES.sshBigSamples; k += 1) {
        for (const where of (i + k) % 2 === 0 ? kinds : [...kinds].reverse()) {
          const { report, ...measured } = await run(where, bigPrompt, where === "ssh");
          if (report.result_chars !== SIZES.sshBigChars) throw new Error(`m: a ${where} job reported ` +
            `${report.result_chars} result characters, not ${SIZES.sshBigChars}`);
          big[where].push({ ...measured, stdoutBytes: fs.statSync(path.join(stateDir, "jobs", report.job_id, "stdout.jsonl")).size });
        }
      }
      await s.close();
      s = undefined;
      // The server ran `ssh -O exit` as it stopped: no master (or session client) of its own may be left.
      const deadline = now() + 3000;
      let left = sshClientsOf(controlDir);
      while (left.length > 0 && now() < deadline) {
        await sleep(50);
        left = sshClientsOf(controlDir);
      }
      if (left.length > 0) {
        log(`m: killing ${left.length} ssh processes left by a stopped server: ` +
          `${left.map((p) => `${p.pid} ${p.command}`).join("; ")}`);
        killedLeftovers.push(...left);
        for (const { pid } of left) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // already gone
          }
        }
      }
      // Between rounds: all but the sshd of this section must be gone (the far side's processes carry our tag too).
      await reapLeftovers((pid) => inOwnTree(sshd.pid, pid));
      samples.cold.push(coldMs);
      for (const where of [...kinds, "bare"]) samples.start[where].push(...start[where]);
      for (const where of kinds) {
        samples.startCpu[where].push(...startCpu[where]);
        samples.big[where].push(...big[where]);
      }
      perRound.push({
        coldMs: round2(coldMs),
        sharedConnection: shared,
        start: Object.fromEntries([...kinds, "bare"].map((w) => [w, { p50: round2(percentile(start[w], 0.5)), p90: round2(percentile(start[w], 0.9)) }])),
        bigMs: Object.fromEntries(kinds.map((w) => [w, big[w].map((b) => round2(b.ms))])),
      });
    }
  } finally {
    if (s) await s.close();
    await sshd.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const startOf = (where, key) => median(perRound.map((r) => r.start[where][key]));
  const start = Object.fromEntries([...kinds, "bare"].map((w) => [w, { p50: startOf(w, "p50"), p90: startOf(w, "p90") }]));
  const mean = (values) => values.reduce((x, y) => x + y, 0) / values.length;
  // CPU time moves in clock ticks (10 ms at CLK_TCK 100): the mean over all the short runs, not a median of ticks.
  const startCpu = Object.fromEntries(kinds.map((w) => [w, mean(samples.startCpu[w])]));
  const coldMs = median(samples.cold);
  const big = Object.fromEntries(
    kinds.map((w) => [w, Object.fromEntries(["ms", "serverCpuMs", "childrenCpuMs", "masterCpuMs", "stdoutBytes"].map((key) => [key, median(samples.big[w].map((b) => b[key]))]))]),
  );
  const mb = big.ssh.stdoutBytes / 1e6;
  // What streaming costs over ssh beyond a short job's own extra: per MB of the agent's stdout.
  const wallPerMb = (big.ssh.ms - big.local.ms - (start.ssh.p50 - start.local.p50)) / mb;
  const cpuPerMb = (big.ssh.serverCpuMs - big.local.serverCpuMs - (startCpu.ssh - startCpu.local)) / mb;
  const sshCpuMs = big.ssh.masterCpuMs + big.ssh.childrenCpuMs;
  const shared = perRound.every((r) => r.sharedConnection);
  const signed = (x, digits = 1) => `${x >= 0 ? "+" : ""}${x.toFixed(digits)}`;
  return {
    rows: [
      {
        metric: `m  claude_run "hi" over ssh (shared connection warm) next to here (${SIZES.sshStartSamples} of ` +
          `each a round)`,
        value: `p50 ${start.ssh.p50.toFixed(1)} ms against ${start.local.p50.toFixed(1)} ms`,
        target: "(no target)",
        pass: undefined,
        detail:
          `p90 ${start.ssh.p90.toFixed(1)} against ${start.local.p90.toFixed(1)} ms; ssh adds ` +
            `${(start.ssh.p50 - start.local.p50).toFixed(1)} ms at p50, of which ` +
          (shared
            ? `a bare session (ssh ${alias} true on the same connection) takes p50 ${start.bare.p50.toFixed(1)}, p90 ` +
              `${start.bare.p90.toFixed(1)} ms`
            : "nothing could be told apart: NO shared connection was seen in its state directory in some round") +
          `; server CPU ${startCpu.ssh.toFixed(1)} against ${startCpu.local.toFixed(1)} ms a job (mean)`,
      },
      {
        metric: "m  first claude_run over ssh on a fresh server (no connection yet: the handshake)",
        value: `${coldMs.toFixed(1)} ms`,
        target: "(no target)",
        pass: undefined,
        detail: `${(coldMs - start.ssh.p50).toFixed(1)} ms over a warm one; per round ` +
          `${samples.cold.map((ms) => ms.toFixed(0)).join(", ")} ms`,
      },
      {
        metric: `m  claude_run of a ${(SIZES.sshBigChars / 1e6).toFixed(0)} MB result (${mb.toFixed(1)} MB of ` +
          `stdout) over ssh next to here (${SIZES.sshBigSamples} of each a round)`,
        value: `${big.ssh.ms.toFixed(0)} ms against ${big.local.ms.toFixed(0)} ms`,
        target: "(no target)",
        pass: undefined,
        detail:
          `beyond a short job's extra, ${signed(wallPerMb)} ms and ${signed(cpuPerMb)} ms of server CPU per MB; ` +
          `server CPU ${big.ssh.serverCpuMs.toFixed(0)} against ${big.local.serverCpuMs.toFixed(0)} ms; ` +
          `ssh here ${sshCpuMs.toFixed(0)} ms CPU (master ${big.ssh.masterCpuMs.toFixed(0)}, session clients ` +
            `${big.ssh.childrenCpuMs.toFixed(0)}); the agent here ${big.local.childrenCpuMs.toFixed(0)} ms`,
      },
    ],
    data: {
      startMs: Object.fromEntries(Object.entries(start).map(([w, v]) => [w, { p50: round2(v.p50), p90: round2(v.p90) }])),
      startServerCpuMs: Object.fromEntries(kinds.map((w) => [w, round2(startCpu[w])])),
      coldMs: round2(coldMs),
      big: Object.fromEntries(kinds.map((w) => [w, Object.fromEntries(Object.entries(big[w]).map(([k, v]) => [k, round2(v)]))])),
      streamingPerMb: { wallMs: round2(wallPerMb), serverCpuMs: round2(cpuPerMb) },
      sharedConnectionSeen: shared,
      perRound,
      samples: {
        coldMs: samples.cold.map(round2),
        startMs: Object.fromEntries([...kinds, "bare"].map((w) => [w, samples.start[w].map(round2)])),
        big: Object.fromEntries(kinds.map((w) => [w, samples.big[w].map((b) => Object.fromEntries(Object.entries(b).map(([k, v]) => [k, round2(v)])))])),
      },
    },
  };
}
