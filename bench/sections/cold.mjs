/** (a) cold start and (d) RSS after initialize: what a fresh server costs. */
import path from "node:path";
import { Server } from "../client.mjs";
import { ROOT, SIZES, sleep, median, round2, procStatusKb } from "../shared.mjs";

/**
 * The floor of (a) and (d): a bare zero-dependency JSON-RPC server over stdio in Node, an ES module started
 * as the server is (`node FILE`), which answers `initialize` and nothing of its own.
 */
const BARE_SERVER = path.join(ROOT, "bench", "fixtures", "bare-server.mjs");
/** Issue 29: the start at most 1.2x the bare server's, and RSS after initialize at most 45 MiB. */
const COLD_RATIO_TARGET = 1.2;
const RSS_TARGET_MIB = 45;

/** Spawn -> initialize answer of a fresh server (ours, or the bare floor), closed at once. */
async function coldStart(main) {
  const s = new Server({}, main);
  const response = await s.initialize();
  await s.close();
  return response.at - s.spawnedAt;
}

/** (a) spawn -> initialize result, and the floor: the bare server's spawn -> initialize result. */
export async function benchColdStart(rounds) {
  const server = [];
  const floor = [];
  const coldServer = () => coldStart(undefined);
  const coldFloor = () => coldStart(BARE_SERVER);
  // One unmeasured pair first, so both start with warm file caches.
  await coldFloor();
  await coldServer();
  for (let i = 0; i < rounds; i += 1) {
    // Each round is the median of a few pairs, in alternating order, so neither always runs second.
    const roundServer = [];
    const roundFloor = [];
    for (let k = 0; k < SIZES.coldPairsPerRound; k += 1) {
      if (k % 2 === 0) roundFloor.push(await coldFloor());
      roundServer.push(await coldServer());
      if (k % 2 === 1) roundFloor.push(await coldFloor());
    }
    server.push(median(roundServer));
    floor.push(median(roundFloor));
  }
  const serverMs = median(server);
  const floorMs = median(floor);
  const limit = COLD_RATIO_TARGET * floorMs;
  return {
    rows: [
      {
        metric: "a  cold start: spawn -> initialize result",
        value: `${serverMs.toFixed(1)} ms, ${(serverMs / floorMs).toFixed(2)}x the bare server`,
        target: `<= ${COLD_RATIO_TARGET} x bare = ${limit.toFixed(1)} ms`,
        pass: serverMs <= limit,
        detail: `floor (a bare JSON-RPC server, bench/fixtures/bare-server.mjs, spawn -> initialize result): ${floorMs.toFixed(1)} ms`,
      },
    ],
    data: {
      serverMs: round2(serverMs),
      floorMs: round2(floorMs),
      limitMs: round2(limit),
      perRound: { server: server.map(round2), floor: floor.map(round2) },
    },
  };
}

/** VmRSS of a fresh server (ours, or the bare floor) 200 ms after its initialize answer. */
async function rssAfterInitialize(main) {
  const s = new Server({}, main);
  await s.initialize();
  await sleep(200); // let startup work and the initialize response settle
  const kb = procStatusKb(s.pid, "VmRSS");
  await s.close();
  return kb;
}

/** (d) VmRSS after initialize, fresh server per round, next to the bare server's. */
export async function benchRss(rounds) {
  const rss = [];
  const bare = [];
  for (let i = 0; i < rounds; i += 1) {
    rss.push(await rssAfterInitialize(undefined));
    bare.push(await rssAfterInitialize(BARE_SERVER));
  }
  const kb = median(rss);
  const bareKb = median(bare);
  const mib = kb / 1024;
  return {
    rows: [
      {
        metric: "d  RSS after initialize (VmRSS)",
        value: `${mib.toFixed(1)} MiB`,
        target: `<= ${RSS_TARGET_MIB} MiB`,
        pass: mib <= RSS_TARGET_MIB,
        detail: `${kb} kB; the bare server's ${(bareKb / 1024).toFixed(1)} MiB`,
      },
    ],
    data: { rssKb: kb, rssMiB: round2(mib), samplesKb: rss, bareKb, bareSamplesKb: bare },
  };
}
