/**
 * The state directory is trusted only when it is ours (PROTOCOL.md §15.1):
 * owned by this user, and no symbolic link inside it is followed, by the
 * store, the process layer, the server or the CLI.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { spawnSync } from "node:child_process";
import {
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import { runCli, type CliIo } from "../src/cli/index.js";
import { systemClock } from "../src/core/clock.js";
import { openForAppending, openForReading, openForWriting, readTextFile } from "../src/store/files.js";
import { StateStore } from "../src/store/state-store.js";
import { StateError, type JobRecord } from "../src/store/records.js";
import { readFileRange } from "../src/store/atomic.js";
import { SERVER_MAIN, ServerProcess, minimalEnvironment } from "./server-process.js";
import { machineOf } from "./host-fakes.js";

const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-trust-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const posix = process.platform !== "win32";
const ourUid = process.getuid?.() ?? 0;
/** chown to another user needs root; without it, a store told to expect another uid stands in. */
const isRoot = ourUid === 0;
const STRANGER = 54_321;

let dirs = 0;
function freshDir(): string {
  dirs += 1;
  return path.join(scratch, `d${dirs}`);
}

function record(id: string, overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    format: 1,
    runtime: "claude",
    host: "local",
    id,
    kind: "start",
    cwd: scratch,
    prompt_preview: "planted",
    options: {},
    status: "queued",
    submitted_at: 1,
    owner: { pid: 999_999, start_time: "1" },
    generation: 0,
    ...overrides,
  };
}

const ID = "11111111-2222-4333-8444-555555555555";
const OTHER_ID = "11111111-2222-4333-8444-666666666666";

describe("a state directory that is not ours is refused", { skip: !posix && "uids are POSIX" }, () => {
  test("open() refuses a directory owned by another user, before changing anything", () => {
    const dir = freshDir();
    mkdirSync(path.join(dir, "jobs"), { recursive: true, mode: 0o755 });
    const store = new StateStore(dir, { uid: ourUid + 1, randomName: () => randomUUID() });
    assert.throws(
      () => store.open(),
      (error: unknown) => error instanceof StateError && /owned by uid \d+, not by this user/.test(error.message),
    );
    assert.equal(lstatSync(dir).mode & 0o777, 0o755, "its mode was left as it was");
    assert.throws(() => store.check(), StateError);
  });

  test("open() refuses a state directory, or a jobs folder, that is a symbolic link", () => {
    const real = freshDir();
    mkdirSync(real, { recursive: true });
    const link = freshDir();
    symlinkSync(real, link);
    assert.throws(
      () => new StateStore(link, { uid: ourUid, randomName: () => randomUUID() }).open(),
      /is a symbolic link/,
    );
    const dir = freshDir();
    mkdirSync(dir, { recursive: true });
    symlinkSync(real, path.join(dir, "jobs"));
    assert.throws(
      () => new StateStore(dir, { uid: ourUid, randomName: () => randomUUID() }).open(),
      /jobs is a symbolic link/,
    );
  });

  test(
    "a job folder of another user's is skipped, never loaded or run",
    { skip: !isRoot && "chown needs root" },
    () => {
      const dir = freshDir();
      const store = new StateStore(dir, { uid: ourUid, randomName: () => randomUUID() });
      store.open();
      store.create(record(ID), "rm -rf ~");
      store.create(record(OTHER_ID), "fine");
      chownSync(store.jobDir(ID), STRANGER, STRANGER);
      const { records, skipped } = store.loadAll();
      assert.deepEqual(
        records.map((loaded) => loaded.id),
        [OTHER_ID],
      );
      assert.deepEqual(skipped, [{ id: ID, reason: `its folder is owned by uid ${STRANGER}, not by this user` }]);
      assert.equal(store.read(ID), undefined);
    },
  );

  test(
    "the server will not start on another user's state directory, and doctor says why",
    { skip: !isRoot && "chown needs root" },
    async () => {
      const dir = freshDir();
      mkdirSync(path.join(dir, "jobs"), { recursive: true, mode: 0o700 });
      chownSync(dir, STRANGER, STRANGER);
      const server = spawnSync(process.execPath, [SERVER_MAIN], {
        env: minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: dir }),
        input: "",
        encoding: "utf8",
        timeout: 30_000,
      });
      assert.equal(server.status, 2, server.stderr);
      assert.match(server.stderr, /owned by uid 54321, not by this user/);

      const doctor = await runCliCapture(["doctor", "--json"], dir);
      assert.equal(doctor.code, 1);
      const checks = (JSON.parse(doctor.stdout) as { checks: { name: string; status: string; detail: string }[] })
        .checks;
      const state = checks.find((check) => check.name === "state directory");
      assert.equal(state?.status, "fail", JSON.stringify(checks));
      assert.match(state?.detail ?? "", /owned by uid 54321/);

      const jobs = await runCliCapture(["jobs"], dir);
      assert.equal(jobs.code, 1);
      assert.match(jobs.stderr, /owned by uid 54321/);
    },
  );

  test(
    "the CLI refuses to list or kill from a directory that is not ours (a store told to expect " + "another uid)",
    async () => {
      const dir = freshDir();
      new StateStore(dir, { uid: ourUid, randomName: () => randomUUID() }).open();
      const listed = await runCliCapture(["jobs", "--json"], dir, ourUid + 1);
      assert.equal(listed.code, 1);
      assert.match(listed.stdout, /STATE_ERROR/);
      const doctor = await runCliCapture(["doctor", "--json"], dir, ourUid + 1);
      assert.equal(doctor.code, 1);
    },
  );
});

