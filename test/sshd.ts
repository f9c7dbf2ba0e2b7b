/**
 * A real OpenSSH server on 127.0.0.1 for tests that need "another machine":
 * Debian's /usr/sbin/sshd started on a free port with a config, host key,
 * client keys and known_hosts generated per run in a fresh temporary
 * directory, plus a client config for `ssh -F` that names two aliases (one
 * whose key is authorized, one whose key is not).
 *
 * Linux only: per-connection processes are found through /proc. Without
 * sshd, ssh or ssh-keygen a suite fails under CI=true (.ci/run installs them)
 * and is skipped, with one loud line, elsewhere (sshSkipReason).
 *
 * Nothing is registered globally: the caller calls stop() in an `after` hook.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import net from "node:net";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { onPath } from "./processes.js";

const execFileAsync = promisify(execFile);

export interface SshdOptions {
  /** Environment every session on this sshd gets (sshd_config SetEnv), e.g. PATH and test-only variables. */
  env?: Record<string, string>;
}

export interface Sshd {
  port: number;
  /** A client config file for `ssh -F`: defines Host aliases below. */
  clientConfig: string;
  /** Alias whose key is authorized. */
  alias: string;
  /** Alias that offers a key the server does not accept (for "refuses the key" tests). */
  refusedAlias: string;
  /** The directory holding everything generated for this run. */
  dir: string;
  /**
   * SIGKILLs every per-connection sshd process (children of the listener whose /proc/PID/comm is "sshd"), never
   * the listener, never anything else; resolves to how many were killed.
   */
  dropConnections(): Promise<number>;
  /** Stops the listener and every per-connection sshd process; removes nothing else. Idempotent. */
  stop(): Promise<void>;
}

const SSHD = "/usr/sbin/sshd";
const ALIAS = "dispatch-test";
const REFUSED_ALIAS = "dispatch-test-refused";
/**
 * The comm of per-connection processes: "sshd" through OpenSSH 9.7 (9.2 on
 * bookworm); 9.8 and later run them as separate binaries.
 */
const PER_CONNECTION_COMMS: ReadonlySet<string> = new Set(["sshd", "sshd-session", "sshd-auth"]);
const START_TIMEOUT_MS = 10_000;
const POLL_MS = 20;
/** How long a SIGKILLed or SIGTERMed process may take to go. */
const EXIT_TIMEOUT_MS = 5_000;

/**
 * undefined when sshd, ssh and ssh-keygen are all there; else why not (e.g.
 * "/usr/sbin/sshd is missing: apt-get install openssh-server").
 */
export function sshMissing(): string | undefined {
  if (process.platform !== "linux") return "the sshd harness reads /proc (Linux only)";
  if (!existsSync(SSHD)) return `${SSHD} is missing: apt-get install openssh-server`;
  if (!onPath("ssh")) return "ssh is not on PATH: apt-get install openssh-client";
  if (!onPath("ssh-keygen")) return "ssh-keygen is not on PATH: apt-get install openssh-client";
  return undefined;
}

/**
 * For a suite: under CI=true a missing ssh fails (throw with the reason); otherwise it prints one loud line on
 * stderr and returns the skip reason for node:test's `skip` option.
 */
export function sshSkipReason(suite: string): string | undefined {
  const why = sshMissing();
  if (why === undefined) return undefined;
  if (process.env.CI === "true" && process.platform === "linux") {
    throw new Error(`${suite} needs a real OpenSSH server and client: ${why} (.ci/run installs them)`);
  }
  process.stderr.write(`\n!!! SKIPPING the ssh tests (${suite}): ${why}.\n\n`);
  return why;
}

// ---------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------

interface Proc {
  pid: number;
  ppid: number;
  state: string;
  /** Field 22 of /proc/PID/stat: with the pid, names one process even if the pid is reused. */
  startTime: string;
  comm: string;
}

function readProc(pid: number): Proc | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    // comm (field 2) may hold spaces and parentheses: the fields after it start after the last ")".
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const comm = readFileSync(`/proc/${pid}/comm`, "latin1").replace(/\n$/, "");
    return { pid, state: rest[0] ?? "", ppid: Number(rest[1]), startTime: rest[19] ?? "", comm };
  } catch {
    return undefined; // gone
  }
}

function listProcs(): Proc[] {
  const procs: Proc[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const proc = readProc(Number(entry));
    if (proc) procs.push(proc);
  }
  return procs;
}

/** Still the same process, and neither exited nor a zombie. */
function stillRunning(proc: Proc): boolean {
  const now = readProc(proc.pid);
  return now !== undefined && now.startTime === proc.startTime && now.state !== "Z" && now.state !== "X";
}

/**
 * The listener's per-connection processes: its descendants with an sshd comm,
 * reached through sshd processes only (so an sshd that a session command
 * happens to run is not one of them), zombies left out.
 */
