/**
 * A server past its opening (PROTOCOL.md §2): the job layer, the request handler and the shutdown. main.ts loads
 * this module while the front door answers `initialize`, and the build makes it one file with what it alone
 * imports, so the first answer waits for none of it (BENCHMARKS.md (a)).
 */
export { serveJobs } from "./serve-jobs.js";
