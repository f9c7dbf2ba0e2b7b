/**
 * Claude Code's command line and environment (PROTOCOL.md §7.1, §7.2): the only
 * place that knows its flags. Observed on CLI 2.1.197 and 2.1.332.
 */
import type { AgentSpec } from "../../agent/types.js";
import { approverArgs } from "./permission-prompt.js";

/**
 * The argv after the program name (§10). Every value travels as `--flag=value`,
 * so no value, whatever it starts with, can be read as a flag of its own.
 */
export function claudeArgs(spec: Pick<AgentSpec, "resumeSessionId" | "options" | "approver">): string[] {
  const args = [
    "-p", // print mode: run headless and exit; the prompt is read from stdin
    "--output-format",
    "stream-json", // one JSON event per line as the agent works, ending with the result event
    "--verbose", // required by stream-json in print mode
  ];
  const options = spec.options ?? {};
  if (options.model !== undefined) args.push(`--model=${options.model}`);
  if (options.permissionMode !== undefined) args.push(`--permission-mode=${options.permissionMode}`);
  // Repeated flags accumulate; one tool rule per flag keeps rules with spaces or commas whole.
  for (const rule of options.allowedTools ?? []) args.push(`--allowedTools=${rule}`);
  for (const rule of options.disallowedTools ?? []) args.push(`--disallowedTools=${rule}`);
  if (options.maxTurns !== undefined) args.push(`--max-turns=${options.maxTurns}`);
  if (options.maxBudgetUsd !== undefined) args.push(`--max-budget-usd=${options.maxBudgetUsd}`);
  if (options.appendSystemPrompt !== undefined) args.push(`--append-system-prompt=${options.appendSystemPrompt}`);
  for (const directory of options.addDirs ?? []) args.push(`--add-dir=${directory}`);
  // Continue that conversation instead of paying to rebuild its context.
  if (spec.resumeSessionId !== undefined) args.push(`--resume=${spec.resumeSessionId}`);
  // What would have prompted a person goes to the approver instead of being refused (§18).
  if (spec.approver) args.push(...approverArgs(spec.approver));
  return args;
}

/**
 * The agent's environment. CLAUDECODE and CLAUDE_CODE_ENTRYPOINT are set when
 * this server runs under Claude Code, and since CLI 2.1.39 they make a child
 * `claude` refuse to start as a "nested session". Our own depth counter
 * (§7.4) is the recursion guard instead.
 */
export function agentEnvironment(
  base: Readonly<Record<string, string | undefined>>,
  extra: Readonly<Record<string, string>>,
): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...base, ...extra };
  delete env.CLAUDECODE;
  delete env.CLAUDE_CODE_ENTRYPOINT;
  return env;
}
