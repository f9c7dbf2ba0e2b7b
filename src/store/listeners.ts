/**
 * Listeners put on a Node object that outlives its use: an exited child process, its pipes, a closed watcher.
 * Node keeps each reachable from its handle until V8's next full collection, and every young collection until
 * then keeps what their listeners' closures reach (a job's whole run, promoted once per job: BENCHMARKS.md (q)).
 * So they are taken off together once the object is done with, and what stays captures nothing.
 */
import type { EventEmitter } from "node:events";

/** Node's own listener type: each event passes arguments of its own. */
type Listener = Parameters<EventEmitter["on"]>[1];

/** Captures nothing: the 'error' listener a finished object keeps, as an 'error' with none is thrown. */
export function ignoreError(): void {}

export class ListenerSet {
  private added: Array<{ emitter: EventEmitter; event: string; listener: Listener }> = [];

  on(emitter: EventEmitter | null | undefined, event: string, listener: Listener): void {
    if (!emitter) return;
    emitter.on(event, listener);
    this.added.push({ emitter, event, listener });
  }

  once(emitter: EventEmitter, event: string, listener: Listener): void {
    emitter.once(event, listener);
    this.added.push({ emitter, event, listener });
  }

  /** Takes them all off; where there was an 'error' listener, ignoreError stays. */
  release(): void {
    const added = this.added;
    this.added = [];
    for (const { emitter, event, listener } of added) emitter.off(event, listener);
    for (const { emitter, event } of added)
      if (event === "error" && emitter.listenerCount("error") === 0) emitter.on("error", ignoreError);
  }
}
