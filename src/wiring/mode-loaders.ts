/**
 * What the modes (src/wiring/server.ts and its siblings) load on first use, beyond what the job layer does. Apart
 * from Loaders, which the job layer's own modules name: this file names them in turn.
 */
import type { Loaders } from "./loaders.js";

export interface ModeLoaders extends Loaders {
  /** The job layer, the hosts, the state directory's store, the carrying of its work and the request handler. */
  serving(): Promise<typeof import("./serving.js")>;
  /** The state directory's approval endpoint (node:http), from a process's first job on (§18). */
  approvalEndpoint(): Promise<typeof import("./approvals-endpoint.js")>;
  /** Starting the carrier, by a server as it leaves or by the command line. */
  detached(): Promise<typeof import("../hosts/local/detached.js")>;
  /** The command line: for a server, only the hint it prints on a terminal. */
  commandLine(): Promise<typeof import("../cli/index.js")>;
}
