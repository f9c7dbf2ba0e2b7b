/**
 * What the runner needs around the server process: its environment, timers, /proc peak RSS, the §9
 * codes. Part of the fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { REPO_ROOT } from "./constants.mjs";

/* ------------------------------------------------------------------ *
 * The runner
 * ------------------------------------------------------------------ */

/**
 * The server's environment: baseEnv (the test suite passes its
 * minimalEnvironment() from test/server-process.ts), else the same minimal
 * base built here (PATH, and SystemRoot on Windows), then the fuzzer's own
 * variables. Never the caller's whole environment: a CLAUDE_DISPATCH_*,
 * HOME or XDG_STATE_HOME of the caller would change what is fuzzed.
 */
function serverEnvironment(baseEnv, extra) {
  const base = {};
  if (baseEnv) Object.assign(base, baseEnv);
  else {
    for (const key of process.platform === "win32" ? ["PATH", "SystemRoot"] : ["PATH"]) {
      if (process.env[key] !== undefined) base[key] = process.env[key];
    }
    if (base.PATH === undefined && process.platform !== "win32") base.PATH = "/usr/bin:/bin";
  }
  return { ...base, ...extra };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves true when promise settles first, false after ms; the timer never outlives the race. */
async function settlesWithin(promise, ms) {
  let timer;
  const expired = new Promise((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

function readHighWater(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = /^VmHWM:\s+(\d+) kB/m.exec(status);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The §9 codes, from the server's own build (dist/errors.js next to main.js) or, failing that, src/core/errors.ts. */
export async function loadErrorCodes(server) {
  try {
    const module = await import(pathToFileURL(path.join(path.dirname(server), "errors.js")).href);
    if (Array.isArray(module.ERROR_CODES)) return [...module.ERROR_CODES];
  } catch {
    // fall through
  }
  const source = readFileSync(path.join(REPO_ROOT, "src", "core", "errors.ts"), "utf8");
  const list = /ERROR_CODES\s*=\s*\[([^\]]*)\]/.exec(source);
  if (!list) throw new Error("cannot find ERROR_CODES in src/core/errors.ts");
  return [...list[1].matchAll(/"([A-Z_]+)"/g)].map((match) => match[1]);
}

export { readHighWater, serverEnvironment, settlesWithin, sleep };
