/**
 * bench/table.mjs: BENCHMARKS.md's current table comes from a results.json of a full run, between two
 * markers; a results.json that lacks a figure is refused and the document left as it was.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { minimalEnvironment } from "./server-process.js";

interface Row {
  metric: string;
  value: string;
  target: string;
  verdict: string;
  detail?: string;
}

interface Results {
  sections: Record<string, Record<string, unknown>>;
  table: Row[];
  machine: { commit: string };
  distChangedDuringRun?: boolean;
}

interface TableModule {
  TABLE_START: string;
  TABLE_END: string;
  missingFigures(results: unknown): string[];
  renderTable(results: unknown): string;
  replaceTable(document: string, table: string): string;
}

// Plain ESM without type declarations; a computed specifier keeps the type checker out of it.
const SCRIPT = fileURLToPath(new URL("../bench/table.mjs", import.meta.url));
const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url));
const load = async (): Promise<TableModule> => (await import(pathToFileURL(SCRIPT).href)) as TableModule;
const fixture = (): Results => JSON.parse(readFileSync(path.join(FIXTURES, "bench-results.json"), "utf8")) as Results;
const expected = readFileSync(path.join(FIXTURES, "bench-table.md"), "utf8").trimEnd();

/** The fixture without section (g), its result and its rows: a run of --only with g left out. */
function withoutWait(): Results {
  const results = fixture();
  delete results.sections.wait;
  results.table = results.table.filter((row) => !row.metric.startsWith("g "));
  return results;
}

test("results.json becomes the table: rows in section order, details left out but a skip's reason", async () => {
  const { renderTable } = await load();
  assert.equal(renderTable(fixture()), expected);
});

test("a results.json that lacks a figure is refused, naming it", async () => {
  const { missingFigures, renderTable } = await load();
  assert.deepEqual(missingFigures(fixture()), []);
  assert.throws(() => renderTable(withoutWait()), /lacks figures: g \(wait\): not run/);

  const failed = fixture();
  failed.sections.big = { error: "timed out" };
  const big = failed.table.findIndex((row) => row.metric.startsWith("f "));
  failed.table[big] = { metric: "f  big", value: "ERROR", target: "", verdict: "MISS" };
  const problems = missingFigures(failed);
  assert.ok(problems.includes("f (big): failed: timed out"), problems.join("; "));
  assert.ok(
    problems.some((problem) => /f \(big\): "big" has no value/.test(problem)),
    problems.join("; "),
  );

  const untargeted = fixture();
  const cold = untargeted.table[0];
  assert.ok(cold);
  cold.target = "";
  assert.throws(() => renderTable(untargeted), /a \(cold\): "cold start: spawn -> initialize result" has no target/);

  const mixed = fixture();
  mixed.distChangedDuringRun = true;
  assert.throws(() => renderTable(mixed), /dist\/ was rebuilt during the run/);
});

test("only the text between the markers is replaced, and only when both are there once", async () => {
  const { TABLE_START, TABLE_END, replaceTable, renderTable } = await load();
  const document = `# Benchmarks\n\nIntro.\n\n${TABLE_START}\nold table\n${TABLE_END}\n\n## History\n\nOld runs.\n`;
  const table = renderTable(fixture());
  const replaced = replaceTable(document, table);
  assert.equal(replaced, `# Benchmarks\n\nIntro.\n\n${expected}\n\n## History\n\nOld runs.\n`);
  assert.equal(replaceTable(replaced, table), replaced);
  assert.throws(() => replaceTable("# Benchmarks\n", table), /markers/);
  assert.throws(() => replaceTable(`${TABLE_END}\n${TABLE_START}\n`, table), /markers/);
  assert.throws(() => replaceTable(`${document}${TABLE_START}\n`, table), /markers/);
});

test("node bench/table.mjs rewrites the document, or leaves it whole and exits 1", async () => {
  const { TABLE_START, TABLE_END } = await load();
  const dir = mkdtempSync(path.join(tmpdir(), "bench-table-"));
  try {
    const document = path.join(dir, "BENCHMARKS.md");
    const before = `# Benchmarks\n\n${TABLE_START}\nold\n${TABLE_END}\n\nHistory.\n`;
    writeFileSync(document, before);
    const missing = path.join(dir, "missing.json");
    writeFileSync(missing, JSON.stringify(withoutWait()));
    const run = (results: string) =>
      spawnSync(process.execPath, [SCRIPT, "--results", results, "--document", document], {
        env: minimalEnvironment(),
        encoding: "utf8",
      });

    const refused = run(missing);
    assert.equal(refused.status, 1, refused.stderr);
    assert.match(refused.stderr, /g \(wait\): not run/);
    assert.equal(readFileSync(document, "utf8"), before);

    const written = run(path.join(FIXTURES, "bench-results.json"));
    assert.equal(written.status, 0, written.stderr);
    assert.equal(readFileSync(document, "utf8"), `# Benchmarks\n\n${expected}\n\nHistory.\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
