/** (b) sequential latency and (c) pipelined tools/list, with the model-visible listing. */
import { Server } from "../client.mjs";
import { SIZES, REFERENCE_SERVER, now, median, percentile, round2, withTimeout, procCpuMs } from "../shared.mjs";

/** (b) sequential request/response latency. */
export async function benchLatency(rounds) {
  const s = new Server();
  await s.initialize();
  const run = async (method, count) => {
    const latencies = [];
    for (let i = 0; i < count; i += 1) {
      const r = await s.request(method);
      latencies.push(r.at - r.sentAt);
    }
    return latencies;
  };
  await run("ping", SIZES.latencyWarmup);
  await run("tools/list", SIZES.latencyWarmup);
  const perRound = { ping: [], "tools/list": [] };
  for (let i = 0; i < rounds; i += 1) {
    for (const method of ["ping", "tools/list"]) {
      const latencies = await run(method, SIZES.latencyRequests);
      perRound[method].push({
        p50: percentile(latencies, 0.5),
        p99: percentile(latencies, 0.99),
        max: Math.max(...latencies),
      });
    }
  }
  await s.close();
  const rows = [];
  const data = {};
  for (const method of ["ping", "tools/list"]) {
    const p50 = median(perRound[method].map((r) => r.p50));
    const p99 = median(perRound[method].map((r) => r.p99));
    const micro = (ms) => Math.round(ms * 1000) / 1000;
    data[method] = {
      p50Ms: micro(p50),
      p99Ms: micro(p99),
      perRound: perRound[method].map((r) => ({ p50: micro(r.p50), p99: micro(r.p99), max: micro(r.max) })),
    };
    rows.push({
      metric: `b  latency ${method} (sequential, ${SIZES.latencyRequests}/round)`,
      value: `p50 ${p50.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms`,
      target: "(no target)",
      pass: undefined,
      detail: `max over rounds ${Math.max(...perRound[method].map((r) => r.max)).toFixed(2)} ms`,
    });
  }
  return { rows, data };
}

/** (c) The limit of PROTOCOL.md §5 on what the host's model reads, as test/listing.test.ts measures it. */
const MODEL_VISIBLE_LIMIT_BYTES = 6144;
/** (c) Every agent and two hosts offered (nothing is run on them): the whole listing a host can get (issue 29). */
const FULL_LISTING_ENV = {
  CLAUDE_DISPATCH_AGENTS: "claude,codex,gemini",
  CLAUDE_DISPATCH_HOSTS: JSON.stringify({
    box: { ssh: "me@build-box", roots: ["/srv/repos", "/home/me/src"], agents: ["claude", "codex"] },
    gpu: { ssh: "gpu.example.org", roots: ["/data/work"], agents: ["claude", "codex", "gemini"] },
  }),
};
/** (c) The pipelined rate, as a multiple of the earlier JavaScript server's in the same rounds (issue 29). */
const PIPELINE_RATIO_TARGET = 2;

/**
 * (c) The model-visible listing: each tool's name, description and inputSchema as JSON, plus the instructions, in
 * bytes, from a server with the full listing, and the whole tools/list for scale.
 */
async function modelVisibleListing() {
  const s = new Server(FULL_LISTING_ENV);
  try {
    const instructions = (await s.initialize()).message.result.instructions;
    const { tools } = (await s.request("tools/list")).message.result;
    const visible = tools.map((tool) =>
      JSON.stringify({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema }),
    );
    const bytes = visible.reduce((sum, text) => sum + Buffer.byteLength(text), 0) + Buffer.byteLength(instructions);
    return {
      bytes,
      instructionsBytes: Buffer.byteLength(instructions),
      listingBytes: Buffer.byteLength(JSON.stringify({ tools })),
    };
  } finally {
    await s.close();
  }
}

/** (c) One round on a server: `count` tools/list written at once; requests per second until the last answer. */
async function pipelinedRound(s, count) {
  const firstId = s.nextId;
  const waiters = [];
  const lines = [];
  for (let k = 0; k < count; k += 1) {
    const id = firstId + k;
    waiters.push(s.expect(id, true));
    lines.push(`{"jsonrpc":"2.0","id":${id},"method":"tools/list"}\n`);
  }
  s.nextId = firstId + count;
  const payload = Buffer.from(lines.join(""), "utf8");
  const startedAt = now();
  const cpuBefore = procCpuMs(s.pid);
  await s.writeAll(payload);
  const answers = await withTimeout(Promise.all(waiters), 120_000, "pipelined tools/list");
  const lastAt = Math.max(...answers.map((a) => a.at));
  return {
    rate: (count / (lastAt - startedAt)) * 1000,
    cpuShare: (procCpuMs(s.pid) - cpuBefore) / (lastAt - startedAt),
    bytes: answers[answers.length - 1].bytes,
  };
}

