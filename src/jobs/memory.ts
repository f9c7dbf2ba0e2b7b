/**
 * Persistence in memory (store/memory-store.ts) for a registry whose jobs
 * end with its server: the unit tests, and a server at the depth limit.
 */
import { Transcript } from "../core/transcript.js";
import { MemoryStore } from "../store/memory-store.js";
import type { Persistence, Slot, SlotPool } from "./types.js";

export function memoryPersistence(overrides: Partial<Persistence> = {}): Persistence {
  let markers = 0;
  return {
    store: new MemoryStore(),
    owner: { pid: 1 },
    replayTranscript: () => new Transcript(0),
    maxBytes: Number.POSITIVE_INFINITY,
    newMarker: () => `memory-${(markers += 1)}`,
    isAlive: async () => true,
    ...overrides,
  };
}

/** One server's slots, counted in memory: nobody else takes them. */
export function memorySlots(count: number): SlotPool {
  let used = 0;
  let generation = 0;
  const take = (): Slot | undefined =>
    used < count ? ((used += 1), { index: used - 1, generation: (generation += 1) }) : undefined;
  return {
    shared: false,
    take,
    reclaim: async () => take(),
    // An agent taken over runs whatever the count: it counts, as a running one must.
    inherit: () => ((used += 1), { index: used - 1, generation: (generation += 1) }),
    give: () => void (used -= 1),
    onChange: () => () => undefined,
  };
}
