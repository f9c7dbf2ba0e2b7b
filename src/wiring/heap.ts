/** The heap sizing of the processes that carry jobs, set once the job layer loads. */
import v8 from "node:v8";

/**
 * V8 sizes a heap for throughput, not memory: under a steady load it grows the young generation to 32 MiB and keeps
 * it while busy, and lets the old one fill with garbage to several times what is live before collecting it. A
 * server's live heap is about 10 MiB and its work I/O, so both cost memory and buy nothing: RSS climbed 37% over
 * 1200 jobs with the defaults, 17% with these (BENCHMARKS.md (q)); (i) moved less than its noise. The node command
 * is the host's choice, so they are set here, for the server and the carrier; V8 reads both each time it sizes the
 * heap.
 */
export function keepHeapSmall(): void {
  v8.setFlagsFromString("--semi-space-growth-factor=1");
  v8.setFlagsFromString("--heap-growing-percent=20");
}
