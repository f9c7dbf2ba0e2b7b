/** (l) what a worktree costs a job. */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { Server } from "../client.mjs";
import { SIZES, percentile, round2, baseEnv, reapLeftovers, makeWorkDir } from "../shared.mjs";

/**
 * (l) what a worktree costs a job (PROTOCOL.md §19). In a repository of 200 files the bench makes, jobs of the fake
 * agent that write one file, alternately with worktree: true and without: the time to the claude_start answer (git
 * worktree add is in it), and to the answer of a claude_wait sent once the job has finished (the report of a
 * worktree job reads what it changed: four git commands).
 */
export async function benchWorktrees(rounds) {
  const dir = makeWorkDir();
  const gitEnv = { ...baseEnv(), GIT_AUTHOR_NAME: "bench", GIT_AUTHOR_EMAIL: "bench@localhost", GIT_COMMITTER_NAME: "bench", GIT_COMMITTER_EMAIL: "bench@localhost" };
  const git = (cwd, ...args) => execFileSync("git", args, { cwd, env: gitEnv, stdio: "ignore" });
  const repo = path.join(dir, "repo");
  fs.mkdirSync(path.join(repo, "src"), { recursive: true });
  for (let i = 0; i < 200; i += 1) fs.writeFileSync(path.join(repo, "src", `file-${i}.txt`), `line ${i}\n`.repeat(50));
  git(repo, "init", "--quiet", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "commit", "--quiet", "-m", "base");
  const samples = { start: { tree: [], plain: [] }, wait: { tree: [], plain: [] } };
  try {
    for (let i = 0; i < rounds; i += 1) {
      const s = new Server({ CLAUDE_DISPATCH_WORKTREE_DIR: path.join(dir, `worktrees-${i}`) });
      await s.initialize();
      for (let k = 0; k < SIZES.worktreeSamples * 2; k += 1) {
        const kind = k % 2 === 0 ? "tree" : "plain";
        const started = await s.callTool("claude_start", { prompt: `@write src/file-${k}.txt changed ${k}`, cwd: repo, worktree: kind === "tree" });
        if (!started.structured?.job_id) throw new Error(`claude_start answered ` +
          `${JSON.stringify(started.structured).slice(0, 300)}`);
        samples.start[kind].push(started.at - started.sentAt);
        const first = await s.callTool("claude_wait", { job_id: started.structured.job_id, hold_ms: 60_000 }, 90_000);
        if (first.structured?.status !== "completed") throw new Error(`claude_wait answered ` +
          `${JSON.stringify(first.structured).slice(0, 300)}`);
        const again = await s.callTool("claude_wait", { job_id: started.structured.job_id, hold_ms: 0 });
        if (kind === "tree" && again.structured?.worktree?.changed_files?.length !== 1) throw new Error(`a worktree ` +
          `job reported ${JSON.stringify(again.structured?.worktree)}`);
        samples.wait[kind].push(again.at - again.sentAt);
      }
      await s.close();
      await reapLeftovers();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const p50 = (values) => percentile(values, 0.5);
  return {
    rows: [
      {
        metric: `l  claude_start answered, worktree: true next to without (${SIZES.worktreeSamples} of each a round, ` +
          `200-file repository)`,
        value: `p50 ${p50(samples.start.tree).toFixed(1)} ms against ${p50(samples.start.plain).toFixed(1)} ms`,
        target: "info (issue 15)",
        detail: `p99 ${percentile(samples.start.tree, 0.99).toFixed(1)} against ` +
          `${percentile(samples.start.plain, 0.99).toFixed(1)} ms: git worktree add runs before the answer`,
      },
      {
        metric: "l  claude_wait on a finished job, worktree: true next to without",
        value: `p50 ${p50(samples.wait.tree).toFixed(1)} ms against ${p50(samples.wait.plain).toFixed(1)} ms`,
        target: "info (issue 15)",
        detail: "a worktree job's report reads what it changed (git log, diff --name-only, ls-files, status)",
      },
    ],
    data: {
      startMs: { worktree: round2(p50(samples.start.tree)), plain: round2(p50(samples.start.plain)) },
      finishedWaitMs: { worktree: round2(p50(samples.wait.tree)), plain: round2(p50(samples.wait.plain)) },
      samplesMs: { start: samples.start, wait: samples.wait },
    },
  };
}
