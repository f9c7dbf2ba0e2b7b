/**
 * The podman harness (test/containers.ts) holds what the container tests rely
 * on: the image it builds offline runs node, the built server and the fake
 * agent; a read-write mount at the same path carries files both ways and a
 * read-only one refuses writes; `podman exec -i` carries stdin in and stdout
 * back; `network: "none"` leaves only lo; and stop() leaves no container, no
 * conmon, no mount and no folder behind.
 *
 * One engine and one image for the whole file (the image takes seconds to
 * build); its last test stops the engine. Without podman, runc or catatonit
 * the suite fails under CI=true and is skipped, loudly, elsewhere.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  containerSkipReason,
  IMAGE_FAKE_CLAUDE,
  IMAGE_MAIN,
  mountsUnder,
  processesNaming,
  startEngine,
  type Container,
  type Engine,
  type PodmanResult,
} from "./containers.js";
import { isAlive } from "./processes.js";

/** Echoes each line of stdin back as "echo: LINE". */
const LINE_ECHO = `
  const lines = require("node:readline").createInterface({ input: process.stdin });
  lines.on("line", (line) => process.stdout.write("echo: " + line + "\\n"));`;
/** `node -e WRITE_FILE FILE TEXT` writes TEXT to FILE. */
const WRITE_FILE = `require("node:fs").writeFileSync(process.argv[1], process.argv[2])`;

function ok(result: PodmanResult, what: string): PodmanResult {
  assert.equal(result.code, 0, `${what} exited ${result.code}: ${result.stderr}`);
  return result;
}

const skip = containerSkipReason("the podman harness");

