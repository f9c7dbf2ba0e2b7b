/**
 * Who carries the state directory's work (PROTOCOL.md §15.8), as the command line sees it, and the carrier
 * started in place of a server or carrier that died, so that `jobs`, `show`, `logs` and `kill` report what
 * really happened: the command waits until the carrier has taken the orphaned jobs over, as a restarting server
 * would, so their records say how each ended.
 */
import { sleep } from "../core/clock.js";
import type { ProcessControl } from "../agent/host.js";
import { PresenceFiles, type Presence } from "../store/presence.js";
import { isFinishedStatus, type JobRecord } from "../store/records.js";
import { loadProcessControl, type Context } from "./context.js";

/** How long a command waits for the carrier it started to take the orphans over. */
export const CARRIER_START_WAIT_MS = 5000;
const CARRIER_POLL_MS = 50;

export interface Carriers {
  /** The processes carrying the directory's work now: servers, or the carrier. */
  carriedBy: Array<Pick<Presence, "pid" | "role" | "since">>;
  /** Unfinished jobs whose owner is gone while nothing carries them. */
  waiting: number;
  /** Why nothing carries them, when something should. */
  why?: string;
  /** The carrier this command started, if it did. */
  started?: number;
}

/**
 * Who carries the work now; when nothing does and jobs were left by a server or carrier that died (its presence
 * is still on file), a carrier is started with that process's settings and waited for.
 */
export async function carry(context: Context): Promise<Carriers> {
  try {
    return await carryNow(context);
  } catch (error) {
    // What the command was asked for still comes: only who carries the work is not known.
    context.io.stderr.write(`claude-dispatch: cannot tell what carries the jobs: ${(error as Error).message}\n`);
    return { carriedBy: [], waiting: 0 };
  }
}

/**
 * Why nothing will end a job its record says is unfinished: its owner is gone and nothing took it over, and
 * nothing can (no carrier could be started), or a carrier runs but has left it alone for `patienceMs`; undefined
 * while it is carried. `goneSince` keeps, between calls, when its owner was first seen gone.
 */
export async function whyNotCarried(
  context: Context,
  record: JobRecord,
  control: ProcessControl,
  goneSince: { at?: number },
  patienceMs: number,
): Promise<string | undefined> {
  if ((await control.isAlive(record.owner.pid, record.owner.start_time)) !== false) {
    goneSince.at = undefined;
    return undefined;
  }
  const carriers = await carry(context);
  if (carriers.carriedBy.length === 0) return carriers.why ?? "no server or carrier runs";
  const now = context.io.clock.now();
  goneSince.at ??= now;
  if (now - goneSince.at < patienceMs) return undefined;
  return `its server is gone, and ${carriersNamed(carriers)} has not taken it over`;
}

