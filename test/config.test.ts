import assert from "node:assert/strict";
import { test } from "node:test";

import type { RuntimeTraits } from "../src/agent/runtime.js";
import * as configuration from "../src/config.js";
import { ConfigError, offeredAgents, programOf, unofferedAgents } from "../src/config.js";
import type { MachineFacts } from "../src/hosts/local/machine.js";
import { RUNTIMES } from "../src/runtimes/index.js";
import { machineOf } from "./host-fakes.js";

type Runtimes = readonly RuntimeTraits[];
/** The configuration on a Linux box, with what a test says of the machine. */
type Env = Readonly<Record<string, string | undefined>>;
const loadConfig = (env: Env, facts: Partial<MachineFacts> = {}, runtimes?: Runtimes) =>
  configuration.loadConfig(env, machineOf(facts), runtimes);
const checkConfig = (env: Env, facts: Partial<MachineFacts> = {}) => configuration.checkConfig(env, machineOf(facts));

const DEFAULT_PERMISSION_MODES = ["default", "acceptEdits", "plan", "auto", "dontAsk"];

test("defaults", () => {
  assert.deepEqual(loadConfig({}), {
    agentSettings: {
      claude: {
        program: "claude",
        allowedModes: DEFAULT_PERMISSION_MODES,
        defaultMode: undefined,
        defaultModel: undefined,
      },
      codex: { program: "codex", allowedModes: ["read-only", "workspace-write"] },
      gemini: { program: "gemini", allowedModes: ["default", "auto_edit", "plan"] },
    },
    depth: 0,
    maxDepth: 1,
    maxLineBytes: 16 * 1024 * 1024,
    maxOutputBytes: 64 * 1024 * 1024,
    killGraceMs: 3000,
    jobRetentionMs: 7 * 24 * 3600 * 1000,
    logLevel: "info",
    maxResultChars: 20_000,
    heartbeatMs: 15_000,
    policy: {
      maxTurns: undefined,
      maxBudgetUsd: undefined,
      defaultTimeoutMs: 120_000,
      homeAgent: "claude",
    },
    roots: undefined,
    maxJobs: 2,
    stateDir: "/nonexistent/.local/state/claude-dispatch",
    stateMaxBytes: 1024 ** 3,
    onExit: "keep",
    onDone: undefined,
    onInput: undefined,
    approvals: "forward",
    approvalTimeoutMs: 600_000,
    worktree: "off",
    worktreeDir: undefined,
    agents: undefined,
    hosts: undefined,
    sshBin: "ssh",
    sshTimeoutMs: 30_000,
  });
  assert.equal(loadConfig({}, { cpus: 8 }).maxJobs, 8, "one agent per CPU");
  assert.equal(loadConfig({}, { cpus: 1 }).maxJobs, 2, "but at least two");
  assert.equal(loadConfig({ CLAUDE_DISPATCH_MAX_JOBS: "5" }).maxJobs, 5);
  assert.ok(!DEFAULT_PERMISSION_MODES.includes("bypassPermissions"), "bypassPermissions must be opted into");
});

test("the operator policy is read, and roots split on the platform's delimiter", () => {
  const config = loadConfig(
    {
      CLAUDE_DISPATCH_PERMISSION_MODES: "default, acceptEdits,bypassPermissions",
      CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE: "acceptEdits",
      CLAUDE_DISPATCH_DEFAULT_MODEL: "sonnet",
      CLAUDE_DISPATCH_MAX_TURNS: "40",
      CLAUDE_DISPATCH_MAX_BUDGET_USD: "2.50",
      CLAUDE_DISPATCH_DEFAULT_TIMEOUT_MS: "300000",
      CLAUDE_DISPATCH_ROOTS: "C:\\work;D:\\src",
      CLAUDE_DISPATCH_MAX_RESULT_CHARS: "5000",
      CLAUDE_DISPATCH_HEARTBEAT_MS: "2000",
    },
    { pathDelimiter: ";" },
  );
  assert.deepEqual(config.policy, { maxTurns: 40, maxBudgetUsd: 2.5, defaultTimeoutMs: 300_000, homeAgent: "claude" });
  assert.deepEqual(config.agentSettings.claude, {
    program: "claude",
    allowedModes: ["default", "acceptEdits", "bypassPermissions"],
    defaultMode: "acceptEdits",
    defaultModel: "sonnet",
  });
  assert.deepEqual(config.roots, ["C:\\work", "D:\\src"]);
  assert.equal(config.maxResultChars, 5000);
  assert.equal(config.heartbeatMs, 2000);
});

