/**
 * The layering of src/ as a test (issue 12 §2, issue 27 item 4), on TypeScript's own parser. The rules are in
 * test/architecture/: rules.ts holds them as data, graph.ts and seams.ts check them over a virtual file map,
 * lines.ts bounds line length, allowlist.ts lists today's violations (a ratchet: ratchet.ts). Each rule is
 * shown failing on planted text (the seam rules' cases are in seam-cases.ts), then held on the tree.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { ALLOWED, LONG_LINES } from "./architecture/allowlist.js";
import {
  checkCircles,
  checkImportsResolve,
  checkLayers,
  checkNodeImports,
  checkProcess,
} from "./architecture/graph.js";
import { checkLineLengths, longLines } from "./architecture/lines.js";
import { formatViolation, lineRatchetProblems, problemReport, ratchetProblems } from "./architecture/ratchet.js";
import { keyed, lines, placed, virtual } from "./architecture/planted.js";
import { describeSeamRules } from "./architecture/seam-cases.js";
import { checkHosts } from "./architecture/seams.js";
import { allNodes, importsOf, parse } from "./architecture/source.js";
import { readLineFiles, readSource, RULES } from "./architecture/tree.js";

describe("reading source", () => {
  test("finds every import form, and none in comments or strings", () => {
    const source = lines(
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
      '// import z from "./comment.js";',
      "const s = \"import y from './string.js'\";",
      "const t = `${a} import w from './template.js'`;",
    );
    const sourceFile = parse("x.ts", source);
    const found = importsOf(allNodes(sourceFile)).map((ref) => {
      const line = sourceFile.getLineAndCharacterOfPosition(ref.node.getStart(sourceFile)).line + 1;
      return [ref.specifier, ref.typeOnly, line];
    });
    assert.deepEqual(found, [
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
    ]);
  });

  test("keys name the enclosing declaration, not the line", () => {
    const found = checkHosts(
      virtual({
        "jobs/zz.ts": lines(
          'const top = host === "local";',
          'class Entry { get where() { return host ?? "local"; } }',
          'export function locate() { const inner = () => host !== "local"; return inner; }',
        ),
      }),
    );
    assert.deepEqual(keyed(found), [
      'jobs/zz.ts: top: === "local"',
      'jobs/zz.ts: Entry.where: ?? "local"',
      'jobs/zz.ts: locate.inner: !== "local"',
    ]);
  });
});

describe("process: only main.ts names process.", () => {
  test("fails on process.env in jobs/", () => {
    const found = checkProcess(
      virtual({
        "jobs/zz.ts": "// process.env is a word\nexport const home = process.env.HOME;",
      }),
    );
    assert.deepEqual(found.map(formatViolation), [
      "src/jobs/zz.ts:2: names process. outside src/main.ts\n    export const home = process.env.HOME;",
    ]);
  });

  test("catches process?., process[ and globalThis.process", () => {
    const found = checkProcess(virtual({ "core/zz.ts": 'process?.exit(1);\nprocess["env"];\nglobalThis.process;\n' }));
    assert.deepEqual(
      found.map((v) => v.line),
      [1, 2, 3],
    );
  });

  test("passes main.ts, comments, strings, and someone's property named process", () => {
    const found = checkProcess(
      virtual({
        "main.ts": "process.exitCode = 1;",
        "jobs/zz.ts": lines(
          '/* process.exit */ const s = "process.env"; const t = `process.${s}`;',
          "child.process.kill(); const p = (process: X) => 1;",
        ),
      }),
    );
    assert.deepEqual(found, []);
  });
});

