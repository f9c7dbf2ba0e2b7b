/**
 * The layering of src/ as a test (issue 12 §2). It reads every .ts file under
 * src/, strips comments with a small tokenizer, parses imports, and holds five
 * rules:
 *   1. only src/main.ts names `process.`;
 *   2. nothing that server/, tools/, jobs/, agent/ or core/ reaches at run time
 *      imports a Node builtin;
 *   3. Claude Code's flags and stream-json vocabulary stay in runtimes/claude/;
 *   4. platform checks stay in hosts/local/;
 *   5. imports follow the layer table below (type imports count);
 *   6. no import circle, type-only imports and dynamic imports included.
 * Plus one sanity rule the others rely on: every import resolves, to a file in
 * src/ or to a Node builtin (a hole in the graph would hide violations).
 *
 * The checks are functions over a virtual file map (path relative to src/ →
 * source), so each rule is also shown to fail on small in-memory examples.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

// ---------------------------------------------------------------------------
// The rules, as data
// ---------------------------------------------------------------------------

/** Rule 1: the files that may name `process.` (the wiring). */
const PROCESS_READERS: readonly string[] = ["main.ts"];

/** Rule 2: folders whose modules, and everything those reach through run-time imports, import no Node builtin. */
const NODE_FREE: readonly string[] = ["server/", "tools/", "jobs/", "agent/", "core/"];

/** Rule 3: Claude Code's flags: forbidden elsewhere in code and in strings (not in comments). */
const CLAUDE_FLAGS: readonly string[] = [
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
];
/**
 * Rule 3: stream-json vocabulary and the reader, as words (code and strings).
 * Left out on purpose: names that are also our own output fields
 * (permission_denials, session_id, num_turns, duration_ms, tool_name, api_error_status).
 */
const CLAUDE_WORDS: readonly string[] = [
  "stream-json",
  "total_cost_usd",
  "is_error",
  "duration_api_ms",
  "error_max_turns",
  "error_max_budget_usd",
  "error_during_execution",
  "CLAUDECODE",
  "CLAUDE_CODE_ENTRYPOINT",
  "ClaudeStream",
];
/** Rule 3: stream-json values that are only forbidden as whole string literals ("tool_use", not tool_use_id). */
const CLAUDE_STRINGS: readonly string[] = ["tool_use", "tool_result"];

interface RuntimeVocabulary {
  /** How messages name the CLI and its output format. */
  label: string;
  stream: string;
  flags: readonly string[];
  words: readonly string[];
  strings: readonly string[];
}

/** Flags an agent CLI shares with claude-dispatch's own command line: they say nothing about the agent. */
const OUR_OWN_FLAGS: readonly string[] = ["--json"];

/** Rule 3: every runtime's vocabulary, by its folder under runtimes/. */
const RUNTIME_VOCABULARY: Readonly<Record<string, RuntimeVocabulary>> = {
  claude: { label: "Claude Code", stream: "stream-json", flags: CLAUDE_FLAGS, words: CLAUDE_WORDS, strings: CLAUDE_STRINGS },
  codex: {
    label: "Codex",
    stream: "exec --json",
    flags: ["--skip-git-repo-check", "--sandbox", "--dangerously-bypass-approvals-and-sandbox", "--add-dir"],
    words: ["thread.started", "turn.started", "turn.completed", "turn.failed", "command_execution", "agent_message", "CodexReader"],
    strings: [],
  },
  gemini: {
    label: "Gemini CLI",
    stream: "stream-json",
    // Shared with Claude Code: the same words may appear in both folders, and in no other.
    flags: ["--output-format", "--model", "--resume", "--approval-mode", "--allowed-tools", "--include-directories"],
    words: ["stream-json", "GeminiReader", "run_shell_command", "GEMINI_CLI_NO_RELAUNCH"],
    strings: ["tool_use", "tool_result"],
  },
};

/** Rule 4: the one folder that may check the platform. */
const PLATFORM_HOME = "hosts/local/";
/** Rule 4: files outside PLATFORM_HOME that may name `process.platform`, to pass it on (never to compare it). */
const PLATFORM_READERS: readonly string[] = ["main.ts"];
/** Rule 4: words that only a platform-specific path would name (code and strings). */
const PLATFORM_WORDS: readonly string[] = ["taskkill", "/proc"];
/** Rule 4: string literals that are a platform check wherever they appear. */
const PLATFORM_STRINGS: readonly string[] = ["win32"];
/** Rule 4: platform names (process.platform values): a comparison with one (===, !==, ==, !=, case) is a platform check. */
const PLATFORM_NAMES: readonly string[] = ["aix", "android", "cygwin", "darwin", "freebsd", "haiku", "linux", "netbsd", "openbsd", "sunos", "win32"];

/**
 * Rule 5: who may import whom (run-time and type imports alike). A key or entry
 * ending in "/" is a folder (with its subfolders), anything else one file.
 * "*" in a key names one folder; "*" in that key's entries is the same folder
 * (a runtime may import its own folder, not another runtime's). The longest
 * matching key decides; a file no key matches is a violation. "" is everything.
 */
const LAYERS: Readonly<Record<string, readonly string[]>> = {
  "core/": ["core/"],
  "agent/": ["core/", "agent/"],
  "store/": ["core/", "agent/", "store/"],
  "jobs/": ["core/", "agent/", "store/", "jobs/"],
  "tools/": ["core/", "agent/", "store/", "jobs/", "tools/"],
  "server/": ["core/", "agent/", "store/", "jobs/", "tools/", "server/"],
  "runtimes/*/": ["core/", "agent/", "runtimes/*/"],
  "runtimes/index.ts": ["core/", "agent/", "runtimes/"],
  "runtimes/all.ts": ["core/", "agent/", "runtimes/"],
  "hosts/*/": ["core/", "agent/", "store/", "hosts/*/"],
  "worktrees/": ["core/", "agent/", "worktrees/"],
  "approver/": ["core/", "agent/", "store/", "runtimes/", "server/eras.ts", "server/jsonrpc.ts", "approver/"],
  "cli/": ["core/", "agent/", "store/", "jobs/", "tools/", "runtimes/", "hosts/", "worktrees/", "cli/", "config.ts", "server/version.ts"],
  "config.ts": ["core/", "agent/", "store/", "tools/", "hosts/", "runtimes/", "server/stdio.ts"],
  // What main builds, with the process's parts handed in: everything below the MCP surface.
  "wiring/": ["core/", "agent/", "store/", "jobs/", "runtimes/", "hosts/", "worktrees/", "config.ts", "wiring/"],
  "main.ts": [""],
};