test("values are read and trimmed; empty means default", () => {
  const config = loadConfig({
    CLAUDE_DISPATCH_CLAUDE_BIN: " /opt/claude ",
    CLAUDE_DISPATCH_DEPTH: "2",
    CLAUDE_DISPATCH_MAX_DEPTH: "3",
    CLAUDE_DISPATCH_KILL_GRACE_MS: "0",
    CLAUDE_DISPATCH_JOB_RETENTION_MS: "",
    CLAUDE_DISPATCH_LOG_LEVEL: "debug",
  });
  assert.equal(config.agentSettings.claude?.program, "/opt/claude");
  assert.equal(programOf(config, "claude"), "/opt/claude");
  assert.equal(config.depth, 2);
  assert.equal(config.maxDepth, 3);
  assert.equal(config.killGraceMs, 0);
  assert.equal(config.jobRetentionMs, 7 * 24 * 3600 * 1000);
  assert.equal(config.logLevel, "debug");
});

test("invalid values are errors that name the variable, never silent fallbacks", () => {
  const cases: Array<[string, string]> = [
    ["CLAUDE_DISPATCH_DEPTH", "-1"],
    ["CLAUDE_DISPATCH_DEPTH", "one"],
    ["CLAUDE_DISPATCH_MAX_DEPTH", "1.5"],
    ["CLAUDE_DISPATCH_MAX_LINE_BYTES", "10"],
    ["CLAUDE_DISPATCH_MAX_OUTPUT_BYTES", "1e99"],
    ["CLAUDE_DISPATCH_KILL_GRACE_MS", "60001"],
    ["CLAUDE_DISPATCH_JOB_RETENTION_MS", "forever"],
    ["CLAUDE_DISPATCH_LOG_LEVEL", "loud"],
    ["CLAUDE_DISPATCH_DEPTH", "0x1"],
    ["CLAUDE_DISPATCH_PERMISSION_MODES", "default,yolo"],
    ["CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE", "bypassPermissions"],
    ["CLAUDE_DISPATCH_DEFAULT_MODEL", "--dangerously-skip-permissions"],
    ["CLAUDE_DISPATCH_MAX_TURNS", "0"],
    ["CLAUDE_DISPATCH_MAX_BUDGET_USD", "-1"],
    ["CLAUDE_DISPATCH_MAX_BUDGET_USD", "1e3"],
    ["CLAUDE_DISPATCH_DEFAULT_TIMEOUT_MS", "500"],
    ["CLAUDE_DISPATCH_MAX_RESULT_CHARS", "10"],
    ["CLAUDE_DISPATCH_HEARTBEAT_MS", "0"],
    ["CLAUDE_DISPATCH_MAX_JOBS", "0"],
    ["CLAUDE_DISPATCH_STATE_DIR", "relative/state"],
    ["CLAUDE_DISPATCH_STATE_MAX_BYTES", "1024"],
    ["CLAUDE_DISPATCH_ON_EXIT", "detach"],
    ["CLAUDE_DISPATCH_ROOTS", " : "],
    ["CLAUDE_DISPATCH_ON_DONE", "notify-send done"],
    ["CLAUDE_DISPATCH_ON_DONE", "[]"],
    ["CLAUDE_DISPATCH_ON_DONE", '["notify-send", 1]'],
    ["CLAUDE_DISPATCH_ON_DONE", '{"argv": ["x"]}'],
    ["CLAUDE_DISPATCH_ON_DONE", '[" ", "x"]'],
    ["CLAUDE_DISPATCH_ON_DONE", JSON.stringify(["x", "a\u0000b"])],
    ["CLAUDE_DISPATCH_ON_DONE", JSON.stringify(Array.from({ length: 65 }, () => "x"))],
    ["CLAUDE_DISPATCH_ON_INPUT", "notify-send input"],
    ["CLAUDE_DISPATCH_ON_INPUT", "[]"],
    ["CLAUDE_DISPATCH_ON_INPUT", '["notify-send", 1]'],
    ["CLAUDE_DISPATCH_ON_INPUT", '[" ", "x"]'],
    ["CLAUDE_DISPATCH_ON_INPUT", JSON.stringify(["x", "a\u0000b"])],
    ["CLAUDE_DISPATCH_ON_INPUT", JSON.stringify(["x", "y".repeat(4097)])],
  ];
  for (const [name, value] of cases) {
    assert.throws(
      () => loadConfig({ [name]: value }),
      (error: unknown) => error instanceof ConfigError && error.message.includes(name),
      `${name}=${value}`,
    );
  }
});

