/**
 * What a server needs past its opening (PROTOCOL.md §2): the job layer, the hosts, the state directory's store, the
 * carrying of its work and the request handler. main.ts loads this one module while the front door answers
 * `initialize`, so the first answer waits for none of it, and the build makes it one file with what it alone
 * imports (BENCHMARKS.md (a)); the carrier, the far end and the command line load it too.
 */
export { createJobs, lazyRuntimes, worktreeHolds } from "./jobs.js";
export { createHosts, HostSet, loadProcessControl, localHost, ownIdentity } from "./hosts.js";
export { Carrying } from "./carrying.js";
export { CarrierSlot, PresenceFiles, settingsOf } from "../store/presence.js";
export { createRequestHandler } from "../server/handler.js";
export { StateStore } from "../store/state-store.js";
export { keepHeapSmall } from "./heap.js";
export { ownIdentityAtOnce } from "../hosts/local/self.js";
