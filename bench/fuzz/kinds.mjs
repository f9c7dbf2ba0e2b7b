/**
 * The line kinds: each builds one line, or several, of one shape, valid or hostile. Part of the
 * fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { MISSING_DIR, MODERN_TASK_METHODS, TOOL_NAMES, VERSIONS } from "./constants.mjs";
import { cwdShaped, deepArray, toolArguments } from "./generators.mjs";
import {
  envelopeOptions, eraConfusion, modernCancelPair, modernControlled, modernMeta, modernRawLine, modernRequest,
  modernTaskMethod, modernToolCall, REMOVED_METHODS, removedMethodBody,
} from "./modern-lines.mjs";

/* Line kinds. Each returns one line (string or Buffer), or an array of them for kinds that need several. */

const KINDS = {
  valid(g) {
    const r = g.rng;
    return r.weighted([
      [3, () => g.request("initialize", { protocolVersion: r.pick([...VERSIONS, "1999-01-01", "", "2025-11-25 ", "latest"]), capabilities: {}, clientInfo: { name: "fuzz", version: "1" } })],
      [6, () => g.request("ping", r.pick([undefined, {}, { _meta: {} }, { _meta: { progressToken: `t${g.fresh()}` } }, { extra: [1, 2] }]))],
      [3, () => g.request("tools/list", r.pick([undefined, {}, { cursor: "abc" }, { cursor: 5 }]))],
      [3, () => g.toolCall("claude_list", r.pick([undefined, {}, null]))],
      [4, () => g.toolCall("claude_wait", { job_id: r.uuid(), hold_ms: 0 })],
      [3, () => g.toolCall("claude_output", { job_id: r.uuid(), view: r.pick(["result", "transcript"]) })],
      [2, () => g.toolCall("claude_kill", { job_id: r.uuid() })],
      [3, () => g.toolCall(r.pick(["claude_run", "claude_start"]), { prompt: "hello", cwd: r.pick([MISSING_DIR, "relative", g.env.file]) })],
    ])();
  },

  toolFuzz(g) {
    const r = g.rng;
    const tool = r.weighted([
      [6, "claude_run"],
      [5, "claude_start"],
      [5, "claude_wait"],
      [3, "claude_kill"],
      [2, "claude_list"],
      [4, "claude_output"],
      [3, "claude_respond"],
    ]);
    const args = r.weighted([
      [90, () => toolArguments(g, tool)],
      [3, () => undefined],
      [3, () => null],
      [4, () => r.pick([[], [1], "args", 5, true, g.raw("1e400")])],
    ])();
    const extra = r.chance(0.1) ? { _meta: r.pick([{}, { progressToken: `t${g.fresh()}` }, { progressToken: g.fresh() }, { other: 1 }]) } : {};
    // Members of params other than name, arguments, _meta and task mean nothing and are ignored; task is §14.
    if (r.chance(0.05)) extra[r.pick(["cursor", "foo", "Arguments", "task"])] = r.pick([1, "x", null, {}, { ttl: -1 }, { ttl: 1000 }]);
    return g.toolCall(tool, args, extra);
  },

  toolName(g) {
    const r = g.rng;
    const name = r.pick(["claude_Run", "", "claude_run ", " claude_list", "unknown_tool", "\ud800", "claude_list\u0000", "CLAUDE_LIST", "claude-run", "__proto__", "constructor", "hasOwnProperty", g.text(1, 30), 5, null, true, [], {}]);
    const params = r.weighted([
      [6, () => ({ name, arguments: {} })],
      [2, () => ({ name })],
      [1, () => ({ arguments: { job_id: "x" } })],
      [1, () => ({})],
      [2, () => ({ name: r.pick(TOOL_NAMES), arguments: r.pick([[], "x", 1, true, [{}]]) })],
    ])();
    return g.request("tools/call", params);
  },

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
    // The ids inside a batch must never be answered one by one: they are not registered, so an answer would be "never sent".
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

  cancelInFlight(g) {
    const r = g.rng;
    const id = g.fresh();
    const call = r.pick([
      () => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "claude_run", arguments: { prompt: "x", cwd: cwdShaped(g) } } }),
      () => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "claude_start", arguments: { prompt: "x", cwd: MISSING_DIR } } }),
      () => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "claude_wait", arguments: { job_id: r.uuid(), hold_ms: 100 } } }),
      () => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "claude_list" } }),
      () => ({ jsonrpc: "2.0", id, method: "ping" }),
    ])();
    const requestId = r.pick([id, id, id, String(id), id + 0.5]);
    const cancel = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId, reason: "fuzz" } };
    const lines = [call];
    if (r.chance(0.3)) lines.push(g.request("ping"));
    if (r.chance(0.15)) lines.unshift({ ...cancel });
    lines.push(cancel);
    return lines;
  },

  /** Rare real work through the fake agent: "@sleep 0" in a real temporary directory. */
  controlled(g) {
    const r = g.rng;
    const prompt = `@sleep 0\n${g.safeText()}`;
    const extra = r.chance(0.5) ? { _meta: { progressToken: r.chance(0.5) ? `tok-${g.fresh()}` : 7e14 + g.fresh() } } : {};
    if (r.chance(0.75)) {
      const args = { prompt, cwd: g.env.realDir };
      if (r.chance(0.3)) args.timeout_ms = 60000;
      // A plain fresh number: a cancelled run's late answer must never meet a reused id such as 0 or "".
      const run = g.toolCall("claude_run", args, extra, g.fresh());
      // §4: a cancelled run is killed and gets no response (its answer is optional: the run may win the race).
      if (r.chance(0.2)) return { line: [run, { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: run.id } }], allowStart: true };
      return { line: run, allowStart: true };
    }
    return { line: g.toolCall("claude_start", { prompt, cwd: g.env.realDir }, {}, g.fresh()), allowStart: true };
  },

  /** The 2026-07-28 era (§16): the envelope, its methods, the methods it lacks, the tasks extension, and look-alikes of the legacy era. */
  modern(g) {
    const r = g.rng;
    return r.weighted([
      [9, () => modernRequest(g, "server/discover", r.chance(0.15) ? { cursor: "x", extra: [1] } : {}, envelopeOptions(g))],
      [7, () => modernRequest(g, "tools/list", r.chance(0.3) ? { cursor: r.pick(["abc", "", null, 5, {}, []]) } : {}, envelopeOptions(g))],
      [28, () => modernToolCall(g)],
      [14, () => modernTaskMethod(g)],
      [10, () => {
        const method = r.pick(REMOVED_METHODS);
        return modernRequest(g, method, removedMethodBody(g, method), envelopeOptions(g, 0.05));
      }],
      // A refused envelope, whatever the method: nothing runs, not even with a real directory.
      [10, () => {
        const method = r.pick(["server/discover", "tools/list", "tools/call", ...MODERN_TASK_METHODS, "initialize", "ping", "tasks/list", "no/such"]);
        let body = {};
        if (method === "tools/call") body = { name: r.pick(TOOL_NAMES), arguments: { prompt: "x", cwd: r.pick([g.env.realDir, MISSING_DIR]) } };
        else if (method.startsWith("tasks/")) body = { taskId: r.uuid(), inputResponses: {} };
        return modernRequest(g, method, body, { ...envelopeOptions(g, 1), tasks: r.chance(0.5) });
      }],
      // Notifications never get a response, envelope or not, valid or not (§1, §16.3).
      [4, () => {
        const method = r.pick(["notifications/initialized", "notifications/cancelled", "notifications/progress", "tools/call", "server/discover", "tasks/cancel", "ping", "initialize"]);
        let params = {};
        if (method === "notifications/cancelled") params = { requestId: 9e14 + g.fresh() };
        else if (method === "notifications/progress") params = { progressToken: "x", progress: 1 };
        else if (method === "tools/call") params = { name: "claude_list" };
        params._meta = modernMeta(g, envelopeOptions(g, 0.3));
        return { jsonrpc: "2.0", method, params };
      }],
      [3, () => modernCancelPair(g)],
      [6, () => eraConfusion(g)],
      [3, () => modernRawLine(g)],
      [1.5, () => modernControlled(g)],
    ])();
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

function randomBytes(rng, length) {
  const bytes = Buffer.alloc(length);
  for (let i = 0; i < length; i += 1) {
    let byte = rng.int(0, 255);
    if (byte === 0x0a) byte = 0x0b;
    bytes[i] = byte;
  }
  return bytes;
}

export { KINDS };