test(
  "CLAUDE_DISPATCH_ON_DONE and CLAUDE_DISPATCH_ON_INPUT are argvs as written: nothing in them is split " +
    "or interpreted",
  () => {
    const argv = ["notify-send", "claude-dispatch", "job $CLAUDE_DISPATCH_JOB_ID; rm -rf ~"];
    assert.deepEqual(loadConfig({ CLAUDE_DISPATCH_ON_DONE: ` ${JSON.stringify(argv)} ` }).onDone, argv);
    assert.equal(loadConfig({ CLAUDE_DISPATCH_ON_DONE: "  " }).onDone, undefined);
    const both = loadConfig({ CLAUDE_DISPATCH_ON_INPUT: JSON.stringify(argv), CLAUDE_DISPATCH_ON_DONE: '["true"]' });
    assert.deepEqual([both.onInput, both.onDone], [argv, ["true"]], "each its own");
    assert.equal(loadConfig({ CLAUDE_DISPATCH_ON_INPUT: "  " }).onInput, undefined);
    assert.throws(
      () => loadConfig({ CLAUDE_DISPATCH_ON_INPUT: "[]" }),
      /CLAUDE_DISPATCH_ON_INPUT must be a JSON array of 1 to 64 strings, the program first/,
    );
  },
);

test("the state directory: explicit, else XDG_STATE_HOME, else ~/.local/state; %LOCALAPPDATA% on Windows", () => {
  const home = { home: "/home/ada" };
  assert.equal(loadConfig({ CLAUDE_DISPATCH_STATE_DIR: "/srv/state/" }, home).stateDir, "/srv/state");
  assert.equal(loadConfig({ XDG_STATE_HOME: "/xdg" }, home).stateDir, "/xdg/claude-dispatch");
  assert.equal(
    loadConfig({ XDG_STATE_HOME: "relative" }, home).stateDir,
    "/home/ada/.local/state/claude-dispatch",
    "a relative XDG_STATE_HOME is ignored, as the XDG spec says",
  );
  assert.equal(loadConfig({}, home).stateDir, "/home/ada/.local/state/claude-dispatch");
  const windows = { platform: "win32", home: "C:\\Users\\ada" };
  assert.equal(
    loadConfig({ LOCALAPPDATA: "C:\\Users\\ada\\AppData\\Local", XDG_STATE_HOME: "/xdg" }, windows).stateDir,
    "C:\\Users\\ada\\AppData\\Local\\claude-dispatch",
  );
  assert.equal(loadConfig({ CLAUDE_DISPATCH_ON_EXIT: "kill" }).onExit, "kill");
});

