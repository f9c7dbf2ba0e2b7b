/**
 * `doctor` (PROTOCOL.md §17): checks every setting, the agents, the state directory, the policy, the depth, the
 * shutdown policy and each host as `ok`/`warn`/`fail` lines of at most 80 columns, then prints the host
 * configuration for this install, without any invalid setting. Exit 1 if a check failed.
 */
import { existsSync, rmSync, statSync, writeFileSync, type Stats } from "node:fs";
import path from "node:path";

import { checkConfig, describeProblem, worktreeRootOf, type Config, type ConfigProblem } from "../config.js";
import { whereIs } from "../hosts/kinds.js";
import type { JobRecord } from "../store/records.js";
import { StateStore } from "../store/state-store.js";
import { filesHere, loadProcessControl, toJson, type CliIo } from "./context.js";
import { formatAge, formatBytes, indent, printable, wrap } from "./format.js";
import { claudeMcpAddLine, claudeMcpAddLines, mcpServersEntry, type Install } from "./host-config.js";
import { keptWorktrees } from "../worktrees/retire.js";
import {
  agentChecks,
  agentDefaultsCheck,
  andList,
  hostModesChecks,
  permissionCheck,
  type Check,
} from "./doctor-agents.js";

/** What doctor prints fits a terminal of this many columns (§17); a check's detail wraps under its name. */
const WIDTH = 80;
const CONTINUATION = " ".repeat("fail  ".length);
const ALL_VALID = "every CLAUDE_DISPATCH_* variable is valid";

/** The checks in the order printed, each with the settings it needs: one of them invalid, it is skipped. */
interface Planned {
  label: string;
  needs: readonly string[];
  run(): Check[] | Promise<Check[]>;
}

function plan(io: CliIo, config: Config): Planned[] {
  const setting = (...names: string[]): string[] => names.map((name) => `CLAUDE_DISPATCH_${name}`);
  const one =
    (check: (config: Config) => Check): (() => Check[]) =>
    () => [check(config)];
  return [
    { label: "agents", needs: setting("AGENTS"), run: () => agentChecks(io, config) },
    {
      label: "state directory",
      needs: setting("STATE_DIR"),
      run: async () => checkStateDirectory(io, config.stateDir, await filesHere(io)),
    },
    {
      label: "permission modes",
      needs: setting("PERMISSION_MODES", "DEFAULT_PERMISSION_MODE"),
      run: one(permissionCheck),
    },
    { label: "approvals", needs: setting("APPROVALS", "APPROVAL_TIMEOUT_MS"), run: one(approvalsCheck) },
    { label: "worktrees", needs: setting("WORKTREE", "WORKTREE_DIR", "STATE_DIR"), run: one(worktreesCheck) },
    {
      label: "agent defaults",
      needs: setting("DEFAULT_MODEL", "MAX_TURNS", "MAX_BUDGET_USD", "DEFAULT_TIMEOUT_MS"),
      run: one(agentDefaultsCheck),
    },
    { label: "roots", needs: setting("ROOTS"), run: async () => [await rootsCheck(io, config)] },
    { label: "depth", needs: setting("DEPTH", "MAX_DEPTH"), run: one(depthCheck) },
    { label: "on exit", needs: setting("ON_EXIT", "JOB_RETENTION_MS", "STATE_MAX_BYTES"), run: one(onExitCheck) },
    {
      label: "hosts",
      needs: setting("HOSTS"),
      run: async () => (config.hosts ? [...hostModesChecks(config), ...(await hostChecks(io, config))] : []),
    },
  ];
}

export async function doctor(io: CliIo, json: boolean): Promise<number> {
  const { config, problems } = checkConfig(io.env, io.machine);
  const planned = plan(io, config);
  const checks = problems.map((problem) => problemCheck(problem, planned));
  if (checks.length === 0) checks.push({ name: "configuration", status: "ok", detail: ALL_VALID });
  for (const each of planned) {
    if (!problems.some((problem) => each.needs.includes(problem.setting))) checks.push(...(await each.run()));
  }

  const ok = checks.every((check) => check.status !== "fail");
  // An invalid value is never printed to be pasted: the host's server would refuse to start with it.
  const invalidSet = problems.filter((problem) => problem.value !== "").map((problem) => problem.setting);
  const leftOut = [...new Set(invalidSet)].sort();
  const env = Object.fromEntries(Object.entries(io.env).filter(([name]) => !leftOut.includes(name)));
  const install: Install = { nodePath: io.nodePath, mainPath: io.mainPath, shell: io.machine.shell };
  const hostConfig = mcpServersEntry(install, env);
  if (json) {
    const claudeMcpAdd = claudeMcpAddLine(install, env);
    io.stdout.write(toJson({ ok, checks, left_out: leftOut, host_config: hostConfig, claude_mcp_add: claudeMcpAdd }));
  } else {
    io.stdout.write(doctorText(checks, leftOut, hostConfig, claudeMcpAddLines(install, env, WIDTH - 2)));
  }
  return ok ? 0 : 1;
}

