/**
 * Short renderings of what Gemini CLI printed: clipped copies (a V8 slice keeps
 * its whole parent alive) and one-line tool summaries, cleaned for reading (PROTOCOL.md §10).
 */
import { isRecord } from "../../core/values.js";

export { clip, oneLine, tail } from "../../core/text.js";
import { clip, forReadingOnOneLine } from "../../core/text.js";

/** The CLI colours its fatal messages on stderr (unless NO_COLOR is set): the escapes go. */
export const withoutAnsi = (text: string): string => text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, "");

/** Parameter names of Gemini CLI's tools that say what a call is about, most telling first. */
const TELLING_PARAMETERS = [
  "command",
  "file_path",
  "dir_path",
  "path",
  "absolute_path",
  "pattern",
  "url",
  "query",
  "prompt",
  "description",
];

/** A short, single-line description of a tool call: "run_shell_command · npm test", "read_file · src/app.ts". */
export function describeToolCall(rawName: string, parameters: unknown, maxChars = 80): string {
  const name = forReadingOnOneLine(rawName);
  if (!isRecord(parameters)) return name;
  const key = TELLING_PARAMETERS.find(
    (candidate) => typeof parameters[candidate] === "string" && parameters[candidate] !== "",
  );
  const detail = key
    ? (parameters[key] as string)
    : Object.keys(parameters).length > 0
      ? JSON.stringify(parameters)
      : "";
  return detail ? `${name} · ${clip(forReadingOnOneLine(detail), maxChars)}` : name;
}
