/**
 * runFuzz: the phases, each with its own server process, block after block. Part of the fuzzer:
 * bench/fuzz-lib.mjs re-exports its public names.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { generateBlock } from "./blocks.mjs";
import { DEFAULT_LINE_LIMIT, DEFAULT_SERVER, MAIN_LINE_LIMIT } from "./constants.mjs";
import { statKind } from "./oracle.mjs";
import { loadErrorCodes } from "./server.mjs";
import { Session } from "./session.mjs";

function makeEnvironment(scratch, maxLineBytes) {
  const cache = new Map();
  return {
    maxLineBytes,
    realDir: path.join(scratch, "work"),
    file: path.join(scratch, "a-file.txt"),
    dirKind(dir) {
      if (cache.has(dir)) return cache.get(dir);
      const kind = statKind(dir);
      if (cache.size < 10000) cache.set(dir, kind);
      return kind;
    },
  };
}

/**
 * Runs the fuzzer. options: seed, lines (main phase), hugeLines (huge phase,
 * default lines/2000 within 4..100), server, blocks (replay: only these block
 * indexes of `phase`), phase, blockTimeoutMs, logLevel, maxViolations,
 * onProgress(stats), baseEnv (the servers' base environment; default: PATH
 * only, see serverEnvironment).
 */
export async function runFuzz(options = {}) {
  const seed = Number(options.seed ?? 1);
  const lines = Number(options.lines ?? 20000);
  const hugeLines = Number(options.hugeLines ?? Math.max(4, Math.min(100, Math.round(lines / 2000))));
  const server = path.resolve(options.server ?? DEFAULT_SERVER);
  const report = {
    seed,
    server,
    violations: [],
    violationCount: 0,
    maxViolations: options.maxViolations ?? 50,
    phases: [],
    serverErrorLogs: [],
    wallMs: 0,
  };
  const started = Date.now();
  const errorCodes = await loadErrorCodes(server);
  const scratch = mkdtempSync(path.join(tmpdir(), "claude-dispatch-fuzz-"));
  mkdirSync(path.join(scratch, "work"));
  writeFileSync(path.join(scratch, "a-file.txt"), "not a directory\n");
  const phases = [];
  if (options.blocks) phases.push({ phase: options.phase ?? "main", blocks: options.blocks });
  else {
    phases.push({ phase: "main", lines });
    if (hugeLines > 0) phases.push({ phase: "huge", lines: hugeLines });
  }
  try {
    for (const plan of phases) {
      const maxLineBytes = plan.phase === "huge" ? DEFAULT_LINE_LIMIT : (options.maxLineBytes ?? MAIN_LINE_LIMIT);
      const env = makeEnvironment(scratch, maxLineBytes);
      const phaseStarted = Date.now();
      const session = new Session({
        server,
        phase: plan.phase,
        maxLineBytes,
        seed,
        errorCodes,
        report,
        blockTimeoutMs: options.blockTimeoutMs ?? 20000,
        exitTimeoutMs: options.exitTimeoutMs ?? 15000,
        logLevel: options.logLevel ?? "warn",
        baseEnv: options.baseEnv,
      });
      session.maxLineBytes = maxLineBytes;
      session.finalCr = seed % 2 === 1;
      const indexes = plan.blocks ?? null;
      let lastProgress = Date.now();
      for (let i = 0; ; i += 1) {
        if (indexes ? i >= indexes.length : session.stats.lines >= plan.lines) break;
        if (session.aborted || session.exit || session.exitedEarly) break;
        const block = generateBlock(seed, plan.phase, indexes ? indexes[i] : i, env);
        if (options.onBlock) options.onBlock(block);
        await session.runBlock(block);
        if (options.onProgress && Date.now() - lastProgress > 2000) {
          lastProgress = Date.now();
          options.onProgress({ ...session.stats, wallMs: Date.now() - phaseStarted });
        }
      }
      await session.finish();
      session.stats.wallMs = Date.now() - phaseStarted;
      session.stats.pid = session.pid;
      report.phases.push(session.stats);
      report.serverErrorLogs.push(...session.errorLogs.map((line) => `[${plan.phase}] ${line}`));
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  report.wallMs = Date.now() - started;
  return report;
}
