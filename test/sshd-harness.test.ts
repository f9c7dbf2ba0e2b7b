/**
 * The sshd harness (test/sshd.ts) holds what the ssh tests rely on: the
 * authorized alias runs a command, SetEnv reaches the session, the refused
 * alias is refused, dropConnections() cuts a live connection but leaves the
 * listener and the session's command running, and stop() leaves no sshd of
 * the run behind.
 *
 * Without sshd, ssh or ssh-keygen the suite fails under CI=true and is
 * skipped, loudly, elsewhere.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcessByStdio } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import type { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";

import { isAlive } from "./processes.js";
import { startSshd, sshSkipReason, type Sshd } from "./sshd.js";

/** How long any one wait on ssh may take before the test fails. */
const WAIT_MS = 20_000;
/** A SetEnv value sshd_config must carry unchanged: spaces, quotes, a backslash, a `$` and a `#`. */
const PROBE_VALUE = "a b 'c' \\d $HOME #x";

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

interface SshRun {
  child: ChildProcessByStdio<null, Readable, Readable>;
  exited: Promise<Exit>;
  /** Resolves with the first match of `pattern` in stdout; rejects if ssh exits first or after WAIT_MS. */
  waitForStdout(pattern: RegExp): Promise<RegExpMatchArray>;
}

function sshdLog(sshd: Sshd): string {
  try {
    return readFileSync(`${sshd.dir}/sshd.log`, "utf8").trimEnd().split("\n").slice(-15).join("\n");
  } catch {
    return "(no sshd.log)";
  }
}

/** `ssh -F <clientConfig> <alias> -- <command>`, spawned with argv and an environment of named variables only. */
function ssh(sshd: Sshd, alias: string, command: string): SshRun {
  const child = spawn("ssh", ["-F", sshd.clientConfig, alias, "--", command], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<Exit>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  const waitForStdout = (pattern: RegExp): Promise<RegExpMatchArray> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const match = stdout.match(pattern);
        if (!match) return;
        cleanup();
        resolve(match);
      };
      const onClose = (code: number | null): void => {
        cleanup();
        reject(
          new Error(`ssh exited (${code}) before printing ${pattern}; stderr: ${stderr}\nsshd.log:\n${sshdLog(sshd)}`),
        );
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`no ${pattern} on ssh's stdout after ${WAIT_MS} ms; stdout: ${stdout}`));
      }, WAIT_MS);
      const cleanup = (): void => {
        clearTimeout(timer);
        child.stdout.off("data", check);
        child.off("close", onClose);
      };
      child.stdout.on("data", check);
      child.once("close", onClose);
      check();
    });
  return { child, exited, waitForStdout };
}

