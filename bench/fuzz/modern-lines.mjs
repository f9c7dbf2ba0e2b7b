/**
 * Lines of the 2026-07-28 era (§16): envelopes, valid and hostile, and the requests that carry them.
 * Part of the fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import {
  CAPABILITIES_KEY, MODERN_TASK_METHODS, MODERN_VERSION, TASKS_EXTENSION, VERSION_KEY, VERSIONS,
} from "./constants.mjs";
import { deepArray, setOwn, toolArguments, UNICODE_BITS } from "./generators.mjs";
import { hasOwn } from "./oracle.mjs";

/* The 2026-07-28 era (§16): envelopes, valid and hostile, and the requests that carry them. */

const ABSENT = Symbol("absent");

/** §16.3: not methods of that era (-32601), the legacy-only ones included, and near-misses of the real ones. */
const REMOVED_METHODS = [
  "initialize", "ping", "tasks/result", "tasks/list", "resources/list", "resources/read", "prompts/list", "prompts/get",
  "logging/setLevel", "completion/complete", "subscriptions/listen", "sampling/createMessage", "elicitation/create", "roots/list",
  "notifications/initialized", "notifications/cancelled", "notifications/progress", "notifications/tasks/status", "notifications/tasks",
  "server/Discover", "server/discover ", " tools/list", "tools/call/", "Tasks/get", "tasks/get\u0000", "tasks/delete", "__proto__", "constructor", "toString",
];

/** A version string this era does not serve: -32022 echoing it (§16.1). */
function unsupportedVersion(g) {
  const r = g.rng;
  return r.pick([
    ...VERSIONS, "", " ", "\t", `${MODERN_VERSION} `, ` ${MODERN_VERSION}`, `\t${MODERN_VERSION}\r`, `${MODERN_VERSION}\u0000`,
    "2026-07-29", "2026-7-28", "2026-07-28T00:00:00Z", "2027-01-01", "1900-01-01", "latest", "2026\u201007\u201028", "２０２６-０７-２８",
    "\ud800", `${MODERN_VERSION}\ud800`, `\udc00${MODERN_VERSION}`, r.pick(UNICODE_BITS), "x".repeat(r.int(100, 4000)), g.text(1, 30),
  ]);
}

/** A version key whose value is not a string: -32602 (§16.1). */
function versionOfWrongType(g) {
  return g.rng.pick([20260728, 2026, 0, -1, 1.5, g.raw("1e400"), g.raw("-0"), null, true, false, {}, { version: MODERN_VERSION }, [], [MODERN_VERSION], deepArray(g.rng.int(2, 40))]);
}

/** clientCapabilities that is not an object (or is missing): -32602 (§16.1). */
function hostileCapabilities(g) {
  return g.rng.pick([ABSENT, ABSENT, null, [], [{}], [{ extensions: { [TASKS_EXTENSION]: {} } }], "x", "", 0, 1, true, false]);
}

/** An object; it declares the tasks extension (an object under extensions) only when tasks is true (§16.1). */
function clientCapabilities(g, tasks) {
  const r = g.rng;
  const caps = {};
  if (tasks) {
    const extensions = {};
    setOwn(extensions, TASKS_EXTENSION, r.pick([{}, {}, { x: 1 }, { [TASKS_EXTENSION]: null }]));
    if (r.chance(0.2)) setOwn(extensions, r.pick(["io.modelcontextprotocol/ui", "x", "__proto__"]), r.pick([{}, null, 5]));
    caps.extensions = extensions;
  } else {
    const extension = r.pick([ABSENT, null, true, false, 1, "x", "", [], [{}]]);
    caps.extensions = r.pick([
      () => ABSENT,
      () => ({}),
      () => r.pick([null, true, 1, "io.modelcontextprotocol/tasks", [], [TASKS_EXTENSION], [{ [TASKS_EXTENSION]: {} }]]),
      () => (extension === ABSENT ? {} : { [TASKS_EXTENSION]: extension }),
      () => ({ [r.pick(["io.modelcontextprotocol/Tasks", "io.modelcontextprotocol/tasks ", "tasks", "modelcontextprotocol/tasks"])]: {} }),
      () => ({ "io.modelcontextprotocol/ui": {} }),
      () => {
        // An own "__proto__" member holding the extension is not the extension.
        const extensions = {};
        setOwn(extensions, "__proto__", { [TASKS_EXTENSION]: {} });
        return extensions;
      },
    ])();
    if (caps.extensions === ABSENT) delete caps.extensions;
    // The legacy tasks capability (§14) is not the extension.
    if (r.chance(0.15)) caps.tasks = r.pick([{}, { requests: { tools: { call: {} } } }]);
  }
  if (r.chance(0.2)) setOwn(caps, r.pick(["roots", "sampling", "elicitation", "experimental", "__proto__"]), r.pick([{}, { listChanged: true }, null, 1]));
  return caps;
}

