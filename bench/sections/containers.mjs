/**
 * (p) What a job in a container costs (PROTOCOL.md §21): claude_run "hi" here, in a running container (a `container`
 * host: `podman exec -i` of claude-dispatch there), and in a fresh sandbox (an `image` host: a container made for the
 * job, then exec, then removed), on a private rootful podman whose image test/containers.ts builds offline (through
 * test/podman-serve.ts). The agent is the fake one in every case; what shows is the engine's cost: a container's
 * making, an exec, a Node start there, and the removal.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Server } from "../client.mjs";
import { FAKE_CLAUDE, SIZES, TSX_CLI, median, percentile, round2, startServing } from "../shared.mjs";

const IMAGE_MAIN = "/opt/claude-dispatch/dist/main.js";
const IMAGE_FAKE_CLAUDE = "/opt/fixtures/fake-claude.mjs";
const WHERE = ["local", "container", "sandbox"];

export async function benchContainers(rounds) {
  const skipped = (why) => ({
    rows: [{ metric: "p  containers", value: "skipped", target: "(no target)", pass: undefined, detail: why }],
    data: { skipped: why },
  });
  if (!fs.existsSync(TSX_CLI)) return skipped(`${path.relative(process.cwd(), TSX_CLI)} is missing (npm install)`);
  const podman = await startServing("podman-serve.ts", "a podman engine");
  if (podman.info.missing !== undefined) {
    await podman.stop();
    return skipped(`no podman for the bench: ${podman.info.missing}`);
  }
  const { env, image, container, work } = podman.info;
  const farEnd = { roots: [work], command: ["/usr/bin/node", IMAGE_MAIN], programs: { claude: IMAGE_FAKE_CLAUDE } };
  const hosts = JSON.stringify({
    dev: { container, engine_bin: podman.info.podman, ...farEnd },
    sandbox: { image, engine_bin: podman.info.podman, ...farEnd },
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cdb-p-"));
  const perRound = [];
  let s;
  try {
    for (let i = 0; i < rounds; i += 1) {
      s = new Server({ ...env, CLAUDE_DISPATCH_HOSTS: hosts, CLAUDE_DISPATCH_STATE_DIR: path.join(dir, `s-${i}`) });
      await s.initialize();
      const hi = async (where) => {
        const host = where === "local" ? {} : { host: where === "container" ? "dev" : "sandbox" };
        const response = await s.callTool("claude_run", { prompt: "hi", cwd: work, ...host }, 120_000);
        if (response.structured?.result !== "ECHO: hi")
          throw new Error(`p: claude_run ${where} answered ${JSON.stringify(response.result).slice(0, 400)}`);
        return response.at - response.sentAt;
      };
      // The first job loads the process layer here: not measured.
      await hi("local");
      const samples = { local: [], container: [], sandbox: [] };
      for (let k = 0; k < SIZES.containerSamples; k += 1) {
        // The three in turn, each one first as often as the others.
        for (let j = 0; j < WHERE.length; j += 1) {
          const where = WHERE[(k + j) % WHERE.length];
          samples[where].push(await hi(where));
        }
      }
      await s.close();
      s = undefined;
      perRound.push(Object.fromEntries(WHERE.map((w) => [w, round2(percentile(samples[w], 0.5))])));
    }
  } finally {
    if (s) await s.close();
    await podman.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const p50 = Object.fromEntries(WHERE.map((w) => [w, round2(median(perRound.map((r) => r[w])))]));
  return {
    rows: [
      {
        metric: 'p  claude_run "hi": here, in a running container, in a fresh sandbox (p50)',
        value: `${p50.local} ms; ${p50.container} ms; ${p50.sandbox} ms`,
        target: "info (issue 28)",
        pass: undefined,
        detail: `per round: ${perRound.map((r) => WHERE.map((w) => r[w]).join("/")).join(", ")} ms; ` +
          `the fake agent everywhere (${path.basename(FAKE_CLAUDE)}), podman rootful with runc`,
      },
    ],
    data: { p50, perRound },
  };
}