test("CLAUDE_DISPATCH_APPROVALS and CLAUDE_DISPATCH_APPROVAL_TIMEOUT_MS", () => {
  assert.equal(loadConfig({ CLAUDE_DISPATCH_APPROVALS: "deny" }).approvals, "deny");
  assert.equal(loadConfig({ CLAUDE_DISPATCH_APPROVALS: " forward " }).approvals, "forward");
  assert.throws(
    () => loadConfig({ CLAUDE_DISPATCH_APPROVALS: "ask" }),
    /CLAUDE_DISPATCH_APPROVALS must be one of forward, deny, got "ask"/,
  );
  assert.equal(loadConfig({ CLAUDE_DISPATCH_APPROVAL_TIMEOUT_MS: "5000" }).approvalTimeoutMs, 5000);
  assert.throws(
    () => loadConfig({ CLAUDE_DISPATCH_APPROVAL_TIMEOUT_MS: "10" }),
    /CLAUDE_DISPATCH_APPROVAL_TIMEOUT_MS must be an integer from 1000 to 86400000/,
  );
});

test("CLAUDE_DISPATCH_WORKTREE and CLAUDE_DISPATCH_WORKTREE_DIR", () => {
  assert.equal(loadConfig({ CLAUDE_DISPATCH_WORKTREE: "required" }).worktree, "required");
  assert.throws(
    () => loadConfig({ CLAUDE_DISPATCH_WORKTREE: "yes" }),
    /CLAUDE_DISPATCH_WORKTREE must be one of off, on, required, got "yes"/,
  );
  assert.equal(loadConfig({ CLAUDE_DISPATCH_WORKTREE_DIR: "/var/tmp/worktrees" }).worktreeDir, "/var/tmp/worktrees");
  assert.throws(
    () => loadConfig({ CLAUDE_DISPATCH_WORKTREE_DIR: "worktrees" }),
    /CLAUDE_DISPATCH_WORKTREE_DIR must be an absolute path/,
  );
});

test("CLAUDE_DISPATCH_AGENTS and each agent's permission modes", () => {
  assert.deepEqual(loadConfig({ CLAUDE_DISPATCH_AGENTS: "claude, codex,codex" }).agents, ["claude", "codex"]);
  assert.throws(
    () => loadConfig({ CLAUDE_DISPATCH_AGENTS: "claude,aider" }),
    /CLAUDE_DISPATCH_AGENTS must list, comma-separated, agents among claude, codex, gemini, got "claude,aider"/,
  );
  assert.deepEqual(loadConfig({ CLAUDE_DISPATCH_GEMINI_PERMISSION_MODES: "yolo" }).agentSettings.gemini?.allowedModes, [
    "yolo",
  ]);
  assert.throws(
    () => loadConfig({ CLAUDE_DISPATCH_CODEX_PERMISSION_MODES: "yolo" }),
    /CLAUDE_DISPATCH_CODEX_PERMISSION_MODES must list, comma-separated, permission modes among read-only, .*, got "yolo"/,
  );
});

