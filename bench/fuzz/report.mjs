/**
 * The readable side: describing a block for replays and formatting the report the CLI prints. Part of
 * the fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { describeCheck, preview } from "./checks.mjs";

function describeExpectation(exp) {
  if (exp.t === "none") return "no response";
  if (exp.t === "null") return `error ${exp.code} with id null`;
  if (exp.code !== undefined) return `error ${exp.code}`;
  return describeCheck(exp.check);
}


/** A readable account of one block, for replays (--dump). */
export function describeBlock(block) {
  return block.items.map((item, index) => {
    const exp = describeExpectation(item.exp) + (item.optional ? " (optional: cancelled)" : "") + (item.early ? " [reported before its newline]" : "");
    return `${String(index).padStart(3)} ${item.kind.padEnd(16)} ${String(item.line.length).padStart(8)} B  -> ` +
      `${exp}\n      ${preview(item.line.toString("utf8"), 200)}`;
  }).join("\n");
}

/** Formats the report as the summary the CLI prints. */
export function formatReport(report) {
  const out = [];
  const mib = (bytes) => (bytes === undefined ? "n/a" : `${(bytes / 1048576).toFixed(1)} MiB`);
  out.push(`claude-dispatch fuzz  seed ${report.seed}  server ${report.server}`);
  for (const stats of report.phases) {
    const seconds = stats.wallMs / 1000;
    out.push("");
    out.push(`phase ${stats.phase}${stats.phase === "main" ? " (CLAUDE_DISPATCH_MAX_LINE_BYTES=65536)" : " (default 16 MiB line limit: huge strings, 1e5-deep nesting)"}`);
    out.push(`  lines sent      ${stats.lines} (+ ${stats.sentinels} sentinel pings) in ${stats.blocks} blocks, ` +
      `${mib(stats.bytes)}`);
    out.push(`  writes          ${stats.writes} (1 B to 64 KiB; ${stats.splitCharacters} cut a UTF-8 ` +
      `character in two)`);
    out.push(`  requests        ${stats.requests}`);
    out.push(`  responses       ${stats.responses}`);
    out.push(`  notifications   ${stats.notifications}`);
    out.push(`  codes           ` +
      `${Object.entries(stats.codes).sort().map(([code, count]) => `${code}: ${count}`).join("  ")}`);
    out.push(`  tool results    ` +
      `${Object.entries(stats.toolCodes).sort().map(([code, count]) => `${code}: ${count}`).join("  ")}`);
    out.push(`  line kinds      ` +
      `${Object.entries(stats.kinds).sort().map(([kind, count]) => `${kind}: ${count}`).join("  ")}`);
    out.push(`  lines/s         ${Math.round(stats.lines / seconds)}`);
    out.push(`  wall time       ${seconds.toFixed(1)} s`);
    out.push(`  peak server RSS ${mib(stats.peakRssBytes)} (VmHWM)`);
    out.push(`  server exit     ${stats.exitCode}`);
  }
  out.push("");
  out.push(`total wall time ${(report.wallMs / 1000).toFixed(1)} s`);
  if (report.serverErrorLogs.length > 0) {
    out.push(`server logged errors on stderr (first ${report.serverErrorLogs.length}):`);
    for (const line of report.serverErrorLogs.slice(0, 5)) out.push(`  ${line}`);
  }
  if (report.violationCount === 0) out.push("no violations");
  else {
    out.push(`${report.violationCount} violation(s); the first ${report.violations.length}:`);
    for (const v of report.violations) {
      out.push(`- seed ${v.seed} phase ${v.phase} block ${v.block} line ${v.line}${v.kind ? ` (${v.kind})` : ""}: ` +
        `${v.message}`);
      if (v.sent) out.push(`    sent: ${v.sent}`);
    }
    const first = report.violations.find((v) => typeof v.block === "number");
    if (first) out.push(`replay: node bench/fuzz.mjs --seed ${first.seed} --phase ${first.phase} --block ` +
      `${first.block} --dump`);
  }
  return out.join("\n");
}

export { describeExpectation };
