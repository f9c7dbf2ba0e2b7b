/**
 * Blocks: the mix of line kinds per phase, one block's lines with their expectations, and how it is
 * written. Part of the fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { BlockGen } from "./generators.mjs";
import { KINDS } from "./kinds.mjs";
import { expectLine, hasOwn, isRecord, keyedResult } from "./oracle.mjs";
import { hash32, Rng } from "./random.mjs";

const MAIN_MIX = [
  [18, "valid"],
  [22, "toolFuzz"],
  [3, "toolName"],
  [7, "invalidJson"],
  [3, "nonObject"],
  [3, "batch"],
  [4, "wrongJsonrpc"],
  [2, "badMethod"],
  [6, "idTypes"],
  [1, "twinIds"],
  [1.5, "members"],
  [7, "params"],
  [4, "unknownMethod"],
  [1.5, "deep"],
  [5, "strings"],
  [3, "blank"],
  [6, "notification"],
  [4, "stray"],
  [1.5, "cancelInFlight"],
  [0.8, "oversize"],
  [0.3, "boundary"],
  [0.1, "controlled"],
  [7, "modern"],
  [0.03, "hugeString"],
];

const HUGE_MIX = [
  [5, "hugeString"],
  [4, "deep"],
  [2, "valid"],
  [1, "strings"],
];

/** §4: the requests a notifications/cancelled can silence; it is ignored for any other. */
const CANCELLABLE_METHODS = new Set(["tools/call", "tasks/result", "tasks/cancel"]);

/**
 * One block: its lines with their expectations, and the sentinel ping. Every
 * block is generated from its own PRNG stream, so replaying block B needs
 * nothing from the blocks before it.
 */
export function generateBlock(seed, phase, block, env) {
  const rng = new Rng(hash32(seed, phase === "huge" ? 2 : 1, block));
  const g = new BlockGen(rng, env, phase, block);
  const mix = phase === "huge" ? HUGE_MIX : MAIN_MIX;
  const count = phase === "huge" ? rng.int(1, 4) : rng.weighted([[3, () => rng.int(1, 8)], [5, () => rng.int(8, 40)], [2, () => rng.int(40, 80)]])();
  const items = [];
  const keys = new Set();
  let lineCount = 0;
  while (lineCount < count) {
    const group = generateGroup(g, rng.weighted(mix), keys, env);
    items.push(...group);
    lineCount += group.length;
  }
  // §4: a cancellation that names a tools/call, tasks/result or tasks/cancel sent earlier
  // in the block may drop its response; it stays optional.
  const sentCalls = new Map();
  for (const item of items) {
    const exp = item.exp;
    if (exp.t === "id" && CANCELLABLE_METHODS.has(exp.method)) sentCalls.set(exp.key, item);
    if (exp.t === "none" && exp.cancels !== undefined && sentCalls.has(exp.cancels)) sentCalls.get(exp.cancels).optional = true;
  }
  const sentinelId = `sentinel-${phase}-${block}`;
  const sentinel = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: sentinelId, method: "ping" }));
  items.push({ kind: "sentinel", line: sentinel, exp: keyedResult(sentinelId, { r: "ping" }, "ping"), sentinel: true });
  return { phase, block, items, lines: lineCount, writeMode: pickWriteMode(rng, items) };
}

function generateGroup(g, kind, keys, env) {
  for (let attempt = 0; attempt < 10; attempt += 1) {
    let produced = KINDS[kind](g);
    let allowStart = false;
    let early = false;
    let noCr = false;
    if (isRecord(produced) && hasOwn(produced, "line")) {
      ({ allowStart = false, early = false, noCr = false } = produced);
      produced = produced.line;
    }
    const lines = Array.isArray(produced) ? produced : [produced];
    const group = [];
    const groupKeys = new Set();
    let ok = true;
    for (const value of lines) {
      let line = typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.isBuffer(value) ? value : Buffer.from(g.json(value), "utf8");
      if (line.includes(0x0a)) throw new Error(`generator bug: a ${kind} line holds a newline`);
      if (!noCr && g.rng.chance(0.12)) line = Buffer.concat([line, Buffer.from("\r")]);
      else if (!noCr && g.rng.chance(0.03)) line = Buffer.concat([Buffer.from(g.rng.pick([" ", "\t", "  "])), line, Buffer.from(g.rng.pick([" ", "\t "]))]);
      const exp = expectLine(line, env);
      if (exp.t === "id") {
        // Ids stay unique within a block (a duplicate in flight may rightly get two answers).
        if (keys.has(exp.key) || groupKeys.has(exp.key)) ok = false;
        groupKeys.add(exp.key);
        // No agent may start except the controlled "@sleep 0" runs.
        if (exp.check && exp.check.starts && !allowStart) ok = false;
      }
      group.push({ kind, line, exp, early: early && line.length > env.maxLineBytes });
    }
    if (!ok) continue;
    for (const key of groupKeys) keys.add(key);
    return group;
  }
  // Fall back to a plain ping with a fresh id.
  const line = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: `fallback-${g.fresh()}`, method: "ping" }));
  const exp = expectLine(line, env);
  keys.add(exp.key);
  return [{ kind: "fallback", line, exp }];
}

function pickWriteMode(rng, items) {
  let total = 0;
  for (const item of items) total += item.line.length + 1;
  const mode = rng.weighted([
    [55, "big"],
    [30, "mixed"],
    [15, total < 8192 ? "tiny" : "mixed"],
  ]);
  return { mode, split: rng.chance(0.4), pauses: rng.int(0, 3), seed: rng.int(0, 2 ** 31) };
}
