#!/usr/bin/env node
/**
 * Hostile-input fuzzer for claude-dispatch (see bench/fuzz-lib.mjs).
 *
 *   node bench/fuzz.mjs --seed N --lines M [--server path/to/dist/main.js]
 *                       [--huge-lines K] [--log-level warn] [--json]
 *   node bench/fuzz.mjs --seed N --phase main --block B [--dump]   replay one block
 *
 * Runs the BUILT server (npm run build first). Prints a summary and exits 1
 * on any violation, printing the first ones with the seed and block index.
 */
import { DEFAULT_SERVER, describeBlock, formatReport, runFuzz } from "./fuzz-lib.mjs";

const USAGE = `usage: node bench/fuzz.mjs --seed N --lines M [--server dist/main.js] [--huge-lines K]
       [--log-level debug|info|warn|error|silent] [--block-timeout-ms MS] [--max-violations N] [--json]
       node bench/fuzz.mjs --seed N [--phase main|huge] --block B[,B2...] [--dump]`;

function parseArgs(argv) {
  const options = {};
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    const value = () => {
      const next = argv[i + 1];
      if (next === undefined) throw new Error(`${arg} needs a value`);
      i += 1;
      return next;
    };
    const integer = () => {
      const text = value();
      if (!/^-?\d+$/.test(text)) throw new Error(`${arg} needs an integer, got ${text}`);
      return Number(text);
    };
    switch (arg) {
      case "--seed":
        options.seed = integer();
        break;
      case "--lines":
        options.lines = integer();
        break;
      case "--huge-lines":
        options.hugeLines = integer();
        break;
      case "--server":
        options.server = value();
        break;
      case "--phase":
        options.phase = value();
        if (options.phase !== "main" && options.phase !== "huge") throw new Error("--phase is main or huge");
        break;
      case "--block":
        options.blocks = value().split(",").map((part) => {
          if (!/^\d+$/.test(part)) throw new Error(`--block needs block indexes, got ${part}`);
          return Number(part);
        });
        break;
      case "--dump":
        options.dump = true;
        break;
      case "--json":
        options.json = true;
        break;
      case "--log-level":
        options.logLevel = value();
        break;
      case "--block-timeout-ms":
        options.blockTimeoutMs = integer();
        break;
      case "--max-violations":
        options.maxViolations = integer();
        break;
      case "-h":
      case "--help":
        console.log(USAGE);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${arg}`);
    }
  }
  return options;
}

let options;
try {
  options = parseArgs(process.argv.slice(2));
} catch (error) {
  console.error(`fuzz: ${error.message}\n${USAGE}`);
  process.exit(2);
}

const report = await runFuzz({
  ...options,
  server: options.server ?? DEFAULT_SERVER,
  onBlock: options.dump ? (block) => console.log(`block ${block.block} (${block.phase}), write mode ` +
    `${JSON.stringify(block.writeMode)}:\n${describeBlock(block)}\n`) : undefined,
  onProgress: process.stderr.isTTY
    ? (stats) => process.stderr.write(`\r  ${stats.phase}: ${stats.lines} lines, ${stats.responses} responses, ` +
      `${(stats.wallMs / 1000).toFixed(0)} s   `)
    : undefined,
});
if (process.stderr.isTTY) process.stderr.write("\n");

console.log(options.json ? JSON.stringify(report, null, 2) : formatReport(report));
process.exit(report.violationCount === 0 ? 0 : 1);
