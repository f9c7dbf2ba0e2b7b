/**
 * The shape every tool answers with (PROTOCOL.md §5.5): one text block, the
 * structuredContent, isError on failures, and `next` set from the hints that
 * apply. Shared by the renderers of each tool.
 */
export interface CallToolResult<Structured = unknown> {
  content: Array<{ type: "text"; text: string }>;
  structuredContent: Structured;
  isError?: true;
}

export function toolResult<Structured>(text: string, report: Structured, isError: boolean): CallToolResult<Structured> {
  return {
    content: [{ type: "text", text }],
    structuredContent: report,
    ...(isError ? { isError: true as const } : {}),
  };
}

/** Sets `next` from the hints that apply, in order; none leaves it absent. */
export function withNext<Structured extends { next?: string }>(
  report: Structured,
  ...hints: Array<string | undefined>
): Structured {
  const next = hints.filter((hint) => hint !== undefined).join(" ");
  if (next) report.next = next;
  return report;
}
