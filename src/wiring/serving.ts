/**
 * What a server needs past its opening (PROTOCOL.md §2), but for the request handler: the job layer, the hosts and the
 * carrying of the state directory. main.ts loads this module while the front door answers `initialize`, so the
 * first answer waits for none of it (BENCHMARKS.md (a)); the carrier, the far end and the command line load it too.
 */
export { createJobs, lazyRuntimes, worktreeHolds } from "./jobs.js";
export { createHosts, HostSet, loadProcessControl, localHost, ownIdentity } from "./hosts.js";
export { Carrying } from "./carrying.js";
export { holdApprovalEndpoint } from "./approvals-endpoint.js";
export { CarrierSlot, PresenceFiles, settingsOf } from "../store/presence.js";
export { keepHeapSmall } from "./heap.js";
export { ownIdentityAtOnce } from "../hosts/local/self.js";
