/** Keeps the normative documents and the code saying the same thing. */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";

import * as configuration from "../src/config.js";
import { ConfigError } from "../src/config.js";
import type { MachineFacts } from "../src/hosts/local/machine.js";
import { machineOf } from "./host-fakes.js";
import { ERROR_CODES } from "../src/core/errors.js";
import { SERVER_VERSION } from "../src/core/version.js";
import { TOOL_NAMES } from "../src/tools/definitions.js";

/** The configuration on a Linux box, with what a test says of the machine. */
const loadConfig = (env: Readonly<Record<string, string | undefined>>, facts: Partial<MachineFacts> = {}) =>
  configuration.loadConfig(env, machineOf(facts));

const read = (name: string): string => readFileSync(new URL(`../${name}`, import.meta.url), "utf8");

/** Every .ts file under src/, as paths from the repository root. */
function sourceFiles(): string[] {
  const entries = readdirSync(new URL("../src", import.meta.url), { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => `${entry.parentPath ?? entry.path}/${entry.name}`.replace(/^.*?\/src\//, "src/"));
}

/** The pages under docs/, as paths from the repository root. */
function docPages(): string[] {
  return readdirSync(new URL("../docs", import.meta.url))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`);
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
    rows.push(
      line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
  }
  return rows.slice(2); // header and separator
}

test("PROTOCOL.md's error table lists exactly the codes in src/core/errors.ts, in order", () => {
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

test(
  "every CLAUDE_DISPATCH_ variable the code reads or sets is documented, and no document names " + "one it does not",
  () => {
    const code = sourceFiles()
      .map((file) => read(file))
      .join("\n");
    const used = new Set(code.match(/CLAUDE_DISPATCH_[A-Z_]+/g));
    for (const document of ["PROTOCOL.md", "README.md", ...docPages()]) {
      const mentioned = new Set(read(document).match(/CLAUDE_DISPATCH_[A-Z_]+/g));
      if (!document.startsWith("docs/")) {
        for (const name of used) assert.ok(mentioned.has(name), `${name} is not documented in ${document}`);
      }
      for (const name of mentioned)
        assert.ok(used.has(name), `${document} documents ${name}, which the code does not read`);
    }
  },
);

// ---------------------------------------------------------------------------
// The configuration table (PROTOCOL.md §11) against loadConfig
//
// Nothing about a variable is restated here. The names are those loadConfig
// reads (a recording env); the field a variable sets is found by setting it to
// the values its Range cell documents; its default is that field of
// loadConfig({}); its range is probed at each documented bound.
// ---------------------------------------------------------------------------

type Env = Record<string, string | undefined>;
type Config = ReturnType<typeof loadConfig>;

interface Setting {
  name: string;
  default: string;
  range: string;
}

/** The rows of a settings table whose first cell is a `CLAUDE_DISPATCH_*` name: Variable | Default | [Range |] … */
function settingsTable(markdown: string, heading: RegExp, withRange: boolean): Setting[] {
  return tableAfter(markdown, heading).map((row) => {
    const name = /^`(CLAUDE_DISPATCH_[A-Z_]+)`$/.exec(row[0] ?? "")?.[1];
    assert.ok(name, `a row of the table under ${heading} does not start with a variable: ${row.join(" | ")}`);
    return { name, default: row[1] ?? "", range: withRange ? (row[2] ?? "") : "" };
  });
}

const protocolSettings = (): Setting[] => settingsTable(read("PROTOCOL.md"), /Configuration/, true);

/** The environment variables loadConfig reads, on POSIX and on Windows. */
function variablesRead(): Set<string> {
  const seen = new Set<string>();
  const env = new Proxy({} as Env, {
    get(_target, key) {
      if (typeof key === "string") seen.add(key);
      return undefined;
    },
  });
  loadConfig(env);
  loadConfig(env, { platform: "win32", pathDelimiter: ";" });
  return new Set([...seen].filter((name) => name.startsWith("CLAUDE_DISPATCH_")));
}

/** Every leaf of a config as "a.b" → JSON; arrays are leaves. */
function leaves(value: unknown, prefix = "", out = new Map<string, string>()): Map<string, string> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [key, inner] of Object.entries(value)) leaves(inner, prefix ? `${prefix}.${key}` : key, out);
  } else {
    out.set(prefix, JSON.stringify(value) ?? "undefined");
  }
  return out;
}

function field(config: Config, path: string): unknown {
  return path.split(".").reduce<unknown>((value, key) => (value as Record<string, unknown> | undefined)?.[key], config);
}

function accepts(name: string, value: string, host: Partial<MachineFacts> = {}): Config {
  try {
    return loadConfig({ [name]: value }, host);
  } catch (error) {
    assert.fail(
      `${name}=${JSON.stringify(value)} is documented as valid, but loadConfig refuses it: ${(error as Error).message}`,
    );
  }
}

function refuses(name: string, value: string): ConfigError {
  let thrown: unknown;
  try {
    loadConfig({ [name]: value });
  } catch (error) {
    thrown = error;
  }
  assert.ok(
    thrown instanceof ConfigError,
    `${name}=${JSON.stringify(value)} is outside the documented range, but loadConfig accepts it`,
  );
  return thrown;
}

const backticked = (text: string): string[] => [...text.matchAll(/`([^`]+)`/g)].map((match) => match[1] ?? "");

/** How a Range cell reads. */
type Range =
  | { kind: "integer"; min: number; max: number }
  | { kind: "decimal"; above: number; atMost: number; example: string }
  | { kind: "values"; values: string[]; list: boolean }
  | { kind: "one of"; variable: string; example: string }
  | { kind: "example"; example: string };

function parseRange(setting: Setting): Range {
  const cell = setting.range;
  const integer = /^(\d+)–(\d+)$/.exec(cell);
  if (integer) return { kind: "integer", min: Number(integer[1]), max: Number(integer[2]) };
  const decimal = /above (\d+(?:\.\d+)?), at most (\d+(?:\.\d+)?), such as `([^`]+)`/.exec(cell);
  if (decimal)
    return { kind: "decimal", above: Number(decimal[1]), atMost: Number(decimal[2]), example: decimal[3] ?? "" };
  const oneOf = /^one of the modes `(CLAUDE_DISPATCH_[A-Z_]+)` allows, such as `([^`]+)`$/.exec(cell);
  if (oneOf) return { kind: "one of", variable: oneOf[1] ?? "", example: oneOf[2] ?? "" };
  const list = /^comma-separated, from (`[^`]+`(?:, `[^`]+`)*)$/.exec(cell);
  if (list) return { kind: "values", values: backticked(list[1] ?? ""), list: true };
  if (/^`[^`]+`(?:, `[^`]+`)*$/.test(cell)) return { kind: "values", values: backticked(cell), list: false };
  const example = /such as `([^`]+)`$/.exec(cell);
  if (example) return { kind: "example", example: example[1] ?? "" };
  assert.fail(`${setting.name}: cannot read the Range cell ${JSON.stringify(cell)}`);
}

/** Values the Range cell says are valid, to find the field the variable sets. */
function validValues(range: Range): string[] {
  switch (range.kind) {
    case "integer":
      return [String(range.min), String(range.max)];
    case "decimal":
      return [range.example, String(range.atMost)];
    case "values":
      return range.list ? [...range.values, range.values.join(",")] : range.values;
    case "one of":
    case "example":
      return [range.example];
  }
}

/** The one config field that the variable sets, found by setting it to valid values. */
function fieldOf(setting: Setting, range: Range): string {
  const base = leaves(loadConfig({}));
  const changed = new Set<string>();
  for (const value of validValues(range)) {
    for (const [path, json] of leaves(accepts(setting.name, value))) if (base.get(path) !== json) changed.add(path);
  }
  assert.equal(
    changed.size,
    1,
    `${setting.name} should set exactly one config field; its documented values change ` +
      `${[...changed].join(", ") || "none"}`,
  );
  return [...changed][0] ?? "";
}

/** A Default cell holds for the field: a literal, unset, "all but `x`", "CPUs, at least n", or path templates. */
function checkDefault(setting: Setting, path: string, values: string[] | undefined): void {
  const cell = setting.default;
  const actual = field(loadConfig({}), path);
  const where = `${setting.name}'s documented default ${JSON.stringify(cell)}`;
  const literal = /^`([^`]*)`(?: \([^)]*\))?$/.exec(cell);
  if (literal) {
    assert.equal(String(actual), literal[1], `${where}, but the code's is ${JSON.stringify(actual)}`);
    return;
  }
  if (cell === "unset") {
    assert.equal(actual, undefined, `${where}, but the code's is ${JSON.stringify(actual)}`);
    return;
  }
  const allBut = /^all but `([^`]+)`$/.exec(cell);
  if (allBut) {
    assert.ok(values, `${where} needs a list of values in its Range cell`);
    assert.deepEqual(
      actual,
      values.filter((value) => value !== allBut[1]),
      `${where}, but the code's is ${JSON.stringify(actual)}`,
    );
    return;
  }
  const cpus = /^CPUs, at least (\d+)$/.exec(cell);
  if (cpus) {
    const least = Number(cpus[1]);
    for (const count of [1, least, least + 6]) {
      assert.equal(
        field(loadConfig({}, { cpus: count }), path),
        Math.max(least, count),
        `${where}, with ${count} CPUs`,
      );
    }
    return;
  }
  const templates = backticked(cell);
  assert.ok(
    templates.length > 0 && templates.every((template) => /^(\$[A-Z_]+|~|%[A-Z_]+%)[/\\]/.test(template)),
    `${setting.name}: cannot read the Default cell ${JSON.stringify(cell)}`,
  );
  for (const template of templates) {
    const [, head = "", rest = ""] = /^(\$[A-Z_]+|~|%[A-Z_]+%)(.*)$/.exec(template) ?? [];
    const windows = head.startsWith("%");
    const env: Env = {};
    const windowsBox = { platform: "win32", home: "C:\\Users\\probe" };
    const host: Partial<MachineFacts> = windows ? windowsBox : { home: "/probe/home" };
    let expected: string;
    if (head === "~") {
      expected = `/probe/home${rest}`;
    } else if (windows) {
      env[head.slice(1, -1)] = "C:\\probe";
      expected = `C:\\probe${rest}`;
    } else {
      env[head.slice(1)] = "/probe/state";
      expected = `/probe/state${rest}`;
    }
    assert.equal(field(loadConfig(env, host), path), expected, `${where}: ${template} with ${JSON.stringify(env)}`);
  }
}

