/**
 * The Linux process table read as it changes (src/hosts/local/posix/proc.ts, LinuxProcessLister), against a /proc
 * made of plain files: an entry is kept from an earlier read only while its pid cannot have been handed out again.
 * Each test changes a process's stat file between reads, so whether it was read again shows in what comes back.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test, type TestContext } from "node:test";

import { LinuxProcessLister, type ProcessInfo } from "../src/hosts/local/index.js";

const SELF = 4000;

/** A /proc of files: the pid counter, the fork count, the thread count, pid_max, and one stat file a process. */
class FakeProc {
  readonly root: string;
  lastPid = 1000;
  forks = 50_000;
  tasks = 200;
  pidMax = 32_768;

  constructor(t: TestContext, self: number | string = SELF) {
    this.root = mkdtempSync(path.join(tmpdir(), "fake-proc-"));
    t.after(() => rmSync(this.root, { recursive: true, force: true }));
    mkdirSync(path.join(this.root, "sys", "kernel"), { recursive: true });
    symlinkSync(String(self), path.join(this.root, "self"));
    this.process(SELF, 1, "100");
    this.writeCounters();
  }

  /** Writes pid's stat file: parent and start time as given, its own group and session. */
  process(pid: number, ppid: number, startTime: string): void {
    mkdirSync(path.join(this.root, String(pid)), { recursive: true });
    const rest = "0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0";
    writeFileSync(
      path.join(this.root, String(pid), "stat"),
      `${pid} (p ${pid}) S ${ppid} ${pid} ${pid} ${rest} ${startTime} 0 0`,
    );
  }

  gone(pid: number): void {
    rmSync(path.join(this.root, String(pid)), { recursive: true });
  }

  /** Hands out `count` pids: the counter moves on (round past pid_max to 300) and the fork count grows. */
  handOut(count: number): void {
    for (let k = 0; k < count; k += 1) this.lastPid = this.lastPid + 1 >= this.pidMax ? 300 : this.lastPid + 1;
    this.forks += count;
    this.writeCounters();
  }

  writeCounters(): void {
    const kernel = path.join(this.root, "sys", "kernel");
    writeFileSync(path.join(kernel, "ns_last_pid"), `${this.lastPid}\n`);
    writeFileSync(path.join(kernel, "pid_max"), `${this.pidMax}\n`);
    writeFileSync(path.join(this.root, "stat"), `cpu  1 2 3 4\nintr 5 6\nctxt 7\nbtime 8\nprocesses ${this.forks}\n`);
    writeFileSync(path.join(this.root, "loadavg"), `0.10 0.20 0.30 1/${this.tasks} ${this.lastPid}\n`);
  }
}

function byPid(list: readonly ProcessInfo[]): Map<number, ProcessInfo> {
  return new Map(list.map((info) => [info.pid, info]));
}

test("a process keeps its first entry while its pid is not handed out again, unless asked fresh", async (t) => {
  const proc = new FakeProc(t);
  proc.process(500, 1, "200");
  const lister = new LinuxProcessLister(proc.root, SELF);
  assert.equal(byPid(await lister.list()).get(500)?.ppid, 1);
  // Reparented, with no pid handed out meanwhile: the same process, its entry kept.
  proc.process(500, 77, "200");
  assert.equal(byPid(await lister.list()).get(500)?.ppid, 1, "an entry the counter vouches for is not read again");
  assert.equal(byPid(await lister.list({ fresh: new Set([500]) })).get(500)?.ppid, 77, "a fresh pid is read now");
  proc.process(500, 78, "200");
  assert.equal(byPid(await lister.list({ full: true })).get(500)?.ppid, 78, "a full read reads every process");
});

test("a pid handed out since the read before is read again, and a new one is read", async (t) => {
  const proc = new FakeProc(t);
  proc.process(1001, 1, "300");
  proc.process(900, 1, "250");
  const lister = new LinuxProcessLister(proc.root, SELF);
  await lister.list();
  // 1001 exited and its pid came round again (a new start time); 1002 is new; 900 stays below the counter.
  proc.handOut(5);
  proc.process(1001, 999, "400");
  proc.process(1002, 1001, "401");
  proc.process(900, 55, "250");
  const table = byPid(await lister.list());
  assert.deepEqual(
    [table.get(1001)?.startTime, table.get(1002)?.ppid, table.get(900)?.ppid],
    ["400", 1001, 1],
    "1001 and 1002 read anew, 900 as first read",
  );
});

