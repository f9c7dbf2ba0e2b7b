/**
 * The generator's building blocks: per-block state (BlockGen) and tool argument values, valid and not.
 * Part of the fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { ALLOWED_MODES, MISSING_DIR, REQUIRED_ARGS, TOOL_ARGS } from "./constants.mjs";

/* ------------------------------------------------------------------ *
 * The generator
 * ------------------------------------------------------------------ */

const RAW_MARK = /"\\u0007R(\d+)\\u0007"/g;
const UNICODE_BITS = ["é", "中文", "😀", "ß", "\u2028", "Ω≈ç√", "🇫🇷", "\u0301e", "ｗｉｄｅ"];

/** Per-block generation state: the block's PRNG, fresh ids, and raw-number markers for the line being built. */
class BlockGen {
  constructor(rng, env, phase, block) {
    this.rng = rng;
    this.env = env;
    this.phase = phase;
    this.block = block;
    this.counter = 0;
    this.raws = [];
  }

  /** A number never used before in this run: ids and tokens stay unique without a global counter. */
  fresh() {
    this.counter += 1;
    return this.block * 100000 + this.counter + (this.phase === "huge" ? 5e14 : 0);
  }

  /** A marker that json() replaces by raw JSON text: 1e400, -0, 1.0, 1e21 and the like. */
  raw(text) {
    this.raws.push(text);
    return `\u0007R${this.raws.length - 1}\u0007`;
  }

  json(value) {
    const text = JSON.stringify(value);
    return this.raws.length === 0 ? text : text.replace(RAW_MARK, (_, index) => this.raws[Number(index)]);
  }

  /** A fresh request id of a varied but valid type and spelling. */
  id() {
    const r = this.rng;
    const n = this.fresh();
    return r.weighted([
      [45, () => n],
      [14, () => `r${n}`],
      [6, () => `${r.pick(UNICODE_BITS)}-${n}-${r.pick(UNICODE_BITS)}`],
      [5, () => n + 0.5],
      [5, () => -n],
      [4, () => String(n)],
      [3, () => this.raw(r.pick([`${n}.0`, `${n}e0`, `${n}0e-1`, `${n}.000`, `${n}E+0`]))],
      [2, () => `\u0000${n}`],
      [2, () => `${n}\ud800`],
      [1, () => `\udfff${n}\ud83d`],
      [2, () => r.pick([0, "", this.raw("-0"), this.raw("1e21"), 1e-7, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, " ", "null", "1"])],
    ])();
  }

  text(min = 1, max = 40) {
    const r = this.rng;
    const length = r.int(min, max);
    let s = "";
    while (s.length < length) s += r.chance(0.15) ? r.pick(UNICODE_BITS) : String.fromCharCode(r.int(0x20, 0x7e));
    return s;
  }

  /** Text that can never hold a fake-agent directive: no "@", no newline. */
  safeText() {
    return this.text(1, 30).replace(/[@\n\r\u2028]/g, "_");
  }

  request(method, params, id = this.id()) {
    const message = { jsonrpc: "2.0", id, method };
    if (params !== undefined) message.params = params;
    return message;
  }

  toolCall(name, args, extra = {}, id = this.id()) {
    const params = { name, ...extra };
    if (args !== undefined) params.arguments = args;
    return this.request("tools/call", params, id);
  }
}

/* Argument values: valid ones (that still never start a job, since cwd is never a real directory) and invalid ones. */

function cwdShaped(g) {
  const r = g.rng;
  return r.weighted([
    [30, () => MISSING_DIR],
    [8, () => `${MISSING_DIR}/${g.fresh()}`],
    [5, () => `${MISSING_DIR}/${r.pick(UNICODE_BITS)}`],
    [3, () => `${MISSING_DIR}/\ud800/x`],
    [6, () => g.env.file],
    [3, () => `${g.env.file}/sub`],
    [3, () => "/dev/null"],
    [6, () => "relative/dir"],
    [3, () => r.pick([".", "..", "./x", "~", "~/src", "C:\\work", " /missing-dir-xyz", "src\\x"])],
    [2, () => `/${"a".repeat(r.int(256, 6000))}`],
    [2, () => `${MISSING_DIR}/${"b/".repeat(r.int(10, 900))}`],
  ])();
}

