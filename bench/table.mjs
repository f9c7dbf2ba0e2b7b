#!/usr/bin/env node
/**
 * BENCHMARKS.md opens with the current figures: one table, written here from a results.json of a full
 * run of bench/bench.mjs between two markers, and nowhere else. Each row is a figure, its result, the
 * target the section itself applies (sections/*.mjs) and its verdict, the time and load average when the
 * section began, and the commit measured; each row's details stay in results.json.
 *
 *   node bench/table.mjs [--results bench/results.json] [--document BENCHMARKS.md]
 *
 * `npm run bench` does the same at the end of its run (bench.mjs --table). A results.json that lacks a
 * figure (a section not run, or failed, a row without its value or target) is refused and the document
 * left as it was: the table never mixes runs.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { SECTION_LIST } from "./sections/list.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const DOCUMENT = path.join(ROOT, "BENCHMARKS.md");
export const RESULTS = path.join(ROOT, "bench", "results.json");
export const TABLE_START =
  "<!-- bench-table: written by `node bench/table.mjs` from bench/results.json; do not edit -->";
export const TABLE_END = "<!-- bench-table: end -->";

const VERDICTS = new Set(["PASS", "MISS", "info"]);

/** The section letter a row's metric starts with ("a  cold start: ..."), and the rest. */
function splitMetric(metric) {
  const match = /^([a-z])\s+(.*)$/s.exec(String(metric ?? ""));
  return match ? { key: match[1], figure: match[2] } : { key: undefined, figure: String(metric ?? "") };
}

const filled = (value) => typeof value === "string" && value.trim() !== "";

/** What keeps these results from making the table, one line each; empty when nothing does. */
export function missingFigures(results) {
  if (typeof results !== "object" || results === null) return ["results.json holds no object"];
  const missing = [];
  if (!filled(results.date)) missing.push("no date");
  if (!filled(results.machine?.commit)) missing.push("no commit");
  if (results.distChangedDuringRun) missing.push("dist/ was rebuilt during the run: its figures mix two builds");
  const rows = Array.isArray(results.table) ? results.table : [];
  if (!Array.isArray(results.table)) missing.push("no table of rows");
  for (const row of rows) {
    const { key, figure } = splitMetric(row?.metric);
    if (!SECTION_LIST.some((section) => section.key === key)) missing.push(`"${figure}" belongs to no section`);
  }
  for (const { key, name } of SECTION_LIST) {
    const section = results.sections?.[name];
    const own = rows.filter((row) => splitMetric(row?.metric).key === key);
    if (section === undefined || own.length === 0) missing.push(`${key} (${name}): not run`);
    else if (section.error !== undefined) missing.push(`${key} (${name}): failed: ${section.error}`);
    for (const row of own) {
      const { figure } = splitMetric(row.metric);
      if (!filled(row.value) || row.value === "ERROR") missing.push(`${key} (${name}): "${figure}" has no value`);
      if (!filled(row.target)) missing.push(`${key} (${name}): "${figure}" has no target`);
      if (!VERDICTS.has(row.verdict)) missing.push(`${key} (${name}): "${figure}" has no verdict`);
    }
  }
  return missing;
}

/** A table cell: one line, and no `|` that would end the cell. */
const cell = (text) => String(text).replace(/\s*\n\s*/g, " ").replace(/\|/g, "\\|");

/** "2026-12-02T06:10:33.123Z" -> "2026-12-02 06:10 UTC". */
const minute = (iso) => `${String(iso).slice(0, 10)} ${String(iso).slice(11, 16)} UTC`;

const oneMinuteLoad = (load) => (Array.isArray(load) && Number.isFinite(load[0]) ? load[0].toFixed(2) : "?");

