/**
 * Hostile-input fuzzer for claude-dispatch: a seeded generator of JSON-RPC
 * lines (valid, malformed and hostile), an oracle that derives from
 * PROTOCOL.md §1, §2, §4, §5, §9, §14 and §16 (the 2026-07-28 era: line kind
 * "modern") what the server must answer to each line, and a runner that
 * drives the BUILT server (dist/main.js) over stdio and checks every frame it
 * writes. Plain Node ESM, built-ins only.
 *
 * Lines go out in blocks; each block ends with a sentinel `ping`. The next
 * block is sent only once the sentinel and every response the block must get
 * have arrived, so expectations are kept per block and dropped once verified
 * (memory stays bounded however long the run). Every block has its own PRNG
 * stream (mulberry32 seeded from seed, phase and block index), so any block
 * can be regenerated and replayed on its own.
 *
 * Two phases, each with its own server process:
 *   main  CLAUDE_DISPATCH_MAX_LINE_BYTES=65536: the whole mix, lines over the
 *         limit included;
 *   huge  the default 16 MiB limit: strings of 1-2 MiB and 1e5-deep nesting,
 *         which would not fit under 64 KiB.
 *
 * The pieces live in bench/fuzz/: constants, random (the PRNG), oracle (the
 * expected answer to a line), checks (a response against its expectation),
 * generators, modern-lines, kinds and kinds-calls, kinds-envelope, kinds-sizes
 * (the lines), blocks (a block's lines and write mode), server (around the
 * server process), session (one server process, block by block), writes (how
 * bytes reach it), frames (what it writes, checked), run and report. This
 * module re-exports what bench/fuzz.mjs and test/fuzz.test.ts use.
 */
export {
  DEFAULT_LINE_LIMIT, DEFAULT_SERVER, FAKE_CLAUDE, MAIN_LINE_LIMIT, OVERSIZE_MESSAGE, REPO_ROOT,
} from "./fuzz/constants.mjs";
export { mulberry32, Rng } from "./fuzz/random.mjs";
export { classify, echoed, expectLine, idKey, toolOracle } from "./fuzz/oracle.mjs";
export { describeBlock, formatReport } from "./fuzz/report.mjs";
export { generateBlock } from "./fuzz/blocks.mjs";
export { loadErrorCodes } from "./fuzz/server.mjs";
export { preview } from "./fuzz/checks.mjs";
export { runFuzz } from "./fuzz/run.mjs";
