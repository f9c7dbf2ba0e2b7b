/**
 * The approval endpoint of a state directory (PROTOCOL.md §18, docs/approvals.md), as a server or the carrier
 * holds it: one port for the directory, recorded with its secret in the directory, served by one live process
 * of ours at a time. The others stand by and take the port over when its holder goes.
 */
import { randomBytes, randomInt } from "node:crypto";

import { approvalFilesOf, createApprover, type Approver } from "../approver/approver.js";
import { ApprovalEndpoint, jobUrl, tokenFor } from "../approver/endpoint.js";
import type { EndpointAddress } from "../agent/host.js";
import type { Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { EndpointFile, type EndpointRecord } from "../store/endpoint-file.js";
import type { StateStore } from "../store/state-store.js";

/**
 * Where a new port is chosen: below every system's range of ports for outgoing connections (Linux 32768-60999,
 * macOS and Windows 49152-65535). A port from that range, free while its holder is away, can become the source port
 * of some connection, or of the agent's own reconnection, which then reaches itself and waits for ever.
 */
const PORT_RANGE = { from: 20000, to: 32768 };
const PORT_TRIES = 20;
/** A process standing by tries the port this often. */
const STANDBY_RETRY_MS = 5000;
/** Approvers kept, the one made first dropped first: each knows where its job's next request is filed. */
const APPROVERS_KEPT = 256;

export interface HeldEndpoint {
  addressOf(jobId: string): EndpointAddress | undefined;
  close(): Promise<void>;
}

export interface EndpointParts {
  store: StateStore;
  clock: Clock;
  logger: Logger;
  /** How long a request waits for an answer before it is denied. */
  waitMs: number;
  /** Whether another live process of ours shares the directory: the port's holder, when it is in use. */
  othersPresent(): Promise<boolean>;
}

/** The directory's secret and port (0: none chosen yet), made by the first process to come. */
function recordedEndpoint(file: EndpointFile): EndpointRecord {
  const recorded = file.read();
  if (recorded) return recorded;
  const made = { port: 0, secret: randomBytes(32).toString("hex") };
  if (file.create(made)) return made;
  // Another process made it first; what it made stands. One that is not whole is replaced.
  const theirs = file.read();
  if (theirs) return theirs;
  file.write(made);
  return made;
}

/** Holds the directory's endpoint, or stands by for it; resolves once either is settled. */
export async function holdApprovalEndpoint(parts: EndpointParts): Promise<HeldEndpoint> {
  const { store, clock, logger, waitMs } = parts;
  const file = new EndpointFile(store.root, () => randomBytes(8).toString("hex"));
  const { secret } = recordedEndpoint(file);
  const approvers = new Map<string, Approver>();
  const endpoint = new ApprovalEndpoint({
    secret,
    clock,
    logger,
    approverFor: (jobId) => {
      const known = approvers.get(jobId);
      if (known) return known;
      if (store.read(jobId) === undefined) return undefined;
      const approver = createApprover({ jobId, files: approvalFilesOf(store, jobId), clock, logger, waitMs });
      if (approvers.size >= APPROVERS_KEPT) approvers.delete(approvers.keys().next().value as string);
      approvers.set(jobId, approver);
      return approver;
    },
  });
  /** The port agents are given: ours, or the holder's while we stand by; undefined when no one of ours serves. */
  let port: number | undefined;
  let closed = false;
  let cancelRetry = (): void => undefined;

  const standBy = (recorded: number): void => {
    port = recorded;
    cancelRetry = clock.setTimer(() => void take().catch(report), STANDBY_RETRY_MS);
  };
  /** Serves the recorded port if it is free; one held by no process of ours is given up for a new one. */
  const take = async (): Promise<void> => {
    if (closed || endpoint.listening !== undefined) return;
    const recorded = file.read()?.port ?? 0;
    const bound = recorded === 0 ? "in use" : await endpoint.listen(recorded);
    if (bound !== "in use") {
      port = bound;
      logger.info(`approval endpoint on 127.0.0.1:${bound}`);
      return;
    }
    if (recorded !== 0 && (await parts.othersPresent())) return standBy(recorded);
    let fresh: number | "in use" = "in use";
    for (let tries = 0; tries < PORT_TRIES && fresh === "in use"; tries += 1)
      fresh = await endpoint.listen(randomInt(PORT_RANGE.from, PORT_RANGE.to));
    if (fresh === "in use") throw new Error(`no free port in ${PORT_RANGE.from}-${PORT_RANGE.to - 1}`);
    file.write({ port: fresh, secret });
    // Two processes that chose at once: the one whose port was recorded last serves, the other stands by.
    const settled = file.read()?.port;
    if (settled !== fresh && settled !== undefined && settled !== 0) {
      await endpoint.close();
      return standBy(settled);
    }
    port = fresh;
    logger.info(`approval endpoint on 127.0.0.1:${fresh} (a new port)`);
  };
  const report = (error: unknown): void => {
    port = endpoint.listening;
    logger.warn(`approval endpoint: ${(error as Error).message}; agents started meanwhile run their own approver`);
  };
  await take().catch(report);
  return {
    addressOf: (jobId) =>
      port === undefined ? undefined : { url: jobUrl(port, jobId), token: tokenFor(secret, jobId) },
    close: async () => {
      closed = true;
      cancelRetry();
      await endpoint.close();
    },
  };
}
