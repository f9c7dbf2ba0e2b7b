/**
 * Short renderings of what an agent printed, for every runtime: clipped copies
 * (a V8 slice keeps its whole parent alive, and the parent may be megabytes of
 * agent output) and text on one line.
 */

/** The start of text, at most max characters, as a copy of its own. */
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
