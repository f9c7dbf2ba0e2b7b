/**
 * Diagnostics go to stderr through this interface; stdout belongs to the protocol.
 * A message may quote an agent: it is cleaned for the terminal it lands on (PROTOCOL.md §10).
 */
import { forReading } from "./text.js";

export const LOG_LEVELS = ["debug", "info", "warn", "error", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface TextSink {
  write(text: string): unknown;
}

export function createLogger(sink: TextSink, level: LogLevel): Logger {
  const threshold = LOG_LEVELS.indexOf(level);
  const emit = (at: LogLevel, message: string): void => {
    if (LOG_LEVELS.indexOf(at) < threshold) return;
    try {
      sink.write(`claude-dispatch ${at}: ${forReading(message)}\n`);
    } catch {
      // A broken stderr must never take the server down.
    }
  };
  return {
    debug: (m) => emit("debug", m),
    info: (m) => emit("info", m),
    warn: (m) => emit("warn", m),
    error: (m) => emit("error", m),
  };
}
