/**
 * The operator's policy (src/agent/policy.ts) applied directly: each refusal and
 * its message, each default filled in, and that the request is left alone. One
 * path serves every agent: Claude Code's offer here, and one a test declares.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import type { AgentOffer, AgentOptions } from "../src/agent/options.js";
import { DispatchError } from "../src/core/errors.js";
import { applyPolicy, type Policy } from "../src/agent/policy.js";
import { DEFAULT_POLICY } from "../src/config.js";
import { CLAUDE_PERMISSION_MODES } from "../src/runtimes/claude/index.js";

/** The default policy with these overrides, and these of Claude Code's offer (its allowed modes, its defaults). */
function policy(overrides: Partial<Policy> = {}, claude: Partial<AgentOffer> = {}): Policy {
  return { ...DEFAULT_POLICY, agents: DEFAULT_POLICY.agents.map((offer) => ({ ...offer, ...claude })), ...overrides };
}

/** Claude Code's modes that an unset CLAUDE_DISPATCH_PERMISSION_MODES allows. */
const DEFAULT_PERMISSION_MODES = DEFAULT_POLICY.agents.find((offer) => offer.name === "claude")?.allowedModes ?? [];

/** Asserts applyPolicy refuses with POLICY_DENIED; returns the message. */
function denial(requested: AgentOptions, p: Policy, agent?: string): string {
  let caught: unknown;
  try {
    applyPolicy(requested, p, agent);
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof DispatchError, `expected a DispatchError, got ${String(caught)}`);
  assert.equal(caught.code, "POLICY_DENIED");
  return caught.message;
}

/** Freezes an options object and its arrays, so any mutation throws. */
function frozen(options: AgentOptions): AgentOptions {
  for (const value of Object.values(options)) if (Array.isArray(value)) Object.freeze(value);
  return Object.freeze(options);
}

/* ------------------------------------------------------------------ *
 * Defaults
 * ------------------------------------------------------------------ */

test("Claude Code's default modes are every mode except bypassPermissions, in order", () => {
  assert.ok(!DEFAULT_PERMISSION_MODES.includes("bypassPermissions"));
  assert.deepEqual(
    DEFAULT_PERMISSION_MODES,
    CLAUDE_PERMISSION_MODES.filter((mode) => mode !== "bypassPermissions"),
  );
  assert.equal(DEFAULT_PERMISSION_MODES.length, CLAUDE_PERMISSION_MODES.length - 1);
  assert.ok(CLAUDE_PERMISSION_MODES.includes("bypassPermissions"), "the CLI mode itself still exists for operators");
});

test("DEFAULT_POLICY offers Claude Code with the default modes and sets no defaults or caps", () => {
  const { agents, ...rest } = DEFAULT_POLICY;
  const expected = { maxTurns: undefined, maxBudgetUsd: undefined, defaultTimeoutMs: 120_000, roots: undefined };
  assert.deepEqual(rest, { ...expected, homeAgent: "claude" });
  assert.deepEqual(
    agents.map(({ name, allowedModes, defaultMode, defaultModel }) => ({
      name,
      allowedModes,
      defaultMode,
      defaultModel,
    })),
    [{ name: "claude", allowedModes: DEFAULT_PERMISSION_MODES, defaultMode: undefined, defaultModel: undefined }],
  );
});

test("under DEFAULT_POLICY the options pass through unchanged", () => {
  const requested: AgentOptions = {
    model: "sonnet",
    permissionMode: "acceptEdits",
    allowedTools: ["Edit", "Bash(git log:*)"],
    disallowedTools: ["WebFetch"],
    maxTurns: 50,
    maxBudgetUsd: 9_999,
    appendSystemPrompt: "Be brief.",
    addDirs: ["/a", "/b"],
  };
  assert.deepEqual(applyPolicy(requested, DEFAULT_POLICY), requested);
  assert.deepEqual(applyPolicy({}, DEFAULT_POLICY), {});
});

test("applyPolicy adds no keys for values neither the call nor the policy gives", () => {
  const result = applyPolicy({ model: "opus" }, DEFAULT_POLICY);
  assert.deepEqual(Object.keys(result), ["model"]);
});

/* ------------------------------------------------------------------ *
 * Refusals
 * ------------------------------------------------------------------ */

test("bypassPermissions is refused under the default modes, naming the variable that allows it", () => {
  const message = denial({ permissionMode: "bypassPermissions" }, DEFAULT_POLICY);
  assert.equal(
    message,
    `permission_mode "bypassPermissions" is not allowed here (an operator can allow it with ` +
      `CLAUDE_DISPATCH_PERMISSION_MODES); allowed: ${DEFAULT_PERMISSION_MODES.join(", ")}`,
  );
});

test("another mode outside the allowed list is refused without the bypass hint", () => {
  const message = denial({ permissionMode: "acceptEdits" }, policy({}, { allowedModes: ["plan", "default"] }));
  assert.equal(message, 'permission_mode "acceptEdits" is not allowed here; allowed: plan, default');
  assert.doesNotMatch(message, /CLAUDE_DISPATCH_PERMISSION_MODES/);
});

