/**
 * The hostile-input fuzzer (bench/fuzz-lib.mjs), fast: a fixed seed and a few
 * thousand lines against the built server, then a handful of 1-2 MiB lines and
 * 1e5-deep nesting under the default line limit. Every line's expected answer
 * comes from PROTOCOL.md §1, §2, §4, §5, §9, §14 and §16, both eras mixed on
 * the one connection; any violation fails the test
 * and is printed with its seed and block, so `node bench/fuzz.mjs --seed …
 * --block … --dump` replays it. FUZZ_SERVER points it at another build.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { minimalEnvironment, SERVER_MAIN } from "./server-process.js";

interface FuzzReport {
  violationCount: number;
  phases: Array<{
    phase: string;
    lines: number;
    responses: number;
    exitCode: number | null;
    kinds: Record<string, number>;
  }>;
}

interface FuzzLib {
  runFuzz(options: Record<string, unknown>): Promise<FuzzReport>;
  formatReport(report: FuzzReport): string;
}

// Plain ESM without type declarations; a computed specifier keeps the type checker out of it.
const LIB = new URL("../bench/fuzz-lib.mjs", import.meta.url).href;

test(
  "hostile input: every line gets exactly what PROTOCOL.md says (fixed seed)",
  { skip: process.platform === "win32" && "the fake agent is an .mjs file run directly", timeout: 60_000 },
  async () => {
    const fuzz = (await import(LIB)) as FuzzLib;
    const report = await fuzz.runFuzz({
      seed: 20_240_611,
      lines: 6000,
      hugeLines: 6,
      server: process.env.FUZZ_SERVER ?? SERVER_MAIN,
      baseEnv: minimalEnvironment(),
      blockTimeoutMs: 15_000,
      exitTimeoutMs: 10_000,
      maxViolations: 20,
    });
    assert.equal(report.violationCount, 0, fuzz.formatReport(report));
    const main = report.phases.find((phase) => phase.phase === "main");
    assert.ok(main && main.lines >= 6000, `the main phase ran to the end\n${fuzz.formatReport(report)}`);
    assert.ok(
      (main.kinds.modern ?? 0) >= 200,
      `the 2026-07-28 era (§16) had its share of lines\n${fuzz.formatReport(report)}`,
    );
  },
);
