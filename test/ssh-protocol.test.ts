/**
 * The SSH host's pieces without ssh (PROTOCOL.md §21): the remote command line a POSIX shell reads, ssh's argv,
 * both ends' checks of what they read, and the remote mode's serving loop with a fake job layer and clock.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { PassThrough } from "node:stream";
import { describe, test } from "node:test";

import { checkRemoteDirectory } from "../src/agent/policy.js";
import { remoteCommandLine, shellQuote, sshArguments } from "../src/hosts/ssh/command.js";
import type { SshHostConfig } from "../src/hosts/ssh/config.js";
import { farEndCommand } from "../src/hosts/remote/entry.js";
import {
  OUTPUT_CHUNK_BYTES,
  parseFrame,
  parseRequest,
  type RemoteFrame,
  type StartRequest,
} from "../src/hosts/remote/protocol.js";
import { serveRemote, type RemoteJobView, type RemoteSide } from "../src/hosts/remote/far-end.js";
import type { Approval } from "../src/store/approvals.js";
import { FakeClock, settle } from "./helpers.js";

const JOB = "0b7c6a4e-5d3f-4e21-9c8b-7a6f5e4d3c2b";

const HOST: SshHostConfig = {
  kind: "ssh",
  name: "box",
  destination: "me@build-box",
  roots: ["/srv"],
  sshConfig: "/etc/dispatch/ssh_config",
  options: { Port: "2222" },
  command: ["/opt/node dir/bin/node", "it's/main.js"],
  stateDir: "/var/lib/cd state",
  agents: ["claude"],
  programs: {},
  permissionModes: undefined,
};

function sh(script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("/bin/sh", ["-c", script], { env: { PATH: "/usr/bin:/bin" } }, (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
  });
}

describe("the remote command line", { skip: process.platform === "win32" ? "no POSIX shell" : undefined }, () => {
  test("a POSIX shell reads back every word exactly, whatever it holds", async () => {
    const words = [
      "plain",
      "with space",
      "it's",
      "'",
      "$HOME",
      "`id`",
      "a;b",
      "a\\b",
      "*",
      "",
      "-n",
      '"q"',
      "$(touch /tmp/nope)",
    ];
    const printed = await sh(`printf '%s\\n' ${words.map(shellQuote).join(" ")}`);
    assert.deepEqual(printed.split("\n").slice(0, -1), words);
    assert.equal(shellQuote("/usr/bin/node"), "/usr/bin/node", "a plain word is left as it is");
  });

  test("it is the configured command, remote, and the state directory: nothing else", async () => {
    const line = remoteCommandLine(farEndCommand(HOST));
    const printed = await sh(`printf '%s\\n' ${line}`);
    assert.deepEqual(printed.split("\n").slice(0, -1), [
      "/opt/node dir/bin/node",
      "it's/main.js",
      "remote",
      "--state-dir=/var/lib/cd state",
    ]);
  });

  test("ssh's argv: batch mode, the shared connection, the operator's options, then -- and the destination", () => {
    const argv = sshArguments(HOST, "/state/ssh", "LINE");
    assert.equal(argv[0], "-T");
    assert.ok(argv.includes("BatchMode=yes"));
    assert.ok(argv.includes("ControlPath=/state/ssh/%C"));
    assert.deepEqual(argv.slice(argv.indexOf("-F"), argv.indexOf("-F") + 2), ["-F", "/etc/dispatch/ssh_config"]);
    assert.ok(argv.includes("Port=2222"));
    assert.deepEqual(argv.slice(-3), ["--", "me@build-box", "LINE"]);
    assert.ok(
      !sshArguments(HOST, undefined, "LINE").some((arg) => arg.startsWith("Control")),
      "no sharing without a folder",
    );
  });
});

describe("the roots of another machine, checked by path here", () => {
  test("inside after . and .. are resolved; outside, relative, or a sibling with the same prefix is refused", () => {
    assert.deepEqual(checkRemoteDirectory("/srv/app/./src/../lib", ["/srv"]), { ok: true, path: "/srv/app/lib" });
    assert.deepEqual(checkRemoteDirectory("/srv", ["/srv/"]), { ok: true, path: "/srv" });
    assert.equal(checkRemoteDirectory("/srv/../etc", ["/srv"]).ok, false);
    assert.equal(checkRemoteDirectory("/srv2/app", ["/srv"]).ok, false);
    assert.deepEqual(checkRemoteDirectory("srv/app", ["/srv"]), {
      ok: false,
      code: "INVALID_ARGUMENT",
      problem: "must be an absolute path on that host",
    });
  });
});

describe("what each end reads", () => {
  const start: StartRequest = {
    op: "start",
    job_id: JOB,
    agent: "claude",
    cwd: "/srv/app",
    roots: ["/srv"],
    command: "claude",
    args: ["-p"],
    env: { CLAUDE_DISPATCH_DEPTH: "1" },
    prompt: "hi",
    offset: 0,
  };

  test("a well-formed request is taken as it is; every malformed one is refused with a reason", () => {
    assert.deepEqual(parseRequest(JSON.stringify(start)), start);
    assert.deepEqual(parseRequest(JSON.stringify({ op: "follow", job_id: JOB, offset: 10 })), {
      op: "follow",
      job_id: JOB,
      offset: 10,
    });
    const refusals: unknown[] = [
      "not json",
      [],
      { op: "exec" },
      { ...start, job_id: "../../etc" },
      { ...start, cwd: "srv/app" },
      { ...start, roots: ["relative"] },
      { ...start, command: "" },
      { ...start, args: ["-p", 3] },
      { ...start, args: ["a\0b"] },
      { ...start, env: { "BAD NAME": "x" } },
      { ...start, env: { GOOD: 1 } },
      { ...start, offset: -1 },
      { ...start, agent: "../claude" },
      { op: "follow", job_id: JOB, offset: 1.5 },
      { op: "kill" },
    ];
    for (const request of refusals)
      assert.equal(
        typeof parseRequest(typeof request === "string" ? request : JSON.stringify(request)),
        "string",
        JSON.stringify(request),
      );
  });

  test("frames: known ones parsed, anything else skipped", () => {
    assert.deepEqual(parseFrame('{"type":"output","data":"aGk="}'), { type: "output", data: "aGk=" });
    assert.deepEqual(
      parseFrame('{"type":"end","outcome":{"ok":false,"code":"KILLED","detail":"x"},"stderr_tail":"","size":3}'),
      {
        type: "end",
        outcome: { ok: false, code: "KILLED", detail: "x" },
        stderr_tail: "",
        size: 3,
      },
    );
    assert.equal(
      parseFrame('{"type":"end","outcome":{"ok":false,"code":"NOT_A_CODE"},"stderr_tail":"","size":3}'),
      undefined,
    );
    assert.equal(parseFrame('{"type":"error","code":"rm -rf","message":"x"}'), undefined);
    assert.equal(parseFrame('{"type":"killed","killed":true,"survivors":["1"]}'), undefined);
    assert.equal(parseFrame("Welcome to the build box!"), undefined);
  });
});

/**
 * A job layer with one job whose stdout is `output` and which ends when told. With `watched`, its permission files are
 * watched: `stir` calls the watch, `reads` counts the looks at the output, `watching` says whether a watch is on.
 */