/** Every type: a string or finite number is a token; anything else is -32602 before the envelope is read (§1). */
function anyProgressToken(g) {
  const r = g.rng;
  return r.weighted([
    [5, () => r.pick([`mt${g.fresh()}`, g.fresh(), g.fresh() + 0.5, -g.fresh(), "", 0])],
    [2, () => r.pick([null, true, false, {}, [], [1], { progressToken: 1 }, g.raw("1e400"), g.raw("-1e400")])],
  ])();
}

/**
 * _meta of a 2026-07-28 request. options: version, capabilities (ABSENT for
 * none), tasks (declare the extension), token (ABSENT for none); each
 * defaults to a valid, random choice.
 */
function modernMeta(g, options = {}) {
  const r = g.rng;
  // hasOwn, not ??: a null version or null capabilities is one of the hostile values.
  const entries = [[VERSION_KEY, hasOwn(options, "version") ? options.version : MODERN_VERSION]];
  const capabilities = hasOwn(options, "capabilities") ? options.capabilities : clientCapabilities(g, options.tasks ?? r.chance(0.6));
  if (capabilities !== ABSENT) entries.push([CAPABILITIES_KEY, capabilities]);
  // Neither is read (§16.1), whatever they hold.
  if (r.chance(0.3)) entries.push(["io.modelcontextprotocol/clientInfo", r.pick([{ name: "fuzz", version: "1" }, { name: r.pick(UNICODE_BITS) }, "x", null, 5, [], deepArray(r.int(2, 30))])]);
  if (r.chance(0.15)) entries.push(["io.modelcontextprotocol/logLevel", r.pick(["debug", "emergency", "nope", 3, null, {}])]);
  const token = options.token ?? (r.chance(0.25) ? anyProgressToken(g) : ABSENT);
  if (token !== ABSENT) entries.push(["progressToken", token]);
  if (r.chance(0.08)) entries.push([r.pick(["io.modelcontextprotocol/related-task", "io.modelcontextprotocol/protocolversion", "protocolVersion", "x", "", "__proto__"]), r.pick([{}, 1, MODERN_VERSION, null])]);
  const meta = {};
  for (const [key, value] of r.shuffle(entries)) setOwn(meta, key, value);
  return meta;
}

/** Mostly a valid envelope; at rate, one that is refused (§16.1). */
function envelopeOptions(g, rate = 0.12) {
  const r = g.rng;
  if (!r.chance(rate)) return {};
  return r.weighted([
    [4, () => ({ version: unsupportedVersion(g) })],
    [3, () => ({ version: versionOfWrongType(g) })],
    [3, () => ({ capabilities: hostileCapabilities(g) })],
    // The version is read first: an unsupported one is reported whatever else the envelope lacks.
    [2, () => ({ version: unsupportedVersion(g), capabilities: hostileCapabilities(g) })],
    [1, () => ({ version: versionOfWrongType(g), capabilities: hostileCapabilities(g) })],
  ])();
}

function modernRequest(g, method, body, metaOptions = {}, id = g.id()) {
  const params = {};
  const meta = modernMeta(g, metaOptions);
  if (g.rng.chance(0.5)) setOwn(params, "_meta", meta);
  for (const [key, value] of Object.entries(body)) setOwn(params, key, value);
  if (!hasOwn(params, "_meta")) setOwn(params, "_meta", meta);
  return g.request(method, params, id);
}

function modernToolCall(g) {
  const r = g.rng;
  const tool = r.weighted([[6, "claude_run"], [5, "claude_start"], [5, "claude_wait"], [3, "claude_kill"], [2, "claude_list"], [4, "claude_output"]]);
  const params = {};
  const name = r.weighted([[94, () => tool], [3, () => r.pick(["claude_Run", "", "unknown_tool", "claude_list ", "__proto__", "\ud800"])], [2, () => r.pick([5, null, [], {}, true])], [1, () => ABSENT]])();
  if (name !== ABSENT) params.name = name;
  const args = r.weighted([
    [84, () => toolArguments(g, tool)],
    [6, () => ({})],
    [4, () => ABSENT],
    [3, () => null],
    [3, () => r.pick([[], [1], "args", 5, true, g.raw("1e400")])],
  ])();
  if (args !== ABSENT) params.arguments = args;
  // §16.3: a `task` param means nothing in this era, valid or not.
  if (r.chance(0.1)) params.task = r.pick([{}, { ttl: 1000 }, { ttl: -1 }, 5, "x", null, []]);
  if (r.chance(0.03)) params[r.pick(["cursor", "foo", "Arguments"])] = r.pick([1, "x", null, {}]);
  return modernRequest(g, "tools/call", params, envelopeOptions(g));
}