/** The line above the table: the run, the machine, and what the run left behind. */
function caption(results) {
  const { machine } = results;
  const sections = SECTION_LIST.map(({ name }) => results.sections[name]);
  const loadStart = oneMinuteLoad(sections[0]?.loadBefore);
  const loadEnd = oneMinuteLoad(sections.at(-1)?.loadAfter);
  const killed = results.killedLeftovers?.length ?? 0;
  const left = results.leftoverProcesses?.length ?? 0;
  const leftovers =
    killed + left === 0 ? "no process was left over" : `${killed} leftover processes were killed, ${left} remained`;
  return (
    `A full run of \`node bench/bench.mjs\` (${results.rounds} rounds, medians) on ${minute(results.date)}, ` +
    `commit ${machine.commit}, in ${Math.round(results.totalSeconds ?? 0)} s: node ${machine.node}, ` +
    `${machine.nproc} CPUs (${machine.cpu}), ${machine.memTotalMiB} MiB, kernel ${machine.kernel}; ` +
    `load average (1 min) ${loadStart} at the start, ${loadEnd} at the end; ${leftovers}.`
  );
}

function tableRow(results, row) {
  const { key, figure } = splitMetric(row.metric);
  const section = results.sections[SECTION_LIST.find((s) => s.key === key).name];
  // The details (floors, rounds, pooled figures) stay in results.json; a skipped figure keeps its reason.
  const result = row.value === "skipped" && filled(row.detail) ? `**skipped** (${row.detail})` : `**${row.value}**`;
  const verdict = row.verdict === "MISS" ? "**MISS**" : row.verdict;
  const when = `${minute(section.startedAt ?? results.date)}, load ${oneMinuteLoad(section.loadBefore)}`;
  return `| ${key} | ${[figure, result, row.target, verdict, when, results.machine.commit].map(cell).join(" | ")} |`;
}

/** The block between the markers, markers included; throws, naming each one, if a figure is missing. */
export function renderTable(results) {
  const missing = missingFigures(results);
  if (missing.length > 0) throw new Error(`results.json lacks figures: ${missing.join("; ")}`);
  const order = (row) => SECTION_LIST.findIndex((s) => s.key === splitMetric(row.metric).key);
  const rows = results.table
    .map((row, index) => ({ row, index }))
    .sort((x, y) => order(x.row) - order(y.row) || x.index - y.index);
  return [
    TABLE_START,
    caption(results),
    "",
    "| | Figure | Result | Target | Verdict | Date, load | Commit |",
    "|---|---|---|---|---|---|---|",
    ...rows.map(({ row }) => tableRow(results, row)),
    TABLE_END,
  ].join("\n");
}

/** The document with its table replaced; throws unless it holds the two markers once each, in order. */
export function replaceTable(document, table) {
  const start = document.indexOf(TABLE_START);
  const end = document.indexOf(TABLE_END);
  const once = (marker, at) => at !== -1 && document.indexOf(marker, at + marker.length) === -1;
  if (!once(TABLE_START, start) || !once(TABLE_END, end) || end < start) {
    throw new Error(`the document must hold each of the markers ${TABLE_START} and ${TABLE_END} once, in that order`);
  }
  return document.slice(0, start) + table + document.slice(end + TABLE_END.length);
}

/** Rewrites the table of the document at documentPath from results; nothing is written if either is wrong. */
export function writeTable(results, documentPath = DOCUMENT) {
  const updated = replaceTable(fs.readFileSync(documentPath, "utf8"), renderTable(results));
  fs.writeFileSync(documentPath, updated);
}

function main(argv) {
  let resultsPath = RESULTS;
  let documentPath = DOCUMENT;
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === "--results" && argv[i + 1] !== undefined) resultsPath = path.resolve(argv[++i]);
    else if (argv[i] === "--document" && argv[i + 1] !== undefined) documentPath = path.resolve(argv[++i]);
    else throw new Error(`usage: node bench/table.mjs [--results FILE] [--document FILE] (got ${argv[i]})`);
  }
  writeTable(JSON.parse(fs.readFileSync(resultsPath, "utf8")), documentPath);
  const shown = path.relative(process.cwd(), documentPath) || documentPath;
  process.stdout.write(`${shown}: table written from ${resultsPath}\n`);
}

if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  try {
    main(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`bench/table.mjs: ${error?.message ?? error}\n`);
    process.exitCode = 1;
  }
}
