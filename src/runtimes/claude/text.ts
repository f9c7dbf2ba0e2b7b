/**
 * Short renderings of what the agent printed: clipped copies (a V8 slice keeps its
 * whole parent alive) and one-line tool summaries.
 */
import { isRecord } from "../../core/values.js";

/**
 * The start of text, at most max characters, as a copy of its own: V8 keeps a
 * slice's whole parent alive, and the parent may be megabytes of agent output.
 */
export const clip = (text: string, max: number): string => {
  const trimmed = text.trim();
  const kept = trimmed.length > max ? `${trimmed.slice(0, max)}…` : trimmed;
  return kept === "" ? kept : (JSON.parse(JSON.stringify(kept)) as string);
};

export const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim();

/** The end of text, at most max characters, copied for the same reason as clip. */
export const tail = (text: string, max: number): string => {
  const trimmed = text.trim();
  const kept = trimmed.length > max ? `…${trimmed.slice(-max)}` : trimmed;
  return kept === "" ? kept : (JSON.parse(JSON.stringify(kept)) as string);
};

/** A short, single-line description of a tool call: "Bash · npm test", "Edit · src/app.ts". */
export function describeToolUse(name: string, input: unknown, maxChars = 80): string {
  if (!isRecord(input)) return name;
  const key = ["command", "file_path", "notebook_path", "path", "pattern", "url", "query", "description", "prompt"].find(
    (candidate) => typeof input[candidate] === "string" && input[candidate] !== "",
  );
  const detail = key ? (input[key] as string) : Object.keys(input).length > 0 ? JSON.stringify(input) : "";
  return detail ? `${name} · ${clip(oneLine(detail), maxChars)}` : name;
}

