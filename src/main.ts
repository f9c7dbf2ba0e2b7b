#!/usr/bin/env node
/**
 * The only file that touches process.* (argv, env, stdio, signals, exit), and the one that loads modules lazily:
 * it reads the process once into ProcessParts and hands it to the mode its arguments name (src/wiring/). Without
 * arguments it is the MCP server; with them, the human command line (§17) or a mode the server starts.
 */
import { readFileSync, realpathSync } from "node:fs";
import { availableParallelism, homedir } from "node:os";
import path from "node:path";

import { thisMachine } from "./hosts/local/machine.js";
import type { ModeLoaders } from "./wiring/mode-loaders.js";
import type { ProcessParts } from "./wiring/machine.js";
import { serve } from "./wiring/server.js";

/**
 * This program's main.js, links resolved: run through npx or a package manager's bin link, the path a host
 * configuration or a carrier is given is the installed file itself, not the link in a cache.
 */
function entryPoint(): string {
  const named = path.resolve(process.argv[1] ?? "dist/main.js");
  try {
    return realpathSync(named);
  } catch {
    return named;
  }
}

const parts: ProcessParts = {
  env: process.env,
  platform: process.platform,
  pid: process.pid,
  execPath: process.execPath,
  mainPath: entryPoint(),
  kill: (pid, signal) => void process.kill(pid, signal),
  uid: process.getuid?.(),
  // Getters: reading process.stdin opens it, which a command that reads nothing must not do.
  get stdin() {
    return process.stdin;
  },
  get stdout() {
    return process.stdout;
  },
  get stderr() {
    return process.stderr;
  },
  cwd: () => process.cwd(),
  here: thisMachine({
    platform: process.platform,
    home: homedir(),
    pathDelimiter: path.delimiter,
    cpus: availableParallelism(),
    readTextFile: (file) => readFileSync(file, "utf8"),
  }),
  exit: (code) => process.exit(code),
  onSignals: (signals, listener) => {
    for (const signal of signals) process.on(signal, listener);
    return () => signals.forEach((signal) => process.off(signal, listener));
  },
  onCrash: (listener) => {
    process.on("uncaughtException", listener);
    process.on("unhandledRejection", listener);
  },
};

/** The modules loaded on first use: the one place that imports them dynamically (BENCHMARKS.md (a)). */
const loaders: ModeLoaders = {
  processes: () => import("./hosts/local/index.js"),
  git: () => import("./hosts/local/git.js"),
  runtimes: () => import("./runtimes/all.js"),
  remoteHosts: () => import("./wiring/remote-hosts.js"),
  serving: () => import("./wiring/serving.js"),
  detached: () => import("./hosts/local/detached.js"),
  approvalEndpoint: () => import("./wiring/approvals-endpoint.js"),
  commandLine: () => import("./cli/index.js"),
};

async function main(): Promise<void> {
  const [mode, ...rest] = process.argv.slice(2);
  switch (mode) {
    case undefined:
      return serve(parts, loaders);
    case "approver":
      return (await import("./wiring/approver.js")).serveApprover(parts, rest);
    case "remote":
      return (await import("./wiring/remote-end.js")).serveRemoteEnd(parts, loaders, rest);
    case "carrier":
      return (await import("./wiring/carrier.js")).serveCarrier(parts, loaders, rest);
  }
  const { runCommandLine } = await import("./wiring/command-line.js");
  process.exitCode = await runCommandLine(parts, loaders, [mode, ...rest]);
  // A command is done when it returns, even if processes that survived a kill are still being watched.
  setTimeout(() => process.exit(), 1000).unref();
}

main().catch((error: unknown) => {
  // Before a mode's own handlers exist (say, the takeover at startup failed): say why, exit 1.
  process.stderr.write(`claude-dispatch: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exit(1);
});