const VALID = {
  prompt: (g) => g.rng.pick(["hello", "  spaced  ", "@sleep 0", "fix the tests", "\u0000 nul inside", "lone \ud800 surrogate", g.text(1, 80), "x".repeat(g.rng.int(1, 3000))]),
  cwd: cwdShaped,
  session_id: (g) => g.rng.uuid(g.rng.chance(0.3)),
  timeout_ms: (g) => g.rng.pick([1000, 86_400_000, 5000, 120000, g.raw("1e3"), g.raw("120000.0"), g.rng.int(1000, 86_400_000)]),
  model: (g) => g.rng.pick(["sonnet", "opus", "claude-sonnet-4-5", "claude-opus-4-8[1m]", "us.anthropic.claude-3:0", "arn:aws:bedrock/x@y", "a".repeat(200)]),
  permission_mode: (g) => g.rng.pick([...ALLOWED_MODES, "bypassPermissions"]),
  allowed_tools: (g) => g.rng.pick([["Edit"], ["Bash(git log:*)", "Read"], ["mcp__server__tool"], Array(100).fill("Edit"), ["x".repeat(500)]]),
  disallowed_tools: (g) => g.rng.pick([["WebFetch"], ["Bash(rm:*)"], ["Edit", "Write"]]),
  max_turns: (g) => g.rng.pick([1, 10000, 5, g.raw("3.0")]),
  max_budget_usd: (g) => g.rng.pick([0.01, 10000, 5, 1e-9, 2.5]),
  append_system_prompt: (g) => g.rng.pick(["be brief", "x".repeat(g.rng.int(1, 2000)), "é😀"]),
  add_dirs: (g) => g.rng.pick([[MISSING_DIR], ["/tmp"], ["relative"], Array(20).fill(MISSING_DIR)]),
  job_id: (g) => g.rng.pick([g.rng.uuid(), g.rng.uuid(true), "nope", "😀", "\u0000", "\ud800", "x".repeat(g.rng.int(61, 500)), ` ${g.rng.uuid()} `, g.text(1, 20)]),
  hold_ms: (g) => g.rng.pick([0, 0, 0, 100, 60000, 1e9, Number.MAX_SAFE_INTEGER, g.raw("-0"), g.raw("0.0"), g.raw("1e2")]),
  view: (g) => g.rng.pick(["result", "transcript", "approvals"]),
  request_id: (g) => g.rng.pick(["1", "2", "999999999", 1, 7]),
  decision: (g) => g.rng.pick(["allow", "deny"]),
  message: (g) => g.rng.pick(["use a temp file", "", "  ", "\u0000", "\ud800", "x".repeat(2000), g.text(1, 80)]),
  offset: (g) => g.rng.pick([0, 5, Number.MAX_SAFE_INTEGER, g.raw("1e3")]),
  limit: (g) => g.rng.pick([1, 20000, 100]),
};

const WRONG_TYPES = (g) => g.rng.pick([0, 1, -1, 1.5, true, false, [], ["x"], {}, { a: 1 }, "", "x", g.raw("1e400"), g.raw("-1e400"), deepArray(g.rng.int(2, 50))]);