function perConnection(listener: number): Proc[] {
  const children = new Map<number, Proc[]>();
  for (const proc of listProcs()) {
    const siblings = children.get(proc.ppid);
    if (siblings) siblings.push(proc);
    else children.set(proc.ppid, [proc]);
  }
  const found: Proc[] = [];
  const queue = [listener];
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    for (const child of children.get(pid) ?? []) {
      if (!PER_CONNECTION_COMMS.has(child.comm) || child.state === "Z" || child.state === "X") continue;
      found.push(child);
      queue.push(child.pid);
    }
  }
  return found;
}

/** Sends `signal` to `proc` if it is still that process; whether it was sent. */
function signalProc(proc: Proc, signal: NodeJS.Signals): boolean {
  if (!stillRunning(proc)) return false;
  try {
    process.kill(proc.pid, signal);
    return true;
  } catch {
    return false; // exited in between
  }
}

/**
 * SIGKILLs every per-connection process of `listener` and waits until they are gone.
 * They are first SIGSTOPped, and the tree read again until nothing new shows up,
 * so a `[priv]` process forking its session child while we look cannot leave
 * that child behind (it would be reparented away from the listener's tree).
 */
async function killPerConnection(listener: number): Promise<number> {
  const frozen = new Map<number, Proc>();
  for (;;) {
    const fresh = perConnection(listener).filter((proc) => !frozen.has(proc.pid));
    if (fresh.length === 0) break;
    for (const proc of fresh) if (signalProc(proc, "SIGSTOP")) frozen.set(proc.pid, proc);
    if (fresh.every((proc) => !frozen.has(proc.pid))) break; // all exited on their own
  }
  let killed = 0;
  for (const proc of frozen.values()) if (signalProc(proc, "SIGKILL")) killed += 1;
  const deadline = Date.now() + EXIT_TIMEOUT_MS;
  for (;;) {
    const left = [...frozen.values()].filter(stillRunning);
    if (left.length === 0) return killed;
    if (Date.now() > deadline)
      throw new Error(
        `per-connection sshd processes still running after SIGKILL: ${left.map((p) => p.pid).join(", ")}`,
      );
    await delay(POLL_MS);
  }
}

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The environment of what this helper spawns: named variables only. */
const toolEnvironment = (): Record<string, string> => ({ PATH: process.env.PATH ?? "/usr/bin:/bin" });

/** An ed25519 key pair at `file` and `file`.pub, the private half mode 0600 (ssh refuses others). */
async function keygen(file: string): Promise<void> {
  await execFileAsync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "dispatch-test", "-f", file], {
    env: toolEnvironment(),
    timeout: 30_000,
  });
  chmodSync(file, 0o600);
}

/**
 * The SetEnv line for `env`, or "" without any. sshd_config splits its lines
 * like a shell without expansion: each NAME=value is one double-quoted word,
 * where a backslash escapes a backslash; a `"` or a line break cannot be written.
 */
function setEnvLine(env: Record<string, string>): string {
  const words: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      throw new Error(`SetEnv: ${JSON.stringify(name)} is not a variable name`);
    if (/["\r\n\0]/.test(value))
      throw new Error(
        `SetEnv: the value of ${name} holds a double quote or a line break, which sshd_config cannot carry`,
      );
    words.push(`"${name}=${value.replaceAll("\\", "\\\\")}"`);
  }
  return words.length === 0 ? "" : `SetEnv ${words.join(" ")}\n`;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error("no port from 127.0.0.1:0"))));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

function logTail(log: string, lines = 20): string {
  try {
    return readFileSync(log, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no sshd.log)";
  }
}

// ---------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------

interface Listener {
  child: ChildProcess;
  pid: number;
  exited: Promise<void>;
  hasExited(): boolean;
}

/**
 * Starts one. Generates per run in a fresh mkdtemp dir: an ed25519 host key, a client key pair (authorized), a
 * second client key pair (not authorized), authorized_keys, known_hosts (with the host key for
 * [127.0.0.1]:PORT so StrictHostKeyChecking yes works), sshd_config, ssh_config.
 */
