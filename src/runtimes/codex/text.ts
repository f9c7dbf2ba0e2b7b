/**
 * Short renderings of what Codex printed: clipped copies (a V8 slice keeps its
 * whole parent alive) and one-line tool summaries, cleaned for reading (PROTOCOL.md §10).
 */
import { isRecord } from "../../core/values.js";

export { clip, oneLine, tail } from "../../core/text.js";
import { clip, forReadingOnOneLine } from "../../core/text.js";

/**
 * Codex reports a command as the shell line it ran, `/bin/bash -lc 'echo hi'`
 * (double quotes when the script has a single quote in it). The script alone
 * is what the model asked for; anything else is shown as printed.
 */
const SHELL_WRAPPER = /^(?:\S*\/)?(?:bash|sh|zsh) -l?c (?:'([^']*)'|"((?:[^"\\]|\\.)*)")$/s;

export function shellScript(command: string): string {
  const match = SHELL_WRAPPER.exec(command.trim());
  if (!match) return command;
  return match[1] ?? (match[2] ?? "").replace(/\\(["\\$`])/g, "$1");
}

/** A one-line tool call for the live summary and the transcript: "shell · npm test". */
export function describeTool(name: string, detail: string, maxChars = 80): string {
  const line = clip(forReadingOnOneLine(detail), maxChars);
  return line ? `${forReadingOnOneLine(name)} · ${line}` : forReadingOnOneLine(name);
}

/** An MCP tool's arguments on one line: a likely main argument, else the JSON. */
export function mcpArguments(args: unknown): string {
  if (!isRecord(args)) return typeof args === "string" ? args : "";
  const key = ["command", "path", "file_path", "url", "query", "pattern"].find(
    (candidate) => typeof args[candidate] === "string" && args[candidate] !== "",
  );
  return key ? (args[key] as string) : Object.keys(args).length > 0 ? JSON.stringify(args) : "";
}

/** The text blocks of an MCP result's content. */
export function contentText(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .filter(
      (block): block is { type: "text"; text: string } =>
        isRecord(block) && block.type === "text" && typeof block.text === "string",
    )
    .map((block) => block.text)
    .join("\n");
}