/** An invalid setting: its name, value and range (§11), and the checks skipped for want of it. */
function problemCheck(problem: ConfigProblem, planned: readonly Planned[]): Check {
  const skipped = planned.filter((each) => each.needs.includes(problem.setting)).map((each) => each.label);
  const checksSkipped = `check${skipped.length === 1 ? "" : "s"}`;
  const skips = skipped.length === 0 ? "" : `, and doctor skips the ${andList(skipped)} ${checksSkipped}`;
  const detail = `${describeProblem(problem)}; the server will not start${skips}`;
  return { name: "configuration", status: "fail", detail };
}

function doctorText(
  checks: readonly Check[],
  leftOut: readonly string[],
  hostConfig: unknown,
  mcpAdd: readonly string[],
): string {
  const lines = checks.flatMap(checkLines);
  const prose = (text: string): string[] => wrap(text, WIDTH);
  lines.push("");
  if (leftOut.length > 0) {
    const [defaults, them] = leftOut.length === 1 ? ["its default", "it"] : ["their defaults", "them"];
    const names = `${andList(leftOut)}; a host's server started with it uses ${defaults}`;
    const note = `Left out of the configuration below, as invalid: ${names}. Fix ${them}, then run doctor again.`;
    lines.push(...prose(note), "");
  }
  lines.push(
    ...prose("Host configuration for this install (Claude Desktop, Cursor: mcpServers in their JSON configuration):"),
    // JSON cannot break a string: a path longer than the width makes a longer line, to be pasted whole.
    indent(printable(JSON.stringify(hostConfig, null, 2))),
    "",
    "Claude Code (every project: user scope):",
    ...mcpAdd.map((line) => indent(printable(line))),
  );
  return `${lines.join("\n")}\n`;
}

/** "fail  name: detail", the detail wrapped under the name; a long path breaks where the line ends, never cut. */
function checkLines(check: Check): string[] {
  const text = `${check.name}: ${printable(check.detail).replace(/\s*\n\s*/g, " ")}`;
  const first = check.status.padEnd(CONTINUATION.length);
  return wrap(text, WIDTH - CONTINUATION.length).map((line, index) => (index === 0 ? first : CONTINUATION) + line);
}

/* ------------------------------------------------------------------ *
 * The state directory
 * ------------------------------------------------------------------ */

const STATE_DIRECTORY = "state directory";

function checkStateDirectory(io: CliIo, root: string, here: (host: string) => boolean): Check[] {
  const name = STATE_DIRECTORY;
  const store = new StateStore(root, { uid: io.uid, randomName: () => io.randomName() });
  try {
    store.check();
  } catch (error) {
    return [{ name, status: "fail", detail: `${(error as Error).message}; the server will not start` }];
  }
  const found = statWritable(root, io.randomName());
  if ("check" in found) return [found.check];
  return [modeCheck(io, root, found.info), jobsCheck(store, here)];
}

