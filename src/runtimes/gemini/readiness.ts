/**
 * Whether Gemini CLI can sign in, as doctor looks (PROTOCOL.md §17). It has no status command: a key or an
 * auth choice in the environment counts, as does its Google sign-in file (~/.gemini/oauth_creds.json, under
 * GEMINI_CLI_HOME when set). Observed on 0.61.0; a key in a .env file it reads is not seen.
 */
import path from "node:path";

import type { Readiness, ReadinessProbe } from "../../agent/runtime.js";

type Env = Readonly<Record<string, string | undefined>>;

/** Each chooses a way to sign in that needs no file of its own (validateAuthMethod, getAuthTypeFromEnv in 0.61.0). */
const KEYS = [
  "GEMINI_API_KEY",
  "GOOGLE_API_KEY",
  "GOOGLE_GENAI_USE_VERTEXAI",
  "GOOGLE_GENAI_USE_GCA",
  "GEMINI_CLI_USE_COMPUTE_ADC",
];
const FIX =
  "set GEMINI_API_KEY in the server's environment, or run `gemini` once where the server runs and sign in with Google";

export function geminiReadiness(env: Env, home: string): ReadinessProbe {
  const base = env.GEMINI_CLI_HOME?.trim() || home;
  const credentials = base ? path.join(base, ".gemini", "oauth_creds.json") : undefined;
  const settings = base ? path.join(base, ".gemini", "settings.json") : undefined;
  return {
    files: [credentials, settings].filter((file): file is string => file !== undefined),
    read: ({ present }): Readiness => {
      const key = KEYS.find((name) => env[name]?.trim());
      if (key !== undefined) return { status: "ok", detail: `${key} is set (its value is not checked)` };
      if (credentials && present.includes(credentials)) {
        return { status: "ok", detail: `signed in with Google (${credentials} exists)` };
      }
      if (settings && present.includes(settings)) {
        const why = `no key is set and no sign-in file exists, but ${settings} may choose another way (it is not read)`;
        return { status: "warn", detail: `cannot tell: ${why}` };
      }
      return { status: "fail", detail: `no key and no sign-in: ${FIX}` };
    },
  };
}
