/**
 * Persistence in memory (store/memory-store.ts) for a registry whose jobs
 * end with its server: the unit tests, and a server at the depth limit.
 */
import { Transcript } from "../core/transcript.js";
import { MemoryStore } from "../store/memory-store.js";
import type { Persistence } from "./types.js";

export function memoryPersistence(overrides: Partial<Persistence> = {}): Persistence {
  let markers = 0;
  return {
    store: new MemoryStore(),
    owner: { pid: 1 },
    attach: () => {
      throw new Error("a store in memory has no jobs of earlier servers to attach to");
    },
    replayTranscript: () => new Transcript(0),
    maxBytes: Number.POSITIVE_INFINITY,
    newMarker: () => `memory-${(markers += 1)}`,
    isAlive: async () => true,
    admit: async (spec) => spec,
    ...overrides,
  };
}
