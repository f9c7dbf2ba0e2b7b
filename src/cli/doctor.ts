/**
 * `doctor` (PROTOCOL.md §17): checks the configuration, `claude`, the state
 * directory, the policy, the depth and the shutdown policy as `ok`/`warn`/
 * `fail` lines, then prints the host configuration for this install.
 * Exit 1 if a check failed.
 */
import { findProgram } from "../hosts/local/find-program.js";
import { existsSync, rmSync, statSync, writeFileSync, type Stats } from "node:fs";
import path from "node:path";

import { loadConfig, type Config } from "../config.js";
import { resolveRoots } from "../hosts/local/directory.js";
import { DEFAULT_CLAUDE_BIN } from "../runtimes/claude/index.js";
import { AGENT_PROGRAMS } from "../runtimes/index.js";
import type { JobRecord } from "../store/records.js";
import { stateDirectory } from "../hosts/local/state-location.js";
import { StateStore } from "../store/state-store.js";
import { toJson, type CliIo } from "./context.js";
import { firstLine, formatAge, formatBytes, indent, printable } from "./format.js";
import { isWindowsPlatform } from "../hosts/local/self.js";
import { claudeMcpAddLine, mcpServersEntry, type Install } from "./host-config.js";
import { keptWorktrees } from "../worktrees/retire.js";

const VERSION_TIMEOUT_MS = 10_000;

type CheckStatus = "ok" | "warn" | "fail";

interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
}

export async function doctor(io: CliIo, json: boolean): Promise<number> {
  const { config, check } = checkConfiguration(io);
  const checks: Check[] = [check];
  checks.push(await checkClaude(io, config?.claudeBin ?? DEFAULT_CLAUDE_BIN));
  if (config) checks.push(agentsCheck(io, config));
  checks.push(...checkStateDirectory(io, config));
  if (config) checks.push(...(await policyChecks(config)));
  if (config && config.hosts) checks.push(...(await hostChecks(io, config)));

  const ok = checks.every((check) => check.status !== "fail");
  const install: Install = { nodePath: io.nodePath, mainPath: io.mainPath, platform: io.host?.platform };
  const hostConfig = mcpServersEntry(install, io.env);
  const mcpAdd = claudeMcpAddLine(install, io.env);
  io.stdout.write(json ? toJson({ ok, checks, host_config: hostConfig, claude_mcp_add: mcpAdd }) : doctorText(checks, hostConfig, mcpAdd));
  return ok ? 0 : 1;
}

function doctorText(checks: readonly Check[], hostConfig: unknown, mcpAdd: string): string {
  const lines = checks.map((check) => `${check.status.padEnd(4)}  ${check.name}: ${printable(check.detail)}`);
  lines.push(
    "",
    "Host configuration for this install (Claude Desktop, Cursor: mcpServers in their JSON config):",
    indent(printable(JSON.stringify(hostConfig, null, 2))),
    "",
    "Claude Code (every project: user scope):",
    indent(printable(mcpAdd)),
  );
  return `${lines.join("\n")}\n`;
}

function checkConfiguration(io: CliIo): { config: Config | undefined; check: Check } {
  try {
    const config = loadConfig(io.env, io.host);
    return { config, check: { name: "configuration", status: "ok", detail: "every CLAUDE_DISPATCH_* variable is valid" } };
  } catch (error) {
    // The server would refuse to start: say why, and check what can still be checked.
    return { config: undefined, check: { name: "configuration", status: "fail", detail: `${(error as Error).message}; the server will not start` } };
  }
}

/* ------------------------------------------------------------------ *
 * claude
 * ------------------------------------------------------------------ */

async function checkClaude(io: CliIo, bin: string): Promise<Check> {
  const name = "claude";
  // The resolver the server's spawn uses: doctor names the program the server would run.
  const program = findProgram(bin, io.env, { platform: io.host?.platform ?? "linux" });
  if (program === undefined) {
    const where = hasDirectory(bin) ? `${bin} is not an executable file` : `${bin} not found on PATH`;
    return { name, status: "fail", detail: `${where}; set CLAUDE_DISPATCH_CLAUDE_BIN to the output of \`which claude\`` };
  }
  // execFile cannot run a .cmd or .bat without a shell, and a shell is what we never start.
  if (isWindowsPlatform(io.host?.platform) && /\.(cmd|bat)$/i.test(program)) {
    return { name, status: "warn", detail: `${program} (an npm shim; its version was not checked)` };
  }
  const run = await io.runFile(program, ["--version"], VERSION_TIMEOUT_MS);
  if (!run.ok) {
    const why = firstLine(run.stderr) || run.error || "it failed";
    return { name, status: "fail", detail: `${program} --version: ${why}` };
  }
  return { name, status: "ok", detail: `${program} (${firstLine(run.stdout) || "no version printed"})` };
}