// ---------------------------------------------------------------------------
// Reading source: a tokenizer that knows comments, strings, templates, regexes
// ---------------------------------------------------------------------------

type TokenKind = "word" | "punct" | "string" | "template" | "regex";

interface Token {
  kind: TokenKind;
  /** The token as written. */
  text: string;
  /** Strings and template chunks: the contents between the delimiters (escapes left as written). */
  value: string;
  start: number;
  /** A template chunk that ends in `${`. */
  opens?: boolean;
}

interface Scanned {
  tokens: Token[];
  /** The source with comments blanked (newlines kept, so offsets and lines hold). */
  noComments: string;
  /** The source with comments and the contents of strings, templates and regexes blanked. */
  codeOnly: string;
  lineOf(offset: number): number;
  lineText(line: number): string;
  /** Why the tokenizer lost its way (an unterminated literal, unbalanced braces), if it did. */
  trouble: string | undefined;
}

const PUNCTUATORS = ["===", "!==", "...", "==", "!=", "=>", "?.", "??", "&&", "||"];
/** Words after which a `/` starts a regex rather than a division. */
const REGEX_AFTER_WORDS = new Set([
  "return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do", "else", "yield", "await",
]);
const WORD_CHAR = /[\w$\u0080-\uffff]/;

function regexMayStart(prev: Token | undefined): boolean {
  if (prev === undefined) return true;
  if (prev.kind === "word") return REGEX_AFTER_WORDS.has(prev.text);
  if (prev.kind === "punct") return prev.text !== ")" && prev.text !== "]" && prev.text !== "}";
  return prev.kind === "template" && prev.opens === true;
}

function scan(source: string): Scanned {
  const tokens: Token[] = [];
  const noComments = source.split("");
  const codeOnly = source.split("");
  const blank = (chars: string[], from: number, to: number): void => {
    for (let k = from; k < to; k += 1) if (chars[k] !== "\n" && chars[k] !== "\r") chars[k] = " ";
  };
  /** Brace depths at which an open template substitution closes. */
  const substitutions: number[] = [];
  let depth = 0;
  let trouble: string | undefined;
  let i = 0;
  const n = source.length;
  if (source.startsWith("#!")) {
    i = source.indexOf("\n") === -1 ? n : source.indexOf("\n"); // the hashbang line, a comment to the checks
    blank(noComments, 0, i);
    blank(codeOnly, 0, i);
  }

  /** Reads a template chunk whose opening delimiter (` or }) ends just before `from`. */
  const templateChunk = (begin: number, from: number): void => {
    let j = from;
    while (j < n) {
      const c = source[j];
      if (c === "\\") {
        j += 2;
        continue;
      }
      if (c === "`") {
        tokens.push({ kind: "template", text: source.slice(begin, j + 1), value: source.slice(from, j), start: begin });
        blank(codeOnly, from, j);
        i = j + 1;
        return;
      }
      if (c === "$" && source[j + 1] === "{") {
        tokens.push({ kind: "template", text: source.slice(begin, j + 2), value: source.slice(from, j), start: begin, opens: true });
        blank(codeOnly, from, j);
        substitutions.push(depth);
        i = j + 2;
        return;
      }
      j += 1;
    }
    tokens.push({ kind: "template", text: source.slice(begin), value: source.slice(from), start: begin });
    blank(codeOnly, from, n);
    trouble ??= `an unterminated template at offset ${begin}`;
    i = n;
  };

  while (i < n) {
    const c = source[i] ?? "";
    const next = source[i + 1] ?? "";
    if (/\s/.test(c)) {
      i += 1;
      continue;
    }
    if (c === "/" && next === "/") {
      const end = source.indexOf("\n", i) === -1 ? n : source.indexOf("\n", i);
      blank(noComments, i, end);
      blank(codeOnly, i, end);
      i = end;
      continue;
    }
    if (c === "/" && next === "*") {
      const close = source.indexOf("*/", i + 2);
      if (close === -1) trouble ??= `an unterminated comment at offset ${i}`;
      const end = close === -1 ? n : close + 2;
      blank(noComments, i, end);
      blank(codeOnly, i, end);
      i = end;
      continue;
    }
    if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < n && source[j] !== c && source[j] !== "\n") j += source[j] === "\\" ? 2 : 1;
      if (source[j] !== c) trouble ??= `an unterminated string at offset ${i}`;
      tokens.push({ kind: "string", text: source.slice(i, j + 1), value: source.slice(i + 1, j), start: i });
      blank(codeOnly, i + 1, j);
      i = j + 1;
      continue;
    }
    if (c === "`") {
      templateChunk(i, i + 1);
      continue;
    }
    if (c === "}" && substitutions.length > 0 && substitutions[substitutions.length - 1] === depth) {
      substitutions.pop();
      templateChunk(i, i + 1);
      continue;
    }
    if (c === "/" && regexMayStart(tokens[tokens.length - 1])) {
      let j = i + 1;
      let inClass = false;
      while (j < n && source[j] !== "\n") {
        const r = source[j];
        if (r === "\\") j += 1;
        else if (r === "[") inClass = true;
        else if (r === "]") inClass = false;
        else if (r === "/" && !inClass) break;
        j += 1;
      }
      if (source[j] === "/") {
        let end = j + 1;
        while (end < n && /[a-z]/i.test(source[end] ?? "")) end += 1;
        tokens.push({ kind: "regex", text: source.slice(i, end), value: source.slice(i + 1, j), start: i });
        blank(codeOnly, i + 1, j);
        i = end;
        continue;
      }
      // Not a regex after all (no closing slash on the line): a division.
    }
    if (WORD_CHAR.test(c)) {
      let j = i + 1;
      while (j < n && WORD_CHAR.test(source[j] ?? "")) j += 1;
      tokens.push({ kind: "word", text: source.slice(i, j), value: "", start: i });
      i = j;
      continue;
    }
    const punct = PUNCTUATORS.find((p) => source.startsWith(p, i) && !(p === "?." && /\d/.test(source[i + 2] ?? ""))) ?? c;
    if (punct === "{") depth += 1;
    if (punct === "}") depth -= 1;
    tokens.push({ kind: "punct", text: punct, value: "", start: i });
    i += punct.length;
  }

  if (depth !== 0 || substitutions.length > 0) trouble ??= `unbalanced braces (depth ${depth} at the end)`;
  const lineStarts = [0];
  for (let k = 0; k < n; k += 1) if (source[k] === "\n") lineStarts.push(k + 1);
  const lines = source.split("\n");
  return {
    tokens,
    noComments: noComments.join(""),
    codeOnly: codeOnly.join(""),
    trouble,
    lineOf(offset: number): number {
      let low = 0;
      let high = lineStarts.length - 1;
      while (low < high) {
        const mid = (low + high + 1) >> 1;
        if ((lineStarts[mid] ?? 0) <= offset) low = mid;
        else high = mid - 1;
      }
      return low + 1;
    },
    lineText(line: number): string {
      const text = (lines[line - 1] ?? "").trim();
      return text.length > 140 ? `${text.slice(0, 137)}...` : text;
    },
  };
}

