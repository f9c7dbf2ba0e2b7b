/**
 * An agent's outcome made safe to read (PROTOCOL.md §10): its texts came from the agent, or from the host that
 * ran it. Cleaned where an outcome is made (the launcher) and where one is read back from a record.
 */
import { forReading, forReadingOnOneLine, valueForReading } from "../core/text.js";
import type { AgentOutcome, AgentResult, PermissionDenial } from "./types.js";

export function outcomeForReading(outcome: AgentOutcome): AgentOutcome {
  const result = outcome.result && resultForReading(outcome.result);
  if (outcome.ok) return { ...outcome, result: result ?? {} };
  return { ...outcome, detail: forReading(outcome.detail), ...(result ? { result } : {}) };
}

function resultForReading(result: AgentResult): AgentResult {
  const { sessionId, text, permissionDenials } = result;
  return {
    ...result,
    ...(sessionId === undefined ? {} : { sessionId: forReadingOnOneLine(sessionId) }),
    ...(text === undefined ? {} : { text: forReading(text) }),
    ...(permissionDenials === undefined ? {} : { permissionDenials: permissionDenials.map(denialForReading) }),
  };
}

function denialForReading({ tool_name, tool_input }: PermissionDenial): PermissionDenial {
  const input = tool_input === undefined ? {} : { tool_input: valueForReading(tool_input) };
  return { tool_name: forReadingOnOneLine(tool_name), ...input };
}
