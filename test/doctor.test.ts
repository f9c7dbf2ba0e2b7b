/**
 * `doctor` finds the real problem (issue 26, item 2), through the built command line and server: every
 * invalid setting named with its value and range while the other checks still run, a Claude Code that is
 * not logged in, lines that fit 80 columns, no configuration snippet with an invalid value; and the server
 * saying at its start which agents it offers, and refusing at once a call for an agent it cannot start.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { claudeRuntime } from "../src/runtimes/claude/index.js";
import { codexRuntime } from "../src/runtimes/codex/index.js";
import { geminiRuntime } from "../src/runtimes/gemini/index.js";
import { waitFor } from "./processes.js";
import { minimalEnvironment, SERVER_MAIN, ServerProcess } from "./server-process.js";

const isPosix = process.platform !== "win32";
const scratch = mkdtempSync(path.join(tmpdir(), "cd-doc-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/cli/${name}`, import.meta.url));
/** Verbatim `claude auth status` of Claude Code 2.1.332 (exit 1 and 0). */
const LOGGED_OUT = fixture("auth-status-logged-out-2.1.332.json");
const API_KEY = fixture("auth-status-api-key-2.1.332.json");

/** A stand-in for Claude Code: its `--version`, and `auth status` printing a recorded answer with its exit code. */
function fakeClaude(dir: string, status: string, exitCode: number): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, "claude");
  const printStatus = `while IFS= read -r line; do printf '%s\\n' "$line"; done < '${status}'; exit ${exitCode}`;
  writeFileSync(
    file,
    [
      "#!/bin/sh",
      'if [ "$1" = "--version" ]; then echo "2.1.332 (Claude Code)"; exit 0; fi',
      `if [ "$1 $2" = "auth status" ]; then ${printStatus}; fi`,
      "echo 'the fake claude was asked something else' >&2; exit 3",
      "",
    ].join("\n"),
  );
  chmodSync(file, 0o755);
  return file;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The built command line, with an environment built from nothing but what the test gives. */