const INVALID = {
  prompt: (g) => g.rng.pick(["", "   ", "\n\t", "\u00a0", "\ufeff", "\u2028", WRONG_TYPES(g)]),
  cwd: (g) => g.rng.pick(["", "  ", "\t", `/tmp/a\u0000b`, `\u0000`, WRONG_TYPES(g)]),
  session_id: (g) => g.rng.pick(["not-a-uuid", "--resume", "--dangerously-skip-permissions", "", `${g.rng.uuid()}x`, ` ${g.rng.uuid()}`, g.rng.uuid().replaceAll("-", ""), "x".repeat(100), WRONG_TYPES(g)]),
  timeout_ms: (g) => g.rng.pick([999, 86_400_001, 1.5, -1, 0, "1000", g.raw("1e400"), g.raw("9e15"), WRONG_TYPES(g)]),
  model: (g) => g.rng.pick(["-x", "--dangerously-skip-permissions", "a b", "", "x".repeat(201), "model\n", "é", WRONG_TYPES(g)]),
  permission_mode: (g) => g.rng.pick(["Plan", "", "yolo", "default ", "bypass", WRONG_TYPES(g)]),
  allowed_tools: (g) => g.rng.pick([[], "Edit", ["-x"], [" Edit"], ["a\nb"], [5], [null], Array(101).fill("Edit"), ["x".repeat(501)], [""], {}, WRONG_TYPES(g)]),
  disallowed_tools: (g) => g.rng.pick([[], ["--x"], ["\tEdit"], "Bash", WRONG_TYPES(g)]),
  max_turns: (g) => g.rng.pick([0, 10001, 1.5, -3, "5", g.raw("1e400"), WRONG_TYPES(g)]),
  max_budget_usd: (g) => g.rng.pick([0, -1, 10000.5, "1", g.raw("1e400"), g.raw("-0"), WRONG_TYPES(g)]),
  append_system_prompt: (g) => g.rng.pick(["", " ", "a\u0000b", "x".repeat(100001), WRONG_TYPES(g)]),
  add_dirs: (g) => g.rng.pick([[], MISSING_DIR, [""], [" "], ["/a\u0000"], [5], [null], Array(21).fill(MISSING_DIR), WRONG_TYPES(g)]),
  job_id: (g) => g.rng.pick(["", "   ", "\t\n", "\u00a0", WRONG_TYPES(g)]),
  request_id: (g) => g.rng.pick(["0", "01", "-1", "1.5", "1e3", "", " 1", "1234567890", 0, -1, 1.5, g.raw("1e400"), WRONG_TYPES(g)]),
  decision: (g) => g.rng.pick(["Allow", "yes", "", "allow ", 1, true, WRONG_TYPES(g)]),
  message: (g) => g.rng.pick(["x".repeat(2001), 5, true, [], {}]),
  hold_ms: (g) => g.rng.pick([-1, 1.5, "0", g.raw("9007199254740992"), g.raw("1e400"), g.raw("1e300"), WRONG_TYPES(g)]),
  view: (g) => g.rng.pick(["RESULT", "", "both", "transcript ", WRONG_TYPES(g)]),
  offset: (g) => g.rng.pick([-1, 0.5, "0", g.raw("1e400"), WRONG_TYPES(g)]),
  limit: (g) => g.rng.pick([0, 20001, 1.5, -1, "10", WRONG_TYPES(g)]),
};

const EXTRA_KEYS = ["x", "", "_meta", "__proto__", "constructor", "toString", "Prompt", "job_id", "timeout_ms", "hold_ms", "prompt ", "😀", "\ud800", "cwd\u0000", "0", "10", "arguments", "name"];

/** An own property even for "__proto__", as JSON.parse makes it. */
function setOwn(object, key, value) {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
}

function deepArray(depth) {
  let value = [];
  for (let i = 1; i < depth; i += 1) value = [value];
  return value;
}

function toolArguments(g, tool) {
  const r = g.rng;
  const defectRate = r.pick([0, 0.05, 0.15, 0.4, 0.8]);
  const args = {};
  for (const key of TOOL_ARGS[tool]) {
    const required = REQUIRED_ARGS.has(key);
    const roll = r.float();
    if (required) {
      if (roll < defectRate * 0.15) continue; // missing
      if (roll < defectRate * 0.3) args[key] = null;
      else if (roll < defectRate) args[key] = INVALID[key](g);
      else args[key] = VALID[key](g);
    } else {
      if (roll < 0.6) continue;
      if (roll < 0.68) args[key] = null;
      else if (roll < 0.68 + 0.32 * defectRate) args[key] = INVALID[key](g);
      else args[key] = VALID[key](g);
    }
  }
  if (r.chance(0.12)) setOwn(args, r.pick(EXTRA_KEYS), r.chance(0.5) ? null : WRONG_TYPES(g));
  const keys = r.shuffle(Object.keys(args));
  const shuffled = {};
  for (const key of keys) setOwn(shuffled, key, args[key]);
  return shuffled;
}

export { BlockGen, cwdShaped, deepArray, setOwn, toolArguments, UNICODE_BITS };