test("CLAUDE_DISPATCH_HOSTS: a JSON object or a file of one; each host checked, every problem named", () => {
  const box = {
    ssh: "me@build-box",
    roots: ["/srv/repos/", "/home/me/src"],
    options: { Port: 2222 },
    command: ["npx", "-y", "claude-dispatch@1.2.3"],
    programs: { claude: "/opt/bin/claude" },
  };
  const [host] = loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ box }) }).hosts ?? [];
  assert.deepEqual(host, {
    kind: "ssh",
    name: "box",
    destination: "me@build-box",
    roots: ["/srv/repos", "/home/me/src"],
    sshConfig: undefined,
    options: { Port: "2222" },
    command: ["npx", "-y", "claude-dispatch@1.2.3"],
    stateDir: undefined,
    agents: ["claude"],
    programs: { claude: "/opt/bin/claude" },
    permissionModes: undefined,
  });
  const read: string[] = [];
  const fromFile = loadConfig(
    { CLAUDE_DISPATCH_HOSTS: "/etc/dispatch-hosts.json" },
    { readTextFile: (file) => (read.push(file), JSON.stringify({ box })) },
  );
  assert.deepEqual(read, ["/etc/dispatch-hosts.json"]);
  const [first] = fromFile.hosts ?? [];
  assert.equal(first?.kind === "ssh" ? first.destination : undefined, "me@build-box");
  const refused = (hosts: unknown, pattern: RegExp): void =>
    assert.throws(
      () => loadConfig({ CLAUDE_DISPATCH_HOSTS: typeof hosts === "string" ? hosts : JSON.stringify(hosts) }),
      (error: Error) => error instanceof ConfigError && pattern.test(error.message),
    );
  refused(
    "hosts.json",
    /^CLAUDE_DISPATCH_HOSTS must be a JSON object of hosts \(§21\.1\) or the absolute path of a file holding one, got "hosts\.json"$/,
  );
  refused("{nope", /not valid JSON/);
  refused(["box"], /^CLAUDE_DISPATCH_HOSTS must be a JSON object of hosts .*, got "\[\\"box\\"\]"$/);
  refused({ local: box }, /"local" is not a usable name/);
  refused({ box: { ...box, ssh: "-oProxyCommand=evil" } }, /needs "ssh"/);
  refused({ box: { ...box, ssh: "me@box ls" } }, /needs "ssh"/);
  refused({ box: { ...box, roots: [] } }, /needs "roots"/);
  refused({ box: { ...box, roots: ["relative/path"] } }, /needs "roots"/);
  refused(
    { box: { ...box, options: { ControlPath: "/tmp/x" } } },
    /sets ControlPath, which claude-dispatch sets itself/,
  );
  refused({ box: { ...box, options: { "Bad Key": "x" } } }, /unusable ssh option/);
  refused({ box: { ...box, options: { ProxyJump: "a\nb" } } }, /unusable ssh option/);
  refused({ box: { ...box, command: [] } }, /"command" that is not 1 to 16 strings/);
  refused(
    { box: { ...box, agents: ["claude", "cursor"] } },
    /"agents" that is not a list of agents among claude, codex, gemini/,
  );
  refused({ box: { ...box, programs: { claude: "" } } }, /unusable program for "claude"/);
  refused({ box: { ...box, state_dir: "state" } }, /state_dir that is not an absolute path/);
  refused({ box: { ...box, colour: "blue" } }, /unknown setting "colour"/);
  refused({ box: { ...box, container: "dev" } }, /unknown setting "container"/);
  refused({ box: { roots: ["/srv"] } }, /needs one of "ssh", "pod", "container", "image": how it is reached/);
});

test("CLAUDE_DISPATCH_HOSTS: a running container, reached with the engine's exec", () => {
  const dev = { container: "dev-box_1", roots: ["/workspace/"], command: ["node", "/opt/cd/dist/main.js"] };
  const [host] = loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ dev }) }).hosts ?? [];
  assert.deepEqual(host, {
    kind: "container",
    name: "dev",
    container: "dev-box_1",
    engine: "podman",
    engineBin: undefined,
    user: undefined,
    roots: ["/workspace"],
    command: ["node", "/opt/cd/dist/main.js"],
    stateDir: undefined,
    agents: ["claude"],
    programs: {},
    permissionModes: undefined,
  });
  const docker = { ...dev, engine: "docker", engine_bin: "/usr/local/bin/docker", user: "1000:1000" };
  const [other] = loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ docker }) }).hosts ?? [];
  assert.deepEqual(other?.kind === "container" ? [other.engine, other.engineBin, other.user] : [], [
    "docker",
    "/usr/local/bin/docker",
    "1000:1000",
  ]);
  const refused = (entry: unknown, pattern: RegExp): void =>
    assert.throws(
      () => loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ dev: entry }) }),
      (error: Error) => error instanceof ConfigError && pattern.test(error.message),
    );
  refused({ ...dev, container: "--privileged" }, /needs "container"/);
  refused({ ...dev, container: "a b" }, /needs "container"/);
  refused({ ...dev, engine: "lxc" }, /"engine" that is not one of podman, docker/);
  refused({ ...dev, engine_bin: "podman" }, /engine_bin that is not an absolute path/);
  refused({ ...dev, user: "--root" }, /"user" that is not a user name or uid/);
  refused({ ...dev, ssh_config: "/etc/ssh" }, /unknown setting "ssh_config"/);
  refused({ ...dev, roots: [] }, /needs "roots"/);
});

