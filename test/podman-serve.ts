/**
 * test/containers.ts as a process, for bench/bench.mjs (plain ESM, which cannot import .ts):
 *
 *   node_modules/.bin/tsx test/podman-serve.ts
 *
 * Prints one JSON line, {"env", "image", "podman", "container", "work"} (or {"missing": reason} and exits 0 when
 * podman, runc or catatonit is not there): a private engine's environment, the test image built offline, a running
 * container of it with the folder `work` mounted at the same path. Then serves until its stdin ends or SIGTERM, when
 * it stops the engine (every container and image, and its folder) and exits.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { containersMissing, startEngine } from "./containers.js";
import { onPath } from "./processes.js";

const missing = containersMissing();
if (missing !== undefined) {
  process.stdout.write(`${JSON.stringify({ missing })}\n`);
  process.exit(0);
}

const engine = await startEngine();
const work = mkdtempSync(path.join(tmpdir(), "cd-podman-work-"));
const image = await engine.buildImage();
const container = await engine.runContainer({ image, mounts: [{ source: work, target: work }] });
const podman = onPath("podman", engine.env.PATH);
process.stdout.write(`${JSON.stringify({ env: engine.env, image, podman, container: container.name, work })}\n`);

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await engine.stop();
  rmSync(work, { recursive: true, force: true });
  process.exit(0);
};
process.once("SIGTERM", () => void stop());
process.stdin.on("end", () => void stop());
process.stdin.on("error", () => void stop());
process.stdin.resume();
