/**
 * Configuration from environment variables (PROTOCOL.md §11). A value that
 * is set but invalid is a startup error, never a silent fallback.
 */
import { DEFAULT_CLAUDE_BIN } from "./claude.js";
import { LOG_LEVELS, type LogLevel } from "./log.js";
import { DEFAULT_MAX_LINE_BYTES } from "./stdio.js";

export interface Config {
  claudeBin: string;
  /** How many claude-dispatch servers sit above this one (0 for a host's own). */
  depth: number;
  maxDepth: number;
  maxLineBytes: number;
  maxOutputBytes: number;
  killGraceMs: number;
  jobRetentionMs: number;
  logLevel: LogLevel;
}

export const DEPTH_VARIABLE = "CLAUDE_DISPATCH_DEPTH";

export class ConfigError extends Error {}

type Env = Readonly<Record<string, string | undefined>>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

export function loadConfig(env: Env): Config {
  const logLevel = (env.CLAUDE_DISPATCH_LOG_LEVEL ?? "info").trim() || "info";
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(`CLAUDE_DISPATCH_LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, got ${JSON.stringify(logLevel)}`);
  }
  const claudeBin = env.CLAUDE_DISPATCH_CLAUDE_BIN?.trim() || DEFAULT_CLAUDE_BIN;
  return {
    claudeBin,
    depth: integer(env, DEPTH_VARIABLE, 0, 0, 1000),
    maxDepth: integer(env, "CLAUDE_DISPATCH_MAX_DEPTH", 1, 0, 1000),
    maxLineBytes: integer(env, "CLAUDE_DISPATCH_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES, 1024, 1024 ** 3),
    maxOutputBytes: integer(env, "CLAUDE_DISPATCH_MAX_OUTPUT_BYTES", 64 * 1024 * 1024, 1024, 1024 ** 3),
    killGraceMs: integer(env, "CLAUDE_DISPATCH_KILL_GRACE_MS", 3000, 0, 60_000),
    jobRetentionMs: integer(env, "CLAUDE_DISPATCH_JOB_RETENTION_MS", 10 * 60 * 1000, 0, 30 * 24 * 3600 * 1000),
    logLevel: logLevel as LogLevel,
  };
}