/** The directory's stat once a probe file was written there; else the check that ends doctor's look at it. */
function statWritable(root: string, probeName: string): { info: Stats } | { check: Check } {
  const name = STATE_DIRECTORY;
  let info: Stats;
  try {
    info = statSync(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return {
        check: {
          name,
          status: "warn",
          detail: `${root} does not exist yet; the server creates it (mode 0700) when it starts`,
        },
      };
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
  const { fileModes } = io.machine;
  const mode = info.mode & 0o777;
  if (fileModes && mode !== 0o700) {
    return {
      name,
      status: "warn",
      detail: `${root} is writable but has mode 0${mode.toString(8)}; the server makes it 0700 when it starts`,
    };
  }
  return { name, status: "ok", detail: `${root} (writable${fileModes ? ", mode 0700" : ""})` };
}

function jobsCheck(store: StateStore, here: (host: string) => boolean): Check {
  const { records, skipped } = store.loadAll();
  const bytes = records.reduce((sum, record) => sum + store.size(record.id), 0);
  const count = (status: JobRecord["status"]): number => records.filter((record) => record.status === status).length;
  // Which agent runs each job, and where (§7, §21): "claude 3, codex on box 1".
  const where = new Map<string, number>();
  for (const record of records) {
    const key = `${record.runtime}${here(record.host) ? "" : ` on ${record.host}`}`;
    where.set(key, (where.get(key) ?? 0) + 1);
  }
  const agents = [...where].map(([key, n]) => `${key} ${n}`).join(", ");
  return {
    name: "jobs",
    status: skipped.length > 0 ? "warn" : "ok",
    detail:
      `${records.length} (${count("running")} running, ${count("queued")} queued${agents ? `; ${agents}` : ""}), ` +
      `${formatBytes(bytes)}` +
      (skipped.length > 0
        ? `; ${skipped.length} folder${skipped.length === 1 ? "" : "s"} without a readable record`
        : ""),
  };
}

/* ------------------------------------------------------------------ *
 * Policy, roots, depth, shutdown
 * ------------------------------------------------------------------ */

/**
 * The default for "worktree", and the worktrees retention kept for their
 * unmerged changes after their jobs were pruned (§19).
 */
function worktreesCheck(config: Config): Check {
  const root = worktreeRootOf(config);
  const kept = keptWorktrees(root, "dispatch/", (id) => existsSync(path.join(config.stateDir, "jobs", id)));
  const policy = `${config.worktree} (in ${root})`;
  if (kept.length === 0)
    return { name: "worktrees", status: "ok", detail: `${policy}; none kept after its job was pruned` };
  const list = kept.map((worktree) => `${worktree.path} (branch ${worktree.branch})`).join(", ");
  return {
    name: "worktrees",
    status: "warn",
    detail:
      `${policy}; ${kept.length} kept with changes nobody merged or discarded after their jobs were pruned: ` +
      `${list}; merge them with git, or remove them with git worktree remove`,
  };
}

function approvalsCheck(config: Config): Check {
  return {
    name: "approvals",
    status: "ok",
    detail:
      config.approvals === "forward"
        ? `forward: what would prompt is asked of the caller, denied after ${formatAge(config.approvalTimeoutMs)} ` +
          `unanswered (§18)`
        : "deny: what would prompt is refused, as headless Claude Code does (CLAUDE_DISPATCH_APPROVALS=deny)",
  };
}

async function rootsCheck(io: CliIo, config: Config): Promise<Check> {
  if (config.roots === undefined) {
    return {
      name: "roots",
      status: "warn",
      detail: "CLAUDE_DISPATCH_ROOTS is unset: agents may work in any directory",
    };
  }
  try {
    return { name: "roots", status: "ok", detail: (await io.machine.resolveRoots(config.roots)).join(", ") };
  } catch (error) {
    return { name: "roots", status: "fail", detail: `${(error as Error).message}; the server will not start` };
  }
}

function depthCheck(config: Config): Check {
  return config.depth >= config.maxDepth
    ? {
        name: "depth",
        status: "warn",
        detail:
          `CLAUDE_DISPATCH_DEPTH ${config.depth} reaches CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: a ` +
          `server started here offers no tools`,
      }
    : {
        name: "depth",
        status: "ok",
        detail: `${config.depth}, below CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: tools are offered`,
      };
}

function onExitCheck(config: Config): Check {
  return {
    name: "on exit",
    status: "ok",
    detail:
      (config.onExit === "keep"
        ? "keep (agents outlive the server; the next server follows them)"
        : "kill (the server kills its agents when it stops)") +
      `; finished jobs kept ${formatAge(config.jobRetentionMs)}, at most ${formatBytes(config.stateMaxBytes)}`,
  };
}

/**
 * Each host of CLAUDE_DISPATCH_HOSTS (§21.5): reached in BatchMode, claude-dispatch
 * there, its state directory, the agents' programs.
 */
async function hostChecks(io: CliIo, config: Config): Promise<Check[]> {
  if (!config.hosts) return [];
  const reached = await io.hosts?.(() => loadProcessControl(io));
  return Promise.all(
    config.hosts.map(async (entry): Promise<Check> => {
      const name = `host ${entry.name}`;
      const destination = whereIs(entry);
      const host = reached?.get(entry.name);
      // The command line builds its hosts only from a valid configuration.
      if (!host) return { name, status: "warn", detail: `${destination}: not checked until every setting is valid` };
      const found = await host.check();
      if (!found.ok)
        return { name, status: "fail", detail: `${destination}: ${found.problem}; jobs there cannot start` };
      const missing = Object.entries(found.programs)
        .filter(([, program]) => program === null)
        .map(([agent]) => agent);
      const programs = Object.entries(found.programs)
        .map(([agent, program]) => `${agent} ${program ?? "not found"}`)
        .join(", ");
      const detail =
        `${destination}: claude-dispatch ${found.version}, state directory ${found.stateDir}, ` +
        `${programs} (${found.ms} ms)`;
      return {
        name,
        status: missing.length > 0 ? "fail" : "ok",
        detail: missing.length > 0 ? `${detail}; set "programs" for ${missing.join(", ")}` : detail,
      };
    }),
  );
}