// ---------------------------------------------------------------------------
// Imports
// ---------------------------------------------------------------------------

interface ImportRef {
  /** The specifier, or undefined for a dynamic import of a computed one. */
  specifier: string | undefined;
  /** `import type` / `export type` / `typeof import()`: erased, so no run-time edge. */
  typeOnly: boolean;
  line: number;
}

/** A string, or a template without substitutions. */
function literal(token: Token | undefined): string | undefined {
  if (token === undefined) return undefined;
  if (token.kind === "string") return token.value;
  if (token.kind === "template" && token.opens !== true && token.text.startsWith("`")) return token.value;
  return undefined;
}

function isMemberAccess(token: Token | undefined): boolean {
  return token !== undefined && token.kind === "punct" && (token.text === "." || token.text === "?.");
}

/**
 * Static `import … from`, side-effect `import "…"`, `export … from`, and
 * dynamic `import("…")`. `import { type A } from "x"` counts as a run-time
 * import: under verbatimModuleSyntax it is kept as `import {} from "x"`.
 */
function parseImports(scanned: Scanned): ImportRef[] {
  const { tokens } = scanned;
  const found: ImportRef[] = [];
  const fromClause = (k: number): string | undefined => {
    for (let m = k + 1; m < tokens.length && m < k + 2000; m += 1) {
      const token = tokens[m];
      if (token === undefined || token.text === ";" || token.text === "=") return undefined;
      if (token.kind === "word" && (token.text === "import" || token.text === "export")) return undefined;
      if (token.kind === "word" && token.text === "from" && literal(tokens[m + 1]) !== undefined) return literal(tokens[m + 1]);
      if (token.kind === "string" && tokens[m - 1]?.text !== "{" && tokens[m - 1]?.text !== ",") return undefined;
    }
    return undefined;
  };
  tokens.forEach((token, k) => {
    if (token.kind !== "word" || (token.text !== "import" && token.text !== "export")) return;
    if (isMemberAccess(tokens[k - 1])) return;
    const line = scanned.lineOf(token.start);
    const next = tokens[k + 1];
    const after = tokens[k + 2];
    if (token.text === "import") {
      if (next?.text === "(") {
        const typeOnly = tokens[k - 1]?.kind === "word" && tokens[k - 1]?.text === "typeof";
        const specifier = literal(after);
        const closes = tokens[k + 3]?.text === ")" || tokens[k + 3]?.text === ",";
        found.push({ specifier: specifier !== undefined && closes ? specifier : undefined, typeOnly, line });
        return;
      }
      if (next?.text === ".") return; // import.meta
      const bare = literal(next);
      if (bare !== undefined) {
        found.push({ specifier: bare, typeOnly: false, line });
        return;
      }
      const typeOnly = next?.text === "type" && after !== undefined && after.text !== "from" && after.text !== ",";
      const specifier = fromClause(k);
      if (specifier !== undefined) found.push({ specifier, typeOnly, line });
      return;
    }
    // export: only `export {…} from`, `export * from` and their `export type` forms import anything.
    const typeOnly = next?.text === "type";
    const head = typeOnly ? after : next;
    if (head?.text !== "{" && head?.text !== "*") return;
    const specifier = fromClause(k);
    if (specifier !== undefined) found.push({ specifier, typeOnly, line });
  });
  return found;
}

// ---------------------------------------------------------------------------
// The source tree as a virtual file map
// ---------------------------------------------------------------------------

/** Path relative to src/ (posix separators) → source text. */
type Files = ReadonlyMap<string, string>;

interface Violation {
  rule: string;
  file: string;
  line: number;
  message: string;
  /** The offending line as written. */
  text: string;
}

interface Module {
  file: string;
  scanned: Scanned;
  imports: Array<ImportRef & { target: Target }>;
}

type Target =
  | { kind: "file"; file: string }
  | { kind: "builtin"; name: string }
  | { kind: "package"; name: string }
  | { kind: "missing"; reason: string };

const BUILTINS = new Set(builtinModules);

function isBuiltin(specifier: string): boolean {
  if (specifier.startsWith("node:")) return true;
  return BUILTINS.has(specifier) || BUILTINS.has(specifier.split("/")[0] ?? "");
}

function resolveImport(from: string, specifier: string | undefined, files: Files): Target {
  if (specifier === undefined) return { kind: "missing", reason: "a dynamic import of a computed specifier cannot be checked" };
  if (!specifier.startsWith(".") && !specifier.startsWith("/")) {
    return isBuiltin(specifier)
      ? { kind: "builtin", name: specifier.startsWith("node:") ? specifier : `node:${specifier}` }
      : { kind: "package", name: specifier };
  }
  const joined = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  if (joined.startsWith("../") || joined === ".." || specifier.startsWith("/")) {
    return { kind: "missing", reason: `"${specifier}" leaves src/` };
  }
  const candidates = [joined.replace(/\.js$/, ".ts").replace(/\.mjs$/, ".mts"), joined, `${joined}.ts`, `${joined}/index.ts`];
  const file = candidates.find((candidate) => files.has(candidate));
  return file === undefined ? { kind: "missing", reason: `"${specifier}" resolves to no file in src/` } : { kind: "file", file };
}