export async function startSshd(options: SshdOptions = {}): Promise<Sshd> {
  const setEnv = setEnvLine(options.env ?? {}); // throws before anything is made
  const missing = sshMissing();
  if (missing) throw new Error(`cannot start sshd: ${missing}`);

  const user = userInfo().username;
  // sshd's privilege separation dir
  if (process.getuid?.() === 0) mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });

  const dir = mkdtempSync(path.join(tmpdir(), "dispatch-sshd-"));
  const file = (name: string): string => path.join(dir, name);
  const hostKey = file("host_ed25519");
  const clientKey = file("client_ed25519");
  const refusedKey = file("refused_ed25519");
  await Promise.all([keygen(hostKey), keygen(clientKey), keygen(refusedKey)]);
  writeFileSync(file("authorized_keys"), readFileSync(`${clientKey}.pub`, "utf8"), { mode: 0o600 });
  const hostPublic = readFileSync(`${hostKey}.pub`, "utf8").trim().split(/\s+/).slice(0, 2).join(" ");
  const log = file("sshd.log");
  const sshdConfig = file("sshd_config");
  const clientConfig = file("ssh_config");

  const writeConfigs = (port: number): void => {
    writeFileSync(
      sshdConfig,
      [
        "ListenAddress 127.0.0.1",
        `Port ${port}`,
        `HostKey ${hostKey}`,
        `AuthorizedKeysFile ${file("authorized_keys")}`,
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "PermitRootLogin prohibit-password",
        "PidFile none",
        "LogLevel VERBOSE",
        "MaxSessions 50",
        "MaxStartups 50",
        "",
      ].join("\n") + setEnv,
    );
    const host = (alias: string, key: string): string =>
      [
        `Host ${alias}`,
        "  HostName 127.0.0.1",
        `  Port ${port}`,
        `  User ${user}`,
        `  IdentityFile ${key}`,
        "  IdentitiesOnly yes",
        `  UserKnownHostsFile ${file("known_hosts")}`,
        "  GlobalKnownHostsFile /dev/null",
        "  StrictHostKeyChecking yes",
        "  BatchMode yes",
        "  LogLevel ERROR",
        "  ConnectTimeout 10",
        "",
      ].join("\n");
    writeFileSync(clientConfig, host(ALIAS, clientKey) + host(REFUSED_ALIAS, refusedKey));
    writeFileSync(file("known_hosts"), `[127.0.0.1]:${port} ${hostPublic}\n`);
  };

  const launch = (): Listener => {
    const out = openSync(log, "a");
    try {
      const child = spawn(SSHD, ["-D", "-e", "-f", sshdConfig], {
        env: toolEnvironment(),
        stdio: ["ignore", out, out],
      });
      let gone = false;
      const exited = new Promise<void>((resolve) => {
        child.once("exit", () => {
          gone = true;
          resolve();
        });
        child.once("error", () => {
          gone = true;
          resolve();
        });
      });
      return { child, pid: child.pid ?? -1, exited, hasExited: () => gone };
    } finally {
      closeSync(out);
    }
  };

  /**
   * Waits until `listener` accepts; undefined then, else why not (it exited, or the time ran out: then it is killed).
   */
  const ready = async (listener: Listener, port: number): Promise<string | undefined> => {
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      if (listener.hasExited()) return "exited";
      if (await canConnect(port)) return listener.hasExited() ? "exited" : undefined;
      if (Date.now() > deadline) {
        listener.child.kill("SIGKILL");
        await listener.exited;
        return `not accepting on 127.0.0.1:${port} after ${START_TIMEOUT_MS} ms`;
      }
      await delay(POLL_MS);
    }
  };

  // The free port is closed again before sshd binds it: if something took it meanwhile, try another.
  let started: { listener: Listener; port: number } | undefined;
  for (let attempt = 1; started === undefined; attempt += 1) {
    const port = await freePort();
    writeConfigs(port);
    const listener = launch();
    const why = await ready(listener, port);
    if (why === undefined) started = { listener, port };
    else if (why !== "exited" || attempt >= 3 || !/Address already in use/.test(logTail(log, 5))) {
      throw new Error(
        `sshd ${why === "exited" ? `exited at start (${listener.child.exitCode ?? listener.child.signalCode})` : why}; ${log}:\n${logTail(log)}`,
      );
    }
  }
  const { listener, port } = started;

  const signalListener = (signal: NodeJS.Signals): void => {
    if (listener.hasExited()) return;
    try {
      process.kill(listener.pid, signal);
    } catch {
      // it exited in between
    }
  };
  let stopping: Promise<void> | undefined;
  return {
    port,
    clientConfig,
    alias: ALIAS,
    refusedAlias: REFUSED_ALIAS,
    dir,
    async dropConnections() {
      if (listener.hasExited()) return 0;
      return killPerConnection(listener.pid);
    },
    stop() {
      stopping ??= (async () => {
        if (listener.hasExited()) return;
        // On SIGTERM the 9.2 listener exits and leaves its connections running,
        // reparented out of reach: freeze it (no new connections), kill them, then let it go.
        signalListener("SIGSTOP");
        try {
          await killPerConnection(listener.pid);
        } finally {
          signalListener("SIGTERM");
          signalListener("SIGCONT");
        }
        const timer = setTimeout(() => listener.child.kill("SIGKILL"), EXIT_TIMEOUT_MS);
        await listener.exited;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}