function fakeSide(
  output: Buffer,
  known = true,
  watched = false,
): RemoteSide & {
  end(): void;
  left: number;
  started: StartRequest[];
  written: number;
  filed: Approval[];
  reads: number;
  stir(): void;
  watching: boolean;
} {
  let finish: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const view: RemoteJobView = { id: JOB, done, outcome: () => ({ ok: true, exit: { code: 0, signal: null } }) };
  const side = {
    left: 0,
    started: [] as StartRequest[],
    end: () => finish(),
    start: async (request: StartRequest) => (side.started.push(request), view),
    find: async () => (known ? view : undefined),
    kill: async () => ({ killed: true, survivors: [] }),
    check: async () => ({ type: "check" as const, version: "1", state_dir: "/s", programs: {} }),
    // What the agent has written so far grows with `written`.
    readOutput: (_id: string, offset: number, length: number) => {
      side.reads += 1;
      return output.subarray(offset, Math.min(side.written, offset + length));
    },
    reads: 0,
    written: 0,
    stderrTail: async () => "the tail",
    lookUpApproval: (_id: string, requestId: string) =>
      side.filed.find((approval) => approval.request.id === requestId),
    filed: [] as Approval[],
    onChange: undefined as (() => void) | undefined,
    watchApprovals: (_id: string, onChange: () => void) => {
      if (!watched) return undefined;
      side.onChange = onChange;
      return () => void (side.onChange = undefined);
    },
    stir: () => side.onChange?.(),
    get watching() {
      return side.onChange !== undefined;
    },
    answer: () => undefined,
    worktree: async () => null,
    leave: async () => void (side.left += 1),
  };
  return side;
}

