/** (b) sequential latency and (c) pipelined tools/list, with the model-visible listing. */
import { Server } from "../client.mjs";
import { SIZES, now, median, percentile, round2, withTimeout, procCpuMs } from "../shared.mjs";

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
      perRound[method].push({ p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), max: Math.max(...latencies) });
    }
  }
  await s.close();
  const rows = [];
  const data = {};
  for (const method of ["ping", "tools/list"]) {
    const p50 = median(perRound[method].map((r) => r.p50));
    const p99 = median(perRound[method].map((r) => r.p99));
    const micro = (ms) => Math.round(ms * 1000) / 1000;
    data[method] = { p50Ms: micro(p50), p99Ms: micro(p99), perRound: perRound[method].map((r) => ({ p50: micro(r.p50), p99: micro(r.p99), max: micro(r.max) })) };
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

/**
 * (c) The model-visible listing: each tool's name, description and inputSchema as JSON, plus the instructions, in
 * bytes, from a server offering every agent and two hosts (nothing is run on them), and the whole tools/list for scale.
 */
async function modelVisibleListing() {
  const hosts = {
    box: { ssh: "me@build-box", roots: ["/srv/repos", "/home/me/src"], agents: ["claude", "codex"] },
    gpu: { ssh: "gpu.example.org", roots: ["/data/work"], agents: ["claude", "codex", "gemini"] },
  };
  const s = new Server({ CLAUDE_DISPATCH_AGENTS: "claude,codex,gemini", CLAUDE_DISPATCH_HOSTS: JSON.stringify(hosts) });
  try {
    const instructions = (await s.initialize()).message.result.instructions;
    const { tools } = (await s.request("tools/list")).message.result;
    const visible = tools.map((tool) => JSON.stringify({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema }));
    const bytes = visible.reduce((sum, text) => sum + Buffer.byteLength(text), 0) + Buffer.byteLength(instructions);
    return { bytes, instructionsBytes: Buffer.byteLength(instructions), listingBytes: Buffer.byteLength(JSON.stringify({ tools })) };
  } finally {
    await s.close();
  }
}

/** (c) pipelined tools/list: all written at once, time until the last response. */
export async function benchPipeline(rounds) {
  const visible = await modelVisibleListing();
  const s = new Server();
  await s.initialize();
  const count = SIZES.pipelineRequests;
  const rates = [];
  const cpuShares = [];
  let responseBytes = 0;
  for (let i = -1; i < rounds; i += 1) {
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
    responseBytes = answers[answers.length - 1].bytes;
    // Round -1 warms the server up and is not counted.
    if (i >= 0) {
      rates.push((count / (lastAt - startedAt)) * 1000);
      cpuShares.push((procCpuMs(s.pid) - cpuBefore) / (lastAt - startedAt));
    }
  }
  await s.close();
  const rate = median(rates);
  return {
    rows: [
      {
        metric: `c  pipelined tools/list (${count} at once)`,
        value: `${Math.round(rate)} req/s`,
        target: ">= 10000 req/s",
        pass: rate >= 10_000,
        detail:
          `${(count / rate).toFixed(2)} s per ${count}; ${responseBytes} bytes per response ` +
            `(${((rate * responseBytes) / 1048576).toFixed(0)} MiB/s); ` +
          `server busy ${(median(cpuShares) * 100).toFixed(0)}% of one core`,
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
      serverCpuShare: round2(median(cpuShares)),
      perRound: rates.map(Math.round),
      modelVisibleBytes: visible.bytes,
      listingBytes: visible.listingBytes,
    },
  };
}