/** The code's own list of valid values, as its refusal of an invalid one names them. */
function listInRefusal(name: string): string[] {
  const message = refuses(name, "no-such-value").message;
  const list = /(?:one of|among) (.+?), got /.exec(message)?.[1];
  assert.ok(list, `${name}: the refusal ${JSON.stringify(message)} lists no valid values`);
  return list.split(", ");
}

function checkRange(setting: Setting, range: Range, path: string, settings: Setting[]): void {
  const { name } = setting;
  switch (range.kind) {
    case "integer":
      for (const bound of [range.min, range.max])
        assert.equal(field(accepts(name, String(bound)), path), bound, `${name}=${bound}`);
      if (range.min > 0) refuses(name, String(range.min - 1));
      refuses(name, String(range.max + 1));
      return;
    case "decimal":
      assert.equal(field(accepts(name, String(range.atMost)), path), range.atMost, `${name}=${range.atMost}`);
      refuses(name, String(range.above));
      refuses(name, `${range.atMost}.01`);
      accepts(name, `${range.above}.01`);
      return;
    case "values":
      for (const value of range.values) accepts(name, value);
      assert.deepEqual(listInRefusal(name), range.values, `${name}: the documented values differ from the code's`);
      if (range.list)
        assert.deepEqual(field(accepts(name, range.values.join(",")), path), range.values, `${name} as a list`);
      return;
    case "one of": {
      const other = settings.find((candidate) => candidate.name === range.variable);
      assert.ok(other, `${name} refers to ${range.variable}, which the table does not list`);
      const otherRange = parseRange(other);
      assert.equal(otherRange.kind, "values", `${range.variable} should list its values`);
      const allowed = field(loadConfig({}), fieldOf(other, otherRange)) as string[];
      for (const value of otherRange.kind === "values" ? otherRange.values : []) {
        if (allowed.includes(value)) assert.equal(field(accepts(name, value), path), value, `${name}=${value}`);
        else refuses(name, value);
      }
      return;
    }
    case "example":
      accepts(name, range.example);
      return;
  }
}

