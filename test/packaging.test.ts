/**
 * What a new user meets before any job: the licence package.json names is there and shipped, `npm pack`'s
 * output is not left for git to add, and run through a link (as npx and package managers run a bin), the
 * program names its real main.js in the host configuration it prints, not the link in a cache.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, describe, test } from "node:test";

import { FAKE_CLAUDE, minimalEnvironment, SERVER_MAIN } from "./server-process.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-packaging-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

describe("packaging", () => {
  test("the build: main.js, then the job layer in one file; no class twice; one byte a character", () => {
    const dist = path.dirname(SERVER_MAIN);
    const files = readdirSync(dist).filter((name) => name.endsWith(".js"));
    const texts = new Map(files.map((name) => [name, readFileSync(path.join(dist, name), "utf8")]));
    const named = (text: string, form: RegExp) => [...text.matchAll(form)].map((match) => match[1] ?? match[2] ?? "");
    const staticForm = /^(?:import|export)\b[^;]*?from\s*"(\.\/[^"]+)";|^import\s*"(\.\/[^"]+)";/gm;
    const dynamicForm = /\bimport\(\s*"(\.\/[^"]+)"\s*\)/g;
    // main.js imports nothing of dist statically: the ES loader reads one file before main runs.
    assert.deepEqual(named(texts.get("main.js") ?? "", staticForm), []);
    const classes = new Map<string, string>();
    for (const [name, text] of texts) {
      for (const imported of [...named(text, staticForm), ...named(text, dynamicForm)]) {
        assert.ok(existsSync(path.join(dist, imported)), `${name} imports ${imported}, which the build did not write`);
      }
      // A class defined twice would be two classes, and instanceof across them false.
      for (const defined of named(text, /^(?:var (\w+) = class\b|class (\w+))/gm)) {
        assert.equal(classes.get(defined), undefined, `class ${defined} is in ${classes.get(defined)} and ${name}`);
        classes.set(defined, name);
      }
    }
    assert.equal(classes.get("StateError"), "main.js");
    // The job layer, loaded as the front door answers, is one file more: it imports only main.js.
    const jobLayer = files.filter((name) => name.startsWith("serving-"));
    assert.equal(jobLayer.length, 1, `one job layer file, not ${jobLayer.join(", ")}`);
    assert.deepEqual([...new Set(named(texts.get(jobLayer[0] ?? "") ?? "", staticForm))], ["./main.js"]);
    // One character above U+00FF, even in a comment, makes V8 hold the whole file's source at two bytes a
    // character (BENCHMARKS.md (d)).
    for (const [name, text] of texts) {
      const wide = /[^\u0000-\u00ff]/.exec(text);
      assert.equal(wide, null, `${name} holds ${JSON.stringify(wide?.[0])} at ${wide?.index}`);
    }
  });

  test("an MIT LICENSE, as package.json says, shipped in the package", () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
      license: string;
      files: string[];
    };
    assert.equal(pkg.license, "MIT");
    assert.ok(pkg.files.includes("LICENSE"));
    assert.match(readFileSync(path.join(ROOT, "LICENSE"), "utf8"), /^MIT License\n\nCopyright \(c\) \d{4} /);
  });

  test("npm pack's output is ignored by git", () => {
    const checked = spawnSync("git", ["check-ignore", "--no-index", "-q", "claude-dispatch-0.1.0.tgz"], {
      cwd: ROOT,
      env: minimalEnvironment(),
    });
    assert.equal(checked.status, 0, "git check-ignore claude-dispatch-0.1.0.tgz");
  });

  test("run through a link, executed as npx runs a bin, doctor's host configuration names the real main.js", () => {
    const bin = path.join(scratch, "cache", "node_modules", ".bin");
    mkdirSync(bin, { recursive: true });
    const link = path.join(bin, "claude-dispatch");
    symlinkSync(SERVER_MAIN, link);
    const env = minimalEnvironment({
      CLAUDE_DISPATCH_STATE_DIR: path.join(scratch, "state"),
      CLAUDE_DISPATCH_CLAUDE_BIN: FAKE_CLAUDE,
    });
    let output: string;
    try {
      // Executed itself, as a package manager's shim is: its first line must name node.
      output = execFileSync(link, ["doctor"], { env: { ...env, PATH: nodeFirst(env.PATH) }, encoding: "utf8" });
    } catch (error) {
      // A failed check exits 1; the configuration is printed all the same.
      output = (error as { stdout: string }).stdout;
    }
    assert.ok(output.includes(SERVER_MAIN), output);
    assert.ok(!output.includes(link), "the link itself is not what the host is told to run");
  });
});

/** PATH with the folder of the node running the tests first, where `#!/usr/bin/env node` looks. */
function nodeFirst(pathVariable: string | undefined): string {
  return [path.dirname(process.execPath), ...(pathVariable ? [pathVariable] : [])].join(path.delimiter);
}
