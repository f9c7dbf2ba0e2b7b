/** (a) cold start and (d) RSS after initialize: what a fresh server costs. */
import { Server } from "../client.mjs";
import { SIZES, sleep, median, round2, procStatusKb, runToExit } from "../shared.mjs";

/** (a) spawn -> initialize result, and the floor: `node -e ""` spawn -> exit. */
export async function benchColdStart(rounds) {
  const server = [];
  const floor = [];
  const coldServer = async () => {
    const s = new Server();
    const response = await s.initialize();
    await s.close();
    return response.at - s.spawnedAt;
  };
  const coldFloor = async () => {
    const { ms, code } = await runToExit(["-e", ""]);
    if (code !== 0) throw new Error(`node -e "" exited ${code}`);
    return ms;
  };
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
  const limit = 1.3 * floorMs + 15;
  return {
    rows: [
      {
        metric: "a  cold start: spawn -> initialize result",
        value: `${serverMs.toFixed(1)} ms`,
        target: `<= 1.3 x floor + 15 = ${limit.toFixed(1)} ms`,
        pass: serverMs <= limit,
        detail: `floor (node -e "" spawn -> exit): ${floorMs.toFixed(1)} ms; ratio ${(serverMs / floorMs).toFixed(2)}x`,
      },
    ],
    data: { serverMs: round2(serverMs), floorMs: round2(floorMs), limitMs: round2(limit), perRound: { server: server.map(round2), floor: floor.map(round2) } },
  };
}

/** (d) VmRSS after initialize, fresh server per round. */
export async function benchRss(rounds) {
  const rss = [];
  for (let i = 0; i < rounds; i += 1) {
    const s = new Server();
    await s.initialize();
    await sleep(200); // let startup work and the initialize response settle
    rss.push(procStatusKb(s.pid, "VmRSS"));
    await s.close();
  }
  const kb = median(rss);
  const mib = kb / 1024;
  return {
    rows: [
      {
        metric: "d  RSS after initialize (VmRSS)",
        value: `${mib.toFixed(1)} MiB`,
        target: "<= 50 MiB",
        pass: mib <= 50,
        detail: `${kb} kB`,
      },
    ],
    data: { rssKb: kb, rssMiB: round2(mib), samplesKb: rss },
  };
}