/** tasks/get|update|cancel with ids the server never issued, of every type, with and without the extension (§16.4). */
function modernTaskMethod(g, method = g.rng.pick(MODERN_TASK_METHODS), id = g.id()) {
  const r = g.rng;
  const params = {};
  const taskId = r.weighted([
    [6, () => r.uuid()],
    [1, () => r.uuid(true)],
    [2, () => ABSENT],
    [3, () => r.pick([null, 5, 1.5, 0, true, {}, [], [r.uuid()], { taskId: r.uuid() }, g.raw("1e400")])],
    [2, () => r.pick(["", " ", "\u0000", "\ud800", `${r.uuid()} `, "../../etc/passwd", "*", "x".repeat(r.int(61, 2000)), g.text(1, 30)])],
  ])();
  if (taskId !== ABSENT) params.taskId = taskId;
  if (method === "tasks/update" ? r.chance(0.9) : r.chance(0.1)) {
    params.inputResponses = r.weighted([
      [6, () => r.pick([{}, { "req-1": { action: "accept", content: {} } }, { x: null }])],
      [3, () => r.pick([null, [], [{}], "x", 5, true])],
    ])();
  }
  return modernRequest(g, method, params, { ...envelopeOptions(g, 0.1), tasks: r.chance(0.75) }, id);
}

/** Params a removed method would take in the legacy era. */
function removedMethodBody(g, method) {
  const r = g.rng;
  if (method === "initialize") return { protocolVersion: r.pick([...VERSIONS, MODERN_VERSION, "1999-01-01"]), capabilities: {}, clientInfo: { name: "fuzz", version: "1" } };
  if (method === "tasks/result") return { taskId: r.uuid() };
  if (method === "tasks/list") return r.chance(0.5) ? {} : { cursor: r.pick(["", "MA", "abc"]) };
  if (method === "notifications/cancelled") return { requestId: 9e14 + g.fresh() };
  return r.chance(0.7) ? {} : { name: "claude_list" };
}

/**
 * Legacy tasks/list cursors (§14: one the server did not issue is -32602), among them "" and "MA"
 * (base64url of "0"), which decode to an offset the server never issues.
 */
const legacyCursor = (g) => g.rng.pick(["", "MA", " ", "abc", "MQ", "nope", 5, null, {}]);

/**
 * Requests that look like 2026-07-28 ones but are not (§2: only an own version key in _meta makes one): legacy answers.
 */
function eraConfusion(g) {
  const r = g.rng;
  const method = r.pick(["server/discover", "server/discover", "tools/list", "ping", "initialize", "tools/call", "tasks/get", "tasks/cancel", "tasks/result", "tasks/list"]);
  const params = {};
  if (method === "initialize") params.protocolVersion = r.pick([...VERSIONS, MODERN_VERSION]);
  if (method === "tools/call") Object.assign(params, { name: r.pick(["claude_list", "claude_wait"]), arguments: { job_id: r.uuid() } });
  if (method.startsWith("tasks/") && method !== "tasks/list") params.taskId = r.pick([r.uuid(), 5, null, ""]);
  if (method === "tasks/list" && r.chance(0.5)) params.cursor = legacyCursor(g);
  const meta = {};
  const capabilities = clientCapabilities(g, r.chance(0.5));
  r.pick([
    () => setOwn(meta, CAPABILITIES_KEY, capabilities),
    () => {
      setOwn(meta, "__proto__", { [VERSION_KEY]: MODERN_VERSION });
      setOwn(meta, CAPABILITIES_KEY, capabilities);
    },
    () => {
      setOwn(meta, r.pick(["io.modelcontextprotocol/protocolversion", "protocolVersion", `${VERSION_KEY} `, "modelcontextprotocol/protocolVersion"]), MODERN_VERSION);
      setOwn(meta, CAPABILITIES_KEY, capabilities);
    },
    () => {
      params[VERSION_KEY] = MODERN_VERSION;
      params[CAPABILITIES_KEY] = capabilities;
    },
    () => setOwn(meta, "progressToken", `mt${g.fresh()}`),
  ])();
  params._meta = meta;
  return g.request(method, params);
}

