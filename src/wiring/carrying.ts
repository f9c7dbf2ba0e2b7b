/**
 * Carrying a state directory's work (PROTOCOL.md §15.8): each server and the headless carrier is present in
 * servers/ while it runs, watches the others, and carries the work of one that goes (it takes over the jobs of a
 * server that died, and watches those of one still leaving until it has gone). The last server to leave with work
 * in the directory starts the carrier, which does the same with no host, and exits once idle.
 *
 * Leaving is ordered so that no work is left without a carrier: a leaver removes its presence first and looks for
 * others after; a carrier about to exit gives up its slot and its presence first and looks for orphaned work after.
 * Of a server leaving and a carrier exiting at once, one of the two therefore sees the other.
 */
import type { CancelTimer, Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import type { JobRegistry } from "../jobs/registry.js";
import type { CarrierSlot, Presence, PresenceFiles, PresenceRole } from "../store/presence.js";
import type { ProcessIdentity } from "../store/records.js";

/** While other processes are present, how often they are checked for one that died (a departure is noticed at once). */
const PRESENCE_POLL_MS = 1000;
/** The carrier exits once it has had nothing to carry for this long. */
export const CARRIER_IDLE_MS = 2000;
/** How often the carrier asks whether it is idle. */
const IDLE_CHECK_MS = 250;

export interface CarryingParts {
  presence: PresenceFiles;
  jobs: JobRegistry;
  self: ProcessIdentity;
  /** The CLAUDE_DISPATCH_* settings this process runs with, for a carrier started in its place. */
  settings: Record<string, string>;
  isAlive(identity: ProcessIdentity): Promise<boolean | undefined>;
  /** Before jobs are taken over here: their agents ask this process's approval endpoint from then on (§18). */
  beforeCarrying?(): Promise<void>;
  clock: Clock;
  logger: Logger;
}

function sameProcess(a: ProcessIdentity, b: ProcessIdentity): boolean {
  return a.pid === b.pid && (a.start_time === undefined || b.start_time === undefined || a.start_time === b.start_time);
}

export class Carrying {
  private removeSelf: (() => void) | undefined;
  private stopWatching: (() => void) | undefined;
  private cancelPoll: CancelTimer | undefined;
  /** The others present at the last look, by file name. */
  private known = new Map<string, Presence>();
  private looking: Promise<void> | undefined;
  private lookAgain = false;
  private left = false;

  constructor(private readonly parts: CarryingParts) {}

  /**
   * Present from now on, as a server or as the carrier (`present`: already, by present()); departures of the
   * others are carried. The first look at them runs in the background: a server answers `initialize` without
   * waiting for it.
   */
  join(role: PresenceRole, present?: () => void): void {
    // A process that began to leave before it joined stays away.
    if (this.left) return;
    this.removeSelf = present ?? this.present(role);
    this.stopWatching = this.parts.presence.watch(() => void this.look());
    void this.look();
  }

  /** This process's presence file alone, without watching the others yet; the function returned removes it. */
  present(role: PresenceRole): () => void {
    const { presence, self, settings, clock } = this.parts;
    return presence.add({ ...self, role, since: clock.now(), settings });
  }

  /** No longer present, nor watching: called first when this process leaves. */
  leave(): void {
    this.left = true;
    this.removeSelf?.();
    this.removeSelf = undefined;
    this.stopWatching?.();
    this.stopWatching = undefined;
    this.cancelPoll?.();
    this.cancelPoll = undefined;
  }

  /** The other processes present and not known to be gone. */
  async liveOthers(): Promise<Presence[]> {
    const others = this.parts.presence.list().filter(({ presence }) => !sameProcess(presence, this.parts.self));
    const alive = await Promise.all(
      others.map(async ({ presence }) => ((await this.parts.isAlive(presence)) !== false ? presence : undefined)),
    );
    return alive.filter((presence): presence is Presence => presence !== undefined);
  }

  /** A job's owner carries it while it is this process or another present one that lives. */
  async carried(): Promise<(owner: ProcessIdentity) => boolean> {
    const live = await this.liveOthers();
    const present = this.removeSelf ? [this.parts.self, ...live] : live;
    return (owner) => present.some((carrier) => sameProcess(carrier, owner));
  }

  /** Carries every orphan now: the work of servers that went or died. */
  async sweep(): Promise<number> {
    const carried = await this.carried();
    if (this.parts.beforeCarrying && this.parts.jobs.findOrphans(carried).length > 0) await this.parts.beforeCarrying();
    return this.parts.jobs.carryOrphans(carried);
  }

  /** Reads the others again; a departure (a presence removed, or one whose process died) is carried at once. */
  private async look(): Promise<void> {
    if (this.looking) {
      this.lookAgain = true;
      return this.looking;
    }
    this.looking = (async () => {
      do {
        this.lookAgain = false;
        await this.lookOnce();
      } while (this.lookAgain && this.removeSelf);
    })().finally(() => (this.looking = undefined));
    return this.looking;
  }

  private async lookOnce(): Promise<void> {
    try {
      await this.readOthers();
    } catch (error) {
      this.parts.logger.error(`cannot read who else carries the state directory: ${(error as Error).message}`);
    }
    this.schedulePoll();
  }

  private async readOthers(): Promise<void> {
    const { presence, logger } = this.parts;
    const listed = presence.list().filter(({ presence: other }) => !sameProcess(other, this.parts.self));
    const dead: string[] = [];
    for (const { name, presence: other } of listed) if ((await this.parts.isAlive(other)) === false) dead.push(name);
    const departed =
      [...this.known.keys()].some((name) => !listed.some((entry) => entry.name === name)) || dead.length > 0;
    this.known = new Map(
      listed.filter(({ name }) => !dead.includes(name)).map(({ name, presence: other }) => [name, other]),
    );
    if (departed && this.removeSelf) {
      try {
        const carried = await this.sweep();
        if (carried > 0) logger.info(`carrying ${carried} job(s) of a server that went`);
        // Theirs are carried here now: a carrier started in their place is not needed, nor are their settings.
        for (const name of dead) presence.remove(name);
      } catch (error) {
        logger.error(`cannot carry the jobs of a server that went: ${(error as Error).message}`);
      }
    }
  }

  /** Only while others are present: their death makes no file-system event. */
  private schedulePoll(): void {
    this.cancelPoll?.();
    this.cancelPoll = undefined;
    if (!this.removeSelf || (this.known.size === 0 && this.stopWatching)) return;
    this.cancelPoll = this.parts.clock.setTimer(() => {
      this.cancelPoll = undefined;
      void this.look();
    }, PRESENCE_POLL_MS);
  }

  /**
   * A leaving server: after leave(), whether a carrier must be started. Not while another process is present
   * (it carries what this one leaves), nor when nothing is left: nothing running, queued or watched here, and no
   * orphan in the directory.
   */
  async needsCarrier(): Promise<boolean> {
    if ((await this.liveOthers()).length > 0) return false;
    return !this.parts.jobs.isIdle() || this.parts.jobs.findOrphans(() => false).length > 0;
  }

  /**
   * The carrier's life once it holds the slot and has taken over: carries until it has been idle for
   * CARRIER_IDLE_MS, then gives up its slot and presence; it goes on if orphans appeared meanwhile and it can
   * hold the slot again. Resolves when it may exit.
   */
  async carry(slot: CarrierSlot): Promise<void> {
    const { jobs, clock, logger } = this.parts;
    await this.sweep();
    let idleSince: number | undefined;
    for (;;) {
      await new Promise<void>((resolve) => clock.setTimer(resolve, IDLE_CHECK_MS));
      if (!jobs.isIdle()) {
        idleSince = undefined;
        continue;
      }
      idleSince ??= clock.now();
      if (clock.now() - idleSince < CARRIER_IDLE_MS) continue;
      this.leave();
      slot.release();
      const isCarried = await this.carried();
      if (jobs.findOrphans(isCarried).length === 0 && jobs.isIdle()) return;
      if (!(await slot.take(this.parts.isAlive))) {
        logger.info("work appeared as this carrier was leaving; the carrier that holds the slot now carries it");
        return;
      }
      logger.info("work appeared as this carrier was leaving; carrying on");
      this.left = false;
      this.join("carrier");
      await this.sweep();
      idleSince = undefined;
    }
  }
}
