/** Keeps the normative documents and the code saying the same thing. */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";

import { ERROR_CODES } from "../src/core/errors.js";
import { SERVER_VERSION } from "../src/core/version.js";
import { TOOL_NAMES } from "../src/tools/definitions.js";

const read = (name: string): string => readFileSync(new URL(`../${name}`, import.meta.url), "utf8");

/** Every .ts file under src/, as paths from the repository root. */
function sourceFiles(): string[] {
  const entries = readdirSync(new URL("../src", import.meta.url), { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile() && entry.name.endsWith(".ts")).map((entry) => `${entry.parentPath ?? entry.path}/${entry.name}`.replace(/^.*?\/src\//, "src/"));
}

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
  const code = sourceFiles().map((file) => read(file)).join("\n");
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
