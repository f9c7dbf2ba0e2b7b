/**
 * claude_run's and claude_start's arguments (PROTOCOL.md §5.1, §5.2, §5.6): the prompt and directory, the agent
 * and its options, checked against what that agent's CLI has a flag for, the host and the worktree. Strict, as
 * every tool's arguments are (tools/validation.ts).
 */
import { MODEL_NAME, OPTION_ARGUMENTS, type AgentOffer, type AgentOptions } from "../agent/options.js";
import {
  checkKnown,
  integerIn,
  invalid,
  LIMITS,
  optionalSessionId,
  present,
  preview,
  requireCwd,
  requirePrompt,
  type RunInput,
  type StartInput,
  type ToolSettings,
} from "./validation.js";

/** Tool rules such as Bash(git log:*), Edit, mcp__server__tool: printable, one line, never a leading dash. */
const TOOL_RULE = /^(?![\s-])[^\x00-\x1f\x7f-\x9f]+$/;

/**
 * run's and start's arguments: agent and host are accepted always, and listed only where this server offers a choice.
 */
function checkRunArguments(args: Record<string, unknown>, settings: ToolSettings, own: readonly string[]): void {
  const choices = [
    ...(settings.agents.length > 1 ? ["agent"] : []),
    ...((settings.hosts ?? []).length > 0 ? ["host"] : []),
  ];
  const named = ["prompt", "cwd", "session_id", ...own, ...AGENT_OPTION_NAMES, "worktree"];
  checkKnown(args, [...named, "agent", "host"], [...named, ...choices]);
}

const AGENT_OPTION_NAMES = [
  "model",
  "permission_mode",
  "allowed_tools",
  "disallowed_tools",
  "max_turns",
  "max_budget_usd",
  "append_system_prompt",
  "add_dirs",
] as const;

function toolRules(args: Record<string, unknown>, key: string): string[] | undefined {
  if (!present(args, key)) return undefined;
  const value = args[key];
  if (!Array.isArray(value) || value.length === 0 || value.length > LIMITS.maxToolRules) {
    throw invalid(
      `"${key}" must be a non-empty array of at most ${LIMITS.maxToolRules} tool rules such as "Edit" or ` +
        `"Bash(git log:*)"`,
    );
  }
  return value.map((rule, index) => {
    if (typeof rule !== "string" || !TOOL_RULE.test(rule) || rule.length > LIMITS.maxToolRuleChars) {
      throw invalid(
        `"${key}"[${index}] must be a tool rule such as "Edit" or "Bash(git log:*)" (one line, no leading dash or ` +
          `space), got ${preview(rule)}`,
      );
    }
    return rule;
  });
}

function directories(args: Record<string, unknown>, key: string): string[] | undefined {
  if (!present(args, key)) return undefined;
  const value = args[key];
  if (!Array.isArray(value) || value.length === 0 || value.length > LIMITS.maxAddDirs) {
    throw invalid(`"${key}" must be a non-empty array of at most ${LIMITS.maxAddDirs} absolute directory paths`);
  }
  return value.map((entry, index) => {
    if (typeof entry !== "string" || entry.trim() === "" || entry.includes("\0")) {
      throw invalid(`"${key}"[${index}] must be a directory path, got ${preview(entry)}`);
    }
    return entry;
  });
}

/** "agent": one this server offers; absent, the default agent, or the first offered when it is not. */
function parseAgent(args: Record<string, unknown>, settings: ToolSettings): AgentOffer {
  const agents = settings.agents;
  const fallback = agents.find((agent) => agent.name === settings.homeAgent) ?? agents[0];
  if (!present(args, "agent") && fallback) return fallback;
  const found = agents.find((agent) => agent.name === args.agent);
  if (!found)
    throw invalid(
      `"agent" must be one of the agents this server offers: ${agents.map((agent) => agent.name).join(", ")}; got ` +
        `${preview(args.agent)}`,
    );
  return found;
}

/** The options an agent has no flag for are refused, naming the agent: never silently dropped (§5.6). */
function checkSupported(options: AgentOptions, agent: AgentOffer): void {
  const problem = agent.optionProblem?.(options);
  if (problem) throw invalid(`${problem} (agent "${agent.name}")`);
  for (const key of Object.keys(options) as (keyof AgentOptions)[]) {
    if (!agent.supportedOptions.includes(key)) {
      throw invalid(
        `"${OPTION_ARGUMENTS[key]}" is not an option of agent "${agent.name}" (it takes: ` +
          `${agent.supportedOptions.map((option) => OPTION_ARGUMENTS[option]).join(", ") || "none"})`,
      );
    }
  }
}