function channel(clock: FakeClock) {
  const input = new PassThrough();
  const frames: RemoteFrame[] = [];
  let release: () => void = () => undefined;
  let held = false;
  return {
    input,
    frames,
    /** Holds the next write until released: a slow connection. */
    hold: () => (held = true),
    release: () => {
      held = false;
      release();
    },
    io: {
      input,
      clock,
      followMs: 100,
      write: (line: string) => {
        frames.push(JSON.parse(line) as RemoteFrame);
        return held ? new Promise<void>((resolve) => (release = resolve)) : Promise.resolve();
      },
    },
  };
}

describe("the remote mode's loop", () => {
  test(
    "start: accepted, the output from the offset in order, then end with the outcome and size; " + "then it leaves",
    async () => {
      const clock = new FakeClock();
      const output = Buffer.alloc(OUTPUT_CHUNK_BYTES * 2 + 10, "x");
      const side = fakeSide(output);
      const c = channel(clock);
      const served = serveRemote(c.io, side);
      c.input.write(
        `${JSON.stringify({ op: "start", job_id: JOB, agent: "claude", cwd: "/srv", roots: ["/srv"], command: "claude", args: [], env: {}, prompt: "hi", offset: 5 })}\n`,
      );
      await settle();
      side.written = 100;
      await clock.advance(100);
      // A slow channel: nothing more is read until the frame is taken.
      c.hold();
      side.written = output.length;
      await clock.advance(100);
      const whileHeld = c.frames.length;
      await clock.advance(1000);
      assert.equal(c.frames.length, whileHeld, "no frame is read while the last one waits");
      c.release();
      await settle();
      side.end();
      await clock.advance(100);
      assert.equal(await served, 0);
      assert.equal(c.frames[0]?.type, "accepted");
      const data = Buffer.concat(
        c.frames.flatMap((frame) => (frame.type === "output" ? [Buffer.from(frame.data, "base64")] : [])),
      );
      assert.ok(data.equals(output.subarray(5)));
      assert.deepEqual(c.frames.at(-1), {
        type: "end",
        outcome: { ok: true },
        exit: { code: 0, signal: null },
        stderr_tail: "the tail",
        size: output.length,
      });
      assert.equal(side.started[0]?.offset, 5);
      assert.equal(side.left, 1);
    },
  );

  test(
    "its stdin closing mid-job (the local server went away) ends it without an end frame; the job is " + "left running",
    async () => {
      const clock = new FakeClock();
      const side = fakeSide(Buffer.from("abc"));
      const c = channel(clock);
      const served = serveRemote(c.io, side);
      c.input.write(`${JSON.stringify({ op: "follow", job_id: JOB, offset: 0 })}\n`);
      side.written = 3;
      await clock.advance(100);
      c.input.end();
      await clock.advance(100);
      assert.equal(await served, 0);
      assert.deepEqual(
        c.frames.map((frame) => frame.type),
        ["accepted", "output"],
      );
      assert.equal(side.left, 1);
    },
  );

  test("permission requests go along once per change, and an answer op answers there", async () => {
    const clock = new FakeClock();
    const side = fakeSide(Buffer.alloc(0));
    const c = channel(clock);
    const served = serveRemote(c.io, side);
    c.input.write(`${JSON.stringify({ op: "follow", job_id: JOB, offset: 0 })}\n`);
    await clock.advance(300);
    const request = {
      id: "1",
      tool_name: "Bash",
      input: { command: "ls" },
      preview: "Bash · ls",
      asked_at: 1,
      expires_at: 2,
    };
    side.filed = [{ request }];
    await clock.advance(300);
    side.filed = [{ request, answer: { decision: "allow", by: "cli", at: 3 } }];
    await clock.advance(300);
    side.end();
    await clock.advance(100);
    assert.equal(await served, 0);
    const sent = c.frames.filter((frame) => frame.type === "approvals");
    assert.deepEqual(sent, [
      { type: "approvals", approvals: [{ request }] },
      { type: "approvals", approvals: [{ request, answer: { decision: "allow", by: "cli", at: 3 } }] },
    ]);
    assert.ok(parseFrame(JSON.stringify(sent[1])), "what one end sends, the other reads");
    assert.equal(
      parseFrame(JSON.stringify({ type: "approvals", approvals: [{ request: { ...request, id: "../1" } }] })),
      undefined,
    );
    assert.equal(
      parseFrame(
        JSON.stringify({
          type: "approvals",
          approvals: [{ request, answer: { decision: "maybe", by: "cli", at: 3 } }],
        }),
      ),
      undefined,
    );

    const answering = fakeSide(Buffer.alloc(0));
    const answers: unknown[] = [];
    answering.answer = (_id, requestId, answer) => (answers.push([requestId, answer]), { answer, won: true });
    const d = channel(clock);
    const answered = serveRemote(d.io, answering);
    d.input.end(
      `${JSON.stringify({ op: "answer", job_id: JOB, request_id: "1", answer: { decision: "deny", by: "tool", at: 5, message: "no" } })}\n`,
    );
    assert.equal(await answered, 0);
    assert.deepEqual(answers, [["1", { decision: "deny", by: "tool", at: 5, message: "no" }]]);
    assert.deepEqual(d.frames, [
      { type: "answered", won: true, answer: { decision: "deny", by: "tool", at: 5, message: "no" } },
    ]);
  });

  test(
    "a quiet job is looked at less and less often, at the fast pace again once output comes; a permission " +
      "request wakes the loop at once; where nothing watches the requests the pace stays fast",
    async () => {
      const clock = new FakeClock();
      const output = Buffer.from("first\nsecond\n");
      const side = fakeSide(output, true, true);
      const c = channel(clock);
      const served = serveRemote(c.io, side);
      c.input.write(`${JSON.stringify({ op: "follow", job_id: JOB, offset: 0 })}\n`);
      await settle();
      assert.ok(side.watching);
      const before = side.reads;
      await clock.advance(10_000);
      // Waits of 200, 400 and 800 ms, then 1 s: 11 looks in 10 s, where the fast pace makes 100.
      const quiet = side.reads - before;
      assert.ok(quiet >= 9 && quiet <= 13, `${quiet} looks in 10 s of quiet`);

      side.written = "first\n".length;
      await clock.advance(1000);
      assert.equal(c.frames.filter((frame) => frame.type === "output").length, 1, "seen within the slow wait");
      side.written = output.length;
      await clock.advance(100);
      assert.equal(c.frames.filter((frame) => frame.type === "output").length, 2, "seen at the fast pace");

      await clock.advance(5000);
      const request = { id: "1", tool_name: "Bash", input: {}, preview: "Bash", asked_at: 1, expires_at: 2 };
      side.filed = [{ request }];
      side.stir();
      await settle();
      assert.deepEqual(c.frames.at(-1), { type: "approvals", approvals: [{ request }] }, "sent with no wait");

      side.end();
      await clock.advance(100);
      assert.equal(await served, 0);
      assert.equal(side.watching, false, "the watch is stopped with the loop");

      // A request filed while the loop looks (after its look for requests, before its wait) is not left for the timer.
      const racing = fakeSide(Buffer.alloc(0), true, true);
      const e = channel(clock);
      const raced = serveRemote(e.io, racing);
      e.input.write(`${JSON.stringify({ op: "follow", job_id: JOB, offset: 0 })}\n`);
      await clock.advance(5000);
      const look = racing.lookUpApproval;
      racing.lookUpApproval = (id, requestId, known) => {
        const found = look(id, requestId, known);
        racing.lookUpApproval = look;
        racing.filed = [{ request }];
        racing.stir();
        return found;
      };
      await clock.advance(1000);
      assert.deepEqual(e.frames.at(-1), { type: "approvals", approvals: [{ request }] }, "sent with no further wait");
      racing.end();
      await clock.advance(100);
      assert.equal(await raced, 0);

      const unwatched = fakeSide(Buffer.alloc(0));
      const d = channel(clock);
      const followed = serveRemote(d.io, unwatched);
      d.input.write(`${JSON.stringify({ op: "follow", job_id: JOB, offset: 0 })}\n`);
      await settle();
      const from = unwatched.reads;
      await clock.advance(1000);
      assert.equal(unwatched.reads - from, 10, "every 100 ms");
      unwatched.end();
      await clock.advance(100);
      assert.equal(await followed, 0);
    },
  );

  test("refusals are error frames with a listed code: a bad request, an unknown job", async () => {
    const clock = new FakeClock();
    for (const [line, known, code] of [
      ["{}", true, "INVALID_ARGUMENT"],
      [JSON.stringify({ op: "follow", job_id: JOB, offset: 0 }), false, "JOB_NOT_FOUND"],
      [JSON.stringify({ op: "kill", job_id: JOB }), false, "JOB_NOT_FOUND"],
    ] as const) {
      const c = channel(clock);
      const served = serveRemote(c.io, fakeSide(Buffer.alloc(0), known));
      c.input.end(`${line}\n`);
      assert.equal(await served, 3);
      assert.equal(c.frames.length, 1);
      assert.equal(c.frames[0]?.type === "error" && c.frames[0].code, code);
    }
  });
});