function modules(files: Files): Map<string, Module> {
  const result = new Map<string, Module>();
  for (const [file, source] of files) {
    const scanned = scan(source);
    const imports = parseImports(scanned).map((ref) => ({ ...ref, target: resolveImport(file, ref.specifier, files) }));
    result.set(file, { file, scanned, imports });
  }
  return result;
}

/** A prefix ending in "/" is a folder with its subfolders, "" is everything, anything else one file. */
function under(file: string, prefixes: readonly string[]): boolean {
  return prefixes.some((prefix) => (prefix === "" || prefix.endsWith("/") ? file.startsWith(prefix) : file === prefix));
}

function byPlace(found: Violation[]): Violation[] {
  return found.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line));
}

function violation(rule: string, module: Module, line: number, message: string): Violation {
  return { rule, file: module.file, line, message, text: module.scanned.lineText(line) };
}

/**
 * Every match of a word in `text`, `-` counting as a word character (so
 * --resume is not --resumed). A path word (/proc) is also not the start of a
 * file name (./posix/proc.js).
 */
function wordMatches(text: string, word: string): number[] {
  const escaped = word.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  const after = word.startsWith("/") ? "(?![\\w$-])(?!\\.[\\w$])" : "(?![\\w$-])";
  const pattern = new RegExp(`(?<![\\w$-])${escaped}${after}`, "g");
  return [...text.matchAll(pattern)].map((match) => match.index);
}

// ---------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------

/** Rule 1: `process.` (or `process?.`, `process[`, `globalThis.process`) in code outside PROCESS_READERS. */
function checkProcess(files: Files): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    if (under(module.file, PROCESS_READERS)) continue;
    const { tokens } = module.scanned;
    tokens.forEach((token, k) => {
      if (token.kind !== "word" || token.text !== "process") return;
      const prev = tokens[k - 1];
      const global = isMemberAccess(prev) && (tokens[k - 2]?.text === "globalThis" || tokens[k - 2]?.text === "global");
      if (isMemberAccess(prev) && !global) return; // someone's property named process
      const next = tokens[k + 1];
      if (!global && !(isMemberAccess(next) || next?.text === "[")) return;
      found.push(violation("1", module, module.scanned.lineOf(token.start), `names process. outside ${PROCESS_READERS.map((f) => `src/${f}`).join(", ")}`));
    });
  }
  return byPlace(found);
}

/** Rule 2: a Node builtin imported by a module that a NODE_FREE module reaches through run-time imports. */
function checkNodeImports(files: Files): Violation[] {
  const all = modules(files);
  /** Multi-source breadth-first search: the shortest chain from a NODE_FREE root. */
  const parent = new Map<string, string | undefined>();
  const queue = [...all.keys()].filter((file) => under(file, NODE_FREE)).sort();
  for (const root of queue) parent.set(root, undefined);
  for (let q = 0; q < queue.length; q += 1) {
    const file = queue[q] ?? "";
    for (const ref of all.get(file)?.imports ?? []) {
      if (ref.typeOnly || ref.target.kind !== "file" || parent.has(ref.target.file)) continue;
      parent.set(ref.target.file, file);
      queue.push(ref.target.file);
    }
  }
  const found: Violation[] = [];
  for (const file of queue) {
    const module = all.get(file);
    if (module === undefined) continue;
    const chain: string[] = [];
    for (let at: string | undefined = file; at !== undefined; at = parent.get(at)) chain.unshift(`src/${at}`);
    for (const ref of module.imports) {
      if (ref.typeOnly || ref.target.kind !== "builtin") continue;
      const reached = chain.length === 1 ? "" : `, and ${chain[0]} reaches it at run time`;
      found.push(violation("2", module, ref.line, `imports ${ref.target.name}${reached}: ${[...chain, ref.target.name].join(" → ")}`));
    }
  }
  return byPlace(found);
}

/**
 * Rule 3: each agent CLI's flags and output vocabulary outside its runtime's folder (code and strings, not
 * comments). A word two CLIs share (say --model) may appear in both runtimes' folders, and nowhere else.
 */
function checkClaudeVocabulary(files: Files, runtimes: Readonly<Record<string, RuntimeVocabulary>> = RUNTIME_VOCABULARY): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    const home = /^runtimes\/([^/]+)\//.exec(module.file)?.[1];
    const ownWords = home === undefined ? [] : [...(runtimes[home]?.flags ?? []), ...(runtimes[home]?.words ?? [])];
    const ownStrings = home === undefined ? [] : (runtimes[home]?.strings ?? []);
    const { scanned } = module;
    for (const [name, vocabulary] of Object.entries(runtimes)) {
      if (name === home) continue;
      for (const word of [...vocabulary.flags, ...vocabulary.words]) {
        if (ownWords.includes(word)) continue;
        for (const at of wordMatches(scanned.noComments, word)) {
          found.push(violation("3", module, scanned.lineOf(at), `names ${vocabulary.label}'s ${word} outside src/runtimes/${name}/`));
        }
      }
      for (const token of scanned.tokens) {
        const value = literal(token);
        if (value !== undefined && vocabulary.strings.includes(value) && !ownStrings.includes(value)) {
          found.push(violation("3", module, scanned.lineOf(token.start), `names ${vocabulary.stream}'s "${value}" outside src/runtimes/${name}/`));
        }
      }
    }
  }
  return byPlace(found);
}

const COMPARISONS = new Set(["===", "!==", "==", "!="]);

