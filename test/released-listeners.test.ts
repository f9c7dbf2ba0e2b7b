/**
 * What an agent's exited process, its pipes and a stopped folder watcher keep once the job is done with them.
 * Node keeps each reachable from its handle until a full collection, and young collections keep whatever their
 * listeners' closures reach: a job's whole run, promoted once per job (BENCHMARKS.md (q)). So what is left on
 * them must capture nothing of a job: the same function for every one.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import childProcess from "node:child_process";
import fs, { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, mock, test } from "node:test";

import { systemClock } from "../src/core/clock.js";
import { createProcessControl, type PosixPlatform } from "../src/hosts/local/index.js";
import { openSession } from "../src/hosts/remote/session.js";
import { watchFolder } from "../src/store/files.js";
import { RecordingLogger } from "./helpers.js";
import { LINUX_PLATFORM } from "./processes.js";

const isLinux = process.platform === "linux";
const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-released-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Process control over the real platform, remembering each child it spawns. */
function spawning(): { start(piped: boolean): Promise<ChildProcess>; logger: RecordingLogger } {
  const children: ChildProcess[] = [];
  const platform: PosixPlatform = {
    ...LINUX_PLATFORM,
    spawn: (...args: Parameters<PosixPlatform["spawn"]>) => {
      const child = LINUX_PLATFORM.spawn(...args);
      children.push(child);
      return child;
    },
  };
  const logger = new RecordingLogger();
  const processes = createProcessControl({
    platform,
    clock: systemClock,
    logger,
    newMarker: () => randomUUID(),
    defer: (fn) => void setImmediate(fn),
    killGraceMs: 400,
    exitDrainMs: 200,
  });
  let count = 0;
  return {
    logger,
    async start(piped) {
      count += 1;
      const dir = mkdtempSync(path.join(scratch, "job-"));
      const big = { held: new Array(1000).fill(count) };
      const handle = processes.start({
        command: "/bin/sh",
        args: ["-c", "cat >/dev/null; echo out; echo err >&2"],
        cwd: dir,
        env: { PATH: "/usr/bin:/bin" },
        stdin: "the prompt",
        // Stands for the job's run: what a listener left behind would keep alive.
        onStdout: () => void big.held.length,
        stderrTailBytes: 1024,
        ...(piped ? {} : { output: { stdoutPath: path.join(dir, "out"), stderrPath: path.join(dir, "err") } }),
      });
      const exit = await handle.exited;
      assert.equal(exit.exitCode, 0);
      await handle.settled;
      const child = children.at(-1);
      assert.ok(child);
      return child;
    },
  };
}

/** What `module[name]` makes from now on, recorded; mock.restoreAll() and syncBuiltinESMExports() undo it. */
function recordMade<T>(module: object, name: string): T[] {
  const made: T[] = [];
  const real = (module as Record<string, (...args: unknown[]) => T>)[name];
  assert.ok(real);
  mock.method(module as Record<string, (...args: unknown[]) => T>, name, (...args: unknown[]) => {
    const object = real(...args);
    made.push(object);
    return object;
  });
  // The source imports the function by name: its binding follows the module object only once synced.
  syncBuiltinESMExports();
  return made;
}

describe("listeners left on an exited agent", { skip: !isLinux && "POSIX process tests run on Linux" }, () => {
  for (const piped of [false, true]) {
    const how = piped ? "pipes" : "output files";
    test(`${how}: the child keeps one 'error' listener, the same for every agent`, async () => {
      const { start, logger } = spawning();
      const first = await start(piped);
      const second = await start(piped);
      for (const child of [first, second]) {
        assert.deepEqual(child.eventNames(), ["error"]);
        assert.equal(child.listenerCount("error"), 1);
      }
      assert.equal(first.listeners("error")[0], second.listeners("error")[0]);
      // A late 'error' neither throws nor reaches the job.
      first.emit("error", new Error("late"));
      assert.ok(!logger.lines.some((line) => line.includes("late")), logger.lines.join("\n"));
    });
  }

  test("pipes: stdout and stderr keep no 'data' listener, and a late pipe error is ignored", async () => {
    const { start } = spawning();
    const child = await start(true);
    for (const stream of [child.stdout, child.stderr]) {
      assert.ok(stream);
      assert.equal(stream.listenerCount("data"), 0);
    }
    child.stdin?.emit("error", new Error("EPIPE after the end"));
  });
});

describe("a stopped folder watcher", () => {
  test("keeps one 'error' listener, the same for every watcher, and nothing of its caller", () => {
    const watchers = recordMade<fs.FSWatcher>(fs, "watch");
    try {
      const folder = path.join(scratch, "watched");
      mkdirSync(folder);
      const stops = [1, 2].map((n) => {
        const held = new Array(1000).fill(n);
        return watchFolder(
          folder,
          () => true,
          () => void held.length,
        );
      });
      assert.equal(watchers.length, 2);
      for (const stop of stops) stop?.();
      for (const watcher of watchers) assert.deepEqual(watcher.eventNames(), ["error"]);
      assert.equal(watchers[0]?.listeners("error")[0], watchers[1]?.listeners("error")[0]);
      watchers[0]?.emit("error", new Error("late"));
      writeFileSync(path.join(folder, "news.json"), "{}");
    } finally {
      mock.restoreAll();
      syncBuiltinESMExports();
    }
  });
});

describe(
  "a remote session's transport once it has exited",
  { skip: !isLinux && "POSIX process tests run on Linux" },
  () => {
    test("keeps one 'error' listener, the same for every session, and no 'data' listener", async () => {
      const children = recordMade<ChildProcess>(childProcess, "spawn");
      try {
        for (const n of [1, 2]) {
          const held = new Array(1000).fill(n);
          const session = openSession(
            {
              label: "test",
              program: "/bin/sh",
              argv: ["-c", "read request; echo said >&2"],
              env: { PATH: "/usr/bin:/bin" },
              logger: new RecordingLogger(),
              clock: systemClock,
              firstFrameMs: 30_000,
            },
            { kind: "version" } as unknown as Parameters<typeof openSession>[1],
            () => void held.length,
          );
          const end = await session.ended;
          assert.equal(end.exitCode, 0);
          assert.equal(end.stderr, "said");
        }
        assert.equal(children.length, 2);
        for (const child of children) {
          assert.deepEqual(child.eventNames(), ["error"]);
          assert.equal(child.stdout?.listenerCount("data"), 0);
          assert.equal(child.stderr?.listenerCount("data"), 0);
        }
        assert.equal(children[0]?.listeners("error")[0], children[1]?.listeners("error")[0]);
      } finally {
        mock.restoreAll();
        syncBuiltinESMExports();
      }
    });
  },
);