/** The agent options of §5.6: types and formats here; the operator's policy is applied by the handler. */
function parseAgentOptions(args: Record<string, unknown>, agent: AgentOffer, homeAgent: string): AgentOptions {
  const options: AgentOptions = {};
  if (present(args, "model")) {
    const model = args.model;
    if (typeof model !== "string" || !MODEL_NAME.test(model)) {
      throw invalid(
        `"model" must be a model name or alias such as "sonnet" or "claude-sonnet-4-5", got ${preview(model)}`,
      );
    }
    options.model = model;
  }
  if (present(args, "permission_mode")) {
    const mode = args.permission_mode;
    if (typeof mode !== "string" || !agent.modes.includes(mode)) {
      const whose = agent.name === homeAgent ? "" : ` for agent "${agent.name}"`;
      throw invalid(`"permission_mode" must be one of ${agent.modes.join(", ")}${whose}, got ${preview(mode)}`);
    }
    // A known mode that is not allowed is the policy's refusal (POLICY_DENIED), made later.
    options.permissionMode = mode;
  }
  const allowed = toolRules(args, "allowed_tools");
  if (allowed) options.allowedTools = allowed;
  const disallowed = toolRules(args, "disallowed_tools");
  if (disallowed) options.disallowedTools = disallowed;
  if (present(args, "max_turns"))
    options.maxTurns = integerIn(args, "max_turns", 1, LIMITS.maxTurns, "number of turns");
  if (present(args, "max_budget_usd")) {
    const budget = args.max_budget_usd;
    if (typeof budget !== "number" || !Number.isFinite(budget) || budget <= 0 || budget > LIMITS.maxBudgetUsd) {
      throw invalid(
        `"max_budget_usd" must be a number of dollars above 0 and at most ${LIMITS.maxBudgetUsd}, got ` +
          `${preview(budget)}`,
      );
    }
    options.maxBudgetUsd = budget;
  }
  if (present(args, "append_system_prompt")) {
    const text = args.append_system_prompt;
    if (
      typeof text !== "string" ||
      text.trim() === "" ||
      text.includes("\0") ||
      text.length > LIMITS.maxSystemPromptChars
    ) {
      throw invalid(
        `"append_system_prompt" must be non-empty text of at most ${LIMITS.maxSystemPromptChars} ` +
          `characters without NUL`,
      );
    }
    options.appendSystemPrompt = text;
  }
  const addDirs = directories(args, "add_dirs");
  if (addDirs) options.addDirs = addDirs;
  return options;
}

/** Checked in the order PROTOCOL.md §5 lists them: a spread's parts are read left to right. */
export function parseRunInput(args: Record<string, unknown>, settings: ToolSettings): RunInput {
  checkRunArguments(args, settings, ["timeout_ms"]);
  const timeout = (): number =>
    present(args, "timeout_ms")
      ? integerIn(args, "timeout_ms", LIMITS.minTimeoutMs, LIMITS.maxTimeoutMs)
      : settings.defaultTimeoutMs;
  return { ...conversation(args), timeoutMs: timeout(), ...agentArguments(args, settings) };
}

export function parseStartInput(args: Record<string, unknown>, settings: ToolSettings): StartInput {
  checkRunArguments(args, settings, []);
  return { ...conversation(args), ...agentArguments(args, settings) };
}

function conversation(args: Record<string, unknown>): Pick<StartInput, "prompt" | "cwd" | "sessionId"> {
  return { prompt: requirePrompt(args), cwd: requireCwd(args), sessionId: optionalSessionId(args) };
}

/** The agent, its options checked against what its CLI has a flag for, the host and the worktree (§5.6, §19, §21). */
function agentArguments(
  args: Record<string, unknown>,
  settings: ToolSettings,
): Pick<StartInput, "agent" | "host" | "options" | "worktree"> {
  const agent = parseAgent(args, settings);
  const options = parseAgentOptions(args, agent, settings.homeAgent);
  checkSupported(options, agent);
  return { agent: agent.name, host: parseHost(args, settings, agent.name), options, worktree: optionalWorktree(args) };
}

/** "host": one the operator named, which runs this agent; absent, this machine (§21). */
function parseHost(args: Record<string, unknown>, settings: ToolSettings, agent: string): string | undefined {
  if (!present(args, "host")) return undefined;
  const hosts = settings.hosts ?? [];
  const found = hosts.find((host) => host.name === args.host);
  if (!found) {
    const names =
      hosts.length > 0
        ? `one of the hosts this server is configured with: ${hosts.map((host) => host.name).join(", ")}`
        : "absent: this server has no other hosts configured (CLAUDE_DISPATCH_HOSTS)";
    throw invalid(`"host" must be ${names}; got ${preview(args.host)}`);
  }
  if (!found.agents.includes(agent))
    throw invalid(`host "${found.name}" does not run agent "${agent}" (it runs: ${found.agents.join(", ")})`);
  return found.name;
}

/** true: the job runs in a git worktree of its own (§19); absent: the operator's default. */
function optionalWorktree(args: Record<string, unknown>): boolean | undefined {
  if (!present(args, "worktree")) return undefined;
  if (typeof args.worktree !== "boolean")
    throw invalid(`"worktree" must be true or false, got ${preview(args.worktree)}`);
  return args.worktree;
}
