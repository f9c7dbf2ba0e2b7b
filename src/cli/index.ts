/**
 * The command line as main.ts and the tests see it: runCli, what it is handed,
 * and the host configuration lines (the terminal hint is printed by the server).
 */
export { runCli } from "./run.js";
export type { CliIo, RunFileResult } from "./context.js";
export { claudeMcpAddLine, hostEnvironment, terminalHint, type Install } from "./host-config.js";
