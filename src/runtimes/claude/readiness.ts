/**
 * Whether Claude Code can sign in, as doctor asks (PROTOCOL.md §17): `claude auth status`, since 2.1.41, reads
 * its credentials and environment offline and prints JSON with `loggedIn`, exiting 1 when it is false. Observed
 * on 2.1.332 (test/fixtures/cli/auth-status-*.json); no request leaves the machine and no token is spent.
 */
import type { Readiness, ReadinessProbe } from "../../agent/runtime.js";
import { quoted } from "../../core/errors.js";
import { isRecord } from "../../core/values.js";
import { clip, oneLine } from "./text.js";

/** The first release that has it: asked of an older one, "auth status" would be read as a prompt. */
const AUTH_STATUS_SINCE = [2, 1, 41] as const;
const ASK = "claude auth status";
const FIX = "run `claude auth login` where the server runs, or set ANTHROPIC_API_KEY in its environment";

export function claudeReadiness(_env: unknown, _home: string, version: string): ReadinessProbe {
  const release = /^(\d+)\.(\d+)\.(\d+) \(Claude Code\)/.exec(version.trim());
  if (!release) {
    const printed = quoted(oneLine(version));
    const said = version.trim() === "" ? "it printed no version" : `its version, ${printed}, is not Claude Code's`;
    return unknown(`${said}, so \`${ASK}\` was not asked`);
  }
  const numbers = release.slice(1, 4).map(Number);
  const differs = AUTH_STATUS_SINCE.findIndex((part, index) => (numbers[index] ?? 0) !== part);
  if (differs >= 0 && (numbers[differs] ?? 0) < (AUTH_STATUS_SINCE[differs] ?? 0)) {
    const since = AUTH_STATUS_SINCE.join(".");
    return unknown(`Claude Code ${numbers.join(".")} has no \`${ASK}\` (${since} and later have it)`);
  }
  return { args: ["auth", "status"], read: ({ run }) => readStatus(run?.stdout ?? "", run?.stderr ?? "") };
}

function readStatus(stdout: string, stderr: string): Readiness {
  let status: unknown;
  try {
    status = JSON.parse(stdout);
  } catch {
    status = undefined;
  }
  if (!isRecord(status) || typeof status.loggedIn !== "boolean") {
    const printed = oneLine(stderr) || oneLine(stdout);
    const what = printed ? quoted(printed) : "nothing";
    return { status: "warn", detail: `cannot tell: ${ASK} printed ${what}, not a login state` };
  }
  if (!status.loggedIn) return { status: "fail", detail: `${ASK} says not logged in: ${FIX}` };
  const method = typeof status.authMethod === "string" ? clip(oneLine(status.authMethod), 40) : undefined;
  const source = typeof status.apiKeySource === "string" ? clip(oneLine(status.apiKeySource), 60) : undefined;
  const how = method === undefined ? "" : ` (${method}${source === undefined ? "" : ` from ${source}`})`;
  return { status: "ok", detail: `${ASK} says logged in${how}` };
}

function unknown(why: string): ReadinessProbe {
  return { read: () => ({ status: "warn", detail: `cannot tell: ${why}` }) };
}
