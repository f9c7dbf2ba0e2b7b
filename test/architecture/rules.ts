/**
 * The layering of src/ as data (issue 12 §2, issue 27 item 4): the checks in
 * graph.ts and seams.ts read these tables, docs/development.md says them in words.
 */

/** Only these files may name `process.`: main reads the process and hands its parts in. */
export const PROCESS_READERS: readonly string[] = ["main.ts"];

/** Folders whose modules, and everything those reach through run-time imports, import no Node builtin. */
export const NODE_FREE: readonly string[] = ["server/", "tools/", "jobs/", "agent/", "core/"];

/**
 * Who may import whom (run-time and type imports alike). A key or entry
 * ending in "/" is a folder (with its subfolders), anything else one file.
 * "*" in a key names one folder; "*" in that key's entries is the same folder
 * (a runtime may import its own folder, not another runtime's). The longest
 * matching key decides; a file no key matches is a violation. "" is everything.
 */
export const LAYERS: Readonly<Record<string, readonly string[]>> = {
  "core/": ["core/"],
  "agent/": ["core/", "agent/"],
  "store/": ["core/", "agent/", "store/"],
  "jobs/": ["core/", "agent/", "store/", "jobs/"],
  "tools/": ["core/", "agent/", "store/", "jobs/", "tools/"],
  "server/": ["core/", "agent/", "store/", "jobs/", "tools/", "server/"],
  "runtimes/*/": ["core/", "agent/", "runtimes/*/"],
  "runtimes/index.ts": ["core/", "agent/", "runtimes/"],
  "runtimes/all.ts": ["core/", "agent/", "runtimes/"],
  // A kind of remote host builds on the one protocol (hosts/remote/), and no other kind.
  "hosts/*/": ["core/", "agent/", "store/", "hosts/*/", "hosts/remote/"],
  // A sandbox is a container made per job: it execs into it as a container host does.
  "hosts/sandbox/": ["core/", "agent/", "store/", "hosts/sandbox/", "hosts/remote/", "hosts/container/"],
  "hosts/kinds.ts": ["core/", "agent/", "hosts/"],
  "worktrees/": ["core/", "agent/", "worktrees/"],
  "approver/": ["core/", "agent/", "store/", "runtimes/", "server/eras.ts", "server/jsonrpc.ts", "approver/"],
  "cli/": [
    "core/",
    "agent/",
    "store/",
    "jobs/",
    "tools/",
    "runtimes/",
    "hosts/kinds.ts",
    "worktrees/",
    "cli/",
    "config.ts",
    "server/version.ts",
  ],
  "config.ts": ["core/", "agent/", "store/", "tools/", "hosts/kinds.ts", "runtimes/", "server/stdio.ts"],
  // The modes main runs, with the process's parts handed in: the MCP server, the command line and what they build.
  "wiring/": [
    "core/",
    "agent/",
    "store/",
    "jobs/",
    "runtimes/",
    "hosts/",
    "worktrees/",
    "approver/",
    "server/",
    "cli/",
    "config.ts",
    "wiring/",
  ],
  "main.ts": [""],
};

export interface RuntimeVocabulary {
  /** How messages name the CLI. */
  label: string;
  /** Flags, and words (code and strings, not comments) that only this CLI's folder may name. */
  flags: readonly string[];
  words: readonly string[];
  /** Values only forbidden as whole string literals ("tool_use", not tool_use_id). */
  strings: readonly string[];
}

/** Flags an agent CLI shares with claude-dispatch's own command line: they say nothing about the agent. */
export const OUR_OWN_FLAGS: readonly string[] = ["--json"];

/**
 * Each agent CLI's vocabulary, by its folder under runtimes/: flags, output event names and fields, permission
 * modes, environment variables. A word two CLIs share may be in both folders and nowhere else. Left out on purpose:
 * names that are also our own output fields (permission_denials, session_id, num_turns, duration_ms, tool_name,
 * api_error_status) and modes too common to be anyone's ("default", "plan", "auto", "read-only").
 */
