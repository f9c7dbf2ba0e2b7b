/**
 * test/sshd.ts as a process, for bench/bench.mjs (plain ESM, which cannot import .ts):
 *
 *   node_modules/.bin/tsx test/sshd-serve.ts
 *
 * Prints one JSON line, {"alias","clientConfig","refusedAlias"} (or {"missing": reason} and exits 0 when sshd, ssh
 * or ssh-keygen is not there), then serves until its stdin ends or SIGTERM,
 * when it stops sshd, removes its folder and exits.
 * BENCH_RUN_ID, when set, is passed on to every session (sshd_config SetEnv), so the bench's leftover check also
 * finds what runs on the far side.
 */
import { rmSync } from "node:fs";
import path from "node:path";

import { sshMissing, startSshd } from "./sshd.js";

const missing = sshMissing();
if (missing !== undefined) {
  process.stdout.write(`${JSON.stringify({ missing })}\n`);
  process.exit(0);
}

const env: Record<string, string> = { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` };
if (process.env.BENCH_RUN_ID) env.BENCH_RUN_ID = process.env.BENCH_RUN_ID;
const sshd = await startSshd({ env });
process.stdout.write(
  `${JSON.stringify({ alias: sshd.alias, clientConfig: sshd.clientConfig, refusedAlias: sshd.refusedAlias })}\n`,
);

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await sshd.stop();
  rmSync(sshd.dir, { recursive: true, force: true });
  process.exit(0);
};
process.once("SIGTERM", () => void stop());
process.stdin.on("end", () => void stop());
process.stdin.on("error", () => void stop());
process.stdin.resume();