test("CLAUDE_DISPATCH_HOSTS: a fresh container per job from an image, given only what the entry lists", () => {
  const sandbox = { image: "localhost/agents:1", roots: ["/home/me/src"] };
  const [host] = loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ sandbox }) }).hosts ?? [];
  assert.deepEqual(host, {
    kind: "sandbox",
    name: "sandbox",
    image: "localhost/agents:1",
    engine: "podman",
    engineBin: undefined,
    env: [],
    mounts: [],
    network: "none",
    user: undefined,
    roots: ["/home/me/src"],
    command: ["claude-dispatch"],
    stateDir: undefined,
    agents: ["claude"],
    programs: {},
    permissionModes: undefined,
  });
  const full = {
    ...sandbox,
    engine: "docker",
    env: ["ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"],
    mounts: [{ source: "/opt/cache" }, { source: "/srv/out", target: "/out", writable: true }],
    network: "host",
  };
  const [other] = loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ full }) }).hosts ?? [];
  assert.deepEqual(other?.kind === "sandbox" ? [other.env, other.mounts, other.network] : [], [
    ["ANTHROPIC_API_KEY"],
    [
      { source: "/opt/cache", target: "/opt/cache", writable: false },
      { source: "/srv/out", target: "/out", writable: true },
    ],
    "host",
  ]);
  const refused = (entry: unknown, pattern: RegExp): void =>
    assert.throws(
      () => loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ sandbox: entry }) }),
      (error: Error) => error instanceof ConfigError && pattern.test(error.message),
    );
  refused({ ...sandbox, image: "--privileged" }, /needs "image"/);
  refused({ ...sandbox, env: ["NOT-A-NAME"] }, /"env" that is not a list of variable names/);
  refused({ ...sandbox, mounts: [{ source: "relative" }] }, /a mount \(1\) that is not/);
  refused({ ...sandbox, mounts: [{ source: "/a,b" }] }, /a mount \(1\) that is not/);
  refused({ ...sandbox, mounts: [{ source: "/a", readonly: true }] }, /a mount \(1\) that is not/);
  refused({ ...sandbox, network: "--net=host" }, /"network" that is not a network's name/);
  refused({ ...sandbox, container: "dev" }, /unknown setting "image"/);
});

test("CLAUDE_DISPATCH_HOSTS: a host's own permission modes, each among its agent's", () => {
  const dev = {
    container: "dev",
    roots: ["/work"],
    permission_modes: { claude: ["bypassPermissions", "default", "default"], codex: ["danger-full-access"] },
  };
  const [host] = loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ dev }) }).hosts ?? [];
  assert.deepEqual(host?.permissionModes, { claude: ["bypassPermissions", "default"], codex: ["danger-full-access"] });
  const refused = (modes: unknown, pattern: RegExp): void =>
    assert.throws(
      () => loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ dev: { ...dev, permission_modes: modes } }) }),
      (error: Error) => error instanceof ConfigError && pattern.test(error.message),
    );
  refused(["bypassPermissions"], /"permission_modes" that is not an object/);
  refused({ cursor: ["default"] }, /"permission_modes" for "cursor", not an agent/);
  refused({ claude: ["yolo"] }, /"permission_modes" for claude that are not 1 or more of default, acceptEdits/);
  refused({ claude: [] }, /"permission_modes" for claude that are not 1 or more/);
});