test("a process whose parent's pid was handed out since is read again: its parent may be new", async (t) => {
  const proc = new FakeProc(t);
  proc.process(900, 1001, "250");
  const lister = new LinuxProcessLister(proc.root, SELF);
  await lister.list();
  // Its parent 1001 exited, 900 went to init, and 1001 came round again: the kept entry would make 900 its child.
  proc.handOut(1);
  proc.process(900, 1, "250");
  proc.process(1001, SELF, "260");
  assert.equal(byPid(await lister.list()).get(900)?.ppid, 1);
});

test("a counter gone round past pid_max: the pids handed out after the wrap are read again, others kept", async (t) => {
  const proc = new FakeProc(t);
  proc.lastPid = 32_760;
  proc.writeCounters();
  proc.process(350, 1, "10");
  proc.process(32_765, 1, "11");
  proc.process(20_000, 1, "12");
  const lister = new LinuxProcessLister(proc.root, SELF);
  await lister.list();
  proc.handOut(60); // 32761..32767, then 300..352
  for (const pid of [350, 32_765, 20_000]) proc.process(pid, 9, "99");
  const table = byPid(await lister.list());
  assert.deepEqual(
    [table.get(350)?.ppid, table.get(32_765)?.ppid, table.get(20_000)?.ppid],
    [9, 9, 1],
    "the two pids in the wrapped span are read anew; 20000 is not",
  );
});

test("so many forks that the counter may have gone all the way round: every process is read again", async (t) => {
  const proc = new FakeProc(t);
  proc.process(20_000, 1, "12");
  const lister = new LinuxProcessLister(proc.root, SELF);
  await lister.list();
  // Back where it stood, but after a quarter of pid_max forks: 20000 may be a new process.
  proc.forks += proc.pidMax / 4;
  proc.writeCounters();
  proc.process(20_000, 9, "13");
  assert.equal(byPid(await lister.list()).get(20_000)?.startTime, "13");
  // Many threads alive count too: each pid they hold is one the counter skips.
  proc.tasks = proc.pidMax / 2;
  proc.writeCounters();
  await lister.list();
  proc.process(20_000, 9, "14");
  assert.equal(byPid(await lister.list()).get(20_000)?.startTime, "14");
});

test("a process gone from /proc is gone from the table, whatever an earlier read found", async (t) => {
  const proc = new FakeProc(t);
  proc.process(600, 1, "5");
  const lister = new LinuxProcessLister(proc.root, SELF);
  assert.ok(byPid(await lister.list()).has(600));
  proc.gone(600);
  assert.equal(byPid(await lister.list()).has(600), false);
});

test("one read in a hundred is full, whatever the counters say", async (t) => {
  const proc = new FakeProc(t);
  proc.process(700, 1, "5");
  const lister = new LinuxProcessLister(proc.root, SELF);
  await lister.list();
  proc.process(700, 2, "5");
  const parents: number[] = [];
  for (let read = 2; read <= 102; read += 1) parents.push(byPid(await lister.list()).get(700)?.ppid ?? -1);
  assert.deepEqual(
    parents.map((ppid, k) => [k + 2, ppid]).filter(([, ppid]) => ppid === 2),
    [
      [101, 2],
      [102, 2],
    ],
    "the first read was full, the next full one is the 101st: the change shows from it on",
  );
});

test("a /proc of another pid namespace, or a counter it lacks, means every read is full", async (t) => {
  const other = new FakeProc(t, 12345);
  other.process(800, 1, "5");
  const foreign = new LinuxProcessLister(other.root, SELF);
  await foreign.list();
  other.process(800, 3, "5");
  assert.equal(byPid(await foreign.list()).get(800)?.ppid, 3, "/proc/self names another pid: nothing kept");

  const bare = new FakeProc(t);
  bare.process(800, 1, "5");
  rmSync(path.join(bare.root, "sys", "kernel", "ns_last_pid"));
  const lister = new LinuxProcessLister(bare.root, SELF);
  await lister.list();
  bare.process(800, 3, "5");
  assert.equal(byPid(await lister.list()).get(800)?.ppid, 3, "no ns_last_pid: nothing kept");
});

test("the real /proc: a child started after a read is found by the next, with its parent", async (t) => {
  if (process.platform !== "linux") return t.skip("Linux only");
  const { spawn } = await import("node:child_process");
  const lister = new LinuxProcessLister("/proc", process.pid);
  await lister.list();
  const child = spawn("/bin/sleep", ["30"], { stdio: "ignore", env: {} });
  t.after(() => child.kill("SIGKILL"));
  await new Promise((resolve) => child.once("spawn", resolve));
  const found = byPid(await lister.list()).get(child.pid ?? -1);
  assert.equal(found?.ppid, process.pid);
});
