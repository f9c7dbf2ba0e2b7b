/**
 * `doctor`'s look at the agents (PROTOCOL.md §7.5, §17): which are offered, and for each that its program is
 * there and runs (`--version`), then, where its CLI can say so without spending tokens, that it is logged in
 * or has a key. What each CLI can tell is its runtime's knowledge (Runtime.readiness); doctor only looks.
 */
import { existsSync } from "node:fs";

import type { RuntimeTraits } from "../agent/runtime.js";
import { missingProgram, offeredAgents, programOf, unofferedAgents, type Config } from "../config.js";
import { forReadingOnOneLine } from "../core/text.js";
import { runtimeFor } from "../runtimes/all.js";
import { HOME_AGENT, RUNTIMES, traitsOf } from "../runtimes/index.js";
import type { CliIo } from "./context.js";
import { firstLine, formatAge } from "./format.js";

/** What `--version` and a status query may take; neither talks to a model. */
const QUERY_TIMEOUT_MS = 10_000;

export interface Check {
  name: string;
  status: "ok" | "warn" | "fail";
  detail: string;
}

/** The agents line, then each offered agent's program and login. */
export async function agentChecks(io: CliIo, config: Config): Promise<Check[]> {
  const offers = offeredAgents(config, io.env, io.machine);
  const names = offers.map((offer) => offer.name);
  const each = await Promise.all(names.map((name) => agentCheck(io, config, name)));
  return [offeredCheck(names, config), ...each.flat()];
}

function offeredCheck(names: readonly string[], config: Config): Check {
  const offered = `${andList(names)} ${isOrAre(names)} offered`;
  if (config.agents) return { name: "agents", status: "ok", detail: `${offered}, as CLAUDE_DISPATCH_AGENTS lists` };
  const unfound = unofferedAgents(names, config);
  const always = traitsOf(HOME_AGENT)?.label ?? HOME_AGENT;
  const why = `${always} always, the others when found (CLAUDE_DISPATCH_AGENTS is unset)`;
  const rest = unfound.length === 0 ? "" : `; ${andList(unfound)} ${isOrAre(unfound)} not found, so not offered`;
  return { name: "agents", status: "ok", detail: `${offered}: ${why}${rest}` };
}

/** Its program, by the server's own resolver, and what `--version` printed; then its login, if it runs. */
async function agentCheck(io: CliIo, config: Config, name: string): Promise<Check[]> {
  const program = io.machine.findProgram(programOf(config, name), io.env);
  if (program === undefined) {
    // The words a call for it gets (§7.5): the same fix, whoever reads it.
    const detail = missingProgram(config, name, io.env, io.machine) ?? `${programOf(config, name)} not found`;
    return [{ name, status: "fail", detail }];
  }
  // A shell is what we never start.
  if (io.machine.needsShell(program)) {
    const detail = `${program} is an npm shim: running it would need a shell, so its version and login are not checked`;
    return [{ name, status: "warn", detail }];
  }
  const run = await io.runFile(program, ["--version"], QUERY_TIMEOUT_MS);
  if (!run.ok) {
    const why = firstLine(run.stderr) || run.error || "no reason given";
    return [{ name, status: "fail", detail: `${program} --version failed: ${forReadingOnOneLine(why)}` }];
  }
  const version = firstLine(run.stdout);
  const printed = version ? forReadingOnOneLine(version) : "which printed no version";
  return [{ name, status: "ok", detail: `${program}, ${printed}` }, await loginCheck(io, name, program, version)];
}