test("CLAUDE_DISPATCH_HOSTS: a pod on a cluster, reached with kubectl exec", () => {
  const agents = { pod: "agents-0", namespace: "ci", container: "agent", context: "prod ctx", roots: ["/work"] };
  const [host] = loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ agents }) }).hosts ?? [];
  assert.deepEqual(host, {
    kind: "pod",
    name: "agents",
    pod: "agents-0",
    namespace: "ci",
    container: "agent",
    context: "prod ctx",
    kubectlBin: undefined,
    roots: ["/work"],
    command: ["claude-dispatch"],
    stateDir: undefined,
    agents: ["claude"],
    programs: {},
    permissionModes: undefined,
  });
  const refused = (entry: unknown, pattern: RegExp): void =>
    assert.throws(
      () => loadConfig({ CLAUDE_DISPATCH_HOSTS: JSON.stringify({ agents: entry }) }),
      (error: Error) => error instanceof ConfigError && pattern.test(error.message),
    );
  refused({ ...agents, pod: "Agents" }, /needs "pod"/);
  refused({ ...agents, namespace: "-n" }, /"namespace" that is not a namespace's name/);
  refused({ ...agents, container: "a_b" }, /"container" that is not a container's name/);
  refused({ ...agents, context: "--kubeconfig=/x" }, /"context" that is not a context's name/);
  refused({ ...agents, kubectl_bin: "kubectl" }, /kubectl_bin that is not an absolute path/);
});

test("every invalid setting is named, with its value cut as echoes are (§10), and the valid ones are kept", () => {
  const { config, problems } = checkConfig({
    CLAUDE_DISPATCH_CLAUDE_BIN: "/opt/claude",
    CLAUDE_DISPATCH_MAX_TURNS: "0",
    CLAUDE_DISPATCH_WORKTREE: "sometimes",
    CLAUDE_DISPATCH_HOSTS: "{nope",
    CLAUDE_DISPATCH_ON_DONE: "notify-send done",
    CLAUDE_DISPATCH_MAX_JOBS: "3",
  });
  assert.deepEqual(problems.map((problem) => [problem.setting, problem.value]).sort(), [
    ["CLAUDE_DISPATCH_HOSTS", "{nope"],
    ["CLAUDE_DISPATCH_MAX_TURNS", "0"],
    ["CLAUDE_DISPATCH_ON_DONE", "notify-send done"],
    ["CLAUDE_DISPATCH_WORKTREE", "sometimes"],
  ]);
  assert.equal(config.agentSettings.claude?.program, "/opt/claude");
  assert.equal(config.maxJobs, 3);
  assert.equal(config.worktree, "off", "an invalid setting reads as its default");
  assert.equal(config.policy.maxTurns, undefined);

  const error = (() => {
    try {
      loadConfig({
        CLAUDE_DISPATCH_MAX_TURNS: "0",
        CLAUDE_DISPATCH_WORKTREE: "sometimes",
        CLAUDE_DISPATCH_ON_INPUT: `[${"x".repeat(100)}`,
      });
    } catch (thrown) {
      return thrown;
    }
    return undefined;
  })();
  assert.ok(error instanceof ConfigError);
  assert.equal(
    error.message,
    [
      "3 settings are invalid:",
      "  CLAUDE_DISPATCH_ON_INPUT must be a JSON array of 1 to 64 strings, the program first (such as " +
        '["notify-send", "claude-dispatch"]), ' +
        `each at most 4096 characters and the first not empty, got "[${"x".repeat(59)}…"`,
      '  CLAUDE_DISPATCH_WORKTREE must be one of off, on, required, got "sometimes"',
      '  CLAUDE_DISPATCH_MAX_TURNS must be an integer from 1 to 10000, got "0"',
    ].join("\n"),
  );
  assert.equal(error.problems.length, 3);
});

test("the default permission mode is checked against the modes as listed, unless the list is itself invalid", () => {
  const refused = checkConfig({ CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE: "bypassPermissions" }).problems;
  assert.deepEqual(
    refused.map((problem) => problem.setting),
    ["CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE"],
  );
  assert.match(
    refused[0]?.problem ?? "",
    /^must be one of the modes CLAUDE_DISPATCH_PERMISSION_MODES allows \(default, acceptEdits, plan, auto, dontAsk\)$/,
  );
  const both = checkConfig({
    CLAUDE_DISPATCH_PERMISSION_MODES: "default,yolo",
    CLAUDE_DISPATCH_DEFAULT_PERMISSION_MODE: "yolo",
  }).problems;
  assert.deepEqual(
    both.map((problem) => problem.setting),
    ["CLAUDE_DISPATCH_PERMISSION_MODES"],
    "one mistake, named once",
  );
});

/** An agent a test declares: config reads its settings by the names it gives, with no edit to config.ts. */
const FOURTH: RuntimeTraits = {
  name: "fourth",
  label: "Fourth CLI",
  program: { setting: "CLAUDE_DISPATCH_FOURTH_BIN", defaultBin: "fourth", install: "install Fourth" },
  supportedOptions: ["model", "permissionMode"],
  permissionModes: ["careful", "reckless"],
  dangerousModes: ["reckless"],
  policySettings: {
    modes: "CLAUDE_DISPATCH_FOURTH_PERMISSION_MODES",
    defaultMode: "CLAUDE_DISPATCH_FOURTH_DEFAULT_MODE",
  },
};

test("a fourth runtime in the list is configured and offered by what it declares", () => {
  const runtimes = [...RUNTIMES, FOURTH];
  const unset = loadConfig({}, {}, runtimes);
  assert.deepEqual(unset.agentSettings.fourth, {
    program: "fourth",
    allowedModes: ["careful"],
    defaultMode: undefined,
  });
  const env = {
    CLAUDE_DISPATCH_AGENTS: "claude,fourth",
    CLAUDE_DISPATCH_FOURTH_BIN: "/opt/fourth",
    CLAUDE_DISPATCH_FOURTH_PERMISSION_MODES: "careful,reckless",
    CLAUDE_DISPATCH_FOURTH_DEFAULT_MODE: "reckless",
  };
  const config = loadConfig(env, {}, runtimes);
  assert.deepEqual(config.agents, ["claude", "fourth"]);
  assert.equal(programOf(config, "fourth"), "/opt/fourth");
  const [, fourth] = offeredAgents(config, {}, machineOf(), runtimes);
  assert.equal(fourth?.name, "fourth");
  assert.deepEqual(fourth?.allowedModes, ["careful", "reckless"]);
  assert.equal(fourth?.defaultMode, "reckless");
  assert.equal(fourth?.modesSetting, "CLAUDE_DISPATCH_FOURTH_PERMISSION_MODES");
  assert.equal(fourth?.missingProgram?.(), "/opt/fourth not found (CLAUDE_DISPATCH_FOURTH_BIN); check the path");
  assert.deepEqual(unofferedAgents(["claude"], unset), ["codex", "gemini", "fourth"]);
  assert.throws(
    () => loadConfig({ CLAUDE_DISPATCH_FOURTH_DEFAULT_MODE: "reckless" }, {}, runtimes),
    /CLAUDE_DISPATCH_FOURTH_DEFAULT_MODE must be one of the modes CLAUDE_DISPATCH_FOURTH_PERMISSION_MODES allows \(careful\)/,
  );
  assert.throws(
    () => loadConfig({ CLAUDE_DISPATCH_AGENTS: "fourth" }),
    /agents among claude, codex, gemini, got "fourth"/,
    "not without it in the list",
  );
});