test("with no modes allowed, the message says none", () => {
  const message = denial({ permissionMode: "plan" }, policy({}, { allowedModes: [] }));
  assert.equal(message, 'permission_mode "plan" is not allowed here; allowed: none');
});

test("an operator may allow bypassPermissions", () => {
  const result = applyPolicy(
    { permissionMode: "bypassPermissions" },
    policy({}, { allowedModes: [...CLAUDE_PERMISSION_MODES] }),
  );
  assert.equal(result.permissionMode, "bypassPermissions");
});

test("a host's own modes replace the operator's there, and only there (§21.1)", () => {
  const sandboxed = policy({
    hosts: [{ name: "box", roots: ["/work"], agents: ["claude"], allowedModes: { claude: ["bypassPermissions"] } }],
  });
  assert.equal(
    applyPolicy({ permissionMode: "bypassPermissions" }, sandboxed, "claude", "box").permissionMode,
    "bypassPermissions",
  );
  assert.equal(
    denial({ permissionMode: "bypassPermissions" }, sandboxed),
    `permission_mode "bypassPermissions" is not allowed here (an operator can allow it with ` +
      `CLAUDE_DISPATCH_PERMISSION_MODES); allowed: ${DEFAULT_PERMISSION_MODES.join(", ")}`,
  );
  // There the host's list is the whole list: a mode the operator allows everywhere else is refused.
  let caught: unknown;
  try {
    applyPolicy({ permissionMode: "plan" }, sandboxed, "claude", "box");
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof DispatchError && caught.code === "POLICY_DENIED");
  assert.equal(
    caught.message,
    'permission_mode "plan" is not allowed on host box (an operator can allow it with "permission_modes" of host ' +
      "box); allowed: bypassPermissions",
  );
  // A host that names no modes for the agent leaves the operator's.
  const plain = policy({ hosts: [{ name: "box", roots: ["/work"], agents: ["claude"] }] });
  assert.equal(applyPolicy({ permissionMode: "plan" }, plain, "claude", "box").permissionMode, "plan");
});

test("every allowed mode is accepted", () => {
  for (const mode of DEFAULT_PERMISSION_MODES) {
    assert.equal(applyPolicy({ permissionMode: mode }, DEFAULT_POLICY).permissionMode, mode);
  }
});

test("max_turns above the cap is refused; at or below it is kept", () => {
  const capped = policy({ maxTurns: 10 });
  assert.equal(denial({ maxTurns: 11 }, capped), "max_turns 11 is above the operator's cap of 10");
  assert.equal(denial({ maxTurns: 10_000 }, capped), "max_turns 10000 is above the operator's cap of 10");
  assert.equal(applyPolicy({ maxTurns: 10 }, capped).maxTurns, 10);
  assert.equal(applyPolicy({ maxTurns: 3 }, capped).maxTurns, 3, "a lower request is not raised to the cap");
});

test("max_budget_usd above the cap is refused; at or below it is kept", () => {
  const capped = policy({ maxBudgetUsd: 2 });
  assert.equal(denial({ maxBudgetUsd: 3 }, capped), "max_budget_usd 3 is above the operator's cap of 2");
  assert.equal(denial({ maxBudgetUsd: 2.01 }, capped), "max_budget_usd 2.01 is above the operator's cap of 2");
  assert.equal(applyPolicy({ maxBudgetUsd: 2 }, capped).maxBudgetUsd, 2);
  assert.equal(applyPolicy({ maxBudgetUsd: 0.25 }, capped).maxBudgetUsd, 0.25);
});

test("without caps any turn count or budget passes", () => {
  const result = applyPolicy({ maxTurns: 10_000, maxBudgetUsd: 10_000 }, DEFAULT_POLICY);
  assert.equal(result.maxTurns, 10_000);
  assert.equal(result.maxBudgetUsd, 10_000);
});

test("a refused permission mode is reported before an exceeded cap", () => {
  const message = denial({ permissionMode: "bypassPermissions", maxTurns: 99 }, policy({ maxTurns: 1 }));
  assert.match(message, /permission_mode/);
});

/* ------------------------------------------------------------------ *
 * Defaults filled in
 * ------------------------------------------------------------------ */

test("the operator's defaults and caps fill in what the call leaves out", () => {
  const p = policy({ maxTurns: 10, maxBudgetUsd: 2 }, { defaultMode: "acceptEdits", defaultModel: "sonnet" });
  assert.deepEqual(applyPolicy({}, p), {
    permissionMode: "acceptEdits",
    model: "sonnet",
    maxTurns: 10,
    maxBudgetUsd: 2,
  });
});

