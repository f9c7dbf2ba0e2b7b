/**
 * Hostile-input fuzzer for claude-dispatch: a seeded generator of JSON-RPC
 * lines (valid, malformed and hostile), an oracle that derives from
 * PROTOCOL.md §1, §2, §4, §5, §9, §14 and §16 (the 2026-07-28 era: line kind
 * "modern") what the server must answer to each line, and a runner that
 * drives the BUILT server (dist/main.js) over stdio and checks every frame it
 * writes. Plain Node ESM, built-ins only.
 *
 * Lines go out in blocks; each block ends with a sentinel `ping`. The next
 * block is sent only once the sentinel and every response the block must get
 * have arrived, so expectations are kept per block and dropped once verified
 * (memory stays bounded however long the run). Every block has its own PRNG
 * stream (mulberry32 seeded from seed, phase and block index), so any block
 * can be regenerated and replayed on its own.
 *
 * Two phases, each with its own server process:
 *   main  CLAUDE_DISPATCH_MAX_LINE_BYTES=65536: the whole mix, lines over the
 *         limit included;
 *   huge  the default 16 MiB limit: strings of 1-2 MiB and 1e5-deep nesting,
 *         which would not fit under 64 KiB.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));
export const DEFAULT_SERVER = path.join(REPO_ROOT, "dist", "main.js");
export const FAKE_CLAUDE = path.join(REPO_ROOT, "test", "fixtures", "fake-claude.mjs");

export const MAIN_LINE_LIMIT = 65536;
/** The server's default (PROTOCOL.md §11), used by the huge phase, which leaves the variable unset. */
export const DEFAULT_LINE_LIMIT = 16 * 1024 * 1024;
export const OVERSIZE_MESSAGE = "Invalid Request: line exceeds the maximum length";

const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const METHOD_NOT_FOUND = -32601;
const INVALID_PARAMS = -32602;
/** §16.1, §16.4: answered only to 2026-07-28 requests. */
const MISSING_CAPABILITY = -32021;
const UNSUPPORTED_VERSION = -32022;
/** The codes of §9's JSON-RPC table. */
const KNOWN_CODES = new Set([-32700, -32600, -32601, -32602, -32603, MISSING_CAPABILITY, UNSUPPORTED_VERSION]);

const TOOL_NAMES = ["claude_run", "claude_start", "claude_wait", "claude_kill", "claude_list", "claude_output", "claude_respond", "claude_worktree", "claude_sessions"];
const VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const AGENT_OPTIONS = ["model", "permission_mode", "allowed_tools", "disallowed_tools", "max_turns", "max_budget_usd", "append_system_prompt", "add_dirs"];
const TOOL_ARGS = {
  claude_run: ["prompt", "cwd", "session_id", "timeout_ms", ...AGENT_OPTIONS],
  claude_start: ["prompt", "cwd", "session_id", ...AGENT_OPTIONS],
  claude_wait: ["job_id", "hold_ms"],
  claude_kill: ["job_id"],
  claude_list: [],
  claude_output: ["job_id", "view", "offset", "limit"],
  claude_respond: ["job_id", "request_id", "decision", "message"],
};
const REQUIRED_ARGS = new Set(["prompt", "cwd", "job_id", "request_id", "decision"]);
const PERMISSION_MODES = ["default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"];
/** The default policy: every mode but bypassPermissions (§5.6). */
const ALLOWED_MODES = PERMISSION_MODES.filter((mode) => mode !== "bypassPermissions");
const MAX_RESULT_CHARS = 20000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MISSING_DIR = "/missing-dir-xyz";

/* The 2026-07-28 era (§16). */
const MODERN_VERSION = "2026-07-28";
const VERSION_KEY = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo";
const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
const MODERN_TASK_METHODS = ["tasks/get", "tasks/update", "tasks/cancel"];
/** §16.4: a claude_run whose timeout is at most this stays an ordinary call; the default (§5.1, 120 s) makes a task. */
const SYNCHRONOUS_RUN_MAX_TIMEOUT_MS = 30000;
const LISTING_TTL_MS = 3600000;
const SERVER_VERSION = JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")).version;

/* ------------------------------------------------------------------ *
 * PRNG
 * ------------------------------------------------------------------ */

export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function hash32(...parts) {
  let h = 0x811c9dc5;
  for (const part of parts) {
    let x = Math.floor(Number(part)) >>> 0;
    const hi = Math.floor(Number(part) / 4294967296) >>> 0;
    for (const word of [x, hi]) {
      x = word;
      h = Math.imul(h ^ x, 0x01000193) >>> 0;
      h ^= h >>> 15;
      h = Math.imul(h, 0x85ebca6b) >>> 0;
      h ^= h >>> 13;
    }
  }
  return h >>> 0;
}

export class Rng {
  constructor(seed) {
    this.next = mulberry32(seed);
  }
  float() {
    return this.next();
  }
  /** Integer in [lo, hi], inclusive. */
  int(lo, hi) {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p) {
    return this.next() < p;
  }
  pick(list) {
    return list[Math.floor(this.next() * list.length)];
  }
  /** entries: [weight, value][] */
  weighted(entries) {
    let total = 0;
    for (const [weight] of entries) total += weight;
    let x = this.next() * total;
    for (const [weight, value] of entries) {
      x -= weight;
      if (x < 0) return value;
    }
    return entries[entries.length - 1][1];
  }
  /** Log-uniform integer in [lo, hi]. */
  logInt(lo, hi) {
    return Math.min(hi, Math.floor(Math.exp(Math.log(lo) + this.next() * (Math.log(hi + 1) - Math.log(lo)))));
  }
  shuffle(list) {
    for (let i = list.length - 1; i > 0; i -= 1) {
      const j = Math.floor(this.next() * (i + 1));
      [list[i], list[j]] = [list[j], list[i]];
    }
    return list;
  }
  uuid(upper = false) {
    const hex = "0123456789abcdef";
    let s = "";
    for (let i = 0; i < 32; i += 1) s += hex[this.int(0, 15)];
    const id = `${s.slice(0, 8)}-${s.slice(8, 12)}-4${s.slice(13, 16)}-a${s.slice(17, 20)}-${s.slice(20, 32)}`;
    return upper ? id.toUpperCase() : id;
  }
}

/* ------------------------------------------------------------------ *
 * The oracle: what PROTOCOL.md says must come back for one line
 * ------------------------------------------------------------------ */

const hasOwn = (object, key) => Object.prototype.hasOwnProperty.call(object, key);
const isRecord = (value) => typeof value === "object" && value !== null && !Array.isArray(value);
const isRequestId = (value) => typeof value === "string" || (typeof value === "number" && Number.isFinite(value));
/** Ids are compared by type and value (§1): "1" and 1 differ, 1.0 and 1 do not. */
export const idKey = (id) => JSON.stringify(id);

const NONE = Object.freeze({ t: "none" });
const nullError = (code, tag = "other") => ({ t: "null", code, tag });
/** detail: what else the error must carry: data (compared as JSON), message (exactly) or messagePrefix. */
const keyedError = (id, code, method, detail) => ({ t: "id", key: idKey(id), id, code, method, ...detail });
const keyedResult = (id, check, method) => ({ t: "id", key: idKey(id), id, check, method });
const errorEchoing = (id, code, method) => (id === null ? nullError(code) : keyedError(id, code, method));

/**
 * env: { maxLineBytes, dirKind(path) -> "dir" | "missing" | "file" | "other" }
 * Returns { t: "none" } (no response), { t: "null", code, tag } (one error with
 * id null), or { t: "id", key, id, code | check } (one response carrying id).
 */
export function expectLine(line, env) {
  // §1: a line longer than the limit (a trailing \r counts) gets -32600 with id null, nothing else.
  if (line.length > env.maxLineBytes) return nullError(INVALID_REQUEST, "oversize");
  let text = line.toString("utf8");
  if (text.endsWith("\r")) text = text.slice(0, -1);
  if (text.trim() === "") return NONE;
  let message;
  try {
    message = JSON.parse(text);
  } catch {
    return nullError(PARSE_ERROR, "parse");
  }
  return classify(message, env);
}