async function loginCheck(io: CliIo, name: string, program: string, version: string): Promise<Check> {
  const probe = runtimeFor(name, program).readiness?.(io.env, io.machine.home, version);
  if (!probe) return { name: `${name} login`, status: "warn", detail: "cannot tell: this agent has no way to say" };
  const answer = probe.args ? await io.runFile(program, [...probe.args], QUERY_TIMEOUT_MS) : undefined;
  const run = answer && { ok: answer.ok, stdout: answer.stdout, stderr: answer.stderr || answer.error || "" };
  const present = (probe.files ?? []).filter((file) => existsSync(file));
  const verdict = probe.read({ ...(run ? { run } : {}), present });
  return { name: `${name} login`, status: verdict.status, detail: forReadingOnOneLine(verdict.detail) };
}

const isOrAre = (items: readonly unknown[]): string => (items.length === 1 ? "is" : "are");

/** The default agent, as the operator set it, or undefined when this build lacks it. */
function defaultAgent(config: Config, runtimes: readonly RuntimeTraits[]) {
  const runtime = traitsOf(HOME_AGENT, runtimes);
  const agent = config.agentSettings[HOME_AGENT];
  return runtime && agent ? { runtime, agent } : undefined;
}

/** The default agent's modes a call may ask for (§5.6): a warning when one that drops its checks is among them. */
export function permissionCheck(config: Config, runtimes: readonly RuntimeTraits[] = RUNTIMES): Check {
  const found = defaultAgent(config, runtimes);
  if (!found) return { name: "permission modes", status: "warn", detail: `this build has no agent ${HOME_AGENT}` };
  const { runtime, agent } = found;
  const dangerous = agent.allowedModes.filter((mode) => runtime.dangerousModes.includes(mode));
  const lets = dangerous.length === 1 ? "lets" : "let";
  const warning = dangerous.length > 0 ? ` (${andList(dangerous)} ${lets} an agent do anything without asking)` : "";
  const unset = `none (the user's ${runtime.label} settings)`;
  return {
    name: "permission modes",
    status: dangerous.length > 0 ? "warn" : "ok",
    detail: `${agent.allowedModes.join(", ") || "none"}${warning}; default: ${agent.defaultMode ?? unset}`,
  };
}

/**
 * The hosts that allow their own modes (§21.1), one line each: a warning where one lets an agent do anything without
 * asking, which may be just what a container is for.
 */
export function hostModesChecks(config: Config, runtimes: readonly RuntimeTraits[] = RUNTIMES): Check[] {
  return (config.hosts ?? []).flatMap(({ name, permissionModes }) => {
    if (!permissionModes) return [];
    const entries = Object.entries(permissionModes);
    const dangerous = entries.flatMap(([agent, modes]) =>
      modes.filter((mode) => traitsOf(agent, runtimes)?.dangerousModes.includes(mode)),
    );
    const listed = entries.map(([agent, modes]) => `${agent} ${modes.join(", ")}`).join("; ");
    const lets = dangerous.length === 1 ? "lets" : "let";
    const warning = dangerous.length > 0 ? ` (${andList(dangerous)} ${lets} an agent do anything without asking)` : "";
    return [
      {
        name: `host ${name} modes`,
        status: dangerous.length > 0 ? "warn" : "ok",
        detail: `${listed}${warning}, there instead of the operator's`,
      },
    ];
  });
}

/** The operator's defaults and caps for what a call leaves out (§5.6, §11). */
export function agentDefaultsCheck(config: Config, runtimes: readonly RuntimeTraits[] = RUNTIMES): Check {
  const { policy } = config;
  const found = defaultAgent(config, runtimes);
  const model = found?.agent.defaultModel ?? `${found?.runtime.label ?? HOME_AGENT}'s default`;
  return {
    name: "agent defaults",
    status: "ok",
    detail: [
      `model ${model}`,
      `max turns ${policy.maxTurns ?? "no cap"}`,
      `max budget ${policy.maxBudgetUsd === undefined ? "no cap" : `$${policy.maxBudgetUsd}`}`,
      `claude_run timeout ${formatAge(policy.defaultTimeoutMs)}`,
    ].join(", "),
  };
}

/** "a", "a and b", "a, b and c". */
export function andList(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? "none") : `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;
}