function runBuilt(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const environment = minimalEnvironment({ HOME: scratch, ...env });
    const stdio: ["ignore", "pipe", "pipe"] = ["ignore", "pipe", "pipe"];
    const child = spawn(process.execPath, [SERVER_MAIN, ...args], { env: environment, stdio });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.once("error", reject);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Continuation lines joined back: a break between words is a space. */
const unwrapped = (text: string): string => text.replace(/\n {6}/g, " ");

function assertFits(text: string, width = 80): void {
  for (const line of text.split("\n")) {
    assert.ok(line.length <= width, `a line of ${line.length} columns:\n${line}\n\nin:\n${text}`);
  }
}

function freshState(): string {
  return path.join(mkdtempSync(path.join(scratch, "s-")), "state");
}

describe("doctor through the built command line", { skip: !isPosix && "the fake claude is a shell script" }, () => {
  const loggedIn = fakeClaude(path.join(scratch, "in"), API_KEY, 0);
  const loggedOut = fakeClaude(path.join(scratch, "out"), LOGGED_OUT, 1);
  const emptyPath = mkdtempSync(path.join(scratch, "path-"));
  const base = (claude: string): Record<string, string> => ({
    PATH: emptyPath,
    CLAUDE_DISPATCH_CLAUDE_BIN: claude,
    CLAUDE_DISPATCH_STATE_DIR: freshState(),
  });

  test("every invalid setting is named with its value and range, the rest is checked, no snippet has it", async () => {
    const invalid: Record<string, string> = {
      CLAUDE_DISPATCH_MAX_TURNS: "0",
      CLAUDE_DISPATCH_WORKTREE: "sometimes",
      CLAUDE_DISPATCH_HOSTS: "{nope",
      CLAUDE_DISPATCH_ON_DONE: '["notify-send",',
      CLAUDE_DISPATCH_ON_INPUT: `[${"x".repeat(100)}`,
    };
    const env = { ...base(loggedIn), ...invalid };
    const run = await runBuilt(["doctor"], env);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.equal(run.stderr, "");
    const text = unwrapped(run.stdout);
    const named = (setting: string, range: string, got: string): void => {
      const line = `^fail  configuration: ${setting} must be ${range}, got ${got}; the server will not start`;
      assert.match(text, new RegExp(line, "m"), run.stdout);
    };
    const command = "a JSON array of 1 to 64 strings, the program first .*";
    named("CLAUDE_DISPATCH_MAX_TURNS", "an integer from 1 to 10000", '"0"');
    named("CLAUDE_DISPATCH_WORKTREE", "one of off, on, required", '"sometimes"');
    named("CLAUDE_DISPATCH_HOSTS", "a JSON object of hosts .*", '"\\{nope"');
    named("CLAUDE_DISPATCH_ON_DONE", command, '"\\[\\\\"notify-send\\\\","');
    // A long value is cut as every echo is (§10): its first 60 characters, then an ellipsis.
    named("CLAUDE_DISPATCH_ON_INPUT", command, `"\\[${"x".repeat(59)}…"`);
    // The valid settings are used for the rest: the configured claude, not "claude not found on PATH".
    assert.match(text, new RegExp(`^ok {4}claude: ${loggedIn}, 2\\.1\\.332 \\(Claude Code\\)$`, "m"));
    assert.match(text, /^ok {4}claude login: /m);
    assert.match(text, /^warn  state directory: .* does not exist yet/m);
    assert.match(text, /^ok {4}depth: /m);
    // What needs an invalid setting is said to be skipped, not checked against a default.
    assert.match(text, /CLAUDE_DISPATCH_WORKTREE .*; the server will not start, and doctor skips the worktrees check/);
    assert.doesNotMatch(text, /^\w+ +worktrees: /m);
    assert.doesNotMatch(text, /^\w+ +agent defaults: /m, "max turns is invalid");
    // The snippets leave every invalid setting out, and say so; none of their values is printed again.
    const snippets = run.stdout.slice(run.stdout.indexOf("\n\n"));
    for (const name of Object.keys(invalid)) {
      const shown = snippets.includes(`"${name}":`) || snippets.includes(`${name}=`);
      assert.ok(!shown, `${name} is in the snippets:\n${snippets}`);
    }
    for (const value of ["sometimes", "{nope", "notify-send", "xxxxxxxx"]) assert.ok(!snippets.includes(value), value);
    const names = "CLAUDE_DISPATCH_HOSTS, CLAUDE_DISPATCH_MAX_TURNS, CLAUDE_DISPATCH_ON_DONE, CLAUDE_DISPATCH_ON_INPUT";
    const leftOut = `Left out of the configuration below, as invalid: ${names} and CLAUDE_DISPATCH_WORKTREE;`;
    assert.ok(snippets.replace(/\s+/g, " ").includes(leftOut), snippets);
    assert.ok(snippets.includes(`"CLAUDE_DISPATCH_CLAUDE_BIN": "${loggedIn}"`), "a valid setting is kept");
    assertFits(run.stdout);

    const json = await runBuilt(["doctor", "--json"], env);
    const document = JSON.parse(json.stdout) as {
      left_out: string[];
      host_config: { mcpServers: Record<string, { env: Record<string, string> }> };
      claude_mcp_add: string;
    };
    assert.deepEqual(document.left_out, Object.keys(invalid).sort());
    const kept = Object.keys(document.host_config.mcpServers["claude-dispatch"]?.env ?? {});
    assert.deepEqual(kept, ["CLAUDE_DISPATCH_CLAUDE_BIN", "CLAUDE_DISPATCH_STATE_DIR"]);
    assert.ok(!document.claude_mcp_add.includes("MAX_TURNS"));
  });

  test("a CLAUDE_DISPATCH_CLAUDE_BIN that is not there is a fail line with the path; the rest is checked", async () => {
    const missing = path.join(scratch, "no", "such", "claude");
    const run = await runBuilt(["doctor"], base(missing));
    assert.equal(run.code, 1);
    const text = unwrapped(run.stdout);
    assert.match(text, /^ok {4}configuration: every CLAUDE_DISPATCH_\* variable is valid$/m);
    const line = `fail  claude: ${missing} not found (CLAUDE_DISPATCH_CLAUDE_BIN); check the path\n`;
    assert.ok(text.includes(line), run.stdout);
    assert.doesNotMatch(text, /claude login/, "a program that is not there has no login to check");
    for (const name of ["state directory", "permission modes", "roots", "depth", "on exit"]) {
      assert.match(text, new RegExp(`^(ok|warn) +${name}: `, "m"));
    }
    assertFits(run.stdout);
  });

  test("Claude Code that is not logged in is a fail line saying what to run; logged in is ok", async () => {
    const out = await runBuilt(["doctor"], base(loggedOut));
    assert.equal(out.code, 1, out.stdout);
    const line = /^fail  claude login: .*$/m.exec(unwrapped(out.stdout))?.[0];
    assert.ok(line, out.stdout);
    assert.match(line, /not logged in/);
    assert.match(line, /`claude auth login`/);
    assert.match(line, /ANTHROPIC_API_KEY/);
    assertFits(out.stdout);

    const inside = await runBuilt(["doctor", "--json"], base(loggedIn));
    const checks = (JSON.parse(inside.stdout) as { checks: { name: string; status: string; detail: string }[] }).checks;
    const login = checks.find((check) => check.name === "claude login");
    assert.equal(login?.status, "ok", inside.stdout);
    assert.match(login?.detail ?? "", /logged in \(api_key from ANTHROPIC_API_KEY\)/);
  });

  test("every line fits 80 columns: long paths wrap onto continuation lines, whole", async () => {
    const deep = path.join(scratch, "a-directory-with-a-rather-long-name-for-its-binaries", "and-another-level", "bin");
    fakeClaude(deep, API_KEY, 0);
    const env = { PATH: deep, CLAUDE_DISPATCH_STATE_DIR: freshState(), CLAUDE_DISPATCH_MAX_DEPTH: "lots" };
    const run = await runBuilt(["doctor"], env);
    assertFits(run.stdout);
    const lines = run.stdout.split("\n");
    const claudeLine = lines.findIndex((line) => line.startsWith("ok    claude:"));
    assert.ok(claudeLine >= 0, run.stdout);
    const continued = lines
      .slice(claudeLine, claudeLine + 4)
      .join("\n")
      .replace(/\n {6}/g, "");
    assert.ok(continued.includes(path.join(deep, "claude")), `the path is wrapped, not cut:\n${run.stdout}`);
    assert.match(unwrapped(run.stdout), /Claude Code \(every project: user scope\):/);
  });
});

describe("the server's agents", { skip: !isPosix && "paths and PATH here are POSIX" }, () => {
  const codex = path.join(scratch, "nowhere", "codex");
  const codexMissing = `${codex} not found \\(CLAUDE_DISPATCH_CODEX_BIN\\); check the path`;

  test("an invalid configuration: the server names every invalid setting, exits 2 and reads nothing", async () => {
    const run = await runBuilt([], {
      CLAUDE_DISPATCH_MAX_TURNS: "0",
      CLAUDE_DISPATCH_WORKTREE: "sometimes",
      CLAUDE_DISPATCH_STATE_DIR: freshState(),
    });
    assert.equal(run.code, 2);
    assert.equal(run.stdout, "");
    assert.match(run.stderr, /CLAUDE_DISPATCH_MAX_TURNS must be an integer from 1 to 10000, got "0"/);
    assert.match(run.stderr, /CLAUDE_DISPATCH_WORKTREE must be one of off, on, required, got "sometimes"/);
  });

  test("the server says once at its start which agents it offers and which it cannot start", async () => {
    const server = new ServerProcess({ CLAUDE_DISPATCH_AGENTS: "claude,codex", CLAUDE_DISPATCH_CODEX_BIN: codex });
    try {
      await server.initialize();
      await waitFor(() => server.stderr.includes(" ready "), "the ready line");
      const lines = server.stderr.split("\n").filter((line) => / ready /.test(line));
      assert.equal(lines.length, 1, server.stderr);
      const said = `^claude-dispatch warn: .* ready \\(agents: claude, codex; codex cannot start: ${codexMissing}\\)$`;
      assert.match(lines[0] ?? "", new RegExp(said));
    } finally {
      await server.shutdown();
    }
  });

  test("a call for an agent whose program is missing fails at once with the install hint; no job is made", async () => {
    const noClaude = mkdtempSync(path.join(scratch, "no-claude-"));
    const server = new ServerProcess({
      PATH: noClaude,
      CLAUDE_DISPATCH_CLAUDE_BIN: "",
      CLAUDE_DISPATCH_AGENTS: "claude,codex",
      CLAUDE_DISPATCH_CODEX_BIN: codex,
    });
    try {
      await server.initialize();
      const cwd = mkdtempSync(path.join(scratch, "work-"));
      const byCodex = await server.callTool("claude_start", { prompt: "hello", cwd, agent: "codex" });
      assert.equal(byCodex.result?.isError, true, JSON.stringify(byCodex));
      assert.equal(byCodex.result?.structuredContent?.error?.code, "SPAWN_FAILED");
      assert.match(byCodex.result?.structuredContent?.error?.detail, new RegExp(`^${codexMissing}$`));
      const byClaude = await server.callTool("claude_run", { prompt: "hello", cwd });
      assert.equal(byClaude.result?.structuredContent?.error?.code, "SPAWN_FAILED");
      const install = "claude not found on PATH; install Claude Code or set CLAUDE_DISPATCH_CLAUDE_BIN";
      assert.equal(byClaude.result?.structuredContent?.error?.detail, install);
      assert.deepEqual(readdirSync(path.join(server.stateDir, "jobs")), [], "no job was created");
    } finally {
      await server.shutdown();
    }
  });
});

describe("what each agent's CLI says of its login", () => {
  const answer = (stdout: string, ok: boolean, stderr = "") => ({ run: { ok, stdout, stderr }, present: [] });

  test("Claude Code: `claude auth status`, and its verbatim answers", () => {
    const probe = claudeRuntime("claude").readiness?.({}, "/home/tester", "2.1.332 (Claude Code)");
    assert.deepEqual(probe?.args, ["auth", "status"]);
    assert.equal(probe?.read(answer(readFileSync(LOGGED_OUT, "utf8"), false)).status, "fail");
    assert.deepEqual(probe?.read(answer(readFileSync(API_KEY, "utf8"), true)), {
      status: "ok",
      detail: "claude auth status says logged in (api_key from ANTHROPIC_API_KEY)",
    });
    assert.equal(probe?.read(answer("", false, "error: unknown command")).status, "warn", "an answer it cannot read");
  });

  test("Claude Code: nothing is asked of a program that is not Claude Code, or of one older than the query", () => {
    for (const version of ["v20.11.1", "2.1.40 (Claude Code)", "1.0.11 (Claude Code)", ""]) {
      const other = claudeRuntime("claude").readiness?.({}, "/home/tester", version);
      assert.equal(other?.args, undefined, version);
      assert.equal(other?.read({ present: [] }).status, "warn", version);
    }
  });

  test("Codex: `codex login status` (0.171.0 answers on stderr after its warnings), else a key", () => {
    const version = "codex-cli 0.171.0";
    const probe = codexRuntime("codex").readiness?.({}, "/home/tester", version);
    assert.deepEqual(probe?.args, ["login", "status"]);
    const warning = "WARNING: proceeding, even though we could not create PATH aliases\n";
    assert.equal(probe?.read(answer("", false, `${warning}Not logged in\n`)).status, "fail");
    const loggedIn = probe?.read(answer("", true, `${warning}Logged in using ChatGPT\n`));
    assert.deepEqual(loggedIn, { status: "ok", detail: 'codex login status says "Logged in using ChatGPT"' });
    const keyed = codexRuntime("codex").readiness?.({ CODEX_API_KEY: "k" }, "/home/tester", version);
    assert.equal(keyed?.read(answer("", false, "Not logged in\n")).status, "ok");
  });

  test("Gemini CLI: a key in the environment, else its sign-in file; settings alone cannot tell", () => {
    const probe = geminiRuntime("gemini").readiness?.({}, "/home/tester", "0.61.0");
    const [credentials, settings] = probe?.files ?? [];
    assert.equal(credentials, path.join("/home/tester", ".gemini", "oauth_creds.json"));
    assert.equal(probe?.read({ present: [] }).status, "fail");
    assert.equal(probe?.read({ present: [credentials as string] }).status, "ok");
    assert.equal(probe?.read({ present: [settings as string] }).status, "warn");
    const keyed = geminiRuntime("gemini").readiness?.({ GEMINI_API_KEY: "k" }, "", "0.61.0");
    assert.equal(keyed?.read({ present: [] }).status, "ok");
  });
});