/** Duplicate members (the last wins) and keys or values spelled with escapes, written by hand. */
function modernRawLine(g) {
  const r = g.rng;
  const caps = `"${CAPABILITIES_KEY}":{}`;
  const meta = r.pick([
    `{"${VERSION_KEY}":5,"${VERSION_KEY}":"${MODERN_VERSION}",${caps}}`,
    `{"${VERSION_KEY}":"${MODERN_VERSION}","${VERSION_KEY}":"2025-11-25",${caps}}`,
    `{"${VERSION_KEY}":"${MODERN_VERSION}",${caps},"${CAPABILITIES_KEY}":null}`,
    `{"${VERSION_KEY}":"${MODERN_VERSION}","${CAPABILITIES_KEY}":{"extensions":{"io.modelcontextprotocol\\/tasks":{}}}}`,
    `{"io.modelcontextprotocol\\/protocolVersion":"${MODERN_VERSION}",${caps}}`,
    `{"\\u0069o.modelcontextprotocol/protocolVersion":"2026\\u002d07-28",${caps}}`,
    `{"${VERSION_KEY}":"\\ud800",${caps}}`,
    `{"${VERSION_KEY}":"2026-07-28\\u0000",${caps}}`,
    `{"${VERSION_KEY}":"${MODERN_VERSION}","${CAPABILITIES_KEY}":{"extensions":{"${TASKS_EXTENSION}":{}},"extensions":5}}`,
    `{"${VERSION_KEY}":"${MODERN_VERSION}","${CAPABILITIES_KEY}":{"extensions":5,"extensions":{"${TASKS_EXTENSION}":{}}}}`,
    `{"__proto__":{"${VERSION_KEY}":"${MODERN_VERSION}"},${caps}}`,
    `{"${VERSION_KEY}":"${MODERN_VERSION}",${caps},"progressToken":{},"progressToken":"mt${g.fresh()}"}`,
  ]);
  const [method, body] = r.pick([
    ["server/discover", ""],
    ["tools/list", ""],
    ["tasks/get", `"taskId":"${r.uuid()}",`],
    ["tasks/update", `"taskId":"${r.uuid()}","inputResponses":{},`],
    ["tools/call", `"name":"claude_list",`],
    ["ping", ""],
  ]);
  return `{"jsonrpc":"2.0","id":${g.fresh()},"method":"${method}","params":{${body}"_meta":${meta}}}`;
}

/**
 * A request and a notifications/cancelled for it. §4: only tools/call,
 * tasks/result and tasks/cancel can be cancelled; any other request is
 * answered whatever the cancellation, such as tasks/get and tasks/update
 * (2026-07-28) and tasks/get and tasks/list (legacy).
 */
function modernCancelPair(g) {
  const r = g.rng;
  const id = g.fresh();
  const extra = [
    () => modernTaskMethod(g, r.pick(["tasks/get", "tasks/update"]), id),
    () => g.request(r.pick(["tasks/get", "tasks/list"]), r.chance(0.5) ? { taskId: r.uuid() } : {}, id),
  ];
  const call = r.pick([
    () => modernRequest(g, "tools/call", { name: "claude_wait", arguments: { job_id: r.uuid(), hold_ms: 100 } }, {}, id),
    () => modernRequest(g, "tools/call", { name: "claude_kill", arguments: { job_id: r.uuid() } }, {}, id),
    () => modernRequest(g, "tools/call", { name: "claude_list" }, {}, id),
    () => modernTaskMethod(g, "tasks/cancel", id),
    () => modernRequest(g, "server/discover", {}, {}, id),
    ...extra,
  ])();
  const params = { requestId: id, reason: "fuzz" };
  // Notifications carry no envelope, but one that does is no different (§16.3).
  if (r.chance(0.3)) params._meta = modernMeta(g);
  return [call, { jsonrpc: "2.0", method: "notifications/cancelled", params }];
}

/** Real work through the fake agent: "@sleep 0" in a real directory, a task when the extension is declared (§16.4). */
function modernControlled(g) {
  const r = g.rng;
  const tool = r.chance(0.6) ? "claude_run" : "claude_start";
  const args = { prompt: `@sleep 0\n${g.safeText()}`, cwd: g.env.realDir };
  // Mostly at the 30 s line of §16.4: 30000 stays an ordinary call, 30001 becomes a task.
  // Never short: a loaded machine must not time a run out.
  if (tool === "claude_run" && r.chance(0.7)) args.timeout_ms = r.pick([30000, 30000, 30001, 30001, 60000]);
  // Fresh tokens only: a synchronous run may send progress for its token, a task handle never.
  const token = r.chance(0.5) ? `mtok-${g.fresh()}` : ABSENT;
  return { line: modernRequest(g, "tools/call", { name: tool, arguments: args }, { tasks: r.chance(0.6), token }, g.fresh()), allowStart: true };
}

export {
  envelopeOptions, eraConfusion, modernCancelPair, modernControlled, modernMeta, modernRawLine, modernRequest,
  modernTaskMethod, modernToolCall, REMOVED_METHODS, removedMethodBody,
};