test("each default fills in on its own", () => {
  assert.deepEqual(applyPolicy({}, policy({}, { defaultMode: "plan" })), { permissionMode: "plan" });
  assert.deepEqual(applyPolicy({}, policy({}, { defaultModel: "opus" })), { model: "opus" });
  assert.deepEqual(applyPolicy({}, policy({ maxTurns: 7 })), { maxTurns: 7 });
  assert.deepEqual(applyPolicy({}, policy({ maxBudgetUsd: 1.5 })), { maxBudgetUsd: 1.5 });
});

test("defaults never override what the call asked for", () => {
  const p = policy({ maxTurns: 10, maxBudgetUsd: 2 }, { defaultMode: "acceptEdits", defaultModel: "sonnet" });
  const requested: AgentOptions = { permissionMode: "plan", model: "opus", maxTurns: 4, maxBudgetUsd: 0.5 };
  assert.deepEqual(applyPolicy(requested, p), requested);
});

test("options the policy does not govern are carried over", () => {
  const p = policy({ maxTurns: 10 }, { defaultModel: "sonnet" });
  const requested: AgentOptions = {
    allowedTools: ["Edit"],
    disallowedTools: ["Bash"],
    appendSystemPrompt: "extra",
    addDirs: ["/x"],
  };
  assert.deepEqual(applyPolicy(requested, p), { ...requested, model: "sonnet", maxTurns: 10 });
});

/* ------------------------------------------------------------------ *
 * No mutation
 * ------------------------------------------------------------------ */

test("applyPolicy returns a new object and never mutates the request", () => {
  const p = policy({ maxTurns: 10, maxBudgetUsd: 2 }, { defaultMode: "acceptEdits", defaultModel: "sonnet" });
  const requested = frozen({ allowedTools: ["Edit"], addDirs: ["/x"] });
  const snapshot = structuredClone(requested);
  const result = applyPolicy(requested, p); // a frozen object would throw on any write
  assert.notEqual(result, requested);
  assert.deepEqual(requested, snapshot);
  assert.equal(result.model, "sonnet");

  const empty = frozen({});
  const filled = applyPolicy(empty, p);
  assert.deepEqual(empty, {});
  assert.notEqual(filled, empty);
});

test("a refused request is not mutated either", () => {
  const requested = frozen({ permissionMode: "bypassPermissions", maxTurns: 5 });
  denial(requested, DEFAULT_POLICY);
  assert.deepEqual(requested, { permissionMode: "bypassPermissions", maxTurns: 5 });
});

test("the policy object is not mutated", () => {
  const claude = Object.freeze({ allowedModes: Object.freeze(["plan"] as const), defaultModel: "haiku" });
  const p = Object.freeze(policy({ maxTurns: 3 }, claude));
  for (const offer of p.agents) Object.freeze(offer);
  applyPolicy({ permissionMode: "plan" }, p);
  denial({ maxTurns: 4 }, p);
  assert.deepEqual(p.agents[0]?.allowedModes, ["plan"]);
  assert.equal(p.maxTurns, 3);
  assert.equal(p.agents[0]?.defaultModel, "haiku");
});

/* ------------------------------------------------------------------ *
 * One path for every agent
 * ------------------------------------------------------------------ */

/** An agent a test declares: its own modes and defaults, and flags for only some options. */
const FOURTH: AgentOffer = {
  name: "fourth",
  label: "Fourth CLI",
  modes: ["careful", "reckless"],
  dangerousModes: ["reckless"],
  allowedModes: ["careful"],
  defaultMode: "careful",
  defaultModel: "fourth-1",
  supportedOptions: ["model", "permissionMode", "maxTurns"],
  modesSetting: "CLAUDE_DISPATCH_FOURTH_PERMISSION_MODES",
};

test("another agent takes the same path: its own modes, its defaults, and only the caps it has flags for", () => {
  const p = policy({ maxTurns: 5, maxBudgetUsd: 2, agents: [...DEFAULT_POLICY.agents, FOURTH] });
  assert.deepEqual(applyPolicy({}, p, "fourth"), { permissionMode: "careful", model: "fourth-1", maxTurns: 5 });
  assert.deepEqual(applyPolicy({ model: "fourth-2", maxTurns: 2 }, p, "fourth"), {
    model: "fourth-2",
    maxTurns: 2,
    permissionMode: "careful",
  });
  assert.equal(
    denial({ permissionMode: "reckless" }, p, "fourth"),
    'permission_mode "reckless" is not allowed for agent "fourth" (an operator can allow it with ' +
      "CLAUDE_DISPATCH_FOURTH_PERMISSION_MODES); allowed: careful",
  );
  assert.equal(denial({ maxBudgetUsd: 1 }, p, "fourth"), 'max_budget_usd is not an option of agent "fourth"');
  assert.equal(denial({ maxTurns: 6 }, p, "fourth"), "max_turns 6 is above the operator's cap of 5");
  assert.equal(denial({}, p, "fifth"), 'agent "fifth" is not offered here');
  assert.deepEqual(applyPolicy({}, p), { maxTurns: 5, maxBudgetUsd: 2 }, "the default agent's defaults are its own");
});