/** Rule 4: platform checks outside PLATFORM_HOME (code and strings, not comments). */
function checkPlatform(files: Files): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    if (module.file.startsWith(PLATFORM_HOME)) continue;
    const { scanned } = module;
    const { tokens } = scanned;
    const where = `outside src/${PLATFORM_HOME}`;
    for (const word of PLATFORM_WORDS) {
      for (const at of wordMatches(scanned.noComments, word)) found.push(violation("4", module, scanned.lineOf(at), `names ${word} ${where}`));
    }
    tokens.forEach((token, k) => {
      const value = literal(token);
      if (value !== undefined && PLATFORM_STRINGS.includes(value)) {
        found.push(violation("4", module, scanned.lineOf(token.start), `names the platform "${value}" ${where}`));
      } else if (value !== undefined && PLATFORM_NAMES.includes(value)) {
        const prev = tokens[k - 1];
        const compared = COMPARISONS.has(prev?.text ?? "") || COMPARISONS.has(tokens[k + 1]?.text ?? "") || (prev?.kind === "word" && prev.text === "case");
        if (compared) found.push(violation("4", module, scanned.lineOf(token.start), `compares with the platform name "${value}" ${where}`));
      }
      const platform = token.kind === "word" && token.text === "process" && isMemberAccess(tokens[k + 1]) && tokens[k + 2]?.text === "platform";
      if (platform && !under(module.file, PLATFORM_READERS)) {
        found.push(violation("4", module, scanned.lineOf(token.start), `reads process.platform ${where} and ${PLATFORM_READERS.map((f) => `src/${f}`).join(", ")}`));
      }
    });
  }
  return byPlace(found);
}

/** The LAYERS key that governs a file, with the folder its "*" stands for. */
function layerOf(file: string): { key: string; star: string | undefined } | undefined {
  let best: { key: string; star: string | undefined } | undefined;
  for (const key of Object.keys(LAYERS)) {
    let star: string | undefined;
    if (key.includes("*")) {
      const [before = "", after = ""] = key.split("*");
      if (!file.startsWith(before)) continue;
      const name = file.slice(before.length).split("/")[0] ?? "";
      if (name === "" || !file.startsWith(`${before}${name}${after}`)) continue;
      star = name;
    } else if (!under(file, [key])) {
      continue;
    }
    if (best === undefined || key.length > best.key.length) best = { key, star };
  }
  return best;
}

/** Rule 5: an import (run-time or type) that LAYERS does not allow. */
function checkLayers(files: Files): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    const layer = layerOf(module.file);
    if (layer === undefined) {
      found.push(violation("5", module, 1, `src/${module.file} belongs to no layer (add it to a folder, or to LAYERS)`));
      continue;
    }
    const allowed = (LAYERS[layer.key] ?? []).map((entry) => (layer.star === undefined ? entry : entry.replace("*", layer.star)));
    for (const ref of module.imports) {
      if (ref.target.kind !== "file" || under(ref.target.file, allowed)) continue;
      const kind = ref.typeOnly ? "a type import" : "an import";
      found.push(violation("5", module, ref.line, `${kind} of src/${ref.target.file}: ${layer.key} may import only ${allowed.join(", ")}`));
    }
  }
  return byPlace(found);
}

/** The graph the rules read has no holes: every import names a file in src/ or a Node builtin (no packages: zero dependencies). */
function checkImportsResolve(files: Files): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    for (const ref of module.imports) {
      if (ref.target.kind === "missing") found.push(violation("imports", module, ref.line, ref.target.reason));
      if (ref.target.kind === "package") found.push(violation("imports", module, ref.line, `imports the package "${ref.target.name}" (src/ has no dependencies)`));
    }
  }
  return byPlace(found);
}

/**
 * Rule 6: no circle in the import graph, type-only and dynamic imports included: a circle is two modules that
 * can only be understood together. Each circle is reported once, at the import that closes it.
 */
