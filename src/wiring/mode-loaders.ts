/**
 * What the modes (src/wiring/server.ts and its siblings) load on first use, beyond what the job layer does. Apart
 * from Loaders, which the job layer's own modules name: this file names them in turn.
 */
import type { Loaders } from "./loaders.js";

export interface ModeLoaders extends Loaders {
  /** The job layer, the hosts and the carrying of a state directory: a server's, past its opening. */
  serving(): Promise<typeof import("./serving.js")>;
  /** The whole request handler, past the front door. */
  handler(): Promise<typeof import("../server/handler.js")>;
  /** The state directory's records, once its folders are known to be ours. */
  stateStore(): Promise<typeof import("../store/state-store.js")>;
  /** Starting the carrier, by a server as it leaves or by the command line. */
  detached(): Promise<typeof import("../hosts/local/detached.js")>;
  /** The command line: for a server, only the hint it prints on a terminal. */
  commandLine(): Promise<typeof import("../cli/index.js")>;
}