/**
 * (c) pipelined tools/list with the full listing, all written at once, time until the last response; with
 * BENCH_REFERENCE_SERVER, the earlier JavaScript server's rate in the same rounds, alternating which goes first.
 */
export async function benchPipeline(rounds) {
  const visible = await modelVisibleListing();
  const ours = new Server(FULL_LISTING_ENV);
  const reference = REFERENCE_SERVER ? new Server({}, REFERENCE_SERVER) : undefined;
  const count = SIZES.pipelineRequests;
  const perRound = { rate: [], cpuShare: [], referenceRate: [], ratio: [] };
  let responseBytes = 0;
  let referenceBytes = 0;
  try {
    await ours.initialize();
    await reference?.initialize();
    // Round -1 warms both up and is not counted.
    for (let i = -1; i < rounds; i += 1) {
      const referenceFirst = reference !== undefined && i % 2 === 0;
      const theirs = referenceFirst ? await pipelinedRound(reference, count) : undefined;
      const mine = await pipelinedRound(ours, count);
      const later = reference && !referenceFirst ? await pipelinedRound(reference, count) : theirs;
      responseBytes = mine.bytes;
      if (i < 0) continue;
      perRound.rate.push(mine.rate);
      perRound.cpuShare.push(mine.cpuShare);
      if (later) {
        referenceBytes = later.bytes;
        perRound.referenceRate.push(later.rate);
        perRound.ratio.push(mine.rate / later.rate);
      }
    }
  } finally {
    await ours.close();
    await reference?.close();
  }
  const rate = median(perRound.rate);
  const ratio = reference ? median(perRound.ratio) : undefined;
  const referenceRate = reference ? median(perRound.referenceRate) : undefined;
  const detail =
    `${(count / rate).toFixed(2)} s per ${count}; ${responseBytes} bytes per response ` +
    `(${((rate * responseBytes) / 1048576).toFixed(0)} MiB/s); server busy ${(median(perRound.cpuShare) * 100).toFixed(0)}% ` +
    `of one core` +
    (reference
      ? `; the earlier JavaScript server, same rounds: ${Math.round(referenceRate)} req/s of ${referenceBytes} bytes`
      : "");
  return {
    rows: [
      {
        metric: `c  pipelined tools/list, full listing (${count} at once)`,
        value: reference
          ? `${Math.round(rate)} req/s, ${ratio.toFixed(2)}x the earlier server`
          : `${Math.round(rate)} req/s`,
        target: reference
          ? `>= ${PIPELINE_RATIO_TARGET}x the earlier server`
          : `(BENCH_REFERENCE_SERVER unset: no baseline)`,
        pass: reference ? ratio >= PIPELINE_RATIO_TARGET : undefined,
        detail,
      },
      {
        metric: "c  model-visible listing",
        value: `${visible.bytes} bytes`,
        target: `<= ${MODEL_VISIBLE_LIMIT_BYTES} bytes`,
        pass: visible.bytes <= MODEL_VISIBLE_LIMIT_BYTES,
        detail:
          `descriptions, input schemas and ${visible.instructionsBytes} bytes of instructions, with 3 agents and 2 ` +
          `hosts offered; ` +
          `the whole tools/list is ${visible.listingBytes} bytes`,
      },
    ],
    data: {
      requestsPerSecond: Math.round(rate),
      responseBytes,
      serverCpuShare: round2(median(perRound.cpuShare)),
      perRound: perRound.rate.map(Math.round),
      ...(reference
        ? {
            referenceRequestsPerSecond: Math.round(referenceRate),
            referenceResponseBytes: referenceBytes,
            ratioToReference: round2(ratio),
            referencePerRound: perRound.referenceRate.map(Math.round),
          }
        : {}),
      modelVisibleBytes: visible.bytes,
      listingBytes: visible.listingBytes,
    },
  };
}
