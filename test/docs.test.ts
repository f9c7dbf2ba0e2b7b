/** Keeps the normative documents and the code saying the same thing. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { ERROR_CODES } from "../src/errors.js";
import { SERVER_VERSION } from "../src/version.js";
import { TOOL_NAMES } from "../src/tools.js";

const read = (name: string): string => readFileSync(new URL(`../${name}`, import.meta.url), "utf8");

/** The rows of the first markdown table after the heading that contains `heading`. */
function tableAfter(markdown: string, heading: RegExp): string[][] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((line) => /^#+ /.test(line) && heading.test(line));
  assert.ok(start >= 0, `no heading matching ${heading}`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    if (/^#+ /.test(line)) break;
    if (!line.trim().startsWith("|")) {
      if (rows.length > 0) break;
      continue;
    }
    rows.push(line.split("|").slice(1, -1).map((cell) => cell.trim()));
  }
  return rows.slice(2); // header and separator
}

test("PROTOCOL.md's error table lists exactly the codes in src/errors.ts, in order", () => {
  const rows = tableAfter(read("PROTOCOL.md"), /Error codes/i);
  const documented = rows.map((row) => /^`([A-Z_]+)`$/.exec(row[0] ?? "")?.[1]);
  assert.deepEqual(documented, [...ERROR_CODES]);
});

test("every tool is documented in PROTOCOL.md and README.md", () => {
  for (const name of TOOL_NAMES) {
    assert.ok(read("PROTOCOL.md").includes(name), `${name} missing from PROTOCOL.md`);
    assert.ok(read("README.md").includes(name), `${name} missing from README.md`);
  }
});

test("every CLAUDE_DISPATCH_ variable the code reads or sets is documented, and none that it does not", () => {
  const code = ["config.ts", "claude.ts", "main.ts", "process.ts", "state.ts", "cli.ts"].map((file) => read(`src/${file}`)).join("\n");
  const used = new Set(code.match(/CLAUDE_DISPATCH_[A-Z_]+/g));
  for (const document of ["PROTOCOL.md", "README.md"]) {
    const mentioned = new Set(read(document).match(/CLAUDE_DISPATCH_[A-Z_]+/g));
    for (const name of used) assert.ok(mentioned.has(name), `${name} is not documented in ${document}`);
    for (const name of mentioned) assert.ok(used.has(name), `${document} documents ${name}, which the code does not read`);
  }
});

test("serverInfo.version matches package.json", () => {
  assert.equal(SERVER_VERSION, JSON.parse(read("package.json")).version);
});

test("package.json ships no runtime dependencies", () => {
  const pkg = JSON.parse(read("package.json"));
  assert.equal(pkg.dependencies, undefined);
  assert.equal(pkg.bin["claude-dispatch"], "dist/main.js");
  assert.match(read("src/main.ts"), /^#!\/usr\/bin\/env node\n/);
});