/** The other agents (§7): which are offered, and where their programs are, as the server would decide at its start. */
function agentsCheck(io: CliIo, config: Config): Check {
  const found = (name: "codex" | "gemini"): string | undefined =>
    findProgram(name === "codex" ? config.codexBin : config.geminiBin, io.env, { platform: io.host?.platform ?? "linux" });
  const others = (["codex", "gemini"] as const).map((name) => ({ name, program: found(name), listed: config.agents?.includes(name) }));
  const offered = others.filter((agent) => (config.agents ? agent.listed : agent.program !== undefined));
  const missing = offered.filter((agent) => agent.program === undefined);
  const parts = others.map((agent) =>
    offered.includes(agent) ? `${agent.name} (${agent.program ?? `not found: set ${AGENT_PROGRAMS[agent.name].setting}`})` : `${agent.name} not offered${agent.program ? "" : " (not found)"}`,
  );
  const how = config.agents ? "CLAUDE_DISPATCH_AGENTS" : "found on PATH";
  return { name: "agents", status: missing.length > 0 ? "fail" : "ok", detail: `claude, and by ${how}: ${parts.join("; ")}` };
}

function hasDirectory(bin: string): boolean {
  return bin.includes("/") || bin.includes("\\");
}


/* ------------------------------------------------------------------ *
 * The state directory
 * ------------------------------------------------------------------ */

const STATE_DIRECTORY = "state directory";

function checkStateDirectory(io: CliIo, config: Config | undefined): Check[] {
  const name = STATE_DIRECTORY;
  let root: string;
  try {
    root = config?.stateDir ?? stateDirectory(io.env, io.host?.platform ?? "linux", io.host?.home ?? "");
  } catch (error) {
    return [{ name, status: "fail", detail: (error as Error).message }];
  }
  const store = new StateStore(root, { uid: io.uid, randomName: () => io.randomName() });
  try {
    store.check();
  } catch (error) {
    return [{ name, status: "fail", detail: `${(error as Error).message}; the server will not start` }];
  }
  const found = statWritable(root, io.randomName());
  if ("check" in found) return [found.check];
  return [modeCheck(io, root, found.info), jobsCheck(store)];
}

/** The directory's stat once a probe file was written there; else the check that ends doctor's look at it. */
function statWritable(root: string, probeName: string): { info: Stats } | { check: Check } {
  const name = STATE_DIRECTORY;
  let info: Stats;
  try {
    info = statSync(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return { check: { name, status: "warn", detail: `${root} does not exist yet; the server creates it (mode 0700) when it starts` } };
    }
    return { check: { name, status: "fail", detail: `${root}: ${(error as Error).message}` } };
  }
  if (!info.isDirectory()) return { check: { name, status: "fail", detail: `${root} is not a directory` } };
  const probe = path.join(root, `.doctor-${probeName}.tmp`);
  try {
    writeFileSync(probe, "", { flag: "wx", mode: 0o600 });
    rmSync(probe, { force: true });
  } catch (error) {
    return { check: { name, status: "fail", detail: `${root} is not writable: ${(error as Error).message}` } };
  }
  return { info };
}

function modeCheck(io: CliIo, root: string, info: Stats): Check {
  const name = STATE_DIRECTORY;
  const windows = isWindowsPlatform(io.host?.platform);
  const mode = info.mode & 0o777;
  if (!windows && mode !== 0o700) {
    return { name, status: "warn", detail: `${root} is writable but has mode 0${mode.toString(8)}; the server makes it 0700 when it starts` };
  }
  return { name, status: "ok", detail: `${root} (writable${windows ? "" : ", mode 0700"})` };
}

function jobsCheck(store: StateStore): Check {
  const { records, skipped } = store.loadAll();
  const bytes = records.reduce((sum, record) => sum + store.size(record.id), 0);
  const count = (status: JobRecord["status"]): number => records.filter((record) => record.status === status).length;
  // Which agent runs each job, and where (§7, §21): "claude 3, codex on box 1".
  const where = new Map<string, number>();
  for (const record of records) {
    const key = `${record.runtime ?? "claude"}${record.host && record.host !== "local" ? ` on ${record.host}` : ""}`;
    where.set(key, (where.get(key) ?? 0) + 1);
  }
  const agents = [...where].map(([key, n]) => `${key} ${n}`).join(", ");
  return {
    name: "jobs",
    status: skipped.length > 0 ? "warn" : "ok",
    detail:
      `${records.length} (${count("running")} running, ${count("queued")} queued${agents ? `; ${agents}` : ""}), ${formatBytes(bytes)}` +
      (skipped.length > 0 ? `; ${skipped.length} folder${skipped.length === 1 ? "" : "s"} without a readable record` : ""),
  };
}

/* ------------------------------------------------------------------ *
 * Policy, roots, depth, shutdown
 * ------------------------------------------------------------------ */