function checkCircles(files: Files): Violation[] {
  const graph = modules(files);
  const found: Violation[] = [];
  const state = new Map<string, "open" | "done">();
  const trail: string[] = [];
  const visit = (file: string): void => {
    state.set(file, "open");
    trail.push(file);
    const module = graph.get(file) as Module;
    for (const ref of module.imports) {
      if (ref.target.kind !== "file") continue;
      const next = ref.target.file;
      if (state.get(next) === "open") {
        const circle = [...trail.slice(trail.indexOf(next)), next].map((name) => `src/${name}`).join(" -> ");
        found.push(violation("6", module, ref.line, `an import circle: ${circle}`));
      } else if (!state.has(next)) visit(next);
    }
    trail.pop();
    state.set(file, "done");
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return byPlace(found);
}

function format(found: readonly Violation[]): string[] {
  return found.map((v) => `src/${v.file}:${v.line}: ${v.message}\n    ${v.text}`);
}

function assertNone(found: readonly Violation[], rule: string): void {
  if (found.length === 0) return;
  assert.fail(`${rule}: ${found.length} violation${found.length === 1 ? "" : "s"}\n${format(found).join("\n")}`);
}

const virtual = (entries: Record<string, string>): Files => new Map(Object.entries(entries));

// ---------------------------------------------------------------------------
// The checks, shown to fail on small examples
// ---------------------------------------------------------------------------

describe("the tokenizer", () => {
  test("blanks comments, keeps strings, and keeps offsets", () => {
    const source = 'const a = "// not a comment"; // a comment\n/* block\n comment */ const b = \'/* nor this */\';';
    const { noComments, codeOnly } = scan(source);
    assert.equal(noComments.length, source.length);
    assert.ok(noComments.includes('"// not a comment"'));
    assert.ok(noComments.includes("'/* nor this */'"));
    assert.ok(!noComments.includes("a comment\n"));
    assert.ok(!noComments.includes("block"));
    assert.ok(!codeOnly.includes("not a comment"));
    assert.equal(noComments.split("\n").length, 3);
  });

  test("templates with substitutions, nested strings and braces", () => {
    const source = "const t = `a ${ { x: \"}\" }.x + `in ${1}` } // b ${'c'}`; // gone";
    const { noComments, tokens } = scan(source);
    assert.ok(noComments.includes("// b"), "a // inside a template is text");
    assert.ok(!noComments.includes("gone"));
    assert.deepEqual(tokens.filter((token) => token.kind === "template").map((token) => token.value), ["a ", "in ", "", " // b ", ""]);
  });

  test("reads a hashbang line as a comment", () => {
    const { noComments, tokens } = scan("#!/usr/bin/env node\nconst a = 1;");
    assert.ok(noComments.startsWith(" ".repeat(19) + "\n"));
    assert.equal(tokens[0]?.text, "const");
  });

  test("says when it loses its way", () => {
    assert.equal(scan("const a = { b: `x ${c}` };").trouble, undefined);
    assert.match(scan('const a = "open').trouble ?? "", /unterminated string/);
    assert.match(scan("const a = `open ${b}").trouble ?? "", /unterminated template|unbalanced/);
    assert.match(scan("function f() {").trouble ?? "", /unbalanced braces/);
  });

  test("a regex with slashes is not a comment; a division is not a regex", () => {
    const { noComments, tokens } = scan("const r = /\\/\\/x[/]/g; const d = a / b; // c\nconst e = (x) / 2 / y;");
    assert.ok(noComments.includes("/\\/\\/x[/]/g"));
    assert.ok(!noComments.includes("// c"));
    assert.deepEqual(tokens.filter((token) => token.kind === "regex").map((token) => token.text), ["/\\/\\/x[/]/g"]);
  });

  test("parses every import form", () => {
    const source = [
      'import a from "./a.js";',
      "import {",
      "  b,",
      "  type C,",
      '} from "./b.js";',
      'import type { D } from "./d.js";',
      'import type * as E from "./e.js";',
      'import "./side.js";',
      'export { f } from "./f.js";',
      'export * from "./g.js";',
      'export type { H } from "./h.js";',
      "export { local };",
      "export const x = 1;",
      'const i = await import("./i.js");',
      'type J = typeof import("./j.js");',
      "const k = import.meta.url;",
      "const m = await import(name);",
      "// import z from \"./comment.js\";",
      'const s = "import y from \'./string.js\'";',
    ].join("\n");
    assert.deepEqual(
      parseImports(scan(source)).map((ref) => [ref.specifier, ref.typeOnly, ref.line]),
      [
        ["./a.js", false, 1],
        ["./b.js", false, 2],
        ["./d.js", true, 6],
        ["./e.js", true, 7],
        ["./side.js", false, 8],
        ["./f.js", false, 9],
        ["./g.js", false, 10],
        ["./h.js", true, 11],
        ["./i.js", false, 14],
        ["./j.js", true, 15],
        [undefined, false, 17],
      ],
    );
  });
});

describe("rule 1: only main.ts names process.", () => {
  test("fails on process.env in jobs/", () => {
    const found = checkProcess(virtual({ "jobs/zz.ts": "// process.env in a comment is fine\nexport const home = process.env.HOME;\n" }));
    assert.deepEqual(format(found), ["src/jobs/zz.ts:2: names process. outside src/main.ts\n    export const home = process.env.HOME;"]);
  });

  test("catches process?., process[ and globalThis.process", () => {
    const found = checkProcess(virtual({ "core/zz.ts": 'process?.exit(1);\nprocess["env"];\nglobalThis.process;\n' }));
    assert.deepEqual(found.map((v) => v.line), [1, 2, 3]);
  });

  test("passes main.ts, comments, strings, and someone's property named process", () => {
    const found = checkProcess(
      virtual({
        "main.ts": "process.exitCode = 1;",
        "jobs/zz.ts": '/* process.exit */ const s = "process.env"; const t = `process.${s}`; child.process.kill(); const p = (process: X) => 1;',
      }),
    );
    assert.deepEqual(found, []);
  });
});

describe("rule 2: no Node builtin reached from server/, tools/, jobs/, agent/, core/", () => {
  test("fails on core/ importing node:fs", () => {
    const found = checkNodeImports(virtual({ "core/zz-violation.ts": 'import { readFileSync } from "node:fs";\n' }));
    assert.deepEqual(format(found), ['src/core/zz-violation.ts:1: imports node:fs: src/core/zz-violation.ts → node:fs\n    import { readFileSync } from "node:fs";']);
  });

  test("reports the chain through other layers", () => {
    const found = checkNodeImports(
      virtual({
        "server/handler.ts": 'import { JobRegistry } from "../jobs/registry.js";',
        "jobs/registry.ts": 'import type { X } from "./types.js";\nimport { StateStore } from "../store/state-store.js";',
        "jobs/types.ts": "export type X = 1;",
        "store/state-store.ts": '\n\nimport { open } from "fs/promises";',
      }),
    );
    assert.deepEqual(found.map((v) => `${v.file}:${v.line}: ${v.message}`), [
      "store/state-store.ts:3: imports node:fs/promises, and src/jobs/registry.ts reaches it at run time: src/jobs/registry.ts → src/store/state-store.ts → node:fs/promises",
    ]);
  });

  test("dynamic imports and re-exports count; type imports do not", () => {
    const found = checkNodeImports(
      virtual({
        "agent/a.ts": 'export { b } from "./b.js";\nimport type { S } from "../store/s.js";\nexport type { T } from "../store/t.js";',
        "agent/b.ts": 'export const b = () => import("node:child_process");',
        "store/s.ts": 'import "node:fs";',
        "store/t.ts": 'import "node:fs";',
      }),
    );
    assert.deepEqual(found.map((v) => v.message), ["imports node:child_process: src/agent/b.ts → node:child_process"]);
  });

  test("passes store/, hosts/ and cli/ using builtins when no node-free module reaches them", () => {
    const found = checkNodeImports(
      virtual({ "store/files.ts": 'import "node:fs";', "cli/x.ts": 'import "node:fs";\nimport "../store/files.js";', "jobs/j.ts": 'import type { F } from "../store/files.js";' }),
    );
    assert.deepEqual(found, []);
  });
});

describe("rule 3: Claude Code's vocabulary stays in runtimes/claude/", () => {
  const CLAUDE_ONLY = { claude: RUNTIME_VOCABULARY.claude as RuntimeVocabulary };

  test("a word two CLIs share may be in both folders and nowhere else; a word of one only in its own", () => {
    const found = checkClaudeVocabulary(
      virtual({
        "runtimes/gemini/args.ts": 'const args = ["--resume", "--output-format=stream-json"]; const cost = r.total_cost_usd;',
        "runtimes/codex/args.ts": 'const a = ["--resume"];',
        "tools/zz.ts": 'const s = "--sandbox";',
      }),
    );
    assert.deepEqual(found.map((v) => `${v.file}:${v.line}: ${v.message}`), [
      "runtimes/codex/args.ts:1: names Claude Code's --resume outside src/runtimes/claude/",
      "runtimes/codex/args.ts:1: names Gemini CLI's --resume outside src/runtimes/gemini/",
      "runtimes/gemini/args.ts:1: names Claude Code's total_cost_usd outside src/runtimes/claude/",
      "tools/zz.ts:1: names Codex's --sandbox outside src/runtimes/codex/",
    ]);
  });

  test('fails on "--resume" in tools/', () => {
    const found = checkClaudeVocabulary(virtual({ "tools/zz.ts": 'export const flag = "--resume";\n' }), CLAUDE_ONLY);
    assert.deepEqual(format(found), ['src/tools/zz.ts:1: names Claude Code\'s --resume outside src/runtimes/claude/\n    export const flag = "--resume";']);
  });

  test("catches flags in templates, event names, fields and the reader", () => {
    const found = checkClaudeVocabulary(
      virtual({
        "store/zz.ts": [
          "const a = `--max-turns=${n}`;",
          'if (event.type === "tool_use") {}',
          "const cost = result.total_cost_usd;",
          "new ClaudeStream({});",
          "const f = 'stream-json';",
          "const e = event.is_error;",
        ].join("\n"),
      }),
      CLAUDE_ONLY,
    );
    assert.deepEqual(found.map((v) => `${v.line}: ${v.message}`), [
      "1: names Claude Code's --max-turns outside src/runtimes/claude/",
      '2: names stream-json\'s "tool_use" outside src/runtimes/claude/',
      "3: names Claude Code's total_cost_usd outside src/runtimes/claude/",
      "4: names Claude Code's ClaudeStream outside src/runtimes/claude/",
      "5: names Claude Code's stream-json outside src/runtimes/claude/",
      "6: names Claude Code's is_error outside src/runtimes/claude/",
    ]);
  });

  test("passes comments, runtimes/claude/, our own field names and longer words", () => {
    const found = checkClaudeVocabulary(
      virtual({
        "runtimes/claude/args.ts": 'const args = ["--output-format", "stream-json", "--resume"];',
        "tools/zz.ts": '// the agent ran with --resume and stream-json\nconst d = r.permission_denials; const u = "tool_use_id"; const v = "--resumed";',
      }),
    );
    assert.deepEqual(found, []);
  });
});

describe("rule 4: platform checks stay in hosts/local/", () => {
  test('fails on "win32" in store/', () => {
    const found = checkPlatform(virtual({ "store/zz.ts": "export const windows = (p: string) => p === 'win32';\n" }));
    assert.deepEqual(format(found), ["src/store/zz.ts:1: names the platform \"win32\" outside src/hosts/local/\n    export const windows = (p: string) => p === 'win32';"]);
  });

  test("main.ts may pass process.platform on, not compare it", () => {
    const found = checkPlatform(
      virtual({
        "main.ts": 'const host = { platform: process.platform };\nif (process.platform !== "linux") {}\nswitch (process.platform) { case "darwin": }',
      }),
    );
    assert.deepEqual(found.map((v) => `${v.line}: ${v.message}`), [
      '2: compares with the platform name "linux" outside src/hosts/local/',
      '3: compares with the platform name "darwin" outside src/hosts/local/',
    ]);
  });

  test("catches process.platform, taskkill and /proc elsewhere", () => {
    const found = checkPlatform(
      virtual({ "cli/zz.ts": 'const p = process.platform;\nrun("taskkill.exe");\nread(`/proc/${pid}/stat`);\nconst self = "/proc";' }),
    );
    assert.deepEqual(found.map((v) => `${v.line}: ${v.message}`), [
      "1: reads process.platform outside src/hosts/local/ and src/main.ts",
      "2: names taskkill outside src/hosts/local/",
      "3: names /proc outside src/hosts/local/",
      "4: names /proc outside src/hosts/local/",
    ]);
  });

  test("passes hosts/local/, comments, default values and module paths", () => {
    const found = checkPlatform(
      virtual({
        "hosts/local/windows/spawn.ts": 'if (platform === "win32") run("taskkill"); read("/proc/self/stat");',
        "config.ts": '// on win32, /proc is absent and taskkill kills\nconst DEFAULT_HOST = { platform: "linux" };\nimport { x } from "./hosts/local/posix/proc.js";\nimport "./hosts/local/process.js";',
      }),
    );
    assert.deepEqual(found, []);
  });
});

describe("rule 5: imports follow the layer table", () => {
  test("fails on store/ importing jobs/", () => {
    const found = checkLayers(virtual({ "store/zz.ts": 'import { JobRegistry } from "../jobs/registry.js";', "jobs/registry.ts": "" }));
    assert.deepEqual(format(found), [
      'src/store/zz.ts:1: an import of src/jobs/registry.ts: store/ may import only core/, agent/, store/\n    import { JobRegistry } from "../jobs/registry.js";',
    ]);
  });

  test("type imports count; a runtime may not import another runtime; cli/ may not import server/", () => {
    const found = checkLayers(
      virtual({
        "agent/zz.ts": 'import type { Job } from "../jobs/types.js";',
        "jobs/types.ts": "",
        "runtimes/claude/zz.ts": 'import { x } from "../codex/x.js";',
        "runtimes/codex/x.ts": "",
        "cli/zz.ts": 'import { h } from "../server/handler.js";\nimport { v } from "../server/version.js";\nimport "../main.js";',
        "server/handler.ts": "",
        "server/version.ts": "",
        "main.ts": "",
      }),
    );
    assert.deepEqual(found.map((v) => `${v.file}:${v.line}: ${v.message}`), [
      "agent/zz.ts:1: a type import of src/jobs/types.ts: agent/ may import only core/, agent/",
      "cli/zz.ts:1: an import of src/server/handler.ts: cli/ may import only core/, agent/, store/, jobs/, tools/, runtimes/, hosts/, worktrees/, cli/, config.ts, server/version.ts",
      "cli/zz.ts:3: an import of src/main.ts: cli/ may import only core/, agent/, store/, jobs/, tools/, runtimes/, hosts/, worktrees/, cli/, config.ts, server/version.ts",
      "runtimes/claude/zz.ts:1: an import of src/runtimes/codex/x.ts: runtimes/*/ may import only core/, agent/, runtimes/claude/",
    ]);
  });

  test("config.ts reads defaults only from its list; a file in no layer fails", () => {
    const found = checkLayers(
      virtual({
        "config.ts": 'import { a } from "./server/stdio.js";\nimport { b } from "./server/handler.js";\nimport { c } from "./jobs/registry.js";',
        "server/stdio.ts": "",
        "server/handler.ts": "",
        "jobs/registry.ts": "",
        "types.ts": "",
      }),
    );
    assert.deepEqual(found.map((v) => `${v.file}:${v.line}`), ["config.ts:2", "config.ts:3", "types.ts:1"]);
  });

  test("passes the allowed directions, subfolders of a host, and main.ts importing anything", () => {
    const found = checkLayers(
      virtual({
        "hosts/local/posix/spawn.ts": 'import type { S } from "../types.js";\nimport { r } from "../../../store/records.js";\nimport "../../../agent/host.js";',
        "hosts/local/types.ts": "",
        "store/records.ts": 'import type { AgentSpec } from "../agent/types.js";',
        "agent/host.ts": "",
        "agent/types.ts": "",
        "main.ts": 'import "./hosts/local/types.js";\nimport "./cli/x.js";',
        "cli/x.ts": 'import "../config.js";\nimport "../hosts/local/types.js";',
        "config.ts": "",
      }),
    );
    assert.deepEqual(found, []);
  });
});

describe("rule 6: no import circle", () => {
  test("fails on a circle of type imports and on one closed by a dynamic import; a chain passes", () => {
    const found = checkCircles(
      virtual({
        "server/a.ts": 'import type { B } from "./b.js";',
        "server/b.ts": 'import type { A } from "./a.js";',
        "tools/x.ts": 'import { y } from "./y.js";',
        "tools/y.ts": 'export const y = () => import("./x.js");',
        "core/p.ts": 'import { q } from "./q.js";',
        "core/q.ts": "export const q = 1;",
      }),
    );
    assert.deepEqual(format(found), [
      'src/server/b.ts:1: an import circle: src/server/a.ts -> src/server/b.ts -> src/server/a.ts\n    import type { A } from "./a.js";',
      'src/tools/y.ts:1: an import circle: src/tools/x.ts -> src/tools/y.ts -> src/tools/x.ts\n    export const y = () => import("./x.js");',
    ]);
  });
});

describe("every import resolves", () => {
  test("fails on a missing file, a package, and a computed dynamic import", () => {
    const found = checkImportsResolve(virtual({ "jobs/zz.ts": 'import "./missing.js";\nimport x from "left-pad";\nawait import(name);\nimport "../../test/helpers.js";' }));
    assert.deepEqual(found.map((v) => `${v.line}: ${v.message}`), [
      '1: "./missing.js" resolves to no file in src/',
      '2: imports the package "left-pad" (src/ has no dependencies)',
      "3: a dynamic import of a computed specifier cannot be checked",
      '4: "../../test/helpers.js" leaves src/',
    ]);
  });
});

// ---------------------------------------------------------------------------
// The real tree
// ---------------------------------------------------------------------------

const SRC = fileURLToPath(new URL("../src", import.meta.url));

function readSource(): Files {
  const files = new Map<string, string>();
  const entries = readdirSync(SRC, { recursive: true, encoding: "utf8" })
    .map((entry) => entry.split(path.sep).join("/"))
    .filter((entry) => entry.endsWith(".ts"))
    .sort();
  for (const entry of entries) files.set(entry, readFileSync(path.join(SRC, entry), "utf8"));
  return files;
}

describe("src/", () => {
  const files = readSource();

  test("has files to check", () => {
    assert.ok(files.has("main.ts") && files.size > 10, `found ${files.size} files under ${SRC}`);
  });
  test("the tokenizer reads every file to a balanced end", () => {
    const lost = [...files].flatMap(([file, source]) => {
      const { trouble } = scan(source);
      return trouble === undefined ? [] : [`src/${file}: ${trouble}`];
    });
    assert.deepEqual(lost, [], "the checks below cannot be trusted on these files");
  });
  test("every import resolves to a file in src/ or a Node builtin", () => assertNone(checkImportsResolve(files), "imports"));
  test("rule 1: only src/main.ts names process.", () => assertNone(checkProcess(files), "rule 1"));
  test("rule 2: nothing server/, tools/, jobs/, agent/ or core/ reaches imports node:", () => assertNone(checkNodeImports(files), "rule 2"));
  test("rule 3: Claude Code's flags and stream-json vocabulary stay in src/runtimes/claude/", () => assertNone(checkClaudeVocabulary(files), "rule 3"));
  test("rule 4: platform checks stay in src/hosts/local/", () => assertNone(checkPlatform(files), "rule 4"));
  test("rule 5: imports follow the layer table", () => assertNone(checkLayers(files), "rule 5"));
  test("rule 6: no import circle", () => assertNone(checkCircles(files), "rule 6"));

  test("each runtime's flag list covers every flag its folder passes", () => {
    const missing = new Set<string>();
    for (const [file, source] of files) {
      const home = /^runtimes\/([^/]+)\//.exec(file)?.[1];
      if (home === undefined) continue;
      const flags = RUNTIME_VOCABULARY[home]?.flags ?? [];
      for (const token of scan(source).tokens) {
        const text = token.kind === "string" || token.kind === "template" ? token.value : "";
        for (const match of text.matchAll(/(?<![\w-])--[a-zA-Z][\w-]*/g)) {
          if (!flags.includes(match[0]) && !OUR_OWN_FLAGS.includes(match[0])) missing.add(`${match[0]} (src/${file})`);
        }
      }
    }
    assert.deepEqual([...missing], [], "add these to the runtime's flags in RUNTIME_VOCABULARY so rule 3 keeps them in its folder");
  });
});
