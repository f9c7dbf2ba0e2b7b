/**
 * Gemini CLI's command line and environment (PROTOCOL.md §7.1, §7.2): the only
 * place that knows its flags. Observed on @google/gemini-cli 0.61.0.
 */
import type { AgentOptions } from "../../agent/options.js";
import type { AgentSpec } from "../../agent/types.js";

/**
 * The argv after the program name (§10). Every value travels as `--flag=value`,
 * so no value, whatever it starts with, can be read as a flag of its own.
 */
export function geminiArgs(spec: Pick<AgentSpec, "resumeSessionId" | "options">): string[] {
  const args = [
    // Headless. 0.61.0 wants a value; the empty one leaves the prompt to stdin, which the CLI reads whole.
    "-p",
    "",
    "--output-format=stream-json", // one JSON event per line as the agent works, ending with a result event
  ];
  const options = spec.options ?? {};
  if (options.model !== undefined) args.push(`--model=${options.model}`);
  if (options.permissionMode !== undefined) args.push(`--approval-mode=${options.permissionMode}`);
  // The CLI splits each value on commas: one per flag keeps the rest whole (see geminiOptionProblem).
  for (const rule of options.allowedTools ?? []) args.push(`--allowed-tools=${rule}`);
  for (const directory of options.addDirs ?? []) args.push(`--include-directories=${directory}`);
  // Sessions are kept per project (the cwd): continue that conversation.
  if (spec.resumeSessionId !== undefined) args.push(`--resume=${spec.resumeSessionId}`);
  return args;
}

/**
 * A value the CLI would read as something else: it splits `--allowed-tools`
 * and `--include-directories` on commas and trims each piece. Undefined when
 * every option reaches it as given.
 */
export function geminiOptionProblem(options: AgentOptions): string | undefined {
  const lists: Array<[string, string[] | undefined]> = [
    ["allowed_tools", options.allowedTools],
    ["add_dirs", options.addDirs],
  ];
  for (const [name, values] of lists) {
    const index = (values ?? []).findIndex((value) => value.includes(",") || value.trim() !== value);
    if (index !== -1)
      return `${name}[${index}] holds a comma or surrounding spaces, which Gemini CLI would split or trim`;
  }
  return undefined;
}

/**
 * The agent's environment: the server's own plus `extra`. By default the CLI
 * starts a second Node process of itself (to raise its heap limit), and the
 * first ignores SIGTERM; GEMINI_CLI_NO_RELAUNCH keeps it one process, which
 * starts in about 1.2 s instead of 1.9 s and stops on SIGTERM. An operator's
 * own value wins.
 */
export function geminiEnvironment(
  base: Readonly<Record<string, string | undefined>>,
  extra: Readonly<Record<string, string>>,
): Record<string, string | undefined> {
  return { GEMINI_CLI_NO_RELAUNCH: "true", ...base, ...extra };
}
