/**
 * Short renderings of what the agent printed: clipped copies (a V8 slice keeps its
 * whole parent alive) and one-line tool summaries, cleaned for reading (PROTOCOL.md §10).
 */
import { isRecord } from "../../core/values.js";

export { clip, oneLine, tail } from "../../core/text.js";
import { clip, forReadingOnOneLine } from "../../core/text.js";

/** A short, single-line description of a tool call: "Bash · npm test", "Edit · src/app.ts". */
export function describeToolUse(rawName: string, input: unknown, maxChars = 80): string {
  const name = forReadingOnOneLine(rawName);
  if (!isRecord(input)) return name;
  const key = [
    "command",
    "file_path",
    "notebook_path",
    "path",
    "pattern",
    "url",
    "query",
    "description",
    "prompt",
  ].find((candidate) => typeof input[candidate] === "string" && input[candidate] !== "");
  const detail = key ? (input[key] as string) : Object.keys(input).length > 0 ? JSON.stringify(input) : "";
  return detail ? `${name} · ${clip(forReadingOnOneLine(detail), maxChars)}` : name;
}
