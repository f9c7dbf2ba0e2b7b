/**
 * Checking one response frame against its expectation (§5.5, §9, §16.2-§16.4). Part of the fuzzer:
 * bench/fuzz-lib.mjs re-exports its public names.
 */
import {
  LISTING_TTL_MS, METHOD_NOT_FOUND, MODERN_VERSION, SERVER_INFO_KEY, SERVER_VERSION, TASKS_EXTENSION, TOOL_NAMES, UUID,
} from "./constants.mjs";
import { hasOwn, isRecord } from "./oracle.mjs";

/* ------------------------------------------------------------------ *
 * Checking one response against its expectation
 * ------------------------------------------------------------------ */

function checkKeyed(message, expectation, errorCodes) {
  const problems = [];
  if (expectation.code !== undefined) {
    if (!hasOwn(message, "error")) return [`expected error ${expectation.code}, got a result: ` +
      `${preview(JSON.stringify(message.result), 300)}`];
    const error = message.error;
    if (error.code !== expectation.code) return [`expected error ${expectation.code}, got ${error.code} ` +
      `"${preview(error.message, 200)}"${error.data === undefined ? "" : ` data ${preview(JSON.stringify(error.data), 200)}`}`];
    if (expectation.code === METHOD_NOT_FOUND && !String(error.message).startsWith("Method not found")) {
      problems.push(`-32601 message should read "Method not found: …", got "${preview(error.message, 100)}"`);
    }
    if (expectation.message !== undefined && error.message !== expectation.message) problems.push(`${error.code} ` +
      `message should be "${preview(expectation.message, 200)}", got "${preview(error.message, 200)}"`);
    if (expectation.messagePrefix !== undefined && !String(error.message).startsWith(expectation.messagePrefix)) {
      problems.push(`${error.code} message should start "${expectation.messagePrefix}", got ` +
        `"${preview(error.message, 200)}"`);
    }
    if (expectation.data !== undefined && !sameJson(error.data, expectation.data)) {
      problems.push(`${error.code} data should be ${preview(JSON.stringify(expectation.data), 300)}, got ` +
        `${preview(JSON.stringify(error.data), 300)}`);
    }
    return problems;
  }
  if (!hasOwn(message, "result")) return [`expected a result (${describeCheck(expectation.check)}), got error ` +
    `${message.error?.code} "${preview(message.error?.message, 200)}"`];
  const result = message.result;
  const check = expectation.check;
  // §16.3: every 2026-07-28 result names its type and the server; the legacy era's results (§2, §5.5) do neither.
  if (check.modern) problems.push(...checkModernResult(result, check.r === "task" ? "task" : "complete"));
  else if (isRecord(result) && hasOwn(result, "resultType")) problems.push(`a legacy request got a 2026-07-28 result ` +
    `(resultType ${preview(JSON.stringify(result.resultType), 40)})`);
  switch (check.r) {
    case "ping":
      if (!isRecord(result) || Object.keys(result).length !== 0) problems.push(`ping result must be {}, got ` +
        `${preview(JSON.stringify(result), 200)}`);
      break;
    case "initialize":
      if (!isRecord(result)) return ["initialize result is not an object"];
      if (result.protocolVersion !== check.version) problems.push(`initialize: protocolVersion ` +
        `${JSON.stringify(result.protocolVersion)}, expected ${check.version}`);
      if (!isRecord(result.serverInfo) || result.serverInfo.name !== "claude-dispatch") problems.push("initialize: " +
        "serverInfo.name is not claude-dispatch");
      if (!isRecord(result.capabilities) || !isRecord(result.capabilities.tools) || result.capabilities.tools.listChanged !== false) {
        problems.push(`initialize: capabilities should be {tools: {listChanged: false}}, got ` +
          `${preview(JSON.stringify(result.capabilities), 100)}`);
      }
      if (typeof result.instructions !== "string") problems.push("initialize: instructions missing");
      break;
    case "tools/list": {
      const names = isRecord(result) && Array.isArray(result.tools) ? result.tools.map((tool) => tool && tool.name) : undefined;
      if (!names || names.join(",") !== TOOL_NAMES.join(",")) problems.push(`tools/list: expected ` +
        `${TOOL_NAMES.join(",")}, got ${names ? names.join(",") : "no tools array"}`);
      else if (!result.tools.every((tool) => isRecord(tool.inputSchema) && isRecord(tool.outputSchema) && typeof tool.description === "string")) {
        problems.push("tools/list: every definition needs description, inputSchema and outputSchema");
      }
      if (isRecord(result) && hasOwn(result, "nextCursor")) problems.push("tools/list: nextCursor is never set (§2)");
      if (!names || names.join(",") !== TOOL_NAMES.join(",")) break;
      if (check.modern) {
        // §16.3: without execution (the server decides what becomes a task), cacheable for an hour.
        if (result.tools.some((tool) => hasOwn(tool, "execution"))) problems.push("tools/list (2026-07-28): " +
          "definitions must not carry execution (§16.3)");
        if (result.ttlMs !== LISTING_TTL_MS || result.cacheScope !== "public") problems.push(`tools/list ` +
          `(2026-07-28): ttlMs ${LISTING_TTL_MS} and cacheScope "public" expected, got ` +
            `${preview(JSON.stringify([result.ttlMs, result.cacheScope]), 100)}`);
      } else if (!result.tools.every((tool) => (tool.name === "claude_run" || tool.name === "claude_start") === (isRecord(tool.execution) && tool.execution.taskSupport === "optional"))) {
        problems.push('tools/list: claude_run and claude_start, and only they, carry execution: {taskSupport: ' +
          '"optional"} (§14)');
      }
      break;
    }
    case "tasks/list":
      if (!isRecord(result) || !Array.isArray(result.tasks) || result.tasks.length !== 0 || hasOwn(result, "nextCursor")) {
        problems.push(`tasks/list: no legacy task was ever created, expected {tasks: []}, got ` +
          `${preview(JSON.stringify(result), 200)}`);
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
  if (result.resultType !== resultType) problems.push(`2026-07-28 result: resultType should be "${resultType}", got ` +
    `${preview(JSON.stringify(result.resultType), 60)}`);
  const info = isRecord(result._meta) ? result._meta[SERVER_INFO_KEY] : undefined;
  const expected = { name: "claude-dispatch", version: SERVER_VERSION };
  if (!sameJson(info, expected)) problems.push(`2026-07-28 result: _meta["${SERVER_INFO_KEY}"] should be ` +
    `${JSON.stringify(expected)}, got ${preview(JSON.stringify(info), 200)}`);
  return problems;
}

/** §16.2: the DiscoverResult (no recursion guard in the fuzzer: the tasks extension is declared). */
function checkDiscover(result) {
  if (!isRecord(result)) return [];
  const problems = [];
  if (!sameJson(result.supportedVersions, [MODERN_VERSION])) problems.push(`server/discover: supportedVersions ` +
    `should be ["${MODERN_VERSION}"], got ${preview(JSON.stringify(result.supportedVersions), 200)}`);
  const capabilities = { tools: { listChanged: false }, extensions: { [TASKS_EXTENSION]: {} } };
  if (!sameJson(result.capabilities, capabilities)) problems.push(`server/discover: capabilities should be ` +
    `${JSON.stringify(capabilities)}, got ${preview(JSON.stringify(result.capabilities), 200)}`);
  if (typeof result.instructions !== "string" || !result.instructions.includes("claude_start")) problems.push("server/discover: instructions missing");
  if (result.ttlMs !== LISTING_TTL_MS || result.cacheScope !== "public") problems.push(`server/discover: ttlMs ` +
    `${LISTING_TTL_MS} and cacheScope "public" expected, got ` +
      `${preview(JSON.stringify([result.ttlMs, result.cacheScope]), 100)}`);
  return problems;
}

const isIsoTime = (value) => typeof value === "string" && !Number.isNaN(Date.parse(value)) && new Date(value).toISOString() === value;

/** §16.4: the CreateTaskResult of a job just started: working, no ttl yet, polled every 5 s. */
function checkTaskHandle(result) {
  if (!isRecord(result)) return [];
  const problems = [];
  if (typeof result.taskId !== "string" || !UUID.test(result.taskId)) problems.push(`task handle: taskId should be ` +
    `the job id (a UUID), got ${preview(JSON.stringify(result.taskId), 80)}`);
  if (result.status !== "working" || typeof result.statusMessage !== "string") problems.push(`task handle: expected ` +
    `status "working" with a statusMessage, got ` +
      `${preview(JSON.stringify([result.status, result.statusMessage]), 120)}`);
  if (!isIsoTime(result.createdAt) || !isIsoTime(result.lastUpdatedAt)) problems.push(`task handle: createdAt and ` +
    `lastUpdatedAt must be ISO times, got ${preview(JSON.stringify([result.createdAt, result.lastUpdatedAt]), 120)}`);
  if (result.ttlMs !== null || result.pollIntervalMs !== 5000) problems.push(`task handle: ttlMs null and ` +
    `pollIntervalMs 5000 expected, got ${preview(JSON.stringify([result.ttlMs, result.pollIntervalMs]), 80)}`);
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
    if (result.isError !== true) problems.push(`expected isError true with ${check.code}, got isError ` +
      `${JSON.stringify(result.isError)}: ${preview(text, 200)}`);
    if (!prefix || !errorCodes.includes(prefix[1])) problems.push(`error text must start with a §9 code: ` +
      `${preview(text, 200)}`);
    else if (prefix[1] !== check.code) problems.push(`expected ${check.code}, got ${prefix[1]}: ${preview(text, 300)}`);
    else if (check.mention && !text.includes(check.mention)) problems.push(`${check.code} should name ` +
      `${preview(check.mention, 100)}: ${preview(text, 300)}`);
    else if (check.code === "JOB_NOT_FOUND" && !(text.includes("forgotten") && text.includes("check the id"))) {
      problems.push(`JOB_NOT_FOUND should say to check the id and that finished jobs are forgotten (§5.3): ` +
        `${preview(text, 300)}`);
    }
    if (report.status !== "error") problems.push(`structuredContent.status should be "error", got ` +
      `${JSON.stringify(report.status)}`);
    if (!isRecord(report.error) || report.error.code !== check.code || typeof report.error.detail !== "string") {
      problems.push(`structuredContent.error should be {code: ${check.code}, detail}, got ` +
        `${preview(JSON.stringify(report.error), 200)}`);
    }
    if (hasOwn(report, "job_id")) {
      if (check.echo === undefined || report.job_id !== check.echo) problems.push(`structuredContent.job_id ` +
        `${preview(JSON.stringify(report.job_id), 80)} does not echo the job_id argument`);
    } else if (check.echoRequired && check.echo !== undefined) {
      problems.push("structuredContent.job_id should echo the job_id argument");
    }
    return problems;
  }
  if (hasOwn(result, "isError")) problems.push(`success must not carry isError, got ` +
    `${JSON.stringify(result.isError)}: ${preview(text, 300)}`);
  if (check.listed) {
    if (report.status !== "listed" || !Array.isArray(report.jobs)) problems.push(`claude_list: expected {status: ` +
      `"listed", jobs: [...]}, got status ${JSON.stringify(report.status)}`);
  } else if (check.starts === "run") {
    if (report.status !== "completed") problems.push(`claude_run (@sleep 0): expected completed, got ` +
      `${JSON.stringify(report.status)}: ${preview(text, 300)}`);
    else if (report.result !== `ECHO: ${check.prompt.trim()}`) problems.push(`claude_run: result does not echo the ` +
      `prompt: ${preview(JSON.stringify(report.result), 200)}`);
    if (typeof report.job_id !== "string") problems.push("claude_run: no job_id");
    if (!Number.isInteger(report.elapsed_s)) problems.push("claude_run: elapsed_s missing from the job report (§5.5)");
  } else if (check.starts === "start") {
    // §5.2: running, or queued with its position when CLAUDE_DISPATCH_MAX_JOBS agents already run (§8).
    const queued = report.status === "queued" && Number.isInteger(report.queue_position) && report.queue_position >= 1;
    if (!(report.status === "running" || queued) || typeof report.job_id !== "string") {
      problems.push(`claude_start: expected running, or queued with a queue_position, with a job_id; got ` +
        `${JSON.stringify(report.status)} at ${JSON.stringify(report.queue_position)}`);
    }
  }
  return problems;
}

/**
 * At most max characters, with control characters and lone surrogates written
 * as \uXXXX so a report stays one readable line.
 */
export function preview(value, max = 160) {
  const text = typeof value === "string" ? value : String(value);
  const cut = text.length > max ? `${text.slice(0, max)}…(${text.length} chars)` : text;
  return cut.replace(
    /[\u0000-\u001f\u007f\u2028\u2029]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

export { checkKeyed, describeCheck };
