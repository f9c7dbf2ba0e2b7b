/**
 * Finding a recorded agent in this machine's process table (PROTOCOL.md §15.3): its pid checked against its start
 * time or tree marker, or, for a record written before the spawn, the process carrying its marker. This process's
 * own tree and another job's agent are never taken for it, whatever a record says.
 */
import type { LocatedAgent, NamedProcess, RecordedAgent } from "../../agent/host.js";

/** What locating needs of the process table (hosts/local/types.ts ProcessControl). */
export interface ProcessTable {
  isAlive(pid: number, startTime: string | undefined, marker?: string): Promise<boolean | undefined>;
  findMarked(marker: string): Promise<{ pid: number; startTime: string } | null | undefined>;
  isOwnTree?(pid: number, startTime: string | undefined): Promise<boolean | undefined>;
}

/** This process as its records name it. */
export interface Self {
  pid: number;
  start_time?: string | undefined;
}

/**
 * Where a running job's agent is now. A recorded pid is checked (unknown counts as alive: it is followed, and its
 * liveness polled until it can be told). A record written just before the spawn has only the tree marker: the
 * agent is looked for by it.
 */
export async function locateInTable(
  { agent }: RecordedAgent,
  table: ProcessTable,
  self: Self,
  othersAgent: (agent: NamedProcess) => boolean,
): Promise<LocatedAgent> {
  const notItsAgent = async (pid: number, startTime: string | undefined, marker?: string): Promise<boolean> => {
    if (othersAgent({ pid, start_time: startTime, tree_marker: marker })) return true;
    if (pid === self.pid && (startTime === undefined || startTime === self.start_time)) return true;
    return (await table.isOwnTree?.(pid, startTime)) === true;
  };
  if (!agent) return { state: "unrecorded" };
  const { pid, start_time: startTime, tree_marker: marker } = agent;
  if (pid !== undefined && (await notItsAgent(pid, startTime, marker))) return { state: "not its agent", pid };
  // This process's pid with another start time: a record older than the pid's reuse; only the marker is trusted.
  if (pid !== undefined && pid !== self.pid) {
    const alive = (await table.isAlive(pid, startTime, marker)) !== false;
    return { state: alive ? "alive" : "gone", pid, startTime };
  }
  const found = marker === undefined ? undefined : await table.findMarked(marker);
  if (found === undefined) return { state: "unrecorded" };
  if (found === null) return { state: "gone", pid: undefined, startTime: undefined };
  if (await notItsAgent(found.pid, found.startTime)) return { state: "not its agent", pid: found.pid };
  return { state: "alive", pid: found.pid, startTime: found.startTime };
}
