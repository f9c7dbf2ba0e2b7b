/**
 * The violations the tree still has: the architecture test fails on one not listed here and on one listed
 * that no longer occurs. Rewritten, as the tree is, by
 *   node --import tsx test/architecture/update.ts > test/architecture/allowlist.ts
 */
import type { Allowlist } from "./ratchet.js";

/** Rule → file (relative to src/) → keys, a key repeated as often as it occurs. */
export const ALLOWED: Readonly<Record<string, Allowlist>> = {
};

/** File (relative to the repository) → how many of its lines are over 120 characters. */
export const LONG_LINES: Readonly<Record<string, number>> = {
  "test/architecture/seam-cases.ts": 1,
  "test/claude.test.ts": 1,
  "test/cli-approvals.test.ts": 1,
  "test/cli-terminal.test.ts": 2,
  "test/cli.test.ts": 12,
  "test/codex-runtime.test.ts": 1,
  "test/config.test.ts": 3,
  "test/gemini-runtime.test.ts": 5,
  "test/platform.test.ts": 1,
  "test/sessions.test.ts": 1,
  "test/ssh-guarantees.test.ts": 1,
  "test/ssh-hosts.test.ts": 2,
  "test/ssh-protocol.test.ts": 2,
  "test/sshd.ts": 1,
  "test/state.test.ts": 1,
  "test/test-environment.test.ts": 2,
  "test/worktrees.test.ts": 1,
  "bench/bench.mjs": 1,
  "bench/fuzz/blocks.mjs": 4,
  "bench/fuzz/checks.mjs": 11,
  "bench/fuzz/constants.mjs": 2,
  "bench/fuzz/generators.mjs": 14,
  "bench/fuzz/kinds-calls.mjs": 16,
  "bench/fuzz/kinds-envelope.mjs": 23,
  "bench/fuzz/kinds-sizes.mjs": 5,
  "bench/fuzz/modern-lines.mjs": 28,
  "bench/fuzz/oracle.mjs": 28,
  "bench/fuzz/report.mjs": 2,
  "bench/sections/approvals.mjs": 1,
  "bench/sections/carrier.mjs": 2,
  "bench/sections/cold.mjs": 1,
  "bench/sections/jobcost.mjs": 8,
  "bench/sections/jobs.mjs": 6,
  "bench/sections/latency.mjs": 1,
  "bench/sections/ssh.mjs": 11,
  "bench/sections/startup.mjs": 5,
  "bench/sections/wait.mjs": 3,
  "bench/sections/worktrees.mjs": 2,
};