describe("a private podman engine (test/containers.ts)", { skip, timeout: 120_000 }, () => {
  let engine: Engine | undefined;
  let image = "";
  let box: Container | undefined;
  /** On this machine, mounted into `box` at the same paths. */
  let shared = "";
  let readWrite = "";
  let readOnly = "";

  const podman = (): Engine => {
    assert.ok(engine, "the engine did not start");
    return engine;
  };
  const container = (): Container => {
    assert.ok(box, "the container did not start");
    return box;
  };

  before(async () => {
    shared = mkdtempSync(path.join(tmpdir(), "dispatch-podman-mounts-"));
    readWrite = path.join(shared, "work");
    readOnly = path.join(shared, "frozen");
    mkdirSync(readWrite);
    mkdirSync(readOnly);
    writeFileSync(path.join(readOnly, "given.txt"), "from the host\n");
    engine = await startEngine();
    image = await engine.buildImage();
    box = await engine.runContainer({
      image,
      mounts: [
        { source: readWrite, target: readWrite },
        { source: readOnly, target: readOnly, readOnly: true },
      ],
      env: { DISPATCH_PROBE: "a b 'c' $HOME" },
      network: "none",
    });
  });
  after(async () => {
    try {
      await engine?.stop();
    } finally {
      if (shared) rmSync(shared, { recursive: true, force: true });
    }
  });

  test("buildImage() builds once per engine: a second call names the same image, listed once", async () => {
    assert.equal(await podman().buildImage(), image);
    const listed = ok(await podman().podman(["images", "--format", "{{.Repository}}:{{.Tag}}"]), "podman images");
    assert.deepEqual(listed.stdout.trim().split("\n"), [image]);
  });

  test("the image runs node: `podman run --rm IMAGE node -e …` prints process.version", async () => {
    const result = await podman().podman([
      "run",
      "--rm",
      "--pull=never",
      "--network",
      "none",
      image,
      "/usr/bin/node",
      "-e",
      "console.log(process.version)",
    ]);
    assert.equal(ok(result, "podman run").stdout, `${process.version}\n`);
  });

  test("the built server and the fake agent run in the container", async () => {
    const version = ok(await podman().execIn(container(), ["node", IMAGE_MAIN, "--version"]), "main.js --version");
    assert.match(version.stdout, /^claude-dispatch \S+\n$/);
    // Through its `#!/usr/bin/env node` line: /usr/bin/env finds node on the image's PATH.
    const fake = ok(await podman().execIn(container(), [IMAGE_FAKE_CLAUDE, "-p"], "hello inside\n"), "fake-claude");
    const events = fake.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type?: string; result?: string });
    assert.equal(events.at(-1)?.type, "result");
    assert.equal(events.at(-1)?.result, "ECHO: hello inside");
  });

  test("the shell and the tools run: sh, sleep, cat, ls, git", async () => {
    const script = "sleep 0 && cat /etc/passwd && ls -d /tmp /root && git --version";
    const result = ok(await podman().execIn(container(), ["/bin/sh", "-c", script]), "sh -c");
    assert.match(
      result.stdout,
      /^root:x:0:0:root:\/root:\/bin\/sh\nagent:x:1000:1000::\/home\/agent:\/bin\/sh\n\/root\n\/tmp\ngit version /,
    );
  });

  test("the container's variables reach an exec'd process, with HOME=/root", async () => {
    const result = ok(await podman().execIn(container(), ["/usr/bin/env"]), "env");
    const lines = result.stdout.split("\n");
    assert.ok(lines.includes("DISPATCH_PROBE=a b 'c' $HOME"), result.stdout);
    assert.ok(lines.includes("HOME=/root"), result.stdout);
  });

  test("a read-write mount at the same path: a file the container writes is read here", async () => {
    const target = path.join(readWrite, "written.txt");
    ok(await podman().execIn(container(), ["node", "-e", WRITE_FILE, target, "written inside\n"]), "write");
    assert.equal(readFileSync(target, "utf8"), "written inside\n");
  });

  test("a read-only mount: the container reads it and its write is refused", async () => {
    const read = ok(await podman().execIn(container(), ["cat", path.join(readOnly, "given.txt")]), "cat");
    assert.equal(read.stdout, "from the host\n");
    const target = path.join(readOnly, "refused.txt");
    const write = await podman().execIn(container(), ["node", "-e", WRITE_FILE, target, "x"]);
    assert.notEqual(write.code, 0, "the write succeeded");
    assert.match(write.stderr, /EROFS|read-only file system/);
    assert.equal(existsSync(target), false);
  });

  test("`podman exec -i` carries stdin to the process and its stdout back, line by line", async () => {
    const result = await podman().execIn(container(), ["node", "-e", LINE_ECHO], "one\ntwo words\n\nlast\n");
    assert.equal(ok(result, "line echo").stdout, "echo: one\necho: two words\necho: \necho: last\n");
  });

  test('`network: "none"` leaves only lo (/proc/net/dev inside)', async () => {
    const result = ok(await podman().execIn(container(), ["cat", "/proc/net/dev"]), "cat /proc/net/dev");
    // Two header lines, then "  NAME: counters…" a line.
    const interfaces = result.stdout
      .split("\n")
      .slice(2)
      .map((line) => line.split(":")[0]?.trim())
      .filter((name) => name);
    assert.deepEqual(interfaces, ["lo"]);
  });

  test("processesIn() lists the container's init, its sleep and an exec'd process", async () => {
    ok(await podman().podman(["exec", "--detach", container().name, "/usr/bin/sleep", "1234"]), "exec --detach");
    const processes = await podman().processesIn(container());
    assert.match(processes[0] ?? "", /init.* \/usr\/bin\/sleep infinity$/);
    assert.ok(processes.includes("/usr/bin/sleep infinity"), processes.join("\n"));
    assert.ok(processes.includes("/usr/bin/sleep 1234"), processes.join("\n"));
  });

  test("runContainer() refuses a relative path, a comma or a bad variable name, before running anything", async () => {
    const run = (options: Partial<Parameters<Engine["runContainer"]>[0]>): Promise<Container> =>
      podman().runContainer({ image, ...options });
    await assert.rejects(run({ mounts: [{ source: "relative", target: "/x" }] }), /not absolute/);
    await assert.rejects(run({ mounts: [{ source: "/a,b", target: "/x" }] }), /comma/);
    await assert.rejects(run({ env: { "NOT A NAME": "x" } }), /not a variable name/);
    const listed = ok(await podman().podman(["ps", "--all", "--format", "{{.Names}}"]), "podman ps");
    assert.deepEqual(listed.stdout.trim().split("\n"), [container().name]);
  });

  // Last: it stops the engine the tests above share.
  test("stop() leaves no container, no conmon, no mount and no folder, and may be called again", async () => {
    const { dir } = podman();
    const inspected = ok(await podman().podman(["inspect", "--format", "{{.State.Pid}}", container().name]), "inspect");
    const init = Number(inspected.stdout.trim());
    assert.ok(isAlive(init), "the container's init runs");
    const conmons = processesNaming(dir).filter((pid) => readComm(pid) === "conmon");
    assert.ok(conmons.length >= 1, "the container's conmon is found in /proc");
    assert.ok(mountsUnder(dir).length >= 1, "the container's root filesystem is mounted under the engine's folder");

    await podman().stop();
    assert.equal(isAlive(init), false, "the container's init is gone");
    assert.deepEqual(conmons.filter(isAlive), [], "its conmon is gone");
    assert.deepEqual(processesNaming(dir), [], "no process names the engine's folder");
    assert.deepEqual(mountsUnder(dir), [], "nothing is mounted under the engine's folder");
    assert.equal(existsSync(dir), false, "the engine's folder is gone");
    assert.equal(existsSync(`/run/runc/${container().id}`), false, "runc keeps no state of the container");

    await podman().stop();
    await assert.rejects(podman().podman(["ps"]), /stopped/);
    await assert.rejects(podman().buildImage(), /stopped/);
  });
});

function readComm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, "latin1").trim();
  } catch {
    return "";
  }
}