/** `promise`, or a rejection naming `what` after WAIT_MS. */
async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${WAIT_MS} ms waiting for ${what}`)), WAIT_MS);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function killQuietly(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/**
 * The sshd processes of `sshd`: its listener (found by its config path in
 * /proc/PID/cmdline) and the listener's sshd descendants.
 */
function sshdProcesses(sshd: Sshd): { listener: number | undefined; perConnection: number[] } {
  const procs = readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map((entry) => {
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
        return {
          pid: Number(entry),
          ppid: Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]),
          comm: readFileSync(`/proc/${entry}/comm`, "latin1").trim(),
          cmdline: readFileSync(`/proc/${entry}/cmdline`, "latin1").replaceAll("\0", " "),
        };
      } catch {
        return undefined;
      }
    })
    .filter((proc) => proc !== undefined);
  const config = `${sshd.dir}/sshd_config`;
  const comm = new Map(procs.map((proc) => [proc.pid, proc.comm]));
  // sshd rewrites its argv ("sshd: /usr/sbin/sshd -D -e -f <config> [listener] ..."); a connection's
  // re-executed child names the config too, but its parent is the listener.
  const listener = procs.find(
    (proc) =>
      proc.comm === "sshd" &&
      proc.cmdline.includes(`-f ${config} `) &&
      comm.get(proc.ppid) !== "sshd" &&
      isAlive(proc.pid),
  )?.pid;
  const perConnection: number[] = [];
  const queue = listener === undefined ? [] : [listener];
  for (let parent = queue.shift(); parent !== undefined; parent = queue.shift()) {
    for (const proc of procs) {
      if (proc.ppid !== parent || !proc.comm.startsWith("sshd") || !isAlive(proc.pid)) continue;
      perConnection.push(proc.pid);
      queue.push(proc.pid);
    }
  }
  return { listener, perConnection };
}

const skip = sshSkipReason("the sshd harness");

test("startSshd refuses SetEnv values sshd_config cannot carry, before starting anything", async () => {
  await assert.rejects(startSshd({ env: { X: 'say "hi"' } }), /double quote/);
  await assert.rejects(startSshd({ env: { X: "two\nlines" } }), /line break/);
  await assert.rejects(startSshd({ env: { "NOT A NAME": "x" } }), /not a variable name/);
});

describe("a real OpenSSH server on 127.0.0.1 (test/sshd.ts)", { skip, timeout: 60_000 }, () => {
  let sshd: Sshd | undefined;
  const server = (): Sshd => {
    assert.ok(sshd, "sshd did not start");
    return sshd;
  };

  before(async () => {
    sshd = await startSshd({ env: { PATH: process.env.PATH ?? "/usr/bin:/bin", DISPATCH_SSHD_PROBE: PROBE_VALUE } });
  });
  after(async () => {
    if (!sshd) return;
    await sshd.stop();
    rmSync(sshd.dir, { recursive: true, force: true });
  });

  test("the authorized alias runs a command: `echo hello` prints hello and exits 0", async () => {
    const result = await within(ssh(server(), server().alias, "echo hello").exited, "ssh echo hello");
    assert.equal(result.code, 0, `ssh failed: ${result.stderr}\nsshd.log:\n${sshdLog(server())}`);
    assert.equal(result.stdout, "hello\n");
  });

  test("a SetEnv variable reaches the session unchanged", async () => {
    const result = await within(ssh(server(), server().alias, "printenv DISPATCH_SSHD_PROBE").exited, "ssh printenv");
    assert.equal(result.code, 0, `ssh failed: ${result.stderr}\nsshd.log:\n${sshdLog(server())}`);
    assert.equal(result.stdout, `${PROBE_VALUE}\n`);
  });

  test("the refused alias is refused: exit 255, Permission denied", async () => {
    const result = await within(
      ssh(server(), server().refusedAlias, "echo should-not-run").exited,
      "ssh with the refused key",
    );
    assert.equal(result.code, 255);
    assert.match(result.stderr, /Permission denied/);
    assert.equal(result.stdout, "");
  });

  test(
    "dropConnections() cuts a live connection (ssh exits 255), keeps the listener and the " + "session's command",
    async () => {
      const run = ssh(server(), server().alias, "echo started $$; exec sleep 30");
      let sleeper: number | undefined;
      try {
        const match = await run.waitForStdout(/started (\d+)\n/);
        sleeper = Number(match[1]);
        assert.ok(isAlive(sleeper), "the session's command runs");
        const { listener, perConnection } = sshdProcesses(server());
        assert.ok(listener !== undefined, "the listener is found in /proc");
        // A root login has one ("sshd: root@notty": sshd skips the
        // privilege-separated monitor for uid 0), another user two.
        assert.ok(perConnection.length >= 1, "the connection's sshd processes are found");

        const dropped = await within(server().dropConnections(), "dropConnections()");
        assert.ok(dropped >= 1, `dropConnections() killed ${dropped} processes`);
        const result = await within(run.exited, "ssh to exit after the drop");
        assert.equal(result.code, 255, `ssh exited ${result.code}/${result.signal}: ${result.stderr}`);
        assert.deepEqual(perConnection.filter(isAlive), [], "none of the connection's sshd processes is left");

        assert.ok(isAlive(listener), "the listener survives a drop");
        assert.ok(isAlive(sleeper), "the session's command survives a drop");
        const again = await within(ssh(server(), server().alias, "echo again").exited, "ssh after the drop");
        assert.equal(again.code, 0, `ssh after the drop failed: ${again.stderr}`);
        assert.equal(again.stdout, "again\n");
      } finally {
        run.child.kill("SIGKILL");
        killQuietly(sleeper);
      }
    },
  );
});

describe("stop() (test/sshd.ts)", { skip, timeout: 60_000 }, () => {
  test(
    "stop() ends the listener and a live connection's sshd processes, nothing else, and may be " + "called again",
    async () => {
      const sshd = await startSshd();
      const run = ssh(sshd, sshd.alias, "echo started $$; exec sleep 30");
      let sleeper: number | undefined;
      try {
        sleeper = Number((await run.waitForStdout(/started (\d+)\n/))[1]);
        const before = sshdProcesses(sshd);
        assert.ok(before.listener !== undefined, "the listener is found in /proc");
        assert.ok(before.perConnection.length >= 1, "the live connection has sshd processes");

        await within(sshd.stop(), "stop()");
        const all = [before.listener, ...before.perConnection];
        assert.deepEqual(all.filter(isAlive), [], "no sshd process of this run is left");
        assert.equal(sshdProcesses(sshd).listener, undefined);
        const result = await within(run.exited, "ssh to exit after stop()");
        assert.equal(result.code, 255, `ssh exited ${result.code}/${result.signal}: ${result.stderr}`);
        assert.ok(isAlive(sleeper), "the session's command is not stop()'s to kill");
        assert.ok(existsSync(sshd.clientConfig), "stop() removes no file");

        await within(sshd.stop(), "a second stop()");
      } finally {
        run.child.kill("SIGKILL");
        killQuietly(sleeper);
        await sshd.stop();
        rmSync(sshd.dir, { recursive: true, force: true });
      }
    },
  );
});
