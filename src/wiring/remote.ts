/**
 * `claude-dispatch remote` put together (PROTOCOL.md §21.3): the job layer on this machine's state directory, built
 * for the one request ssh brought, as RemoteSide. Jobs are kept as the server keeps them, so `claude-dispatch jobs`
 * here lists them, and any later follow, or a server on this state directory, takes one over if its follower died.
 */
import { statSync } from "node:fs";
import path from "node:path";

import type { WorktreeRecord, Worktrees } from "../agent/worktree.js";

import { checkDirectory, resolveRoots } from "../hosts/local/directory.js";
import { findProgram } from "../hosts/local/find-program.js";
import type { RemoteJobView, RemoteSide } from "../hosts/remote/far-end.js";
import type { StartRequest } from "../hosts/remote/protocol.js";
import type { Job, JobRegistry } from "../jobs/registry.js";
import { isAgentName } from "../runtimes/index.js";
import { readFileRange } from "../store/atomic.js";
import type { StateStore } from "../store/state-store.js";
import { DispatchError } from "../core/errors.js";
import { SERVER_VERSION } from "../core/version.js";

export interface RemoteParts {
  store: StateStore;
  /** Worktrees on this machine (§19), and the folder they are made in. */
  git: Worktrees;
  worktreeRoot: string;
  /** The job layer; a start's runtime invocation is its launcher's (§21.3). */
  jobs(start?: StartRequest): Promise<JobRegistry>;
  env: Readonly<Record<string, string | undefined>>;
  platform: string;
  /** This machine's own program for an agent: its CLAUDE_DISPATCH_*_BIN, else the agent's name on PATH (§21.3). */
  programOf(agent: string): string;
}

const STDERR_TAIL_BYTES = 64 * 1024;

export function remoteSide(parts: RemoteParts): RemoteSide {
  const { store } = parts;
  let registry: JobRegistry | undefined;
  const jobs = async (start?: StartRequest): Promise<JobRegistry> => (registry ??= await parts.jobs(start));
  const find = async (id: string): Promise<Job | undefined> => {
    const registry = await jobs();
    return registry.get(id) ?? (await registry.recover(id));
  };
  /**
   * The worktree a request names, if it is the one we made for that job:
   * `<our worktree folder>/<job id>` on its branch.
   */
  const ownWorktree = (worktree: WorktreeRecord | undefined, jobId: string): WorktreeRecord => {
    if (
      !worktree ||
      worktree.path !== path.join(parts.worktreeRoot, jobId) ||
      worktree.branch !== `dispatch/${jobId}`
    ) {
      throw new DispatchError("INVALID_ARGUMENT", `job ${jobId}'s worktree is not one this machine made for it`);
    }
    return worktree;
  };
  // Merged or discarded there: this machine's retention then knows (§19).
  const recordState = async (id: string, state: "merged" | "discarded"): Promise<void> => {
    if (await find(id)) (await jobs()).setWorktreeState(id, state);
  };
  /**
   * The start as it may run here: cwd and every add_dirs entry resolved here, links included, inside the roots (§21.3).
   */
  const admit = async (
    request: StartRequest,
  ): Promise<{ request: StartRequest; cwd: string; worktree?: WorktreeRecord }> => {
    if (!isAgentName(request.agent))
      throw new DispatchError(
        "INVALID_ARGUMENT",
        `this claude-dispatch (${SERVER_VERSION}) has no agent ${request.agent}`,
      );
    // A job in its own worktree runs in it, which a worktree create here made inside our worktree folder.
    const worktree = request.worktree ? ownWorktree(request.worktree, request.job_id) : undefined;
    const roots = await hostRoots(request.roots);
    const cwd = await inside(request.cwd, worktree ? await hostRoots([worktree.path]) : roots, "cwd");
    const resolved = new Map<string, string>();
    for (const [index, dir] of (request.add_dirs ?? []).entries())
      resolved.set(dir, await inside(dir, roots, `add_dirs[${index}]`));
    return {
      request: { ...request, args: request.args.map((arg) => naming(arg, resolved)) },
      cwd,
      ...(worktree ? { worktree } : {}),
    };
  };
  return {
    start: async (request) => {
      // Sent again after a dropped connection: the job is there already, and is followed as it was started.
      const admitted = store.read(request.job_id) ? undefined : await admit(request);
      const registry = await jobs(admitted?.request ?? request);
      const existing = await find(request.job_id);
      if (existing) return view(existing);
      if (!admitted)
        throw new DispatchError("STATE_ERROR", `job ${request.job_id} has a record here that cannot be followed`);
      const { cwd, worktree } = admitted;
      const spec = {
        agent: request.agent,
        prompt: request.prompt,
        cwd,
        ...(worktree ? { worktree } : {}),
      };
      return view(registry.start(spec, "start", undefined, request.job_id));
    },
    find: async (id) => {
      const job = await find(id);
      return job ? view(job) : undefined;
    },
    kill: async (id) => (await jobs()).kill(id, "claude_kill"),
    check: async (agents, programs) => ({
      type: "check",
      version: SERVER_VERSION,
      state_dir: store.root,
      programs: Object.fromEntries(
        agents.map((agent) => {
          const program = programs[agent] ?? (isAgentName(agent) ? parts.programOf(agent) : agent);
          return [agent, findProgram(program, parts.env, { platform: parts.platform }) ?? null];
        }),
      ),
    }),
    readOutput: (id, offset, length) =>
      readFileRange(store.outputFiles(id).stdoutPath, offset, length) ?? Buffer.alloc(0),
    stderrTail: async (id) => {
      const file = store.outputFiles(id).stderrPath;
      const size = sizeOf(file);
      return (
        readFileRange(file, Math.max(0, size - STDERR_TAIL_BYTES), STDERR_TAIL_BYTES) ?? Buffer.alloc(0)
      ).toString("utf8");
    },
    worktree: async (request) => {
      if (request.action === "create") {
        return parts.git.create(
          await inside(request.cwd ?? "", await hostRoots(request.roots ?? []), "cwd"),
          request.job_id,
        );
      }
      const worktree = ownWorktree(request.worktree, request.job_id);
      switch (request.action) {
        case "changes":
          return parts.git.changes(worktree);
        case "diff":
          return parts.git.diff(worktree);
        case "merge": {
          const outcome = await parts.git.merge(worktree, request.message ?? `claude-dispatch job ${request.job_id}`);
          if (outcome.merged) await recordState(request.job_id, "merged");
          return outcome;
        }
        case "discard":
          await parts.git.discard(worktree);
          await recordState(request.job_id, "discarded");
          return null;
      }
    },
    lookUpApproval: (id, requestId, known) => store.lookUpApproval(id, requestId, known),
    watchApprovals: (id, onChange) => store.watchApprovals(id, onChange),
    answer: (id, requestId, answer) => store.answerApproval(id, requestId, answer),
    leave: async () => registry?.leave(),
  };
}

