/** macOS and the BSDs: the process table from ps, where there is no /proc. */
import type { ProcessInfo } from "../types.js";

/** The argv for ps on macOS and the BSDs, where there is no /proc. */
export const PS_ARGS = ["-A", "-o", "pid=", "-o", "ppid=", "-o", "pgid=", "-o", "stat=", "-o", "lstart="] as const;

/** Parses `ps -A -o pid= -o ppid= -o pgid= -o stat= -o lstart=`; lstart is the rest of the line. */
export function parsePsOutput(text: string): ProcessInfo[] {
  const found: ProcessInfo[] = [];
  for (const line of text.split("\n")) {
    const match = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(.+?)\s*$/.exec(line);
    if (!match) continue;
    const [, pid, ppid, pgid, stat, lstart] = match;
    found.push({
      pid: Number(pid),
      ppid: Number(ppid),
      pgid: Number(pgid),
      sid: undefined,
      startTime: lstart ?? "",
      zombie: (stat ?? "").startsWith("Z"),
    });
  }
  return found;
}
