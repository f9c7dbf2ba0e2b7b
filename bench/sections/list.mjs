/**
 * The sections of bench/bench.mjs by letter and name, apart from their code (whose shared.mjs makes a
 * scratch directory as it loads): bench.mjs runs them, and bench/table.mjs checks that a results.json
 * holds figures from each.
 */
export const SECTION_LIST = [
  { key: "a", name: "cold" },
  { key: "b", name: "latency" },
  { key: "c", name: "pipeline" },
  { key: "d", name: "rss" },
  { key: "e", name: "jobs" },
  { key: "f", name: "big" },
  { key: "g", name: "wait" },
  { key: "h", name: "startup" },
  { key: "i", name: "jobcost" },
  { key: "j", name: "shared" },
  { key: "k", name: "approvals" },
  { key: "l", name: "worktrees" },
  { key: "m", name: "ssh" },
  { key: "n", name: "approvalscale" },
  { key: "o", name: "carrier" },
  { key: "p", name: "containers" },
  { key: "q", name: "flat" },
  { key: "r", name: "busy" },
];
