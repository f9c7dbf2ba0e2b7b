/** Planted source for the rules' own tests: a virtual src/ and the findings as short strings. */
import type { Files, Violation } from "./source.js";

export const virtual = (entries: Record<string, string>): Files => new Map(Object.entries(entries));
export const lines = (...text: string[]): string => text.join("\n");
export const placed = (found: readonly Violation[]): string[] => found.map((v) => `${v.file}:${v.line}: ${v.message}`);
export const keyed = (found: readonly Violation[]): string[] => found.map((v) => `${v.file}: ${v.key}`);
