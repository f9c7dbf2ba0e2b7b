/**
 * Every runtime, whole: what starting, following and reading an agent needs (PROTOCOL.md §7). The server loads
 * this after it has answered `initialize` (BENCHMARKS.md (a)); the command line and the tests import it directly.
 */
import { DispatchError } from "../core/errors.js";
import type { Runtime, SessionStore } from "../agent/runtime.js";
import type { AgentSession } from "../agent/types.js";
import { claudeRuntime } from "./claude/index.js";
import { codexRuntime } from "./codex/index.js";
import { geminiRuntime } from "./gemini/index.js";
import { HOME_AGENT, RUNTIMES, traitsOf, type AgentName } from "./index.js";

type Env = Readonly<Record<string, string | undefined>>;

/** Each runtime of RUNTIMES, given its program. */
const WHOLE: Readonly<Record<AgentName, (bin: string) => Runtime>> = {
  claude: claudeRuntime,
  codex: codexRuntime,
  gemini: geminiRuntime,
};

/**
 * The runtime named so, running `bin` (default: its name on PATH). Records name their runtime (§15.2); the output
 * of one this build does not have (a later version's) is read by the home agent's reader, which skips what it
 * does not know: such a job is never started or followed here (§15.3), only shown.
 */
export function runtimeFor(name: string, bin?: string): Runtime {
  const traits = traitsOf(name) ?? traitsOf(HOME_AGENT);
  if (!traits) throw new Error(`this build has no agent ${name}`);
  return WHOLE[traits.name as AgentName](bin ?? traits.program.defaultBin);
}

/** The runtimes whose own store of sessions claude_sessions and `sessions` read (§20): one today. */
export function sessionKeepers(): Runtime[] {
  return RUNTIMES.map((traits) => runtimeFor(traits.name)).filter((runtime) => runtime.sessions !== undefined);
}

/**
 * The store of sessions of the one runtime that keeps them, where the environment and home directory put it
 * (§20). Throws INVALID_ARGUMENT when none does, or when it cannot tell where its store is.
 */
export function sessionStore(env: Env, home: string | undefined): SessionStore {
  const store = sessionKeepers()[0]?.sessions?.(env, home);
  if (!store) throw new DispatchError("INVALID_ARGUMENT", "sessions are not available on this server");
  return store;
}

/** claude_sessions' source (§20), for main.ts: a directory's sessions, newest first, at most `limit`. */
export async function listSessions(env: Env, home: string, cwd: string, limit: number): Promise<AgentSession[]> {
  return sessionStore(env, home).list(cwd, limit);
}