/** §1 "Classification", then the params rules, then §2 and §5, or §16 for a 2026-07-28 request. */
export function classify(message, env) {
  if (Array.isArray(message)) return nullError(INVALID_REQUEST);
  if (!isRecord(message)) return nullError(INVALID_REQUEST);
  const hasMethod = hasOwn(message, "method");
  const hasId = hasOwn(message, "id");
  if (message.jsonrpc === "2.0" && !hasMethod && hasId && (hasOwn(message, "result") || hasOwn(message, "error"))) return NONE;
  const echo = isRequestId(message.id) ? message.id : null;
  if (message.jsonrpc !== "2.0") return errorEchoing(echo, INVALID_REQUEST);
  if (typeof message.method !== "string") return errorEchoing(echo, INVALID_REQUEST);
  const method = message.method;
  if (!hasId) {
    if (method === "notifications/cancelled" && isRecord(message.params) && isRequestId(message.params.requestId)) {
      return { t: "none", cancels: idKey(message.params.requestId) };
    }
    return NONE;
  }
  if (echo === null) return nullError(INVALID_REQUEST);
  const id = echo;
  if (hasOwn(message, "params")) {
    const params = message.params;
    if (!isRecord(params)) return keyedError(id, INVALID_PARAMS, method);
    if (hasOwn(params, "_meta")) {
      const meta = params._meta;
      if (!isRecord(meta)) return keyedError(id, INVALID_PARAMS, method);
      if (hasOwn(meta, "progressToken") && !isRequestId(meta.progressToken)) return keyedError(id, INVALID_PARAMS, method);
    }
  }
  const params = isRecord(message.params) ? message.params : {};
  // §2: the protocol version key in _meta (an own member) makes the request one of the 2026-07-28 era.
  if (isRecord(params._meta) && hasOwn(params._meta, VERSION_KEY)) return classifyModern(id, method, params, env);
  switch (method) {
    case "initialize": {
      const version = params.protocolVersion;
      if (typeof version !== "string") return keyedError(id, INVALID_PARAMS, method);
      return keyedResult(id, { r: "initialize", version: VERSIONS.includes(version) ? version : VERSIONS[0] }, method);
    }
    case "ping":
      return keyedResult(id, { r: "ping" }, method);
    case "tools/list":
      // The server issues no cursor, so any cursor is an invalid one (§2).
      if (params.cursor !== undefined) return keyedError(id, INVALID_PARAMS, method);
      return keyedResult(id, { r: "tools/list" }, method);
    case "tools/call":
      if (!hasOwn(message, "params")) return keyedError(id, INVALID_PARAMS, method);
      return classifyToolCall(id, params, env, undefined);
    case "server/discover":
      // §2: a 2026-07-28 method sent without the envelope is a malformed request of that era.
      return keyedError(id, INVALID_PARAMS, method, { messagePrefix: "server/discover requires" });
    case "tasks/get":
    case "tasks/result":
    case "tasks/cancel":
      // §14: the fuzzer never creates a legacy task (no tools/call with `task` ever starts a job), so every id is unknown.
      return taskIdProblem(id, method, params) ?? keyedError(id, INVALID_PARAMS, method, { message: taskNotFound(params.taskId) });
    case "tasks/list":
      // §14: no legacy task ever exists here, so the list is empty and no cursor was ever issued.
      if (params.cursor !== undefined) return keyedError(id, INVALID_PARAMS, method);
      return keyedResult(id, { r: "tasks/list" }, method);
    default:
      return keyedError(id, METHOD_NOT_FOUND, method);
  }
}

/** §5, and §14 for a legacy `task`; modern is the request's 2026-07-28 envelope ({tasksExtension}) or undefined. */
function classifyToolCall(id, params, env, modern) {
  const method = "tools/call";
  const name = params.name;
  if (typeof name !== "string") return keyedError(id, INVALID_PARAMS, method);
  const rawArgs = params.arguments;
  if (rawArgs !== undefined && rawArgs !== null && !isRecord(rawArgs)) return keyedError(id, INVALID_PARAMS, method);
  if (!TOOL_NAMES.includes(name)) return keyedError(id, INVALID_PARAMS, method);
  // §14: `task` asks for a task; only claude_run and claude_start support it. §16.3: in 2026-07-28 it means nothing.
  if (!modern && params.task !== undefined) {
    const ttl = isRecord(params.task) ? params.task.ttl : undefined;
    if (!isRecord(params.task) || (ttl !== undefined && !(typeof ttl === "number" && Number.isFinite(ttl) && ttl >= 0))) return keyedError(id, INVALID_PARAMS, method);
    if (name !== "claude_run" && name !== "claude_start") return keyedError(id, METHOD_NOT_FOUND, method);
  }
  const args = isRecord(rawArgs) ? rawArgs : {};
  const meta = isRecord(params._meta) ? params._meta : {};
  let check = toolOracle(name, args, env);
  if (modern) {
    // §16.4: with the extension declared, claude_start always becomes a task, claude_run when its timeout passes 30 s.
    const timeout = present(args, "timeout_ms") ? args.timeout_ms : Infinity;
    if (check.starts && modern.tasksExtension && (name === "claude_start" || timeout > SYNCHRONOUS_RUN_MAX_TIMEOUT_MS)) check = { r: "task", tool: name, starts: "task" };
    check.modern = true;
  }
  // A task handle's token ends with its request: starts "task" allows no progress (§16.4).
  if (hasOwn(meta, "progressToken")) check.token = idKey(meta.progressToken);
  return keyedResult(id, check, method);
}

/**
 * §10: how every message echoes a value the caller sent: its first 60 characters (59 rather than split a
 * surrogate pair), "…" when cut, as a JSON string, with C1 controls, U+2028 and U+2029 escaped as well.
 */
