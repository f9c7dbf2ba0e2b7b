/**
 * The oracle: what PROTOCOL.md §1, §2, §5, §14 and §16 say must come back for one line. Part of the
 * fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { statSync } from "node:fs";
import path from "node:path";
import {
  ALLOWED_MODES, CAPABILITIES_KEY, INVALID_PARAMS, INVALID_REQUEST, MAX_RESULT_CHARS, METHOD_NOT_FOUND,
  MISSING_CAPABILITY, MODERN_VERSION, PARSE_ERROR, PERMISSION_MODES, SYNCHRONOUS_RUN_MAX_TIMEOUT_MS, TASKS_EXTENSION,
  TOOL_ARGS, TOOL_NAMES, UNSUPPORTED_VERSION, UUID, VERSION_KEY, VERSIONS,
} from "./constants.mjs";

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
      // §14: the fuzzer never creates a legacy task (no tools/call with `task`
      // ever starts a job), so every id is unknown.
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
      if (typeof prompt !== "string") return invalidArgument(tool, `"prompt" must be a string, got ` +
        `${describeType(prompt)}`);
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

/**
 * §5 cwd (directory): absolute, existing, a directory. Returns the expected message start, or undefined when usable.
 */
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

export { hasOwn, isRecord, isRequestId, keyedResult, statKind };