describe("node: no Node builtin reached from server/, tools/, jobs/, agent/, core/", () => {
  test("fails on core/ importing node:fs, with the chain through other layers", () => {
    const found = checkNodeImports(
      virtual({
        "core/zz.ts": 'import { readFileSync } from "node:fs";',
        "server/handler.ts": 'import { JobRegistry } from "../jobs/registry.js";',
        "jobs/registry.ts":
          'import type { X } from "./types.js";\nimport { StateStore } from "../store/state-store.js";',
        "jobs/types.ts": "export type X = 1;",
        "store/state-store.ts": '\n\nimport { open } from "fs/promises";',
      }),
    );
    assert.deepEqual(placed(found), [
      "core/zz.ts:1: imports node:fs: src/core/zz.ts → node:fs",
      "store/state-store.ts:3: imports node:fs/promises, and src/jobs/registry.ts reaches it at run time: " +
        "src/jobs/registry.ts → src/store/state-store.ts → node:fs/promises",
    ]);
  });

  test("dynamic imports and re-exports count; type imports do not; nothing reached, nothing checked", () => {
    const found = checkNodeImports(
      virtual({
        "agent/a.ts": lines(
          'export { b } from "./b.js";',
          'import type { S } from "../store/s.js";',
          'export type { T } from "../store/t.js";',
        ),
        "agent/b.ts": 'export const b = () => import("node:child_process");',
        "store/s.ts": 'import "node:fs";',
        "store/t.ts": 'import "node:fs";',
        "cli/x.ts": 'import "node:fs";\nimport "../store/s.js";',
      }),
    );
    assert.deepEqual(placed(found), ["agent/b.ts:1: imports node:child_process: src/agent/b.ts → node:child_process"]);
  });
});

describeSeamRules();

describe("layers: imports follow the layer table", () => {
  test("fails on store/ importing jobs/", () => {
    const found = checkLayers(
      virtual({
        "store/zz.ts": 'import { JobRegistry } from "../jobs/registry.js";',
        "jobs/registry.ts": "",
      }),
    );
    assert.deepEqual(found.map(formatViolation), [
      "src/store/zz.ts:1: an import of src/jobs/registry.ts: store/ may import only core/, agent/, store/\n" +
        '    import { JobRegistry } from "../jobs/registry.js";',
    ]);
  });

  test("type imports count; a runtime may not import another; cli/ may not import server/; a file in no layer", () => {
    const found = checkLayers(
      virtual({
        "agent/zz.ts": 'import type { Job } from "../jobs/types.js";',
        "jobs/types.ts": "",
        "runtimes/claude/zz.ts": 'import { x } from "../codex/x.js";',
        "runtimes/codex/x.ts": "",
        "cli/zz.ts": 'import { h } from "../server/handler.js";\nimport { v } from "../server/version.js";',
        "server/handler.ts": "",
        "server/version.ts": "",
        "types.ts": "",
      }),
    );
    assert.deepEqual(keyed(found), [
      "agent/zz.ts: import jobs/types.ts",
      "cli/zz.ts: import server/handler.ts",
      "runtimes/claude/zz.ts: import runtimes/codex/x.ts",
      "types.ts: in no layer",
    ]);
    assert.equal(found[0]?.message, "a type import of src/jobs/types.ts: agent/ may import only core/, agent/");
  });

  test("passes the allowed directions, subfolders of a host, and main.ts importing anything", () => {
    const found = checkLayers(
      virtual({
        "hosts/local/posix/spawn.ts": 'import type { S } from "../types.js";\nimport "../../../store/records.js";',
        "hosts/local/types.ts": "",
        "store/records.ts": 'import type { AgentSpec } from "../agent/types.js";',
        "agent/types.ts": "",
        "main.ts": 'import "./hosts/local/types.js";\nimport "./cli/x.js";',
        "cli/x.ts": 'import "../config.js";',
        "config.ts": "",
      }),
    );
    assert.deepEqual(found, []);
  });
});

describe("circles and resolution", () => {
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
    assert.deepEqual(placed(found), [
      "server/b.ts:1: an import circle: src/server/a.ts -> src/server/b.ts -> src/server/a.ts",
      "tools/y.ts:1: an import circle: src/tools/x.ts -> src/tools/y.ts -> src/tools/x.ts",
    ]);
  });

  test("fails on a missing file, a package, a computed dynamic import and a path out of src/", () => {
    const found = checkImportsResolve(
      virtual({
        "jobs/zz.ts": lines(
          'import "./missing.js";',
          'import x from "left-pad";',
          "import(n);",
          'import "../../h.js";',
        ),
      }),
    );
    assert.deepEqual(
      found.map((v) => `${v.line}: ${v.message}`),
      [
        '1: "./missing.js" resolves to no file in src/',
        '2: imports the package "left-pad" (src/ has no dependencies)',
        "3: a dynamic import of a computed specifier cannot be checked",
        '4: "../../h.js" leaves src/',
      ],
    );
  });
});

