/**
 * Whether Codex can sign in, as doctor asks (PROTOCOL.md §17): `codex login status` reads its stored login
 * offline ("Authentication is checked when you send a request"), exiting 1 with "Not logged in"; `codex exec`
 * also takes a key from the environment. Observed on 0.171.0.
 */
import type { Readiness, ReadinessProbe, ReadinessSeen } from "../../agent/runtime.js";
import { quoted } from "../../core/errors.js";
import { oneLine } from "./text.js";

type Env = Readonly<Record<string, string | undefined>>;

const ASK = "codex login status";
const KEYS = ["CODEX_API_KEY", "OPENAI_API_KEY"];
const FIX =
  "run `codex login` where the server runs, or set CODEX_API_KEY in its environment " +
  "(a model provider with a key of its own in config.toml is not checked)";

export function codexReadiness(env: Env, _home: string, version: string): ReadinessProbe {
  if (!/^codex-cli \d/.test(version.trim())) {
    const printed = quoted(oneLine(version));
    const said = version.trim() === "" ? "it printed no version" : `its version, ${printed}, is not Codex's`;
    return { read: () => ({ status: "warn", detail: `cannot tell: ${said}, so \`${ASK}\` was not asked` }) };
  }
  return { args: ["login", "status"], read: ({ run }) => readStatus(run, env) };
}

function readStatus(run: ReadinessSeen["run"], env: Env): Readiness {
  // It warns on stderr about its helper binaries before it answers.
  const said = `${run?.stdout ?? ""}\n${run?.stderr ?? ""}`
    .split("\n")
    .map(oneLine)
    .find((line) => line !== "" && !line.startsWith("WARNING:"));
  if (run?.ok && said !== undefined) return { status: "ok", detail: `${ASK} says ${quoted(said)}` };
  if (said === undefined || !/not logged in/i.test(said)) {
    return { status: "warn", detail: `cannot tell: ${ASK} printed ${said === undefined ? "nothing" : quoted(said)}` };
  }
  const key = KEYS.find((name) => env[name]?.trim());
  if (key !== undefined) return { status: "ok", detail: `not logged in, but ${key} is set (its value is not checked)` };
  return { status: "fail", detail: `${ASK} says not logged in: ${FIX}` };
}
