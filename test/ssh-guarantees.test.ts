/**
 * What an SSH host promises at its edges (PROTOCOL.md §21), end to end with the built server and a real sshd:
 * every call keeps its bound when a host hangs (a listener that accepts and never speaks, a far end that never
 * answers, a connection frozen mid-job behind a proxy), with no ssh process left over; the far end checks each
 * directory it is given with its links resolved; and it runs its own program for an agent the host's
 * configuration names none for, saying on which machine a program could not be started.
 */
import assert from "node:assert/strict";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import net from "node:net";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { sshArguments } from "../src/hosts/ssh/command.js";
import type { SshHostConfig } from "../src/hosts/ssh/config.js";
import { parseRequest } from "../src/hosts/remote/protocol.js";
import { openSession } from "../src/hosts/remote/session.js";
import { FakeClock, RecordingLogger } from "./helpers.js";
import { isAlive, readPids, waitFor } from "./processes.js";
import { FAKE_CLAUDE, SERVER_MAIN, ServerProcess, type RpcResponse } from "./server-process.js";
import { sshSkipReason, startSshd, type Sshd } from "./sshd.js";

const skip = sshSkipReason("ssh guarantees");

/** CLAUDE_DISPATCH_SSH_TIMEOUT_MS for these tests: short, so that a hang is seen in seconds. */
const SSH_TIMEOUT_MS = 2000;
/** What a loaded test machine may add to a bound. */
const SLACK_MS = 2500;

describe("the pieces that bound a session, without ssh", () => {
  const host: SshHostConfig = {
    kind: "ssh",
    name: "box",
    destination: "box",
    roots: ["/srv"],
    sshConfig: undefined,
    options: { ConnectTimeout: "90" },
    command: ["claude-dispatch"],
    stateDir: undefined,
    agents: ["claude"],
    programs: {},
    permissionModes: undefined,
  };

  test(
    "ssh is told the bound: connect timeout and keep-alives from CLAUDE_DISPATCH_SSH_TIMEOUT_MS, after the " +
      "host's own options",
    () => {
      const argv = sshArguments({ ...host, options: {} }, undefined, "LINE", 30_000);
      assert.ok(
        argv.includes("ConnectTimeout=30") &&
          argv.includes("ServerAliveInterval=10") &&
          argv.includes("ServerAliveCountMax=3"),
        argv.join(" "),
      );
      const short = sshArguments({ ...host, options: {} }, undefined, "LINE", 2000);
      assert.ok(
        short.includes("ConnectTimeout=2") &&
          short.includes("ServerAliveInterval=1") &&
          short.includes("ServerAliveCountMax=2"),
        short.join(" "),
      );
      // ssh keeps an option's first value: the operator's, for this host.
      const own = sshArguments(host, undefined, "LINE", 30_000);
      assert.ok(own.indexOf("ConnectTimeout=90") < own.indexOf("ConnectTimeout=30"));
    },
  );

  test("a start names a program and add_dirs only when there are some; an add_dirs entry must be absolute", () => {
    const start = {
      op: "start",
      job_id: "0b7c6a4e-5d3f-4e21-9c8b-7a6f5e4d3c2b",
      agent: "claude",
      cwd: "/srv/app",
      roots: ["/srv"],
      args: ["-p"],
      env: {},
      prompt: "hi",
      offset: 0,
    };
    const parsed = parseRequest(JSON.stringify(start));
    assert.ok(typeof parsed === "object" && parsed.op === "start" && !("command" in parsed) && !("add_dirs" in parsed));
    const withDirs = parseRequest(JSON.stringify({ ...start, command: "/opt/claude", add_dirs: ["/srv/lib"] }));
    assert.ok(
      typeof withDirs === "object" &&
        withDirs.op === "start" &&
        withDirs.command === "/opt/claude" &&
        withDirs.add_dirs?.[0] === "/srv/lib",
    );
    assert.equal(
      parseRequest(JSON.stringify({ ...start, add_dirs: ["lib"] })),
      "a start's add_dirs must be absolute paths",
    );
    assert.equal(parseRequest(JSON.stringify({ ...start, command: "" })), "a start needs args, and a command if any");
  });

  test(
    "an ssh that brings no frame is killed at the bound and reaped; one that ignores SIGTERM when stopped is killed " +
      "after the grace",
    { skip: process.platform === "win32" },
    async () => {
      const clock = new FakeClock();
      const session = (program: string) =>
        openSession(
          {
            label: "ssh",
            program: process.execPath,
            argv: ["-e", program],
            env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
            logger: new RecordingLogger(),
            clock,
            firstFrameMs: 2000,
          },
          { op: "kill", job_id: "0b7c6a4e-5d3f-4e21-9c8b-7a6f5e4d3c2b" },
          () => undefined,
        );
      const silentSsh = session("setInterval(() => {}, 1000)");
      await clock.advance(2000);
      const ended = await silentSsh.ended;
      assert.equal(ended.silentMs, 2000);
      assert.equal(ended.signal, "SIGKILL");
      const folder = mkdtempSync(path.join(tmpdir(), "cd-stubborn-"));
      const ready = path.join(folder, "ready");
      const stubborn = session(
        `process.on('SIGTERM', () => {}); require('node:fs').writeFileSync(${JSON.stringify(ready)}, ''); ` +
          `setInterval(() => {}, 1000)`,
      );
      // Stopped once it ignores SIGTERM, which it says by writing the file.
      await waitFor(() => existsSync(ready), "the stubborn ssh ready");
      stubborn.stop();
      await clock.advance(1999);
      assert.equal(clock.pendingTimers > 0, true);
      await clock.advance(1);
      assert.equal((await stubborn.ended).signal, "SIGKILL");
      assert.equal(clock.pendingTimers, 0, "every timer cleared");
      rmSync(folder, { recursive: true, force: true });
    },
  );
});