/** The host's roots as the operator named them, resolved here. */
function hostRoots(roots: readonly string[]): Promise<string[]> {
  return resolveRoots(roots).catch((error: unknown) => {
    throw new DispatchError(
      "INVALID_ARGUMENT",
      `the host's roots: ${(error as Error).message.replace("CLAUDE_DISPATCH_ROOTS entry", "a root")}`,
    );
  });
}

/**
 * A directory inside one of these real roots, with links resolved here: the local server checked the path only (§5.6).
 */
async function inside(dir: string, roots: readonly string[], label: string): Promise<string> {
  const checked = await checkDirectory(dir, roots);
  if (!checked.ok)
    throw new DispatchError(
      checked.code,
      `"${label}" ${checked.problem.replace("(CLAUDE_DISPATCH_ROOTS)", "(the host's roots)")}`,
    );
  return checked.path;
}

/**
 * An argument that names a directory checked here names what it resolved to, as `--add-dir=<dir>` or alone, so a link
 * swapped after the check cannot move the agent (§5.6); the sending server's runtime wrote the path as it was given.
 */
function naming(arg: string, resolved: ReadonlyMap<string, string>): string {
  for (const [dir, real] of resolved) {
    if (dir === real) continue;
    if (arg === dir) return real;
    if (arg.startsWith("--") && arg.endsWith(`=${dir}`)) return `${arg.slice(0, arg.length - dir.length)}${real}`;
  }
  return arg;
}

function view(job: Job): RemoteJobView {
  return {
    id: job.id,
    done: job.done,
    finishedAt: () => job.finishedAt,
    outcome: () => {
      const outcome = job.outcome;
      if (!outcome) return { ok: false, code: "INTERNAL_ERROR", detail: "the job ended without an outcome" };
      return outcome.ok
        ? { ok: true, ...(outcome.exit ? { exit: outcome.exit } : {}) }
        : { ok: false, code: outcome.code, detail: outcome.detail, ...(outcome.exit ? { exit: outcome.exit } : {}) };
    },
  };
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}