describe("lines: at most 120 characters outside fixtures and data tables", () => {
  const long = (width: number): string => `const s = "${"x".repeat(width - 13)}";`;

  test("fails on a code line of 121 characters, passes 120, counts characters not UTF-16 units", () => {
    assert.equal(long(121).length, 121);
    const wide = [`// ${"é".repeat(117)}`, `// ${"😀".repeat(117)}`];
    assert.deepEqual(longLines("a.ts", lines(long(120), long(121), ...wide)), [2]);
  });

  test("a string alone on its line in an array is a data-table row; a string anywhere else is not", () => {
    const row = `  "${"x".repeat(120)}",`;
    const source = lines("const rows = [", row, "];", "call(", row, ");", `const one = [${row.trim()}];`);
    assert.deepEqual(longLines("a.ts", source), [5, 7]);
    assert.deepEqual(longLines("a.mjs", lines("export const rows = [", row, "];")), []);
    assert.deepEqual(
      [
        ...checkLineLengths(
          new Map([
            ["b.ts", long(130)],
            ["c.ts", long(100)],
          ]),
        ),
      ],
      [["b.ts", [1]]],
    );
  });
});

describe("the ratchet", () => {
  const found = checkHosts(virtual({ "cli/zz.ts": 'const a = host !== "local";\nconst b = host !== "local";' }));

  test("passes exactly the listed violations, each as often as listed", () => {
    assert.deepEqual(ratchetProblems("hosts", found, { "cli/zz.ts": ['a: !== "local"', 'b: !== "local"'] }), []);
  });

  test("fails on a violation not listed, and on a listed one that no longer occurs", () => {
    const problems = ratchetProblems("hosts", found, { "cli/zz.ts": ['a: !== "local"', 'c: !== "local"'] });
    assert.deepEqual(problems, [
      'src/cli/zz.ts:2: compares a host with "local" (!==) outside src/hosts/: ask the host\n    const b = host ' +
        '!== "local";',
      `src/cli/zz.ts: 'c: !== "local"' no longer occurs: delete it from ALLOWED["hosts"] in ` +
        `test/architecture/allowlist.ts`,
    ]);
    assert.equal(ratchetProblems("hosts", found, {}).length, 2);
  });

  test("long lines: a count may neither grow nor shrink unless the list says so", () => {
    const now = new Map([
      ["a.ts", [3, 9]],
      ["b.ts", [1]],
    ]);
    assert.deepEqual(lineRatchetProblems(now, { "a.ts": 2, "b.ts": 1 }), []);
    assert.deepEqual(lineRatchetProblems(now, { "a.ts": 1, "b.ts": 2, "c.ts": 4 }), [
      "a.ts: 2 lines over the limit where 1 may be (lines 3, 9)",
      'b.ts: 1 line over the limit: lower LONG_LINES["b.ts"] from 2 in test/architecture/allowlist.ts',
      'c.ts: 0 lines over the limit: lower LONG_LINES["c.ts"] from 4 in test/architecture/allowlist.ts',
    ]);
  });
});

function assertHeld(rule: string, problems: readonly string[]): void {
  if (problems.length > 0) assert.fail(problemReport(rule, problems));
}

describe("the tree", () => {
  const files = readSource();

  test("src/ has files to check, and every allowlist names a rule", () => {
    assert.ok(files.has("main.ts") && files.size > 10, `found ${files.size} files in src/`);
    const names = new Set(RULES.map((rule) => rule.name));
    assert.deepEqual(
      Object.keys(ALLOWED).filter((name) => !names.has(name)),
      [],
    );
  });
  for (const rule of RULES) {
    test(`${rule.name}: ${rule.title}`, () => {
      assertHeld(rule.name, ratchetProblems(rule.name, rule.check(files), ALLOWED[rule.name]));
    });
  }
  test("lines: at most 120 characters in src/, test/ and bench/", () => {
    assertHeld("lines", lineRatchetProblems(checkLineLengths(readLineFiles()), LONG_LINES));
  });
});