test("PROTOCOL.md §11's table names exactly the variables loadConfig reads, once each", () => {
  const documented = protocolSettings().map((setting) => setting.name);
  assert.equal(new Set(documented).size, documented.length, "a variable is listed twice");
  assert.deepEqual(new Set(documented), variablesRead());
});

test("PROTOCOL.md §11's defaults and ranges are the ones loadConfig applies", () => {
  const settings = protocolSettings();
  for (const setting of settings) {
    const range = parseRange(setting);
    const path = fieldOf(setting, range);
    checkDefault(setting, path, range.kind === "values" ? range.values : undefined);
    checkRange(setting, range, path, settings);
  }
});

test("README.md's settings table lists only variables of §11, with the defaults loadConfig applies", () => {
  const full = new Map(protocolSettings().map((setting) => [setting.name, setting]));
  const short = settingsTable(read("README.md"), /^## Settings$/, false);
  assert.ok(short.length > 0);
  for (const setting of short) {
    const entry = full.get(setting.name);
    assert.ok(entry, `README.md's settings table lists ${setting.name}, which PROTOCOL.md §11 does not`);
    const range = parseRange(entry);
    checkDefault(setting, fieldOf(entry, range), range.kind === "values" ? range.values : undefined);
  }
});

/** GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as dashes, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const [, heading = ""] of markdown.matchAll(/^#+ (.+)$/gm)) {
    const slug = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, "")
      .replace(/ /g, "-");
    let anchor = slug;
    for (let n = 1; anchors.has(anchor); n++) anchor = `${slug}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

/** Every relative link of a page leads to a page, and a heading of it, that exist. */
function checkLinks(name: string): void {
  const markdown = read(name);
  const folder = name.includes("/") ? name.slice(0, name.lastIndexOf("/") + 1) : "";
  const links = [...markdown.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1] ?? "");
  for (const link of links.filter((target) => !/^[a-z]+:/.test(target))) {
    const [path = "", anchor] = link.split("#");
    const target = path === "" ? name : new URL(path, `file:///${folder}`).pathname.slice(1);
    const page = path === "" ? markdown : read(target); // read throws, naming the path, when the page is missing
    if (anchor === undefined) continue;
    assert.ok(anchorsOf(page).has(anchor), `${name} links to ${link}, a heading ${target} does not have`);
  }
}

test("README.md stays under 14000 bytes, and its links lead to pages and headings that exist", () => {
  const bytes = Buffer.byteLength(read("README.md"));
  assert.ok(bytes < 14_000, `README.md is ${bytes} bytes; the bound is 14000`);
  assert.match(read("README.md"), /\]\(PROTOCOL\.md#/);
  checkLinks("README.md");
});

test("PROTOCOL.md stays under 55000 bytes; its links and those of docs/ lead to pages and headings", () => {
  const bytes = Buffer.byteLength(read("PROTOCOL.md"));
  assert.ok(bytes < 55_000, `PROTOCOL.md is ${bytes} bytes; the bound is 55000`);
  for (const name of ["PROTOCOL.md", ...docPages()]) checkLinks(name);
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