export function echoed(value, max = 60) {
  let end = Math.min(max, value.length);
  if (end < value.length && end > 0 && /[\ud800-\udbff]/.test(value[end - 1]) && /[\udc00-\udfff]/.test(value[end])) end -= 1;
  const cut = end < value.length ? `${value.slice(0, end)}…` : value;
  return JSON.stringify(cut).replace(/[\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

const taskNotFound = (taskId) => `Failed to retrieve task: Task not found: ${echoed(taskId)}`;

/** §14, §16.4: params.taskId must be a string. */
function taskIdProblem(id, method, params) {
  return typeof params.taskId === "string" ? undefined : keyedError(id, INVALID_PARAMS, method);
}

/**
 * §16: a request whose _meta holds the protocol version key, after the checks
 * of §1. The envelope (§16.1: version type, version, capabilities, in that
 * order), then the methods of §16.3; everything else is -32601.
 */
function classifyModern(id, method, params, env) {
  const meta = params._meta;
  const version = meta[VERSION_KEY];
  if (typeof version !== "string") return keyedError(id, INVALID_PARAMS, method);
  if (version !== MODERN_VERSION) {
    return keyedError(id, UNSUPPORTED_VERSION, method, { message: "Unsupported protocol version", data: { supported: [MODERN_VERSION], requested: version } });
  }
  const capabilities = meta[CAPABILITIES_KEY];
  if (!isRecord(capabilities)) return keyedError(id, INVALID_PARAMS, method);
  // §16.1: the one capability read is clientCapabilities.extensions["io.modelcontextprotocol/tasks"], an object.
  const extensions = capabilities.extensions;
  const tasksExtension = isRecord(extensions) && isRecord(extensions[TASKS_EXTENSION]);
  switch (method) {
    case "server/discover":
      return keyedResult(id, { r: "discover", modern: true }, method);
    case "tools/list":
      if (params.cursor !== undefined) return keyedError(id, INVALID_PARAMS, method);
      return keyedResult(id, { r: "tools/list", modern: true }, method);
    case "tools/call":
      return classifyToolCall(id, params, env, { tasksExtension });
    case "tasks/get":
    case "tasks/update":
    case "tasks/cancel": {
      // §16.4: the extension must be declared on this very request, before anything else is looked at.
      if (!tasksExtension) {
        return keyedError(id, MISSING_CAPABILITY, method, {
          messagePrefix: "Missing required client capability",
          data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
        });
      }
      const problem = taskIdProblem(id, method, params);
      if (problem) return problem;
      if (method === "tasks/update" && !isRecord(params.inputResponses)) return keyedError(id, INVALID_PARAMS, method);
      // The generator never sends the id of a real job to these.
      return keyedError(id, INVALID_PARAMS, method, { message: taskNotFound(params.taskId) });
    }
    default:
      // §16.3: initialize, ping, tasks/result, tasks/list and every method not of this era.
      return keyedError(id, METHOD_NOT_FOUND, method);
  }
}

function describeType(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

const present = (args, key) => args[key] !== undefined && args[key] !== null;
const isIntegerIn = (value, lo, hi) => typeof value === "number" && Number.isInteger(value) && value >= lo && value <= hi;
const invalidArgument = (tool, mention) => ({ r: "tool", tool, code: "INVALID_ARGUMENT", mention });

/** §5.6 model: 1-200 characters of letters, digits and . _ : / @ [ ] -, not starting with "-". */
const validModel = (value) => typeof value === "string" && /^[A-Za-z0-9._:/@[\]-]{1,200}$/.test(value) && !value.startsWith("-");
/** §5.6 tool rule: one line, at most 500 characters, not starting with "-" or a space. */
const validToolRule = (value) =>
  typeof value === "string" && value.length >= 1 && value.length <= 500 && !/[\r\n]/.test(value) && !/^[-\s]/.test(value);

/** §5: the arguments one at a time in the documented order; the first problem is reported. */
export function toolOracle(tool, args, env) {
  // §5.5: on status "error", job_id is present only if the arguments held a string job_id, and echoes it.
  // Only a well-formed job id is echoed in structuredContent.job_id (§5.5): never a malformed or huge one.
  const jobEcho = typeof args.job_id === "string" && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(args.job_id) ? args.job_id : undefined;
  const allowed = TOOL_ARGS[tool];
  for (const key of Object.keys(args)) {
    if (!allowed.includes(key)) return { ...invalidArgument(tool, `unknown argument ${echoed(key)}`), echo: jobEcho };
  }
  switch (tool) {
    case "claude_run":
    case "claude_start": {
      const prompt = args.prompt;
      // §5: an absent or null required argument is "required", not a wrong type.
      if (!present(args, "prompt")) return invalidArgument(tool, `"prompt" is required`);
      if (typeof prompt !== "string") return invalidArgument(tool, `"prompt" must be a string, got ${describeType(prompt)}`);
      if (prompt.trim() === "") return invalidArgument(tool, `"prompt" must not be empty`);
      const cwd = args.cwd;
      if (!present(args, "cwd")) return invalidArgument(tool, `"cwd" is required`);
      if (typeof cwd !== "string") return invalidArgument(tool, `"cwd" must be a string, got ${describeType(cwd)}`);
      if (cwd.trim() === "") return invalidArgument(tool, `"cwd" must not be empty`);
      if (cwd.includes("\0")) return invalidArgument(tool, `"cwd" must not contain NUL`);
      if (present(args, "session_id") && !(typeof args.session_id === "string" && UUID.test(args.session_id))) {
        return invalidArgument(tool, `"session_id"`);
      }
      if (tool === "claude_run" && present(args, "timeout_ms") && !isIntegerIn(args.timeout_ms, 1000, 86_400_000)) {
        return invalidArgument(tool, `"timeout_ms"`);
      }
      if (present(args, "model") && !validModel(args.model)) return invalidArgument(tool, `"model"`);
      if (present(args, "permission_mode") && !PERMISSION_MODES.includes(args.permission_mode)) return invalidArgument(tool, `"permission_mode"`);
      for (const key of ["allowed_tools", "disallowed_tools"]) {
        if (!present(args, key)) continue;
        const rules = args[key];
        if (!Array.isArray(rules) || rules.length === 0 || rules.length > 100 || !rules.every(validToolRule)) return invalidArgument(tool, `"${key}"`);
      }
      if (present(args, "max_turns") && !isIntegerIn(args.max_turns, 1, 10000)) return invalidArgument(tool, `"max_turns"`);
      if (present(args, "max_budget_usd")) {
        const budget = args.max_budget_usd;
        if (!(typeof budget === "number" && Number.isFinite(budget) && budget > 0 && budget <= 10000)) return invalidArgument(tool, `"max_budget_usd"`);
      }
      if (present(args, "append_system_prompt")) {
        const text = args.append_system_prompt;
        if (!(typeof text === "string" && text.trim() !== "" && !text.includes("\0") && text.length <= 100000)) {
          return invalidArgument(tool, `"append_system_prompt"`);
        }
      }
      if (present(args, "add_dirs")) {
        const dirs = args.add_dirs;
        const entryOk = (entry) => typeof entry === "string" && entry.trim() !== "" && !entry.includes("\0");
        if (!Array.isArray(dirs) || dirs.length === 0 || dirs.length > 20 || !dirs.every(entryOk)) return invalidArgument(tool, `"add_dirs"`);
      }
      // §5.1 step 1: the policy comes after the arguments and before the directories.
      if (present(args, "permission_mode") && !ALLOWED_MODES.includes(args.permission_mode)) return { r: "tool", tool, code: "POLICY_DENIED" };
      const cwdProblem = directoryProblem(cwd, "cwd", env);
      if (cwdProblem) return invalidArgument(tool, cwdProblem);
      if (present(args, "add_dirs")) {
        for (const [index, dir] of args.add_dirs.entries()) {
          const problem = directoryProblem(dir, `add_dirs[${index}]`, env);
          if (problem) return invalidArgument(tool, problem);
        }
      }
      // Everything passed: a job starts. The generator allows this only for its controlled "@sleep 0" runs.
      return tool === "claude_run" ? { r: "tool", tool, starts: "run", prompt } : { r: "tool", tool, starts: "start" };
    }
    case "claude_wait":
    case "claude_kill":
    case "claude_output": {
      const jobId = args.job_id;
      if (typeof jobId !== "string" || jobId.trim() === "") return { ...invalidArgument(tool, `"job_id"`), echo: jobEcho };
      if (tool === "claude_wait" && present(args, "hold_ms") && !isIntegerIn(args.hold_ms, 0, Number.MAX_SAFE_INTEGER)) {
        return { ...invalidArgument(tool, `"hold_ms"`), echo: jobEcho };
      }
      if (tool === "claude_output") {
        if (present(args, "view") && !["result", "transcript", "approvals"].includes(args.view)) return { ...invalidArgument(tool, `"view"`), echo: jobEcho };
        if (present(args, "offset") && !isIntegerIn(args.offset, 0, Number.MAX_SAFE_INTEGER)) return { ...invalidArgument(tool, `"offset"`), echo: jobEcho };
        if (present(args, "limit") && !isIntegerIn(args.limit, 1, MAX_RESULT_CHARS)) return { ...invalidArgument(tool, `"limit"`), echo: jobEcho };
      }
      // The generator never sends the id of a real job to these three.
      return { r: "tool", tool, code: "JOB_NOT_FOUND", echo: jobEcho, echoRequired: true };
    }
    case "claude_respond": {
      // §18: the arguments in order, then the job (never a real one here).
      const jobId = args.job_id;
      if (typeof jobId !== "string" || jobId.trim() === "") return { ...invalidArgument(tool, `"job_id"`), echo: jobEcho };
      const request = typeof args.request_id === "number" && Number.isSafeInteger(args.request_id) ? String(args.request_id) : args.request_id;
      if (typeof request !== "string" || !/^[1-9][0-9]{0,8}$/.test(request)) return { ...invalidArgument(tool, `"request_id"`), echo: jobEcho };
      if (args.decision !== "allow" && args.decision !== "deny") return { ...invalidArgument(tool, `"decision"`), echo: jobEcho };
      if (present(args, "message") && !(typeof args.message === "string" && args.message.length <= 2000)) return { ...invalidArgument(tool, `"message"`), echo: jobEcho };
      return { r: "tool", tool, code: "JOB_NOT_FOUND", echo: jobEcho, echoRequired: true };
    }
    case "claude_list":
      return { r: "tool", tool, listed: true };
  }
  throw new Error(`unknown tool ${tool}`);
}

/** §5 cwd (directory): absolute, existing, a directory. Returns the expected message start, or undefined when usable. */
function directoryProblem(dir, label, env) {
  if (!path.isAbsolute(dir)) return `"${label}" must be an absolute path`;
  const kind = env.dirKind(dir);
  if (kind === "dir") return undefined;
  if (kind === "file") return `"${label}" is not a directory`;
  if (kind === "missing") return `"${label}" does not exist`;
  return `"${label}"`;
}

function statKind(dir) {
  try {
    return statSync(dir).isDirectory() ? "dir" : "file";
  } catch (error) {
    return error && error.code === "ENOENT" ? "missing" : "other";
  }
}

/* ------------------------------------------------------------------ *
 * Checking one response against its expectation
 * ------------------------------------------------------------------ */

function checkKeyed(message, expectation, errorCodes) {
  const problems = [];
  if (expectation.code !== undefined) {
    if (!hasOwn(message, "error")) return [`expected error ${expectation.code}, got a result: ${preview(JSON.stringify(message.result), 300)}`];
    const error = message.error;
    if (error.code !== expectation.code) return [`expected error ${expectation.code}, got ${error.code} "${preview(error.message, 200)}"${error.data === undefined ? "" : ` data ${preview(JSON.stringify(error.data), 200)}`}`];
    if (expectation.code === METHOD_NOT_FOUND && !String(error.message).startsWith("Method not found")) {
      problems.push(`-32601 message should read "Method not found: …", got "${preview(error.message, 100)}"`);
    }
    if (expectation.message !== undefined && error.message !== expectation.message) problems.push(`${error.code} message should be "${preview(expectation.message, 200)}", got "${preview(error.message, 200)}"`);
    if (expectation.messagePrefix !== undefined && !String(error.message).startsWith(expectation.messagePrefix)) {
      problems.push(`${error.code} message should start "${expectation.messagePrefix}", got "${preview(error.message, 200)}"`);
    }
    if (expectation.data !== undefined && !sameJson(error.data, expectation.data)) {
      problems.push(`${error.code} data should be ${preview(JSON.stringify(expectation.data), 300)}, got ${preview(JSON.stringify(error.data), 300)}`);
    }
    return problems;
  }
  if (!hasOwn(message, "result")) return [`expected a result (${describeCheck(expectation.check)}), got error ${message.error?.code} "${preview(message.error?.message, 200)}"`];
  const result = message.result;
  const check = expectation.check;
  // §16.3: every 2026-07-28 result names its type and the server; the legacy era's results (§2, §5.5) do neither.
  if (check.modern) problems.push(...checkModernResult(result, check.r === "task" ? "task" : "complete"));
  else if (isRecord(result) && hasOwn(result, "resultType")) problems.push(`a legacy request got a 2026-07-28 result (resultType ${preview(JSON.stringify(result.resultType), 40)})`);
  switch (check.r) {
    case "ping":
      if (!isRecord(result) || Object.keys(result).length !== 0) problems.push(`ping result must be {}, got ${preview(JSON.stringify(result), 200)}`);
      break;
    case "initialize":
      if (!isRecord(result)) return ["initialize result is not an object"];
      if (result.protocolVersion !== check.version) problems.push(`initialize: protocolVersion ${JSON.stringify(result.protocolVersion)}, expected ${check.version}`);
      if (!isRecord(result.serverInfo) || result.serverInfo.name !== "claude-dispatch") problems.push("initialize: serverInfo.name is not claude-dispatch");
      if (!isRecord(result.capabilities) || !isRecord(result.capabilities.tools) || result.capabilities.tools.listChanged !== false) {
        problems.push(`initialize: capabilities should be {tools: {listChanged: false}}, got ${preview(JSON.stringify(result.capabilities), 100)}`);
      }
      if (typeof result.instructions !== "string") problems.push("initialize: instructions missing");
      break;
    case "tools/list": {
      const names = isRecord(result) && Array.isArray(result.tools) ? result.tools.map((tool) => tool && tool.name) : undefined;
      if (!names || names.join(",") !== TOOL_NAMES.join(",")) problems.push(`tools/list: expected ${TOOL_NAMES.join(",")}, got ${names ? names.join(",") : "no tools array"}`);
      else if (!result.tools.every((tool) => isRecord(tool.inputSchema) && isRecord(tool.outputSchema) && typeof tool.description === "string")) {
        problems.push("tools/list: every definition needs description, inputSchema and outputSchema");
      }
      if (isRecord(result) && hasOwn(result, "nextCursor")) problems.push("tools/list: nextCursor is never set (§2)");
      if (!names || names.join(",") !== TOOL_NAMES.join(",")) break;
      if (check.modern) {
        // §16.3: without execution (the server decides what becomes a task), cacheable for an hour.
        if (result.tools.some((tool) => hasOwn(tool, "execution"))) problems.push("tools/list (2026-07-28): definitions must not carry execution (§16.3)");
        if (result.ttlMs !== LISTING_TTL_MS || result.cacheScope !== "public") problems.push(`tools/list (2026-07-28): ttlMs ${LISTING_TTL_MS} and cacheScope "public" expected, got ${preview(JSON.stringify([result.ttlMs, result.cacheScope]), 100)}`);
      } else if (!result.tools.every((tool) => (tool.name === "claude_run" || tool.name === "claude_start") === (isRecord(tool.execution) && tool.execution.taskSupport === "optional"))) {
        problems.push('tools/list: claude_run and claude_start, and only they, carry execution: {taskSupport: "optional"} (§14)');
      }
      break;
    }
    case "tasks/list":
      if (!isRecord(result) || !Array.isArray(result.tasks) || result.tasks.length !== 0 || hasOwn(result, "nextCursor")) {
        problems.push(`tasks/list: no legacy task was ever created, expected {tasks: []}, got ${preview(JSON.stringify(result), 200)}`);
      }
      break;
    case "discover":
      problems.push(...checkDiscover(result));
      break;
    case "task":
      problems.push(...checkTaskHandle(result));
      break;
    case "tool":
      problems.push(...checkToolResult(result, check, errorCodes));
      break;
    default:
      problems.push(`internal: unknown check ${check.r}`);
  }
  return problems;
}

function describeCheck(check) {
  if (check.r === "task") return `${check.tool} task handle (resultType "task")`;
  if (check.r !== "tool") return check.modern ? `${check.r} (2026-07-28)` : check.r;
  if (check.code) return `${check.tool} ${check.code}${check.mention ? ` mentioning ${check.mention}` : ""}`;
  return `${check.tool} success`;
}

/** Equal as JSON values: same types, same members whatever their order. */
function sameJson(a, b) {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((value, index) => sameJson(value, b[index]));
  if (!isRecord(a) || !isRecord(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => hasOwn(b, key) && sameJson(a[key], b[key]));
}

/** §16.3: resultType, and the server named in _meta. */
function checkModernResult(result, resultType) {
  if (!isRecord(result)) return ["2026-07-28 result is not an object"];
  const problems = [];
  if (result.resultType !== resultType) problems.push(`2026-07-28 result: resultType should be "${resultType}", got ${preview(JSON.stringify(result.resultType), 60)}`);
  const info = isRecord(result._meta) ? result._meta[SERVER_INFO_KEY] : undefined;
  const expected = { name: "claude-dispatch", version: SERVER_VERSION };
  if (!sameJson(info, expected)) problems.push(`2026-07-28 result: _meta["${SERVER_INFO_KEY}"] should be ${JSON.stringify(expected)}, got ${preview(JSON.stringify(info), 200)}`);
  return problems;
}

/** §16.2: the DiscoverResult (no recursion guard in the fuzzer: the tasks extension is declared). */
function checkDiscover(result) {
  if (!isRecord(result)) return [];
  const problems = [];
  if (!sameJson(result.supportedVersions, [MODERN_VERSION])) problems.push(`server/discover: supportedVersions should be ["${MODERN_VERSION}"], got ${preview(JSON.stringify(result.supportedVersions), 200)}`);
  const capabilities = { tools: { listChanged: false }, extensions: { [TASKS_EXTENSION]: {} } };
  if (!sameJson(result.capabilities, capabilities)) problems.push(`server/discover: capabilities should be ${JSON.stringify(capabilities)}, got ${preview(JSON.stringify(result.capabilities), 200)}`);
  if (typeof result.instructions !== "string" || !result.instructions.includes("claude_start")) problems.push("server/discover: instructions missing");
  if (result.ttlMs !== LISTING_TTL_MS || result.cacheScope !== "public") problems.push(`server/discover: ttlMs ${LISTING_TTL_MS} and cacheScope "public" expected, got ${preview(JSON.stringify([result.ttlMs, result.cacheScope]), 100)}`);
  return problems;
}

const isIsoTime = (value) => typeof value === "string" && !Number.isNaN(Date.parse(value)) && new Date(value).toISOString() === value;

/** §16.4: the CreateTaskResult of a job just started: working, no ttl yet, polled every 5 s. */
function checkTaskHandle(result) {
  if (!isRecord(result)) return [];
  const problems = [];
  if (typeof result.taskId !== "string" || !UUID.test(result.taskId)) problems.push(`task handle: taskId should be the job id (a UUID), got ${preview(JSON.stringify(result.taskId), 80)}`);
  if (result.status !== "working" || typeof result.statusMessage !== "string") problems.push(`task handle: expected status "working" with a statusMessage, got ${preview(JSON.stringify([result.status, result.statusMessage]), 120)}`);
  if (!isIsoTime(result.createdAt) || !isIsoTime(result.lastUpdatedAt)) problems.push(`task handle: createdAt and lastUpdatedAt must be ISO times, got ${preview(JSON.stringify([result.createdAt, result.lastUpdatedAt]), 120)}`);
  if (result.ttlMs !== null || result.pollIntervalMs !== 5000) problems.push(`task handle: ttlMs null and pollIntervalMs 5000 expected, got ${preview(JSON.stringify([result.ttlMs, result.pollIntervalMs]), 80)}`);
  for (const key of ["result", "content", "structuredContent", "task"]) if (hasOwn(result, key)) problems.push(`task handle: a working task carries no ${key}`);
  return problems;
}

/** §5.5 and §9: one text block, isError only on failures, "CODE: detail", a structuredContent report. */
function checkToolResult(result, check, errorCodes) {
  const problems = [];
  if (!isRecord(result)) return ["tool result is not an object"];
  const content = result.content;
  if (!Array.isArray(content) || content.length !== 1 || !isRecord(content[0]) || content[0].type !== "text" || typeof content[0].text !== "string") {
    return ["tool result must have exactly one text block"];
  }
  const text = content[0].text;
  const report = result.structuredContent;
  if (!isRecord(report)) return ["tool result has no structuredContent object"];
  for (const [key, value] of Object.entries(report)) {
    if (value === null) problems.push(`structuredContent.${key} is null (fields without a value are omitted, §5.5)`);
  }
  const prefix = /^([A-Z_]+): /.exec(text);
  if (check.code) {
    if (result.isError !== true) problems.push(`expected isError true with ${check.code}, got isError ${JSON.stringify(result.isError)}: ${preview(text, 200)}`);
    if (!prefix || !errorCodes.includes(prefix[1])) problems.push(`error text must start with a §9 code: ${preview(text, 200)}`);
    else if (prefix[1] !== check.code) problems.push(`expected ${check.code}, got ${prefix[1]}: ${preview(text, 300)}`);
    else if (check.mention && !text.includes(check.mention)) problems.push(`${check.code} should name ${preview(check.mention, 100)}: ${preview(text, 300)}`);
    else if (check.code === "JOB_NOT_FOUND" && !(text.includes("forgotten") && text.includes("check the id"))) {
      problems.push(`JOB_NOT_FOUND should say to check the id and that finished jobs are forgotten (§5.3): ${preview(text, 300)}`);
    }
    if (report.status !== "error") problems.push(`structuredContent.status should be "error", got ${JSON.stringify(report.status)}`);
    if (!isRecord(report.error) || report.error.code !== check.code || typeof report.error.detail !== "string") {
      problems.push(`structuredContent.error should be {code: ${check.code}, detail}, got ${preview(JSON.stringify(report.error), 200)}`);
    }
    if (hasOwn(report, "job_id")) {
      if (check.echo === undefined || report.job_id !== check.echo) problems.push(`structuredContent.job_id ${preview(JSON.stringify(report.job_id), 80)} does not echo the job_id argument`);
    } else if (check.echoRequired && check.echo !== undefined) {
      problems.push("structuredContent.job_id should echo the job_id argument");
    }
    return problems;
  }
  if (hasOwn(result, "isError")) problems.push(`success must not carry isError, got ${JSON.stringify(result.isError)}: ${preview(text, 300)}`);
  if (check.listed) {
    if (report.status !== "listed" || !Array.isArray(report.jobs)) problems.push(`claude_list: expected {status: "listed", jobs: [...]}, got status ${JSON.stringify(report.status)}`);
  } else if (check.starts === "run") {
    if (report.status !== "completed") problems.push(`claude_run (@sleep 0): expected completed, got ${JSON.stringify(report.status)}: ${preview(text, 300)}`);
    else if (report.result !== `ECHO: ${check.prompt.trim()}`) problems.push(`claude_run: result does not echo the prompt: ${preview(JSON.stringify(report.result), 200)}`);
    if (typeof report.job_id !== "string") problems.push("claude_run: no job_id");
    if (!Number.isInteger(report.elapsed_s)) problems.push("claude_run: elapsed_s missing from the job report (§5.5)");
  } else if (check.starts === "start") {
    // §5.2: running, or queued with its position when CLAUDE_DISPATCH_MAX_JOBS agents already run (§8).
    const queued = report.status === "queued" && Number.isInteger(report.queue_position) && report.queue_position >= 1;
    if (!(report.status === "running" || queued) || typeof report.job_id !== "string") {
      problems.push(`claude_start: expected running, or queued with a queue_position, with a job_id; got ${JSON.stringify(report.status)} at ${JSON.stringify(report.queue_position)}`);
    }
  }
  return problems;
}

/** At most max characters, with control characters and lone surrogates written as \uXXXX so a report stays one readable line. */
export function preview(value, max = 160) {
  const text = typeof value === "string" ? value : String(value);
  const cut = text.length > max ? `${text.slice(0, max)}…(${text.length} chars)` : text;
  return cut.replace(
    /[\u0000-\u001f\u007f\u2028\u2029]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

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

/** Requests that look like 2026-07-28 ones but are not (§2: only an own version key in _meta makes one): legacy answers. */
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
  // Mostly at the 30 s line of §16.4: 30000 stays an ordinary call, 30001 becomes a task. Never short: a loaded machine must not time a run out.
  if (tool === "claude_run" && r.chance(0.7)) args.timeout_ms = r.pick([30000, 30000, 30001, 30001, 60000]);
  // Fresh tokens only: a synchronous run may send progress for its token, a task handle never.
  const token = r.chance(0.5) ? `mtok-${g.fresh()}` : ABSENT;
  return { line: modernRequest(g, "tools/call", { name: tool, arguments: args }, { tasks: r.chance(0.6), token }, g.fresh()), allowStart: true };
}

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
  // §4: a cancellation that names a tools/call, tasks/result or tasks/cancel sent earlier in the block may drop its response; it stays optional.
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

/* ------------------------------------------------------------------ *
 * The runner
 * ------------------------------------------------------------------ */

/**
 * The server's environment: baseEnv (the test suite passes its
 * minimalEnvironment() from test/server-process.ts), else the same minimal
 * base built here (PATH, and SystemRoot on Windows), then the fuzzer's own
 * variables. Never the caller's whole environment: a CLAUDE_DISPATCH_*,
 * HOME or XDG_STATE_HOME of the caller would change what is fuzzed.
 */
function serverEnvironment(baseEnv, extra) {
  const base = {};
  if (baseEnv) Object.assign(base, baseEnv);
  else {
    for (const key of process.platform === "win32" ? ["PATH", "SystemRoot"] : ["PATH"]) {
      if (process.env[key] !== undefined) base[key] = process.env[key];
    }
    if (base.PATH === undefined && process.platform !== "win32") base.PATH = "/usr/bin:/bin";
  }
  return { ...base, ...extra };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves true when promise settles first, false after ms; the timer never outlives the race. */
async function settlesWithin(promise, ms) {
  let timer;
  const expired = new Promise((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

function readHighWater(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = /^VmHWM:\s+(\d+) kB/m.exec(status);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The §9 codes, from the server's own build (dist/errors.js next to main.js) or, failing that, src/core/errors.ts. */
export async function loadErrorCodes(server) {
  try {
    const module = await import(pathToFileURL(path.join(path.dirname(server), "errors.js")).href);
    if (Array.isArray(module.ERROR_CODES)) return [...module.ERROR_CODES];
  } catch {
    // fall through
  }
  const source = readFileSync(path.join(REPO_ROOT, "src", "core", "errors.ts"), "utf8");
  const list = /ERROR_CODES\s*=\s*\[([^\]]*)\]/.exec(source);
  if (!list) throw new Error("cannot find ERROR_CODES in src/core/errors.ts");
  return [...list[1].matchAll(/"([A-Z_]+)"/g)].map((match) => match[1]);
}

/** One server process: writes blocks, reads and checks every frame. */
class Session {
  constructor({ server, phase, maxLineBytes, seed, errorCodes, report, blockTimeoutMs, exitTimeoutMs, logLevel, baseEnv }) {
    this.phase = phase;
    this.seed = seed;
    this.errorCodes = errorCodes;
    this.report = report;
    this.blockTimeoutMs = blockTimeoutMs;
    this.exitTimeoutMs = exitTimeoutMs;
    this.stats = {
      phase,
      lines: 0,
      sentinels: 0,
      bytes: 0,
      blocks: 0,
      requests: 0,
      responses: 0,
      notifications: 0,
      codes: {},
      toolCodes: {},
      kinds: {},
      writes: 0,
      splitCharacters: 0,
      peakRssBytes: undefined,
      wallMs: 0,
      exitCode: undefined,
    };
    this.pending = [];
    this.pendingSize = 0;
    this.decoder = new TextDecoder("utf-8", { fatal: true });
    this.current = undefined;
    this.lingering = new Map();
    this.answered = [new Set(), new Set()];
    this.tokens = new Map();
    this.stderrTail = "";
    this.errorLogs = [];
    this.aborted = false;
    // A state directory of its own, removed when the server is gone; agents die with the server.
    this.stateDir = mkdtempSync(path.join(tmpdir(), "claude-dispatch-fuzz-state-"));
    const env = serverEnvironment(baseEnv, {
      CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE,
      CLAUDE_DISPATCH_STATE_DIR: this.stateDir,
      CLAUDE_DISPATCH_ON_EXIT: "kill",
      CLAUDE_DISPATCH_KILL_GRACE_MS: "500",
      CLAUDE_DISPATCH_LOG_LEVEL: logLevel,
      CLAUDE_DISPATCH_DEPTH: "0",
      CLAUDE_DISPATCH_MAX_DEPTH: "1",
      ...(maxLineBytes === DEFAULT_LINE_LIMIT ? {} : { CLAUDE_DISPATCH_MAX_LINE_BYTES: String(maxLineBytes) }),
    });
    this.child = spawn(process.execPath, [server], { env, stdio: ["pipe", "pipe", "pipe"] });
    this.pid = this.child.pid;
    this.child.stdout.on("data", (chunk) => this.onStdout(chunk));
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (chunk) => this.onStderr(chunk));
    this.child.stdin.on("error", () => undefined);
    this.inputEnded = false;
    this.exit = undefined;
    this.closed = new Promise((resolve) => {
      this.child.once("error", (error) => {
        this.exit = { code: null, signal: null, error };
        resolve();
      });
      this.child.once("close", (code, signal) => {
        this.exit = { code, signal };
        rmSync(this.stateDir, { recursive: true, force: true });
        resolve();
        this.wake();
      });
    });
    this.child.once("exit", (code, signal) => {
      if (!this.inputEnded) this.violation("-", "-", `the server exited before stdin was closed (code ${code}, signal ${signal}); stderr: ${preview(this.stderrTail.slice(-1500), 1500)}`);
      this.exitedEarly = !this.inputEnded;
      this.wake();
    });
  }

  violation(block, line, message, item) {
    this.report.violationCount += 1;
    if (this.report.violations.length < this.report.maxViolations) {
      this.report.violations.push({
        seed: this.seed,
        phase: this.phase,
        block,
        line,
        kind: item ? item.kind : undefined,
        message,
        sent: item ? preview(item.line.toString("utf8"), 240) : undefined,
      });
    }
  }

  onStderr(chunk) {
    this.stderrTail = (this.stderrTail + chunk).slice(-16384);
    if (chunk.includes(" error: ") && this.errorLogs.length < 20) {
      for (const line of chunk.split("\n")) if (line.startsWith("claude-dispatch error:") && this.errorLogs.length < 20) this.errorLogs.push(line.slice(0, 500));
    }
  }

  onStdout(chunk) {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      if (newline === -1) {
        if (start < chunk.length) {
          const rest = chunk.subarray(start);
          this.pending.push(rest);
          this.pendingSize += rest.length;
        }
        return;
      }
      const part = chunk.subarray(start, newline);
      const frame = this.pending.length === 0 ? part : Buffer.concat([...this.pending, part]);
      this.pending = [];
      this.pendingSize = 0;
      start = newline + 1;
      this.onFrame(frame);
    }
  }

  where() {
    return this.current ? this.current.block : "-";
  }

  onFrame(bytes) {
    let text;
    try {
      text = this.decoder.decode(bytes);
    } catch {
      this.violation(this.where(), "-", `stdout line is not valid UTF-8: ${preview(bytes.toString("latin1"), 200)}`);
      return;
    }
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      this.violation(this.where(), "-", `stdout line is not a JSON frame: "${preview(text, 200)}"`);
      return;
    }
    if (!isRecord(message) || message.jsonrpc !== "2.0") {
      this.violation(this.where(), "-", `stdout frame is not a JSON-RPC 2.0 object: ${preview(text, 200)}`);
      return;
    }
    // §1: every frame is one JSON.stringify value; anything else (pretty-printing, two values) does not round-trip.
    if (JSON.stringify(message) !== text) this.violation(this.where(), "-", `stdout frame is not the JSON.stringify of one value: ${preview(text, 200)}`);
    if (hasOwn(message, "method")) this.onNotification(message, text);
    else if (hasOwn(message, "id")) this.onResponse(message, text);
    else this.violation(this.where(), "-", `stdout frame is neither a response nor a notification: ${preview(text, 200)}`);
    this.checkDone();
  }

  onNotification(message, text) {
    this.stats.notifications += 1;
    if (hasOwn(message, "id")) {
      this.violation(this.where(), "-", `the server sent a request (it sends none): ${preview(text, 200)}`);
      return;
    }
    if (message.method !== "notifications/progress" || !isRecord(message.params)) {
      this.violation(this.where(), "-", `unexpected notification from the server: ${preview(text, 200)}`);
      return;
    }
    const key = idKey(message.params.progressToken);
    const token = this.tokens.get(key);
    if (!token) this.violation(this.where(), "-", `progress for a token no request carried: ${preview(text, 200)}`);
    else if (!token.allowed) this.violation(this.where(), "-", `progress for a request that waits on no job (§5.8) or got a task handle (§16.4): ${preview(text, 200)}`);
    else if (token.done) this.violation(this.where(), "-", `progress after the response to its request (§5.8): ${preview(text, 200)}`);
    else if (message.params.progress !== token.last + 1 || typeof message.params.message !== "string") {
      this.violation(this.where(), "-", `progress must start at 1 and grow by 1, with a message (§5.8): ${token.last} then ${preview(text, 200)}`);
    } else token.last = message.params.progress;
  }

  onResponse(message, text) {
    this.stats.responses += 1;
    const hasResult = hasOwn(message, "result");
    const hasError = hasOwn(message, "error");
    if (hasResult === hasError) {
      this.violation(this.where(), "-", `a response must carry exactly one of result and error: ${preview(text, 200)}`);
      return;
    }
    if (hasError && !(isRecord(message.error) && Number.isInteger(message.error.code) && typeof message.error.message === "string")) {
      this.violation(this.where(), "-", `malformed error object: ${preview(text, 200)}`);
      return;
    }
    const codeLabel = hasError ? String(message.error.code) : "result";
    this.stats.codes[codeLabel] = (this.stats.codes[codeLabel] ?? 0) + 1;
    if (hasResult && isRecord(message.result) && message.result.resultType === "task") this.stats.toolCodes.task = (this.stats.toolCodes.task ?? 0) + 1;
    else if (hasResult && isRecord(message.result) && Array.isArray(message.result.content)) {
      const first = message.result.content[0];
      const toolCode = message.result.isError === true ? (/^([A-Z_]+):/.exec(first?.text ?? "")?.[1] ?? "?") : "ok";
      this.stats.toolCodes[toolCode] = (this.stats.toolCodes[toolCode] ?? 0) + 1;
    }
    if (hasError && !KNOWN_CODES.has(message.error.code)) {
      this.violation(this.where(), "-", `error code ${message.error.code} is not a JSON-RPC code of §9: ${preview(text, 200)}`);
    }
    const block = this.current;
    if (message.id === null) {
      if (!hasError) {
        this.violation(this.where(), "-", `a result with id null: ${preview(text, 200)}`);
        return;
      }
      const tag = message.error.code === INVALID_REQUEST && message.error.message === OVERSIZE_MESSAGE ? "oversize" : message.error.code === PARSE_ERROR ? "parse" : "other";
      const bucket = `${message.error.code}|${tag}`;
      if (block && (block.nulls.get(bucket) ?? 0) > 0) {
        block.nulls.set(bucket, block.nulls.get(bucket) - 1);
        block.nullLeft -= 1;
        if (tag === "oversize") block.oversizeSeen += 1;
        if (tag === "parse" && !message.error.message.startsWith("Parse error")) {
          this.violation(block.block, "-", `-32700 message should read "Parse error: …", got "${preview(message.error.message, 100)}"`);
        }
      } else {
        // It cannot name its line; the lines that expect no response at all are the likely senders.
        const silent = block ? block.items.map((item, index) => (item.exp.t === "none" ? `${index}:${item.kind}` : undefined)).filter(Boolean) : [];
        this.violation(this.where(), "-", `unexpected response with id null: ${message.error.code} "${preview(message.error.message, 200)}" (lines of this block that expect no response: ${silent.join(" ") || "none"})`);
      }
      return;
    }
    if (!isRequestId(message.id)) {
      this.violation(this.where(), "-", `response id is neither a string, a number nor null: ${preview(text, 200)}`);
      return;
    }
    const key = idKey(message.id);
    let record = block ? block.keyed.get(key) : undefined;
    if (record) block.keyed.delete(key);
    else {
      record = this.lingering.get(key);
      if (record) this.lingering.delete(key);
    }
    if (!record) {
      const duplicate = this.answered.some((set) => set.has(key));
      this.violation(this.where(), "-", `${duplicate ? "a second response" : "a response to an id never sent (or not in flight)"} for id ${preview(key, 120)}: ${preview(text, 200)}`);
      return;
    }
    this.answered[0].add(key);
    if (!record.item.optional && block && record.block === block.block) block.requiredLeft -= 1;
    if (record.item.sentinel && block) block.sentinelDone = true;
    const check = record.item.exp.check;
    if (check && check.token !== undefined) {
      const token = this.tokens.get(check.token);
      if (token) token.done = true;
    }
    for (const problem of checkKeyed(message, record.item.exp, this.errorCodes)) this.violation(record.block, record.index, problem, record.item);
  }

  wake() {
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = undefined;
      resolve();
    }
  }

  checkDone() {
    const block = this.current;
    if (!block) return;
    if (block.barrier !== undefined && block.oversizeSeen >= block.barrier) this.wake();
    if (block.sentinelDone && block.requiredLeft === 0 && block.nullLeft === 0) this.wake();
  }

  /** Waits until predicate() holds, the server exits, or ms pass. */
  async waitUntil(predicate, ms) {
    const deadline = Date.now() + ms;
    while (!predicate()) {
      if (this.exit || this.exitedEarly) return predicate();
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 1000));
        this.waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return true;
  }

  async write(buffer) {
    if (this.exit || this.exitedEarly) return;
    this.stats.bytes += buffer.length;
    if (!this.child.stdin.write(buffer)) {
      await new Promise((resolve) => {
        const done = () => {
          this.child.stdin.off("drain", done);
          clearInterval(timer);
          resolve();
        };
        const timer = setInterval(() => {
          if (this.exit || this.exitedEarly) done();
        }, 200);
        this.child.stdin.on("drain", done);
      });
    }
  }

  /** Writes bytes in chunks of 1 B to 64 KiB, sometimes cutting a multi-byte character and pausing so the halves arrive apart. */
  async writeChunked(buffer, writeMode, rng) {
    let offset = 0;
    let pauses = writeMode.pauses;
    // In a split block, one cut is forced inside some multi-byte character, however big the chunks.
    let forced = -1;
    if (writeMode.split && buffer.length > 1) {
      const from = rng.int(1, buffer.length - 1);
      for (let j = from; j < Math.min(buffer.length, from + 4096); j += 1) {
        if ((buffer[j] & 0xc0) === 0x80) {
          forced = j;
          break;
        }
      }
    }
    while (offset < buffer.length) {
      let size;
      if (writeMode.mode === "big") size = rng.int(16384, 65536);
      else if (writeMode.mode === "tiny") size = rng.int(1, 16);
      else size = rng.logInt(1, 65536);
      let end = Math.min(buffer.length, offset + size);
      let pause = false;
      if (forced > offset && forced < end) {
        end = forced;
        pause = pauses > 0;
      } else if (writeMode.split && end < buffer.length && rng.chance(0.8)) {
        // Move the cut onto a UTF-8 continuation byte nearby, if there is one: the character is split across writes.
        for (let j = end; j < Math.min(buffer.length, end + 256); j += 1) {
          if ((buffer[j] & 0xc0) === 0x80 && j > offset) {
            end = j;
            pause = pauses > 0;
            break;
          }
        }
      }
      await this.write(buffer.subarray(offset, end));
      this.stats.writes += 1;
      if (end < buffer.length && (buffer[end] & 0xc0) === 0x80) this.stats.splitCharacters += 1;
      offset = end;
      if (pause) {
        pauses -= 1;
        await sleep(1);
      }
    }
  }

  async runBlock(block, { endInput = false } = {}) {
    const state = {
      block: block.block,
      items: block.items,
      keyed: new Map(),
      nulls: new Map(),
      nullLeft: 0,
      requiredLeft: 0,
      sentinelDone: !block.items.some((item) => item.sentinel),
      oversizeSeen: 0,
      barrier: undefined,
    };
    for (const [index, item] of block.items.entries()) {
      const exp = item.exp;
      if (exp.t === "id") {
        state.keyed.set(exp.key, { item, index, block: block.block });
        this.stats.requests += 1;
        if (!item.optional) state.requiredLeft += 1;
        const check = exp.check;
        if (check && check.token !== undefined) {
          const existing = this.tokens.get(check.token);
          const allowed = check.starts === "run";
          if (existing) existing.allowed = existing.allowed && allowed;
          else this.tokens.set(check.token, { allowed, last: 0, done: false, block: block.block });
        }
      } else if (exp.t === "null") {
        const bucket = `${exp.code}|${exp.tag}`;
        state.nulls.set(bucket, (state.nulls.get(bucket) ?? 0) + 1);
        state.nullLeft += 1;
      }
    }
    this.current = state;
    this.answered.unshift(new Set());
    this.answered.length = 2;

    const rng = new Rng(block.writeMode.seed);
    let segment = [];
    let oversizeSoFar = 0;
    for (const [index, item] of block.items.entries()) {
      const last = index === block.items.length - 1;
      const terminator = last && endInput && block.noFinalNewline ? Buffer.alloc(0) : Buffer.from("\n");
      if (item.exp.t === "null" && item.exp.tag === "oversize") oversizeSoFar += 1;
      if (item.early) {
        // §1: the -32600 must come as soon as the limit is passed, before the line's newline arrives.
        const cut = Math.min(item.line.length, this.maxLineBytes + 1 + rng.int(0, 4096));
        segment.push(item.line.subarray(0, cut));
        await this.writeChunked(Buffer.concat(segment), block.writeMode, rng);
        segment = [];
        state.barrier = oversizeSoFar;
        const reported = this.aborted || (await this.waitUntil(() => state.oversizeSeen >= oversizeSoFar, this.blockTimeoutMs));
        state.barrier = undefined;
        if (!reported) {
          // Send the rest anyway, so the stream stays framed; stop after this block (each such wait costs a timeout).
          this.violation(block.block, index, `an over-long line was not reported within ${this.blockTimeoutMs} ms, before its newline arrived (§1)`, item);
          this.aborted = true;
        }
        segment.push(item.line.subarray(cut), terminator);
      } else {
        segment.push(item.line, terminator);
      }
    }
    await this.writeChunked(Buffer.concat(segment), block.writeMode, rng);
    this.stats.lines += block.lines;
    if (typeof block.block === "number") {
      this.stats.sentinels += 1;
      this.stats.blocks += 1;
      for (const item of block.items) {
        if (item.sentinel) continue;
        const label = item.early ? `${item.kind}(early)` : item.kind;
        this.stats.kinds[label] = (this.stats.kinds[label] ?? 0) + 1;
      }
    }
    if (endInput) {
      this.inputEnded = true;
      this.child.stdin.end();
    }

    const complete = () => state.sentinelDone && state.requiredLeft === 0 && state.nullLeft === 0;
    let done = await this.waitUntil(complete, endInput ? this.exitTimeoutMs : this.blockTimeoutMs);
    if (!done && endInput) {
      await settlesWithin(this.closed, this.exitTimeoutMs);
      done = complete();
    }
    if (!done) {
      for (const record of state.keyed.values()) {
        if (!record.item.optional) this.violation(block.block, record.item.sentinel ? "sentinel" : record.index, `no response for id ${preview(record.item.exp.key, 100)} (expected ${describeExpectation(record.item.exp)})`, record.item);
      }
      for (const [bucket, left] of state.nulls) {
        if (left > 0) this.violation(block.block, "-", `${left} expected response(s) with id null and code ${bucket.replace("|", " (")}) never came`);
      }
      if (!this.exit) this.violation(block.block, "-", `block not complete after ${endInput ? this.exitTimeoutMs : this.blockTimeoutMs} ms; stopping this phase`);
      this.aborted = true;
    }
    // Optional answers (cancelled calls) may still come: they stay valid for a while, then are forgotten.
    for (const [key, record] of state.keyed) {
      if (record.item.optional) this.lingering.set(key, record);
    }
    if (this.lingering.size > 0) {
      for (const [key, record] of this.lingering) if (record.block < block.block - 50) this.lingering.delete(key);
    }
    for (const [key, token] of this.tokens) if (token.done || !token.allowed || token.block < block.block - 50) this.tokens.delete(key);
    if (this.stats.blocks % 64 === 0) this.sampleRss();
  }

  sampleRss() {
    if (!this.pid || this.exit) return;
    const hwm = readHighWater(this.pid);
    if (hwm !== undefined) this.stats.peakRssBytes = Math.max(this.stats.peakRssBytes ?? 0, hwm);
  }

  /** The last line has no newline (§1: still processed), then stdin closes; the answer comes after EOF (§3). */
  async finish() {
    this.sampleRss();
    const id = `final-${this.phase}`;
    const text = `${JSON.stringify({ jsonrpc: "2.0", id, method: "ping" })}${this.finalCr ? "\r" : ""}`;
    const item = { kind: "final-no-newline", line: Buffer.from(text), exp: keyedResult(id, { r: "ping" }, "ping"), sentinel: true };
    if (!this.exit && !this.exitedEarly) await this.runBlock({ block: "final", items: [item], lines: 0, noFinalNewline: true, writeMode: { mode: "mixed", split: false, pauses: 0, seed: 7 } }, { endInput: true });
    if (!this.inputEnded) {
      this.inputEnded = true;
      this.child.stdin.end();
    }
    const closedInTime = await settlesWithin(this.closed, this.exitTimeoutMs);
    if (!closedInTime) {
      this.violation("final", "-", `the server did not exit within ${this.exitTimeoutMs} ms of stdin closing`);
      this.child.kill("SIGKILL");
      await this.closed;
    }
    this.stats.exitCode = this.exit.code;
    if (this.exit.error) this.violation("final", "-", `could not run the server: ${this.exit.error.message}`);
    else if (closedInTime && (this.exit.code !== 0 || this.exit.signal !== null)) {
      this.violation("final", "-", `the server exited with code ${this.exit.code}, signal ${this.exit.signal} after stdin closed (expected 0); stderr: ${preview(this.stderrTail.slice(-1500), 1500)}`);
    }
    if (this.pendingSize > 0) this.violation("final", "-", `stdout ends with ${this.pendingSize} bytes of an unterminated frame: ${preview(Buffer.concat(this.pending).toString("utf8"), 200)}`);
  }
}

function describeExpectation(exp) {
  if (exp.t === "none") return "no response";
  if (exp.t === "null") return `error ${exp.code} with id null`;
  if (exp.code !== undefined) return `error ${exp.code}`;
  return describeCheck(exp.check);
}

function makeEnvironment(scratch, maxLineBytes) {
  const cache = new Map();
  return {
    maxLineBytes,
    realDir: path.join(scratch, "work"),
    file: path.join(scratch, "a-file.txt"),
    dirKind(dir) {
      if (cache.has(dir)) return cache.get(dir);
      const kind = statKind(dir);
      if (cache.size < 10000) cache.set(dir, kind);
      return kind;
    },
  };
}

/**
 * Runs the fuzzer. options: seed, lines (main phase), hugeLines (huge phase,
 * default lines/2000 within 4..100), server, blocks (replay: only these block
 * indexes of `phase`), phase, blockTimeoutMs, logLevel, maxViolations,
 * onProgress(stats), baseEnv (the servers' base environment; default: PATH
 * only, see serverEnvironment).
 */
export async function runFuzz(options = {}) {
  const seed = Number(options.seed ?? 1);
  const lines = Number(options.lines ?? 20000);
  const hugeLines = Number(options.hugeLines ?? Math.max(4, Math.min(100, Math.round(lines / 2000))));
  const server = path.resolve(options.server ?? DEFAULT_SERVER);
  const report = {
    seed,
    server,
    violations: [],
    violationCount: 0,
    maxViolations: options.maxViolations ?? 50,
    phases: [],
    serverErrorLogs: [],
    wallMs: 0,
  };
  const started = Date.now();
  const errorCodes = await loadErrorCodes(server);
  const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-fuzz-"));
  mkdirSync(path.join(scratch, "work"));
  writeFileSync(path.join(scratch, "a-file.txt"), "not a directory\n");
  const phases = [];
  if (options.blocks) phases.push({ phase: options.phase ?? "main", blocks: options.blocks });
  else {
    phases.push({ phase: "main", lines });
    if (hugeLines > 0) phases.push({ phase: "huge", lines: hugeLines });
  }
  try {
    for (const plan of phases) {
      const maxLineBytes = plan.phase === "huge" ? DEFAULT_LINE_LIMIT : (options.maxLineBytes ?? MAIN_LINE_LIMIT);
      const env = makeEnvironment(scratch, maxLineBytes);
      const phaseStarted = Date.now();
      const session = new Session({
        server,
        phase: plan.phase,
        maxLineBytes,
        seed,
        errorCodes,
        report,
        blockTimeoutMs: options.blockTimeoutMs ?? 20000,
        exitTimeoutMs: options.exitTimeoutMs ?? 15000,
        logLevel: options.logLevel ?? "warn",
        baseEnv: options.baseEnv,
      });
      session.maxLineBytes = maxLineBytes;
      session.finalCr = seed % 2 === 1;
      const indexes = plan.blocks ?? null;
      let lastProgress = Date.now();
      for (let i = 0; ; i += 1) {
        if (indexes ? i >= indexes.length : session.stats.lines >= plan.lines) break;
        if (session.aborted || session.exit || session.exitedEarly) break;
        const block = generateBlock(seed, plan.phase, indexes ? indexes[i] : i, env);
        if (options.onBlock) options.onBlock(block);
        await session.runBlock(block);
        if (options.onProgress && Date.now() - lastProgress > 2000) {
          lastProgress = Date.now();
          options.onProgress({ ...session.stats, wallMs: Date.now() - phaseStarted });
        }
      }
      await session.finish();
      session.stats.wallMs = Date.now() - phaseStarted;
      session.stats.pid = session.pid;
      report.phases.push(session.stats);
      report.serverErrorLogs.push(...session.errorLogs.map((line) => `[${plan.phase}] ${line}`));
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  report.wallMs = Date.now() - started;
  return report;
}

/** A readable account of one block, for replays (--dump). */
export function describeBlock(block) {
  return block.items.map((item, index) => {
    const exp = describeExpectation(item.exp) + (item.optional ? " (optional: cancelled)" : "") + (item.early ? " [reported before its newline]" : "");
    return `${String(index).padStart(3)} ${item.kind.padEnd(16)} ${String(item.line.length).padStart(8)} B  -> ${exp}\n      ${preview(item.line.toString("utf8"), 200)}`;
  }).join("\n");
}

/** Formats the report as the summary the CLI prints. */
export function formatReport(report) {
  const out = [];
  const mib = (bytes) => (bytes === undefined ? "n/a" : `${(bytes / 1048576).toFixed(1)} MiB`);
  out.push(`claude-dispatch fuzz  seed ${report.seed}  server ${report.server}`);
  for (const stats of report.phases) {
    const seconds = stats.wallMs / 1000;
    out.push("");
    out.push(`phase ${stats.phase}${stats.phase === "main" ? " (CLAUDE_DISPATCH_MAX_LINE_BYTES=65536)" : " (default 16 MiB line limit: huge strings, 1e5-deep nesting)"}`);
    out.push(`  lines sent      ${stats.lines} (+ ${stats.sentinels} sentinel pings) in ${stats.blocks} blocks, ${mib(stats.bytes)}`);
    out.push(`  writes          ${stats.writes} (1 B to 64 KiB; ${stats.splitCharacters} cut a UTF-8 character in two)`);
    out.push(`  requests        ${stats.requests}`);
    out.push(`  responses       ${stats.responses}`);
    out.push(`  notifications   ${stats.notifications}`);
    out.push(`  codes           ${Object.entries(stats.codes).sort().map(([code, count]) => `${code}: ${count}`).join("  ")}`);
    out.push(`  tool results    ${Object.entries(stats.toolCodes).sort().map(([code, count]) => `${code}: ${count}`).join("  ")}`);
    out.push(`  line kinds      ${Object.entries(stats.kinds).sort().map(([kind, count]) => `${kind}: ${count}`).join("  ")}`);
    out.push(`  lines/s         ${Math.round(stats.lines / seconds)}`);
    out.push(`  wall time       ${seconds.toFixed(1)} s`);
    out.push(`  peak server RSS ${mib(stats.peakRssBytes)} (VmHWM)`);
    out.push(`  server exit     ${stats.exitCode}`);
  }
  out.push("");
  out.push(`total wall time ${(report.wallMs / 1000).toFixed(1)} s`);
  if (report.serverErrorLogs.length > 0) {
    out.push(`server logged errors on stderr (first ${report.serverErrorLogs.length}):`);
    for (const line of report.serverErrorLogs.slice(0, 5)) out.push(`  ${line}`);
  }
  if (report.violationCount === 0) out.push("no violations");
  else {
    out.push(`${report.violationCount} violation(s); the first ${report.violations.length}:`);
    for (const v of report.violations) {
      out.push(`- seed ${v.seed} phase ${v.phase} block ${v.block} line ${v.line}${v.kind ? ` (${v.kind})` : ""}: ${v.message}`);
      if (v.sent) out.push(`    sent: ${v.sent}`);
    }
    const first = report.violations.find((v) => typeof v.block === "number");
    if (first) out.push(`replay: node bench/fuzz.mjs --seed ${first.seed} --phase ${first.phase} --block ${first.block} --dump`);
  }
  return out.join("\n");
}
