/**
 * The seam rules (seams.ts) shown failing on planted text: an agent's vocabulary or name, a host's name or
 * folder, and the platform, where they do not belong. Called from test/architecture.test.ts.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { keyed, lines, placed, virtual } from "./planted.js";
import { RUNTIME_VOCABULARY } from "./rules.js";
import { checkAgentNames, checkAgentVocabulary, checkFlagsListed, checkHosts, checkPlatform } from "./seams.js";

export function describeSeamRules(): void {
  describe("agents: each agent CLI's vocabulary stays in runtimes/<name>/", () => {
    const claudeOnly = { claude: RUNTIME_VOCABULARY.claude as (typeof RUNTIME_VOCABULARY)[string] };

    test("a word two CLIs share may be in both folders and nowhere else; a word of one only in its own", () => {
      const found = checkAgentVocabulary(
        virtual({
          "runtimes/gemini/args.ts": 'const args = ["--resume", "--output-format=stream-json"]; r.total_cost_usd;',
          "runtimes/codex/args.ts": 'const a = ["--resume"];',
          "tools/zz.ts": 'const s = "--sandbox";',
        }),
      );
      assert.deepEqual(placed(found), [
        "runtimes/codex/args.ts:1: names Claude Code's --resume outside src/runtimes/claude/",
        "runtimes/codex/args.ts:1: names Gemini CLI's --resume outside src/runtimes/gemini/",
        "runtimes/gemini/args.ts:1: names Claude Code's total_cost_usd outside src/runtimes/claude/",
        "tools/zz.ts:1: names Codex's --sandbox outside src/runtimes/codex/",
      ]);
    });

    test("catches flags in templates, event names, fields, permission modes and the reader", () => {
      const found = checkAgentVocabulary(
        virtual({
          "store/zz.ts": lines(
            "const a = `--max-turns=${n}`;",
            'if (event.type === "tool_use") {}',
            "const cost = result.total_cost_usd;",
            "new ClaudeStream({});",
            "const f = 'stream-json';",
            'const modes = ["default", "bypassPermissions"];',
            'if (event.type === "item.completed" || event.type === "stream_event") {}',
            'const args = ["--dangerously-skip-permissions"];',
          ),
        }),
      );
      assert.deepEqual(
        found.map((v) => `${v.line}: ${v.key}`),
        [
          "1: a: --max-turns",
          '2: (module): "tool_use"',
          '2: (module): "tool_use"',
          "3: cost: total_cost_usd",
          "4: (module): ClaudeStream",
          "5: f: stream-json",
          "5: f: stream-json",
          "6: modes: bypassPermissions",
          "7: (module): item.completed",
          "7: (module): stream_event",
          "8: args: --dangerously-skip-permissions",
        ],
      );
      const resume = virtual({ "tools/zz.ts": 'export const flag = "--resume";' });
      assert.deepEqual(keyed(checkAgentVocabulary(resume, claudeOnly)), ["tools/zz.ts: flag: --resume"]);
    });

    test("passes comments, the runtime's own folder, our own field names and longer words", () => {
      const found = checkAgentVocabulary(
        virtual({
          "runtimes/claude/args.ts":
            'const args = ["--output-format", "stream-json", "--resume", "bypassPermissions"];',
          "tools/zz.ts": lines(
            "// the agent ran with --resume and stream-json in bypassPermissions",
            'const d = r.permission_denials; const u = "tool_use_id"; const v = "--resumed"; const mode = "plan";',
          ),
        }),
      );
      assert.deepEqual(found, []);
    });

    test("flags: a runtime's folder passes only flags its vocabulary lists", () => {
      const found = checkFlagsListed(
        virtual({
          "runtimes/codex/args.ts": 'const a = ["--json", "--sandbox", `--full-auto=${x}`];',
        }),
      );
      assert.deepEqual(
        found.map((v) => v.key),
        ["a: --full-auto"],
      );
    });
  });

  describe("agent-names: no agent compared or defaulted to by name", () => {
    test('fails on ?? "claude" outside store/ and on comparisons with a runtime name outside runtimes/', () => {
      const found = checkAgentNames(
        virtual({
          "agent/options.ts": 'export const DEFAULT_AGENT = "claude";',
          "jobs/zz.ts": lines(
            'const runtime = record.runtime ?? "claude";',
            'if (agent === "codex") {}',
            "switch (agent) { case 'gemini': }",
            "export function policy(agent = DEFAULT_AGENT) { return agent !== DEFAULT_AGENT; }",
          ),
        }),
      );
      assert.deepEqual(placed(found), [
        'jobs/zz.ts:1: falls back to the agent "claude" (??) outside src/store/, where records are normalised',
        'jobs/zz.ts:2: compares with the agent name "codex" outside src/runtimes/: ask the runtime instead',
        'jobs/zz.ts:3: compares with the agent name "gemini" outside src/runtimes/: ask the runtime instead',
        'jobs/zz.ts:4: falls back to the agent "claude" (=) outside src/store/, where records are normalised',
        'jobs/zz.ts:4: compares with the agent name "claude" outside src/runtimes/: ask the runtime instead',
      ]);
    });

    test("passes store/ normalising, runtimes/ listing, a runtime's own program default and a list of names", () => {
      const found = checkAgentNames(
        virtual({
          "store/records.ts": 'const runtime = raw.runtime ?? "claude";',
          "runtimes/index.ts": 'const traits = name === "codex" ? CODEX : CLAUDE;',
          "runtimes/codex/args.ts": 'export const DEFAULT_CODEX_BIN = "codex";',
          "wiring/zz.ts": 'const bin = setting ?? DEFAULT_CODEX_BIN; const names = ["claude", "codex"];',
        }),
      );
      assert.deepEqual(found, []);
    });
  });

  describe('hosts: no "local" host by name; host folders imported only where hosts are built', () => {
    test('fails on comparisons with "local" and fallbacks to it, outside hosts/', () => {
      const found = checkHosts(
        virtual({
          "cli/zz.ts": lines(
            'if (record.host !== "local") {}',
            'const remote = "local" != host;',
            'switch (host) { case "local": }',
            'const where = (record.host ?? "local") === "local";',
            'const other = host || "local";',
          ),
        }),
      );
      assert.deepEqual(
        found.map((v) => `${v.line}: ${v.message}`),
        [
          '1: compares a host with "local" (!==) outside src/hosts/: ask the host',
          '2: compares a host with "local" (!=) outside src/hosts/: ask the host',
          '3: compares a host with "local" (case) outside src/hosts/: ask the host',
          '4: falls back to the host "local" (??) outside src/hosts/: ask the host',
          '4: compares a host with "local" (===) outside src/hosts/: ask the host',
          '5: falls back to the host "local" (||) outside src/hosts/: ask the host',
        ],
      );
    });

    test("fails on a host's folder imported outside hosts/, wiring/ and main.ts, type imports too; not on kinds", () => {
      const found = checkHosts(
        virtual({
          "cli/zz.ts":
            'import type { ProcessControl } from "../hosts/local/index.js";\nimport "../hosts/ssh/config.js";\n' +
            'import { parseHostsSetting } from "../hosts/kinds.js";',
          "hosts/kinds.ts": 'import "./ssh/config.js";',
          "hosts/local/index.ts": 'import "../ssh/config.js";',
          "hosts/ssh/config.ts": 'if (name === "local") fail();',
          "wiring/zz.ts": 'import "../hosts/local/index.js";\nconst hosts = ["local", ...others];',
          "main.ts": 'import "./hosts/ssh/config.js";',
        }),
      );
      assert.deepEqual(placed(found), [
        "cli/zz.ts:1: a type import of src/hosts/local/index.ts outside where hosts are built " +
          "(src/hosts/, src/wiring/, src/main.ts)",
        "cli/zz.ts:2: an import of src/hosts/ssh/config.ts outside where hosts are built " +
          "(src/hosts/, src/wiring/, src/main.ts)",
      ]);
    });
  });

  describe("platform: platform checks stay in hosts/local/", () => {
    test('fails on "win32" and comparisons with platform names; main.ts may pass process.platform on', () => {
      const found = checkPlatform(
        virtual({
          "store/zz.ts": "export const windows = (p: string) => p === 'win32';",
          "main.ts": lines(
            "const host = { platform: process.platform };",
            'if (process.platform !== "linux") {}',
            'switch (process.platform) { case "darwin": }',
          ),
        }),
      );
      assert.deepEqual(placed(found), [
        'main.ts:2: compares with the platform name "linux" outside src/hosts/local/',
        'main.ts:3: compares with the platform name "darwin" outside src/hosts/local/',
        'store/zz.ts:1: names the platform "win32" outside src/hosts/local/',
      ]);
    });

    test("catches .platform read elsewhere, taskkill and /proc", () => {
      const found = checkPlatform(
        virtual({
          "cli/zz.ts": lines(
            "const p = process.platform;",
            'run("taskkill.exe");',
            "read(`/proc/${pid}/stat`);",
            'const root = stateDirectory(io.env, io.host?.platform ?? "linux");',
            "const { platform } = host;",
            'git(host["platform"]);',
          ),
        }),
      );
      assert.deepEqual(
        found.map((v) => `${v.line}: ${v.key}`),
        [
          "1: p: .platform",
          "2: (module): taskkill",
          "3: (module): /proc",
          "4: root: .platform",
          "5: (module): .platform",
          "6: (module): .platform",
        ],
      );
    });

    test("passes hosts/local/, comments, defaults, passing it on, and module paths", () => {
      const found = checkPlatform(
        virtual({
          "hosts/local/windows/spawn.ts":
            'if (platform === "win32") run("taskkill"); read("/proc/1/stat"); h.platform;',
          "config.ts": lines(
            "// on win32, /proc is absent and taskkill kills",
            'const DEFAULT_HOST = { platform: "linux" };',
            "const local = createLocalHost({ platform: machine.platform });",
            'import { x } from "./hosts/local/posix/proc.js";',
          ),
        }),
      );
      assert.deepEqual(found, []);
    });
  });
}