async function carryNow(context: Context): Promise<Carriers> {
  const { store, io } = context;
  const presence = new PresenceFiles(store.root, () => io.randomName());
  const entries = presence.list();
  // Finished jobs are in the index (§15.5): only the others' records are read.
  const unfinished = store.loadForStartup().records.filter((record) => !isFinishedStatus(record.status));
  if (unfinished.length === 0 && entries.length === 0) return { carriedBy: [], waiting: 0 };
  // No process of this version has been here since: nothing runs that could carry them, nor was one replaced.
  if (entries.length === 0)
    return {
      carriedBy: [],
      waiting: unfinished.length,
      why: "no server or carrier runs; the next server takes them over",
    };
  const control = await loadProcessControl(io);
  const alive = await liveOf(
    control,
    entries.map((entry) => entry.presence),
  );
  const orphans = await orphansOf(control, unfinished);
  if (alive.length > 0) {
    // A carrier that has just started is taking them over: read after it has. (A job no one here can run, of
    // another host or runtime, stays an orphan: no wait for it past a carrier's first moments.)
    const starting = alive.some(
      (presence) => presence.role === "carrier" && io.clock.now() - presence.since < CARRIER_START_WAIT_MS,
    );
    if (orphans.length > 0 && starting) await untilTakenOver(context, orphans);
    return { carriedBy: alive.map(shortPresence), waiting: 0 };
  }
  if (orphans.length === 0) return { carriedBy: [], waiting: 0 };
  const left = entries.map((entry) => entry.presence).sort((a, b) => b.since - a.since)[0] as Presence;
  if (!io.startCarrier) return { carriedBy: [], waiting: orphans.length, why: "this command cannot start the carrier" };
  let started: number;
  try {
    // The settings of the process that died: the policy and limits its jobs were admitted under.
    const env = Object.fromEntries(Object.entries(io.env).filter(([name]) => !name.startsWith("CLAUDE_DISPATCH_")));
    started = await io.startCarrier(store.root, { ...env, ...left.settings, CLAUDE_DISPATCH_STATE_DIR: store.root });
  } catch (error) {
    return {
      carriedBy: [],
      waiting: orphans.length,
      why: `the carrier could not be started: ${(error as Error).message}`,
    };
  }
  const taken = await untilTakenOver(context, orphans);
  const carriedBy = (
    await liveOf(
      control,
      presence.list().map((entry) => entry.presence),
    )
  ).map(shortPresence);
  if (!taken)
    return {
      carriedBy,
      waiting: orphans.length,
      started,
      why: `the carrier has not taken them over; its log is ${store.root}/carrier.log`,
    };
  return { carriedBy, waiting: 0, started };
}

/**
 * Waits until every orphan has a new owner or has finished: the carrier has taken it over, and one whose agent
 * ended has its final record. False after CARRIER_START_WAIT_MS.
 */
async function untilTakenOver(context: Context, orphans: readonly JobRecord[]): Promise<boolean> {
  const left = (orphan: JobRecord): boolean => {
    const now = context.store.read(orphan.id);
    return now !== undefined && !isFinishedStatus(now.status) && now.generation === orphan.generation;
  };
  // Counted in polls, not read off the clock: a clock that stands still (a test's) still ends the wait.
  for (let polls = 0; polls < CARRIER_START_WAIT_MS / CARRIER_POLL_MS; polls += 1) {
    if (!orphans.some(left)) return true;
    await sleep(context.io.clock, CARRIER_POLL_MS);
  }
  return !orphans.some(left);
}

async function liveOf(control: ProcessControl, presences: readonly Presence[]): Promise<Presence[]> {
  const alive = await Promise.all(
    presences.map(async (presence) =>
      (await control.isAlive(presence.pid, presence.start_time)) !== false ? presence : undefined,
    ),
  );
  return alive.filter((presence): presence is Presence => presence !== undefined);
}

async function orphansOf(control: ProcessControl, unfinished: readonly JobRecord[]): Promise<JobRecord[]> {
  const gone = await Promise.all(
    unfinished.map(async (record) => (await control.isAlive(record.owner.pid, record.owner.start_time)) === false),
  );
  return unfinished.filter((_, index) => gone[index]);
}

function shortPresence(presence: Presence): Pick<Presence, "pid" | "role" | "since"> {
  return { pid: presence.pid, role: presence.role, since: presence.since };
}

/** Who carries the work, in words: "server 123, the carrier (pid 456)". */
function carriersNamed(carriers: Carriers): string {
  return carriers.carriedBy
    .map((by) =>
      by.role === "carrier"
        ? `the carrier (pid ${by.pid}${carriers.started === by.pid ? ", started now" : ""})`
        : `server ${by.pid}`,
    )
    .join(", ");
}

/** One line under `jobs`: who carries the work, or that nothing does and why. */
export function carriersText(carriers: Carriers): string {
  const { carriedBy, waiting, why } = carriers;
  if (carriedBy.length > 0) return `Carried by ${carriersNamed(carriers)}.\n`;
  if (waiting === 0) return "";
  return (
    `Nothing carries ${waiting} unfinished job${waiting === 1 ? "" : "s"}: ` +
    `${why ?? "no server or carrier runs"}.\n`
  );
}
