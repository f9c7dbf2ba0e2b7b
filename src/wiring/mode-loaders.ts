/**
 * What the modes (src/wiring/server.ts and its siblings) load on first use, beyond what the job layer does. Apart
 * from Loaders, which the job layer's own modules name: this file names them in turn.
 */
import type { Loaders } from "./loaders.js";

export interface ModeLoaders extends Loaders {
  /** A server past its opening: the job layer, the request handler and the shutdown. */
  serving(): Promise<typeof import("./serving.js")>;
  /** The command line: for a server, only the hint it prints on a terminal. */
  commandLine(): Promise<typeof import("../cli/index.js")>;
}