export const RUNTIME_VOCABULARY: Readonly<Record<string, RuntimeVocabulary>> = {
  claude: {
    label: "Claude Code",
    flags: [
      "--output-format",
      "--input-format",
      "--verbose",
      "--model",
      "--permission-mode",
      "--allowedTools",
      "--disallowedTools",
      "--max-turns",
      "--max-budget-usd",
      "--append-system-prompt",
      "--add-dir",
      "--resume",
      "--continue",
      "--session-id",
      "--mcp-config",
      "--dangerously-skip-permissions",
      "--permission-prompt-tool",
    ],
    words: [
      "stream-json",
      "stream_event",
      "total_cost_usd",
      "is_error",
      "duration_api_ms",
      "error_max_turns",
      "error_max_budget_usd",
      "error_during_execution",
      "queue-operation",
      "CLAUDECODE",
      "CLAUDE_CODE_ENTRYPOINT",
      "ANTHROPIC_API_KEY",
      "ClaudeStream",
      "acceptEdits",
      "dontAsk",
      "bypassPermissions",
    ],
    strings: ["tool_use", "tool_result"],
  },
  codex: {
    label: "Codex",
    flags: ["--skip-git-repo-check", "--sandbox", "--dangerously-bypass-approvals-and-sandbox", "--add-dir"],
    words: [
      "thread.started",
      "turn.started",
      "turn.completed",
      "turn.failed",
      "item.started",
      "item.updated",
      "item.completed",
      "command_execution",
      "agent_message",
      "mcp_tool_call",
      "file_change",
      "CodexReader",
      "workspace-write",
      "danger-full-access",
      "dangerously-bypass-approvals-and-sandbox",
      "CODEX_HOME",
      "CODEX_API_KEY",
      "OPENAI_API_KEY",
    ],
    strings: [],
  },
  gemini: {
    label: "Gemini CLI",
    flags: ["--output-format", "--model", "--resume", "--approval-mode", "--allowed-tools", "--include-directories"],
    words: [
      "stream-json",
      "GeminiReader",
      "run_shell_command",
      "policy_violation",
      "auto_edit",
      "yolo",
      "GEMINI_CLI_NO_RELAUNCH",
      "GEMINI_API_KEY",
      "GEMINI_CLI_HOME",
    ],
    strings: ["tool_use", "tool_result"],
  },
};

/** Where a runtime's name may be compared with (`agent === "codex"`): where the runtimes are listed. */
export const RUNTIME_NAME_HOME: readonly string[] = ["runtimes/"];
/** Where a record's missing runtime may default to one by name (`?? "claude"`): records are normalised on load. */
export const DEFAULT_RUNTIME_HOME: readonly string[] = ["store/"];

/** The host every record names when it runs on this machine; only hosts/ may tell it from another by name. */
export const LOCAL_HOST = "local";
/** The hosts' folders: each is one host's, and the only code that knows it by name. */
export const HOSTS: readonly string[] = ["hosts/"];
/** The list of the kinds of host, which reads CLAUDE_DISPATCH_HOSTS: anyone may import it, as runtimes/index.ts. */
export const HOST_KINDS = "hosts/kinds.ts";
/** Where hosts are constructed: the only places that may import a host's folder. */
export const HOST_BUILDERS: readonly string[] = ["hosts/", "wiring/", "main.ts"];

/** The one folder that may check the platform. */
export const PLATFORM_HOME = "hosts/local/";
/** Files outside PLATFORM_HOME that may read `process.platform`, to pass it on (never to compare it). */
export const PLATFORM_READERS: readonly string[] = ["main.ts"];
/** Words that only a platform-specific path would name (code and strings). */
export const PLATFORM_WORDS: readonly string[] = ["taskkill", "/proc"];
/** String literals that are a platform check wherever they appear. */
export const PLATFORM_STRINGS: readonly string[] = ["win32"];
/** Platform names (process.platform values): a comparison with one (===, !==, ==, !=, case) is a platform check. */
export const PLATFORM_NAMES: readonly string[] = [
  "aix",
  "android",
  "cygwin",
  "darwin",
  "freebsd",
  "haiku",
  "linux",
  "netbsd",
  "openbsd",
  "sunos",
  "win32",
];

/** Lines at most this long, in src/, test/ and bench/ (outside test/fixtures/ and data tables). */
export const MAX_LINE = 120;
export const LINE_ROOTS: readonly string[] = ["src", "test", "bench"];
export const LINE_EXEMPT: readonly string[] = ["test/fixtures/"];
