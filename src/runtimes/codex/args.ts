/**
 * OpenAI Codex's command line and environment (PROTOCOL.md §7.1, §7.2): the
 * only place that knows its flags. Observed on codex-cli 0.171.0.
 */
import { DispatchError, quoted } from "../../core/errors.js";
import type { AgentOptions } from "../../agent/options.js";
import type { AgentSpec } from "../../agent/types.js";
import { CODEX_OPTIONS, CODEX_PERMISSION_MODES, type CodexPermissionMode } from "./traits.js";

const MODE_FLAGS: Readonly<Record<CodexPermissionMode, string>> = {
  "read-only": "--sandbox=read-only",
  "workspace-write": "--sandbox=workspace-write",
  "danger-full-access": "--sandbox=danger-full-access",
  "dangerously-bypass-approvals-and-sandbox": "--dangerously-bypass-approvals-and-sandbox",
};

const isCodexMode = (mode: string): mode is CodexPermissionMode =>
  (CODEX_PERMISSION_MODES as readonly string[]).includes(mode);

/**
 * The argv after the program name (§10). Values travel as `-m=value` or
 * `--flag=value`, so none can be read as a flag of its own; the prompt is
 * read from stdin ("-"). Every option goes before `resume`, which takes them
 * from `codex exec` (it has no --sandbox of its own). An option or mode the
 * server should have refused is refused here too, never dropped.
 */
export function codexArgs(spec: Pick<AgentSpec, "resumeSessionId" | "options">): string[] {
  const args = [
    "exec", // headless: one turn, then exit
    "--json", // one JSON event per line on stdout
    // Jobs run in whatever directory the operator's roots allow, not only in git repositories.
    "--skip-git-repo-check",
  ];
  const options = spec.options ?? {};
  for (const key of Object.keys(options) as (keyof AgentOptions)[]) {
    if (options[key] !== undefined && !(CODEX_OPTIONS as readonly string[]).includes(key))
      throw new DispatchError("INVALID_ARGUMENT", `codex has no flag for ${key}`);
  }
  const mode: string | undefined = options.permissionMode;
  if (mode !== undefined) {
    if (!isCodexMode(mode))
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `codex has no permission mode ${quoted(mode)}; use one of ${CODEX_PERMISSION_MODES.join(", ")}`,
      );
    args.push(MODE_FLAGS[mode]);
  }
  // The short form: the long one is also Claude Code's flag, which stays in runtimes/claude/.
  if (options.model !== undefined) args.push(`-m=${options.model}`);
  // One directory per flag, each writable beside cwd (under a sandbox that writes at all).
  for (const directory of options.addDirs ?? []) args.push(`--add-dir=${directory}`);
  // Continue that thread, with its history, rather than start a new one. The id is a validated UUID (§5).
  if (spec.resumeSessionId !== undefined) args.push("resume", spec.resumeSessionId);
  args.push("-"); // the prompt: read from stdin, never argv
  return args;
}

/**
 * The agent's environment: the server's own plus what it adds. Codex needs
 * PATH, HOME (or CODEX_HOME) and its provider's key from there; nothing in it
 * makes a child codex refuse to start, so nothing is removed.
 */
export function codexEnvironment(
  base: Readonly<Record<string, string | undefined>>,
  extra: Readonly<Record<string, string>>,
): Record<string, string | undefined> {
  return { ...base, ...extra };
}
