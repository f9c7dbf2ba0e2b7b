/**
 * The local host: where agents run on this machine (§6, §15). What other folders and the tests use of it;
 * the files behind it hold one concern each.
 */
export { createProcessControl } from "./control.js";
export { findProgram, type ProgramHost } from "./find-program.js";
export { createLocalPlatform, type LocalFacts } from "./platform.js";
export { TREE_MARKER_VARIABLE } from "./posix/marker.js";
export {
  LinuxProcessLister,
  listLinuxProcesses,
  parseProcStat,
  readLinuxEnvironment,
  readLinuxProcess,
} from "./posix/proc.js";
export { parsePsOutput, PS_ARGS } from "./posix/ps.js";
export { hasProcessTable, ownLinuxStartTime } from "./self.js";
export { parseNpmShimTarget, resolveWindowsInvocation, type Invocation } from "./windows/resolve.js";
export type {
  AgentIdentity,
  AttachRequest,
  ChildExit,
  ChildHandle,
  KillReport,
  OutputFiles,
  Platform,
  PosixPlatform,
  ProcessControl,
  ProcessControlOptions,
  ProcessInfo,
  ProcessListRequest,
  Signal,
  SpawnFunction,
  SpawnRequest,
  WindowsPlatform,
} from "./types.js";