describe("no symbolic link in the state directory is followed", { skip: !posix && "O_NOFOLLOW is POSIX" }, () => {
  const secret = path.join(scratch, "secret.txt");
  writeFileSync(secret, "TOP SECRET KEY MATERIAL");

  test("the file helpers refuse links, for reading, appending and writing", () => {
    const link = path.join(scratch, "link.txt");
    rmSync(link, { force: true });
    symlinkSync(secret, link);
    assert.throws(() => openForReading(link), /ELOOP|symbolic/);
    assert.throws(() => openForAppending(link), /ELOOP|symbolic/);
    assert.throws(() => openForWriting(link), /ELOOP|symbolic/);
    assert.equal(readTextFile(link), undefined);
    assert.equal(readFileSync(secret, "utf8"), "TOP SECRET KEY MATERIAL", "nothing was written through the link");
  });

  test(
    "a result.txt or prompt.txt planted as a link is never written through (both are written in place, not " +
      "renamed over)",
    () => {
      const dir = freshDir();
      const store = new StateStore(dir, { uid: ourUid, randomName: () => randomUUID() });
      store.open();
      store.create(record(ID), "p");
      symlinkSync(secret, store.file(ID, "result.txt"));
      assert.throws(() => store.writeResult(ID, "overwritten"), /ELOOP|symbolic/);
      mkdirSync(store.jobDir(OTHER_ID), { mode: 0o700 });
      symlinkSync(secret, store.file(OTHER_ID, "prompt.txt"));
      assert.throws(() => store.create(record(OTHER_ID), "overwritten"), /EEXIST/, "prompt.txt is created exclusively");
      assert.equal(readFileSync(secret, "utf8"), "TOP SECRET KEY MATERIAL", "nothing was written through either link");
    },
  );

  test("a result.txt, record.json or job folder that is a link is not read", () => {
    const dir = freshDir();
    const store = new StateStore(dir, { uid: ourUid, randomName: () => randomUUID() });
    store.open();
    store.create(
      record(ID, { status: "completed", finished_at: 2, outcome: { ok: true, result: {}, result_chars: 23 } }),
      "p",
    );
    symlinkSync(secret, store.file(ID, "result.txt"));
    assert.equal(store.readResult(ID), undefined);
    assert.equal(store.readResultHead(ID, 100), undefined);
    assert.equal(readFileRange(store.file(ID, "result.txt"), 0, 100), undefined);

    store.create(record(OTHER_ID), "p");
    const recordFile = store.file(OTHER_ID, "record.json");
    const planted = path.join(scratch, "planted-record.json");
    writeFileSync(planted, JSON.stringify(record(OTHER_ID)));
    rmSync(recordFile);
    symlinkSync(planted, recordFile);
    const linkedFolder = "11111111-2222-4333-8444-777777777777";
    const elsewhere = path.join(scratch, "elsewhere");
    mkdirSync(elsewhere, { recursive: true });
    writeFileSync(path.join(elsewhere, "record.json"), JSON.stringify(record(linkedFolder)));
    symlinkSync(elsewhere, path.join(store.jobsDir, linkedFolder));

    const { records, skipped } = store.loadAll();
    assert.deepEqual(
      records.map((loaded) => loaded.id),
      [ID],
    );
    assert.deepEqual(
      skipped.sort((a, b) => a.id.localeCompare(b.id)),
      [
        { id: OTHER_ID, reason: "record.json is a symbolic link" },
        { id: linkedFolder, reason: "its folder is a symbolic link" },
      ],
    );
    assert.equal(store.read(OTHER_ID), undefined);
    assert.equal(store.read(linkedFolder), undefined);
  });

  test(
    "claude_output never leaks the file a planted result.txt points at",
    { skip: process.platform !== "linux" && "end to end on Linux" },
    async () => {
      const dir = freshDir();
      const cwd = path.join(dir, "..", `work-${dirs}`);
      mkdirSync(cwd, { recursive: true });
      const first = new ServerProcess({ CLAUDE_DISPATCH_STATE_DIR: dir });
      await first.initialize();
      const ran = await first.callTool("claude_run", { prompt: `@big 6000\nlong`, cwd });
      const id = ran.result?.structuredContent?.job_id as string;
      assert.equal(ran.result?.structuredContent?.status, "completed");
      first.endInput();
      await first.exited;
      first.dispose();

      const resultFile = path.join(dir, "jobs", id, "result.txt");
      rmSync(resultFile);
      symlinkSync(secret, resultFile);
      const second = new ServerProcess({ CLAUDE_DISPATCH_STATE_DIR: dir });
      try {
        await second.initialize();
        const page = await second.callTool("claude_output", { job_id: id });
        assert.doesNotMatch(JSON.stringify(page), /TOP SECRET/);
        const waited = await second.callTool("claude_wait", { job_id: id, hold_ms: 0 });
        assert.doesNotMatch(JSON.stringify(waited), /TOP SECRET/);
        const shown = spawnSync(process.execPath, [SERVER_MAIN, "show", id, "--json"], {
          env: minimalEnvironment({ CLAUDE_DISPATCH_STATE_DIR: dir }),
          encoding: "utf8",
          timeout: 30_000,
        });
        assert.equal(shown.status, 0, shown.stderr);
        assert.equal(
          (JSON.parse(shown.stdout) as { result: unknown }).result,
          null,
          "show reads no result through the link",
        );
        assert.doesNotMatch(shown.stdout, /TOP SECRET/);
      } finally {
        second.endInput();
        await second.exited;
        second.dispose();
      }
    },
  );
});

async function runCliCapture(
  args: string[],
  stateDir: string,
  uid = ourUid,
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    env: { CLAUDE_DISPATCH_STATE_DIR: stateDir, PATH: "" },
    machine: machineOf({ platform: process.platform, home: scratch }),
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    clock: systemClock,
    processControl: async () => {
      throw new Error("no process layer in this test");
    },
    nodePath: process.execPath,
    mainPath: SERVER_MAIN,
    runFile: async () => ({ ok: true, stdout: "2.1.332 (Claude Code)\n", stderr: "" }),
    identity: () => ({ pid: process.pid }),
    randomName: () => randomUUID(),
    uid,
  };
  const code = await runCli(args, io);
  return { code, stdout, stderr };
}
