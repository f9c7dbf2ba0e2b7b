/**
 * Line kinds about the envelope: broken JSON, values that are not objects, batches, wrong jsonrpc, method,
 * id and params members, duplicate members, unknown methods, notifications, stray responses, bad strings
 * and blank lines. Part of the fuzzer: bench/fuzz/kinds.mjs gathers the kinds.
 */
import { MISSING_DIR } from "./constants.mjs";
import { deepArray } from "./generators.mjs";

/* Line kinds. Each returns one line (string or Buffer), or an array of them for kinds that need several. */

const ENVELOPE_KINDS = {
  invalidJson(g) {
    const r = g.rng;
    const base = g.json(g.request(r.pick(["ping", "tools/list", "initialize"]), r.chance(0.5) ? { a: g.text(1, 20) } : undefined));
    return r.weighted([
      [6, () => base.slice(0, r.int(1, base.length - 1))],
      [3, () => `${base.slice(0, -1)},}`],
      [2, () => `[1,2,]`],
      [2, () => `${base}}`],
      [2, () => `${base} ${base}`],
      [2, () => `${base}x`],
      [4, () => r.pick(["{", "[", "}", "]", '"', "nul", "tru", "01", "+1", ".5", "-", "NaN", "Infinity", "-Infinity", "undefined", "{'a':1}", "{a:1}", "/*c*/{}", "{}//c", '{"a" 1}', "[]]", "'x'", '"\\x41"', '"\\u12"', '"\\uZZZZ"', "{,}", '{"a":1,,"b":2}', "0x10", "1e", "--1", "\u00a0{}", "\ufeff{}"])],
      [2, () => `{"jsonrpc":"2.0","id":${g.fresh()},"method":"pi\tng"}`],
      [2, () => `{"jsonrpc":"2.0","id":${g.fresh()},"method":"ping","x":"a\u0001b"}`],
      [3, () => randomBytes(r, r.int(1, 300))],
      [1, () => Buffer.from([0x00])],
    ])();
  },

  nonObject(g) {
    return g.rng.pick(["1", "-0", "1.5e3", '"str"', "null", "true", "false", '""', "1e400", "  42  ", '"{\\"jsonrpc\\":\\"2.0\\"}"', "0", "-1e-400"]);
  },

  batch(g) {
    const r = g.rng;
    // The ids inside a batch must never be answered one by one: they are not
    // registered, so an answer would be "never sent".
    const inner = () => JSON.stringify({ jsonrpc: "2.0", id: `batch-${g.fresh()}`, method: r.pick(["ping", "tools/list"]) });
    return r.pick(["[]", "[ ]", `[${inner()}]`, `[${inner()},${inner()}]`, "[1,2,3]", "[null]", "[[]]", '[{"jsonrpc":"2.0","method":"notifications/initialized"}]', `[${inner()}, 5]`]);
  },

  wrongJsonrpc(g) {
    const r = g.rng;
    const message = { id: r.weighted([[6, () => g.id()], [2, () => r.pick([null, true, {}, [], g.raw("1e400")])], [2, () => undefined]])() };
    if (message.id === undefined) delete message.id;
    const version = r.pick([undefined, "1.0", 2, g.raw("2.0"), null, "2", "2.0 ", "", ["2.0"], {}, true, "2.00"]);
    if (version !== undefined) message.jsonrpc = version;
    message.method = r.pick(["ping", "tools/list", "initialize", "tools/call", "notifications/initialized"]);
    if (r.chance(0.3)) message.params = { name: "claude_list" };
    return message;
  },

  badMethod(g) {
    const r = g.rng;
    const message = { jsonrpc: "2.0", method: r.pick([null, 5, true, [], {}, ["ping"], undefined]) };
    if (message.method === undefined) delete message.method;
    if (r.chance(0.85)) message.id = r.chance(0.8) ? g.id() : r.pick([null, {}, false]);
    if (r.chance(0.3)) message.params = {};
    return message;
  },

  idTypes(g) {
    const r = g.rng;
    const id = r.weighted([
      [8, () => g.id()],
      [2, () => 0],
      [2, () => ""],
      [1, () => g.raw("-0")],
      [1, () => g.raw(`${g.fresh()}.0`)],
      [1, () => g.raw("1e21")],
      [3, () => g.raw(r.pick(["1e400", "-1e400", "1e999"]))],
      [2, () => null],
      [2, () => r.pick([true, false])],
      [2, () => r.pick([{}, { a: 1 }, { id: 1 }])],
      [2, () => r.pick([[], [1], ["x"]])],
      [1, () => deepArray(r.int(2, 200))],
    ])();
    return g.request(r.pick(["ping", "tools/list", "nope/method", "tools/call"]), r.chance(0.5) ? { name: "claude_list" } : undefined, id);
  },

  /** Duplicate members (the last one wins, as JSON.parse has it) and member names spelled with escapes. */
  members(g) {
    const r = g.rng;
    const n = g.fresh();
    return r.pick([
      `{"jsonrpc":"2.0","id":${n},"method":"ping","method":"no/such"}`,
      `{"jsonrpc":"2.0","id":${n},"method":"no/such","method":"ping"}`,
      `{"jsonrpc":"1.0","jsonrpc":"2.0","id":${n},"method":"ping"}`,
      `{"jsonrpc":"2.0","jsonrpc":"1.0","id":${n},"method":"ping"}`,
      `{"jsonrpc":"2.0","id":null,"id":${n},"method":"ping"}`,
      `{"jsonrpc":"2.0","id":${n},"id":{},"method":"ping"}`,
      `{"json\u0072pc":"2.0","\u0069d":${n},"m\u0065thod":"p\u0069ng"}`,
      `{"jsonrpc":"2.0","id":"\u0072${n}","method":"tools/call","params":{"n\u0061me":"claude_list","arguments":{}}}`,
      `{"jsonrpc":"2.0","id":${n},"method":"tools/call","params":{"name":"claude_list","arguments":{},"arguments":[]}}`,
      `{"jsonrpc":"2.0","id":${n},"method":"tools/call","params":{"name":"claude_wait","arguments":{"job_id":5,"job_id":"j${n}"}}}`,
      `{"jsonrpc":"2.0","id":${n},"method":"ping","params":{"_meta":5,"_meta":{}}}`,
      `{"jsonrpc":"2.0","id":${n},"result":1,"method":"ping"}`,
      `{"jsonrpc":"2.0","id":${n},"method":"ping","jsonrpc":2}`,
    ]);
  },

  /** The same number as a number and as a string: two requests, two answers. */
  twinIds(g) {
    const n = g.fresh();
    return [g.request("ping", undefined, n), g.request("ping", undefined, String(n))];
  },

  params(g) {
    const r = g.rng;
    const method = r.pick(["initialize", "ping", "tools/list", "tools/call", "tools/call", "unknown/method", "resources/list"]);
    const params = r.weighted([
      [2, () => null],
      [2, () => r.pick([[], [1], ["ping"], [{}]])],
      [2, () => r.pick(["str", "", 0, 1.5, true, false, g.raw("1e400")])],
      [2, () => ({ _meta: r.pick([null, [], "x", 1, true, [{}]]) })],
      [3, () => ({ _meta: { progressToken: r.pick([{}, true, false, null, [], [1], g.raw("1e400"), g.raw("-1e400")]) } })],
      [3, () => ({ _meta: { progressToken: r.pick([`t${g.fresh()}`, g.fresh(), g.fresh() + 0.25, "", 0]) } })],
      [2, () => ({ _meta: { progressToken: `t${g.fresh()}`, extra: { deep: deepArray(30) } } })],
      [2, () => ({ protocolVersion: r.pick([5, null, [], {}, "2025-06-18", true]) })],
      [2, () => ({ name: r.pick(["claude_list", "claude_wait"]), arguments: r.pick([{}, null, { job_id: r.uuid() }]), _meta: r.pick([{}, undefined, { progressToken: 1 }]) })],
      [1, () => ({ big: "y".repeat(r.int(1000, 50000)) })],
      [1, () => "proto"],
    ])();
    if (params === "proto") return `{"jsonrpc":"2.0","id":${g.fresh()},"method":"${method}","params":{"__proto__":{"name":"claude_wait","_meta":5},"name":"claude_list"}}`;
    return g.request(method, params);
  },

  unknownMethod(g) {
    const r = g.rng;
    const method = r.pick([
      "foo", "", " ping", "ping ", "PING", "Ping", "tools/call/", "tools\u0000call", "tools/List", "resources/list", "resources/read",
      "prompts/list", "prompts/get", "logging/setLevel", "completion/complete", "sampling/createMessage", "roots/list",
      "notifications/initialized", "notifications/cancelled", "__proto__", "constructor", "toString", "hasOwnProperty",
      "\ud800", "😀", "initialize\r", "x".repeat(r.int(100, 5000)), g.text(1, 40),
    ]);
    return g.request(method, r.pick([undefined, {}, { name: "claude_list" }]));
  },

  notification(g) {
    const r = g.rng;
    return r.weighted([
      [4, () => ({ jsonrpc: "2.0", method: "notifications/initialized", ...(r.chance(0.5) ? { params: r.pick([{}, null, [], "x", { _meta: 5 }]) } : {}) })],
      [5, () => ({ jsonrpc: "2.0", method: "notifications/cancelled", params: r.pick([
        { requestId: 9e14 + g.fresh(), reason: "fuzz" },
        { requestId: `never-${g.fresh()}` },
        { requestId: null },
        { requestId: {} },
        { requestId: [1] },
        {},
        null,
        [],
        "x",
      ]) })],
      [1, () => ({ jsonrpc: "2.0", method: "notifications/cancelled" })],
      [2, () => ({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "x", progress: 1 } })],
      [2, () => ({ jsonrpc: "2.0", method: r.pick(["notifications/roots/list_changed", "foo", "", "ping", "initialize", "tools/list", "\ud800", "notifications/message"]) })],
      // Notifications never get a response, whatever their method: not even a tools/call (it must not run either).
      [2, () => ({ jsonrpc: "2.0", method: "tools/call", params: { name: "claude_list" } })],
      [1, () => ({ jsonrpc: "2.0", method: "ping", params: r.pick([null, [], 5, { _meta: "x" }, { _meta: { progressToken: {} } }]) })],
    ])();
  },

  stray(g) {
    const r = g.rng;
    const id = r.pick([g.fresh(), `s${g.fresh()}`, null, {}, [], true, 0]);
    const body = r.pick([{ result: {} }, { result: null }, { error: { code: -1, message: "x" } }, { error: null }, { result: 1, error: 2 }]);
    return r.weighted([
      [8, () => ({ jsonrpc: "2.0", id, ...body })],
      // Not stray responses by §1's rule 3: they break rule 4 or 5 and get -32600, echoing a usable id.
      [2, () => ({ id: g.id(), ...body })],
      [1, () => ({ jsonrpc: "1.0", id: g.id(), ...body })],
      [2, () => ({ jsonrpc: "2.0", id: g.id(), method: r.pick([null, 5]), ...body })],
      [1, () => ({ jsonrpc: "2.0", ...body })],
    ])();
  },

  /** NUL and lone surrogates as JSON escapes (handled by JSON.stringify) and raw invalid UTF-8. */
  strings(g) {
    const r = g.rng;
    const bad = () => Buffer.from(r.pick([[0xff], [0xfe], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf0, 0x9f, 0x98], [0xe2, 0x82], [0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc3]]));
    const n = g.fresh();
    return r.weighted([
      [3, () => g.request("ping", undefined, `nul\u0000-${n}-\ud800-\udc00\ud800`)],
      [2, () => g.request(`m\u0000${n}\udfff`)],
      [2, () => g.toolCall(`\ud800tool${n}`, {})],
      [3, () => g.toolCall(r.pick(["claude_wait", "claude_output", "claude_kill"]), { job_id: r.pick(["\u0000", "\ud800", `\udc00${n}`, "\u0000\u0000"]) })],
      [2, () => g.toolCall("claude_run", { prompt: `p\u0000\ud800${n}`, cwd: r.pick([MISSING_DIR, `${MISSING_DIR}/\ud800`, `/a\u0000b`]) })],
      [3, () => Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":"raw-${n}-`), bad(), Buffer.from('","method":"ping"}')])],
      [2, () => Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":${n},"method":"unknown`), bad(), Buffer.from('"}')])],
      [2, () => Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":${n},"method":"tools/call","params":{"name":"claude_wait","arguments":{"job_id":"`), bad(), Buffer.from('"}}}')])],
      [2, () => Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":${n},`), bad(), Buffer.from('"method":"ping"}')])],
      [1, () => Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":"raw-nul-${n}`), Buffer.from([0]), Buffer.from('","method":"ping"}')])],
      [1, () => Buffer.concat([bad(), Buffer.from(g.json(g.request("ping")))])],
      [1, () => `{"jsonrpc":"2.0","id":"esc-${n}-\\ud83d\\ude00-\\uDBFF\\uDFFF-\\u0000","method":"ping"}`],
    ])();
  },

  blank(g) {
    return g.rng.pick(["", " ", "\t", "   \t  ", "\r", " \r", "\u00a0", "\ufeff", "\u2028", "\u3000 "]);
  },
};

function randomBytes(rng, length) {
  const bytes = Buffer.alloc(length);
  for (let i = 0; i < length; i += 1) {
    let byte = rng.int(0, 255);
    if (byte === 0x0a) byte = 0x0b;
    bytes[i] = byte;
  }
  return bytes;
}

export { ENVELOPE_KINDS };
