/**
 * The line kinds: each builds one line, or several, of one shape, valid or hostile, named in the mixes
 * of bench/fuzz/blocks.mjs. What is asked (kinds-calls.mjs), the envelope around it (kinds-envelope.mjs)
 * and sizes at and past the line limit (kinds-sizes.mjs). Part of the fuzzer: bench/fuzz-lib.mjs
 * re-exports its public names.
 */
import { CALL_KINDS } from "./kinds-calls.mjs";
import { ENVELOPE_KINDS } from "./kinds-envelope.mjs";
import { SIZE_KINDS } from "./kinds-sizes.mjs";

const KINDS = { ...CALL_KINDS, ...ENVELOPE_KINDS, ...SIZE_KINDS };

export { KINDS };
