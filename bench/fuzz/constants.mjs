/**
 * Paths, limits, JSON-RPC codes, tool names and the other constants the oracle and the generator
 * share. Part of the fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
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

export {
  ALLOWED_MODES, CAPABILITIES_KEY, INVALID_PARAMS, INVALID_REQUEST, KNOWN_CODES, LISTING_TTL_MS, MAX_RESULT_CHARS,
  METHOD_NOT_FOUND, MISSING_CAPABILITY, MISSING_DIR, MODERN_TASK_METHODS, MODERN_VERSION, PARSE_ERROR, PERMISSION_MODES,
  REQUIRED_ARGS, SERVER_INFO_KEY, SERVER_VERSION, SYNCHRONOUS_RUN_MAX_TIMEOUT_MS, TASKS_EXTENSION, TOOL_ARGS,
  TOOL_NAMES, UNSUPPORTED_VERSION, UUID, VERSION_KEY, VERSIONS,
};
