/**
 * Settings read from environment variables (PROTOCOL.md §11): each set but invalid one recorded with what it
 * must be, and read as its default, so that every one is checked and named at once.
 */
import { quoted } from "./errors.js";

/** A setting set but invalid: its name, its value as set, and what it must be ("must be one of keep, kill"). */
export interface ConfigProblem {
  setting: string;
  value: string;
  problem: string;
}

/** The configuration is invalid: the server refuses to start (§11), naming every invalid setting. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly ConfigProblem[]) {
    const each = problems.map((problem) => `  ${describeProblem(problem)}`);
    const only = problems.length === 1 ? problems[0] : undefined;
    super(only ? describeProblem(only) : [`${problems.length} settings are invalid:`, ...each].join("\n"));
  }
}

/** "CLAUDE_DISPATCH_ON_EXIT must be one of keep, kill, got "detach"": the value echoed as §10 echoes values. */
export function describeProblem({ setting, value, problem }: ConfigProblem): string {
  return value === "" ? `${setting} ${problem}` : `${setting} ${problem}, got ${quoted(value)}`;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Reads settings from the environment: each invalid one recorded and read as its default, so that all are checked. */
export class Settings {
  readonly problems: ConfigProblem[] = [];

  constructor(readonly env: Env) {}

  /** Trimmed; unset, empty or only whitespace is undefined. */
  optional(name: string): string | undefined {
    const raw = this.env[name]?.trim();
    return raw === undefined || raw === "" ? undefined : raw;
  }

  /** Records the problem and gives the fallback in the invalid value's place. */
  refuse<T>(setting: string, value: string, problem: string, fallback: T): T {
    this.problems.push({ setting, value, problem });
    return fallback;
  }

  isInvalid(name: string): boolean {
    return this.problems.some((problem) => problem.setting === name);
  }

  /** Plain decimal digits within the range (§11). */
  integer<T extends number | undefined>(name: string, fallback: T, min: number, max: number): number | T {
    const raw = this.env[name];
    if (raw === undefined || raw.trim() === "") return fallback;
    const value = /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
    if (Number.isSafeInteger(value) && value >= min && value <= max) return value;
    return this.refuse(name, raw, `must be an integer from ${min} to ${max}`, fallback);
  }

  oneOf<T extends string>(name: string, values: readonly T[], fallback: T): T {
    const value = this.optional(name) ?? fallback;
    if ((values as readonly string[]).includes(value)) return value as T;
    return this.refuse(name, value, `must be one of ${values.join(", ")}`, fallback);
  }

  /** A comma-separated list of names among `known`; undefined when unset or invalid. */
  list(name: string, known: readonly string[], what: string): string[] | undefined {
    const raw = this.optional(name);
    if (raw === undefined) return undefined;
    const names = raw
      .split(",")
      .map((entry) => entry.trim())
      .filter(Boolean);
    if (names.length > 0 && names.every((entry) => known.includes(entry))) return names;
    return this.refuse(name, raw, `must list, comma-separated, ${what} among ${known.join(", ")}`, undefined);
  }
}
