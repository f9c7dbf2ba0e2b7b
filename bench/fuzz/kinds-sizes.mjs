/**
 * Line kinds about size: deep nesting, lines over, at and just past the line limit (§1), and strings of
 * 1-2 MiB. Part of the fuzzer: bench/fuzz/kinds.mjs gathers the kinds.
 */
import { MISSING_DIR } from "./constants.mjs";

/* Line kinds. Each returns one line (string or Buffer), or an array of them for kinds that need several. */

const SIZE_KINDS = {
  deep(g) {
    const r = g.rng;
    const limit = g.env.maxLineBytes;
    // Arrays take 2 bytes a level, {"a": objects 6; stay under the line limit (the huge phase goes to 1e5).
    const maxArray = Math.min(100000, Math.floor((limit - 200) / 2));
    const maxObject = Math.min(100000, Math.floor((limit - 200) / 6));
    const depth = g.phase === "huge" ? 100000 : r.int(1000, maxArray);
    const odepth = g.phase === "huge" ? 100000 : r.int(1000, maxObject);
    const arr = "[".repeat(depth) + "]".repeat(depth);
    const obj = '{"a":'.repeat(odepth) + "1" + "}".repeat(odepth);
    const pick = r.pick(["arr", "obj", "params", "id", "stray-id", "stray-result", "notification", "argument", "method", "unbalanced", "objparams"]);
    switch (pick) {
      case "arr":
        return arr;
      case "obj":
        return obj;
      case "params":
        return `{"jsonrpc":"2.0","id":${g.fresh()},"method":"ping","params":{"deep":${arr}}}`;
      case "objparams":
        return `{"jsonrpc":"2.0","id":${g.fresh()},"method":"ping","params":${obj}}`;
      case "id":
        return `{"jsonrpc":"2.0","id":${arr},"method":"ping"}`;
      case "stray-id":
        return `{"jsonrpc":"2.0","id":${r.chance(0.5) ? arr : obj},"result":{}}`;
      case "stray-result":
        return `{"jsonrpc":"2.0","id":${g.fresh()},"result":${arr}}`;
      case "notification":
        return `{"jsonrpc":"2.0","method":"notifications/initialized","params":${obj}}`;
      case "argument":
        return `{"jsonrpc":"2.0","id":${g.fresh()},"method":"tools/call","params":{"name":"claude_wait","arguments":{"job_id":${arr}}}}`;
      case "method":
        return `{"jsonrpc":"2.0","id":${g.fresh()},"method":${arr}}`;
      default:
        return "[".repeat(depth);
    }
  },

  /** Over the limit: a request that would be valid (it must get nothing but -32600, id null), or garbage. */
  oversize(g) {
    const r = g.rng;
    const limit = g.env.maxLineBytes;
    const size = r.int(limit + 1, Math.max(limit + 1, Math.min(limit * 3, 200000)));
    const head = Buffer.from(`{"jsonrpc":"2.0","id":${g.fresh()},"method":"ping","params":{"pad":"`);
    const tail = Buffer.from('"}}');
    const fill = r.pick(["x", "é", "😀", " ", "\\u0000"]);
    const body = Buffer.alloc(Math.max(0, size - head.length - tail.length), fill);
    let line = r.pick([
      () => Buffer.concat([head, body, tail]),
      () => Buffer.concat([Buffer.alloc(size - 1, 0x20), Buffer.from("{")]),
      () => Buffer.alloc(size, r.pick([0x78, 0xff, 0x5b])),
    ])();
    // Keep clear of an accidental newline (0x0A never occurs in these fills) and cut to the exact size.
    if (line.length > size) line = line.subarray(0, size);
    return { line, early: r.chance(0.3), noCr: r.chance(0.5) };
  },

  /** Exactly at the limit: still a line; one byte more (a trailing \r counts) is not. */
  boundary(g) {
    const r = g.rng;
    const limit = g.env.maxLineBytes;
    const target = r.pick([limit, limit - 1, limit + 1]);
    const withCr = r.chance(0.5);
    const head = `{"jsonrpc":"2.0","id":${g.fresh()},"method":"ping","params":{"pad":"`;
    const tail = '"}}';
    const content = target - (withCr ? 1 : 0);
    const padLength = content - Buffer.byteLength(head) - tail.length;
    // Multi-byte fill where it fits, so the limit can fall inside a character.
    const twoByte = Math.floor(padLength / 2) * 2 === padLength && r.chance(0.5);
    const pad = twoByte ? "é".repeat(padLength / 2) : "x".repeat(padLength);
    return { line: Buffer.from(`${head}${pad}${tail}${withCr ? "\r" : ""}`), noCr: true };
  },

  /** ≥1 MiB inside params: in the main phase that is over the limit too. */
  hugeString(g) {
    const r = g.rng;
    const size = r.int(1 << 20, 2 << 20);
    const unit = r.pick(["x", "é😀中", "\\u0000\\ud800", "\\\"", " "]);
    const big = unit.repeat(Math.ceil(size / unit.length));
    const n = g.fresh();
    return r.pick([
      () => `{"jsonrpc":"2.0","id":${n},"method":"ping","params":{"data":"${big}"}}`,
      () => `{"jsonrpc":"2.0","id":"${big.slice(0, 1 << 20)}${n}","method":"ping"}`,
      () => `{"jsonrpc":"2.0","id":${n},"method":"${big}"}`,
      () => `{"jsonrpc":"2.0","id":${n},"method":"tools/call","params":{"name":"${big}","arguments":{}}}`,
      () => `{"jsonrpc":"2.0","id":${n},"method":"tools/call","params":{"name":"claude_wait","arguments":{"job_id":"${big}${n}"}}}`,
      () => `{"jsonrpc":"2.0","id":${n},"method":"tools/call","params":{"name":"claude_run","arguments":{"prompt":"${big}","cwd":"${MISSING_DIR}"}}}`,
      () => `{"jsonrpc":"2.0","id":${n},"method":"tools/call","params":{"name":"claude_run","arguments":{"prompt":"p","cwd":"/${big}"}}}`,
      () => `{"jsonrpc":"2.0","method":"notifications/initialized","params":{"data":"${big}"}}`,
      () => `{"jsonrpc":"2.0","id":"stray","result":"${big}"}`,
      () => `{"jsonrpc":"2.0","id":${n},"method":"ping","params":{"_meta":{"progressToken":"${big}"}}}`,
    ])();
  },
};

export { SIZE_KINDS };