describe("ssh hosts at their edges", { skip }, () => {
  let sshd: Sshd;
  let scratch: string;
  let work: string;
  let remoteState: string;
  let clientConfig: string;
  let silent: Listener;
  let proxy: Proxy;
  const servers: ServerProcess[] = [];
  const agentPids: number[] = [];

  before(async () => {
    // The far end's own setting names the agent's program: the host's configuration below names none.
    sshd = await startSshd({
      env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE },
    });
    scratch = mkdtempSync(path.join(tmpdir(), "cd-ssh-guarantees-"));
    work = path.join(scratch, "work");
    mkdirSync(work);
    remoteState = path.join(scratch, "remote-state");
    silent = await silentListener();
    proxy = await freezableProxy(sshd.port);
    clientConfig = writeClientConfig(scratch, sshd, { silent: silent.port, frozen: proxy.port });
  });

  after(async () => {
    for (const server of servers) server.dispose();
    for (const pid of agentPids) if (isAlive(pid)) process.kill(pid, "SIGKILL");
    await proxy?.close();
    await silent?.close();
    await sshd?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  const farEnd = (): Record<string, unknown> => ({
    roots: [work],
    command: [process.execPath, SERVER_MAIN],
    state_dir: remoteState,
    programs: { claude: FAKE_CLAUDE },
  });

  function hosts(): string {
    return JSON.stringify({
      // Accepts the TCP connection and never says a word.
      silent: { ssh: "silent", ssh_config: clientConfig, ...farEnd() },
      // The test sshd through a proxy that can stop forwarding without closing anything.
      frozen: { ssh: "frozen", ssh_config: clientConfig, ...farEnd() },
      // ssh logs in, and the command there never answers.
      mute: { ssh: sshd.alias, ssh_config: sshd.clientConfig, roots: [work], command: ["sh", "-c", "cat >/dev/null"] },
      box: { ssh: sshd.alias, ssh_config: sshd.clientConfig, ...farEnd() },
      // No program named: the far end's own CLAUDE_DISPATCH_CLAUDE_BIN.
      own: { ssh: sshd.alias, ssh_config: sshd.clientConfig, ...farEnd(), programs: undefined },
      // A program named that is not there.
      missing: {
        ssh: sshd.alias,
        ssh_config: sshd.clientConfig,
        ...farEnd(),
        programs: { claude: "/nonexistent/bin/claude-x" },
      },
      // The far end's own setting names a program that is not there.
      unset: {
        ssh: sshd.alias,
        ssh_config: sshd.clientConfig,
        ...farEnd(),
        programs: undefined,
        command: ["env", "CLAUDE_DISPATCH_CLAUDE_BIN=/nonexistent/far/claude", process.execPath, SERVER_MAIN],
      },
    });
  }

  async function server(): Promise<ServerProcess> {
    const started = new ServerProcess({
      CLAUDE_DISPATCH_HOSTS: hosts(),
      CLAUDE_DISPATCH_SSH_TIMEOUT_MS: String(SSH_TIMEOUT_MS),
    });
    servers.push(started);
    await started.initialize();
    return started;
  }

  /** The call's answer and how long it took; a call that outlives the deadline fails the test instead of hanging it. */
  async function timed(
    call: Promise<RpcResponse>,
    deadlineMs: number,
    what: string,
  ): Promise<{ response: RpcResponse; ms: number }> {
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>(
      (_, reject) =>
        (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${deadlineMs} ms`)), deadlineMs)),
    );
    try {
      const response = await Promise.race([call, late]);
      return { response, ms: Date.now() - started };
    } finally {
      clearTimeout(timer);
    }
  }

  function textOf(response: RpcResponse): string {
    return response.result?.content?.[0]?.text ?? "";
  }

  test(
    "a host that accepts the connection and never speaks: each claude_run is HOST_FAILED within the ssh timeout, " +
      "and no ssh is left",
    async () => {
      const s = await server();
      const calls = [1, 2, 3].map(() =>
        timed(
          s.callTool("claude_run", { prompt: "x", cwd: work, host: "silent" }),
          SSH_TIMEOUT_MS + SLACK_MS,
          "claude_run on a silent host",
        ),
      );
      for (const { response, ms } of await Promise.all(calls)) {
        assert.match(textOf(response), /^HOST_FAILED: cannot start it on host silent: /, textOf(response));
        assert.ok(ms <= SSH_TIMEOUT_MS + SLACK_MS, `${ms} ms`);
      }
      await waitFor(() => sshProcesses(clientConfig).length === 0, "no ssh left");
      await s.shutdown();
    },
  );

  test(
    "a far end that never answers: claude_run is HOST_FAILED within the ssh timeout, naming it; claude_start's " +
      "job fails so",
    async () => {
      const s = await server();
      const { response, ms } = await timed(
        s.callTool("claude_run", { prompt: "x", cwd: work, host: "mute" }),
        SSH_TIMEOUT_MS + SLACK_MS,
        "claude_run on a mute host",
      );
      assert.match(
        textOf(response),
        /^HOST_FAILED: cannot start it on host mute: no answer within 2 s \(CLAUDE_DISPATCH_SSH_TIMEOUT_MS\)/,
        textOf(response),
      );
      assert.ok(ms <= SSH_TIMEOUT_MS + SLACK_MS, `${ms} ms`);
      const started = await s.callTool("claude_start", { prompt: "x", cwd: work, host: "mute" });
      const done = await timed(
        s.callTool("claude_wait", { job_id: started.result.structuredContent.job_id, hold_ms: 30_000 }),
        SSH_TIMEOUT_MS + SLACK_MS,
        "claude_wait",
      );
      assert.equal(done.response.result.structuredContent.status, "failed");
      assert.equal(done.response.result.structuredContent.error.code, "HOST_FAILED");
      await waitFor(() => sshProcesses("cat >/dev/null").length === 0, "no session to the mute host left");
      await s.shutdown();
      await waitFor(() => sshProcesses(s.stateDir).length === 0, "the shared connection closed at shutdown");
    },
  );

  test(
    "a host that stops answering mid-job: claude_run answers within timeout_ms plus its grace, the kill stands " +
      "and lands once the host is back",
    async () => {
      const s = await server();
      const pidFile = path.join(scratch, "run-frozen.pids");
      const timeoutMs = 4000;
      const running = timed(
        s.callTool("claude_run", {
          prompt: `@pid ${pidFile}\n@sleep 60000`,
          cwd: work,
          host: "frozen",
          timeout_ms: timeoutMs,
        }),
        timeoutMs + 3 * SSH_TIMEOUT_MS + 1500 + SLACK_MS,
        "claude_run on a frozen host",
      );
      await waitFor(() => readPids(pidFile).length === 1, "the agent there");
      agentPids.push(...readPids(pidFile));
      proxy.freeze();
      const most = watchMost(() => sshProcesses(clientConfig, s.stateDir).length);
      try {
        const { response } = await running;
        const report = response.result.structuredContent;
        assert.equal(report.status, "failed", textOf(response));
        assert.equal(report.error.code, "TIMEOUT");
        assert.match(
          report.error.detail,
          /host frozen could not be reached .*; the kill stands, and is sent as soon as the host can be reached/,
        );
        assert.ok(readPids(pidFile).every(isAlive), "not killed yet: the host is out of reach");
      } finally {
        proxy.thaw();
      }
      // The pending kill goes with the first session that gets through.
      await waitFor(() => !readPids(pidFile).some(isAlive), "the agent killed there once the host is back", 40_000);
      assert.ok(
        most.stop() <= 3,
        `at most the shared connection, the follower and the kill: ${most.stop()} ssh at once`,
      );
      await s.shutdown();
      await waitFor(() => sshProcesses(clientConfig, s.stateDir).length === 0, "no ssh left after shutdown");
    },
  );

  test(
    "a host that stops answering mid-job: each claude_kill is KILL_FAILED within its bound, and the job ends " +
      "killed once the host is back",
    async () => {
      const s = await server();
      const pidFile = path.join(scratch, "kill-frozen.pids");
      const started = await s.callTool("claude_start", {
        prompt: `@pid ${pidFile}\n@sleep 60000`,
        cwd: work,
        host: "frozen",
      });
      const id = started.result.structuredContent.job_id;
      await waitFor(() => readPids(pidFile).length === 1, "the agent there");
      agentPids.push(...readPids(pidFile));
      proxy.freeze();
      try {
        for (let attempt = 1; attempt <= 3; attempt += 1) {
          const { response, ms } = await timed(
            s.callTool("claude_kill", { job_id: id }),
            3 * SSH_TIMEOUT_MS + SLACK_MS,
            `claude_kill ${attempt}`,
          );
          assert.match(
            textOf(response),
            /^KILL_FAILED: host frozen could not be reached .*; it is still running, and is killed as soon as the host can be reached/,
            textOf(response),
          );
          assert.ok(ms <= 3 * SSH_TIMEOUT_MS + SLACK_MS, `${ms} ms`);
          // Each kill's ssh is gone when the call answers: they do not pile up.
          const left = sshProcesses(clientConfig, s.stateDir).length;
          assert.ok(left <= 2, `at most the shared connection and the follower after kill ${attempt}: ${left} ssh`);
        }
        assert.ok(readPids(pidFile).every(isAlive));
      } finally {
        proxy.thaw();
      }
      const done = await s.callTool("claude_wait", { job_id: id, hold_ms: 40_000 });
      assert.equal(done.result.structuredContent.status, "killed", textOf(done));
      assert.equal(readPids(pidFile).some(isAlive), false);
      await s.shutdown();
      await waitFor(() => sshProcesses(clientConfig, s.stateDir).length === 0, "no ssh left after shutdown");
    },
  );

  test(
    "the far end resolves every add_dirs entry, links included: a link in the roots that leaves them is " +
      "POLICY_DENIED",
    async () => {
      const outside = mkdtempSync(path.join(scratch, "outside-"));
      const link = path.join(work, "escape");
      symlinkSync(outside, link);
      const inner = path.join(work, "inner");
      mkdirSync(inner);
      symlinkSync(inner, path.join(work, "inner-link"));
      const s = await server();
      const denied = await s.callTool("claude_run", { prompt: "x", cwd: work, host: "box", add_dirs: [link] });
      const report = denied.result.structuredContent;
      assert.equal(report.status, "failed", textOf(denied));
      assert.equal(report.error.code, "POLICY_DENIED");
      assert.match(
        report.error.detail,
        /"add_dirs\[0\]" is outside the allowed roots \(the host's roots\): .*\(it resolves to .*outside-/,
      );
      // A link that stays inside is given to the agent as the directory it resolves to.
      const recordFile = path.join(scratch, "add-dirs.json");
      const allowed = await s.callTool("claude_run", {
        prompt: `@record ${recordFile}`,
        cwd: work,
        host: "box",
        add_dirs: [path.join(work, "inner-link")],
      });
      assert.equal(allowed.result.structuredContent.status, "completed", textOf(allowed));
      const argv: string[] = JSON.parse(readFileSync(recordFile, "utf8")).argv;
      assert.ok(argv.includes(`--add-dir=${inner}`), argv.join(" "));
      await s.shutdown();
    },
  );

  test(
    "with no program named for the agent, the far end runs its own; every SPAWN_FAILED names the program tried " +
      "and the host",
    async () => {
      const s = await server();
      const own = await s.callTool("claude_run", { prompt: "from the far end's own setting", cwd: work, host: "own" });
      assert.equal(own.result.structuredContent.status, "completed", textOf(own));
      assert.match(own.result.structuredContent.result, /ECHO: from the far end's own setting/);
      const named = await s.callTool("claude_run", { prompt: "x", cwd: work, host: "missing" });
      assert.equal(named.result.structuredContent.error?.code, "SPAWN_FAILED", textOf(named));
      assert.match(
        named.result.structuredContent.error.detail,
        /^on host missing: \/nonexistent\/bin\/claude-x not found \(the host's "programs" in CLAUDE_DISPATCH_HOSTS\)/,
      );
      const theirs = await s.callTool("claude_run", { prompt: "x", cwd: work, host: "unset" });
      assert.equal(theirs.result.structuredContent.error?.code, "SPAWN_FAILED", textOf(theirs));
      assert.match(
        theirs.result.structuredContent.error.detail,
        /^on host unset: \/nonexistent\/far\/claude not found \(CLAUDE_DISPATCH_CLAUDE_BIN\)/,
      );
      await s.shutdown();
    },
  );
});

interface Listener {
  port: number;
  close(): Promise<void>;
}

/** A TCP listener on 127.0.0.1 that accepts every connection and never writes a byte. */
async function silentListener(): Promise<Listener> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
  });
  const port = await listen(server);
  return {
    port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

interface Proxy extends Listener {
  /** Stops forwarding in both directions, closing nothing; new connections are accepted and left waiting. */
  freeze(): void;
  thaw(): void;
}

/**
 * A TCP proxy to 127.0.0.1:target that can freeze, as a host that stops
 * answering does (a sleeping laptop, a dead link).
 */
async function freezableProxy(target: number): Promise<Proxy> {
  let frozen = false;
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  const waiting: net.Socket[] = [];
  const forward = (pair: { client: net.Socket; upstream: net.Socket }): void => {
    pair.client.pipe(pair.upstream);
    pair.upstream.pipe(pair.client);
    pair.client.resume();
    pair.upstream.resume();
  };
  const connect = (client: net.Socket): void => {
    const pair = { client, upstream: net.connect(target, "127.0.0.1") };
    pair.upstream.on("error", () => undefined);
    const end = (): void => {
      pairs.delete(pair);
      pair.client.destroy();
      pair.upstream.destroy();
    };
    client.on("close", end);
    pair.upstream.on("close", end);
    pairs.add(pair);
    if (frozen) pair.upstream.pause();
    else forward(pair);
  };
  const server = net.createServer((client) => {
    client.on("error", () => undefined);
    if (!frozen) return connect(client);
    client.pause();
    waiting.push(client);
  });
  const port = await listen(server);
  return {
    port,
    freeze: () => {
      frozen = true;
      for (const { client, upstream } of pairs) {
        client.unpipe();
        upstream.unpipe();
        client.pause();
        upstream.pause();
      }
    },
    thaw: () => {
      frozen = false;
      for (const pair of pairs) forward(pair);
      for (const client of waiting.splice(0)) connect(client);
    },
    close: () => {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      for (const client of waiting) client.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address && typeof address === "object") resolve(address.port);
      else reject(new Error("no port"));
    });
  });
}

/** A client config with the aliases "silent" and "frozen", the test sshd's key and its host key at the proxy's port. */
function writeClientConfig(dir: string, sshd: Sshd, ports: { silent: number; frozen: number }): string {
  const hostKey = readFileSync(path.join(sshd.dir, "host_ed25519.pub"), "utf8")
    .trim()
    .split(/\s+/)
    .slice(0, 2)
    .join(" ");
  const knownHosts = path.join(dir, "known_hosts");
  writeFileSync(knownHosts, `[127.0.0.1]:${ports.frozen} ${hostKey}\n`);
  const host = (alias: string, port: number): string =>
    [
      `Host ${alias}`,
      "  HostName 127.0.0.1",
      `  Port ${port}`,
      `  User ${userInfo().username}`,
      `  IdentityFile ${path.join(sshd.dir, "client_ed25519")}`,
      "  IdentitiesOnly yes",
      `  UserKnownHostsFile ${knownHosts}`,
      "  GlobalKnownHostsFile /dev/null",
      "  StrictHostKeyChecking yes",
      "  LogLevel ERROR",
      "",
    ].join("\n");
  const file = path.join(dir, "guarantees_ssh_config");
  writeFileSync(file, host("silent", ports.silent) + host("frozen", ports.frozen));
  return file;
}

/**
 * The ssh processes whose command line holds one of the markers, from /proc. The shared connection's master, which
 * ssh forks into the background, retitles itself "<control path> [mux]": the server's state directory finds it.
 */
function sshProcesses(...markers: string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() !== "ssh") continue;
      const line = readFileSync(`/proc/${entry}/cmdline`, "latin1").replaceAll("\0", " ");
      if (markers.some((marker) => line.includes(marker))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids.filter(isAlive);
}

/** Samples a count every 50 ms; stop() gives the most seen. */
function watchMost(count: () => number): { stop(): number } {
  let most = count();
  const timer = setInterval(() => (most = Math.max(most, count())), 50);
  return {
    stop: () => {
      clearInterval(timer);
      return most;
    },
  };
}