async function policyChecks(config: Config): Promise<Check[]> {
  return [permissionCheck(config), approvalsCheck(config), worktreesCheck(config), agentDefaultsCheck(config), await rootsCheck(config), depthCheck(config), onExitCheck(config)];
}

/** The default for "worktree", and the worktrees retention kept for their unmerged changes after their jobs were pruned (§19). */
function worktreesCheck(config: Config): Check {
  const root = config.worktreeDir ?? path.join(config.stateDir, "worktrees");
  const kept = keptWorktrees(root, "dispatch/", (id) => existsSync(path.join(config.stateDir, "jobs", id)));
  const policy = `${config.worktree} (in ${root})`;
  if (kept.length === 0) return { name: "worktrees", status: "ok", detail: `${policy}; none kept after its job was pruned` };
  const list = kept.map((worktree) => `${worktree.path} (branch ${worktree.branch})`).join(", ");
  return { name: "worktrees", status: "warn", detail: `${policy}; ${kept.length} kept with changes nobody merged or discarded after their jobs were pruned: ${list}; merge them with git, or remove them with git worktree remove` };
}

function approvalsCheck(config: Config): Check {
  return {
    name: "approvals",
    status: "ok",
    detail:
      config.approvals === "forward"
        ? `forward: what would prompt is asked of the caller, denied after ${formatAge(config.approvalTimeoutMs)} unanswered (§18)`
        : "deny: what would prompt is refused, as headless Claude Code does (CLAUDE_DISPATCH_APPROVALS=deny)",
  };
}

function permissionCheck({ policy }: Config): Check {
  const bypass = policy.permissionModes.includes("bypassPermissions");
  return {
    name: "permission modes",
    status: bypass ? "warn" : "ok",
    detail: `${policy.permissionModes.join(", ") || "none"}${bypass ? " (bypassPermissions lets an agent do anything without asking)" : ""}; default: ${policy.defaultPermissionMode ?? "none (the user's Claude Code settings)"}`,
  };
}

function agentDefaultsCheck({ policy }: Config): Check {
  return {
    name: "agent defaults",
    status: "ok",
    detail: [
      `model ${policy.defaultModel ?? "Claude Code's default"}`,
      `max turns ${policy.maxTurns ?? "no cap"}`,
      `max budget ${policy.maxBudgetUsd === undefined ? "no cap" : `$${policy.maxBudgetUsd}`}`,
      `claude_run timeout ${formatAge(policy.defaultTimeoutMs)}`,
    ].join(", "),
  };
}

async function rootsCheck(config: Config): Promise<Check> {
  if (config.roots === undefined) {
    return { name: "roots", status: "warn", detail: "CLAUDE_DISPATCH_ROOTS is unset: agents may work in any directory" };
  }
  try {
    return { name: "roots", status: "ok", detail: (await resolveRoots(config.roots)).join(", ") };
  } catch (error) {
    return { name: "roots", status: "fail", detail: `${(error as Error).message}; the server will not start` };
  }
}

function depthCheck(config: Config): Check {
  return config.depth >= config.maxDepth
    ? {
        name: "depth",
        status: "warn",
        detail: `CLAUDE_DISPATCH_DEPTH ${config.depth} reaches CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: a server started here offers no tools`,
      }
    : { name: "depth", status: "ok", detail: `${config.depth}, below CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: tools are offered` };
}

function onExitCheck(config: Config): Check {
  return {
    name: "on exit",
    status: "ok",
    detail:
      (config.onExit === "keep" ? "keep (agents outlive the server; the next server follows them)" : "kill (the server kills its agents when it stops)") +
      `; finished jobs kept ${formatAge(config.jobRetentionMs)}, at most ${formatBytes(config.stateMaxBytes)}`,
  };
}

/** Each host of CLAUDE_DISPATCH_HOSTS (§21.5): reached in BatchMode, claude-dispatch there, its state directory, the agents' programs. */
async function hostChecks(io: CliIo, config: Config): Promise<Check[]> {
  const hosts = (await io.sshHosts?.()) ?? [];
  return Promise.all(
    hosts.map(async (host): Promise<Check> => {
      const name = `host ${host.name}`;
      const destination = config.hosts?.find((entry) => entry.name === host.name)?.destination ?? host.name;
      const found = await host.check();
      if (!found.ok) return { name, status: "fail", detail: `${destination}: ${found.problem}; jobs there cannot start` };
      const missing = Object.entries(found.programs).filter(([, program]) => program === null).map(([agent]) => agent);
      const programs = Object.entries(found.programs).map(([agent, program]) => `${agent} ${program ?? "not found"}`).join(", ");
      const detail = `${destination}: claude-dispatch ${found.version}, state directory ${found.stateDir}, ${programs} (${found.ms} ms)`;
      return { name, status: missing.length > 0 ? "fail" : "ok", detail: missing.length > 0 ? `${detail}; set "programs" for ${missing.join(", ")}` : detail };
    }),
  );
}
