/**
 * Waiting on what happens rather than for a while: a read of the process table, a file an agent writes,
 * a line a server prints. Each wait is bounded, so a behaviour that never comes fails with its name
 * instead of hanging the suite; the bound is a backstop, never what a test asserts.
 */
import { existsSync, readFileSync, watch } from "node:fs";
import path from "node:path";

import type { PosixPlatform, ProcessInfo } from "../../src/hosts/local/index.js";
import type { ServerProcess } from "../server-process.js";

const BACKSTOP_MS = 30_000;

/**
 * Settles as arm says, or rejects naming what after the backstop; arm returns what undoes it, which runs, and
 * the timer is cleared, however it ends.
 */
export function eventually<T>(
  what: string,
  arm: (resolve: (value: T) => void, reject: (error: unknown) => void) => () => void,
  backstopMs = BACKSTOP_MS,
): Promise<T> {
  let disarm = (): void => undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  return new Promise<T>((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`never happened within ${backstopMs} ms: ${what}`)), backstopMs);
    disarm = arm(resolve, reject);
  }).finally(() => {
    clearTimeout(timer);
    disarm();
  });
}

/** The promise's value, with the backstop of eventually. */
export function bounded<T>(what: string, promise: Promise<T>): Promise<T> {
  return eventually<T>(what, (resolve, reject) => (void promise.then(resolve, reject), () => undefined));
}

/** Conditions a test awaits, checked again each time the code under test tells the watch that something happened. */
export class Watch {
  private readonly checks = new Set<() => void>();

  changed(): void {
    for (const check of [...this.checks]) check();
  }

  /** Resolves with found's first value other than undefined, checked now and at each change. */
  until<T>(what: string, found: () => T | undefined): Promise<T> {
    return eventually<T>(what, (resolve) => {
      const check = (): void => {
        const value = found();
        if (value !== undefined) resolve(value);
      };
      this.checks.add(check);
      check();
      return () => void this.checks.delete(check);
    });
  }
}

export interface ObservedPlatform {
  platform: PosixPlatform;
  /**
   * Resolves after the process layer has read a table that shows and has taken in what it read (its trees
   * grown from it): the wait for "one tree refresh", as an event.
   */
  tableRead(what: string, shows: (table: ReadonlyMap<number, ProcessInfo>) => boolean): Promise<void>;
}

/** The platform with every read of the process table announced to the test. */
export function observedPlatform(base: PosixPlatform): ObservedPlatform {
  const listeners = new Set<(table: ReadonlyMap<number, ProcessInfo>) => void>();
  const platform: PosixPlatform = {
    ...base,
    listProcesses: async (request) => {
      const list = await base.listProcesses(request);
      const table = new Map(list.map((info) => [info.pid, info]));
      for (const listener of [...listeners]) listener(table);
      return list;
    },
  };
  const tableRead = (what: string, shows: (table: ReadonlyMap<number, ProcessInfo>) => boolean): Promise<void> =>
    eventually<void>(what, (resolve) => {
      const listener = (table: ReadonlyMap<number, ProcessInfo>): void => {
        if (!shows(table)) return;
        listeners.delete(listener);
        // The reader grows its trees synchronously once this read's promise settles: one macrotask later it has.
        setImmediate(resolve);
      };
      listeners.add(listener);
      return () => void listeners.delete(listener);
    });
  return { platform, tableRead };
}

/** Resolves with a file's text once it exists and accept says it is whole (by default: ends with a newline). */
export function fileWritten(file: string, accept = (text: string) => text.endsWith("\n")): Promise<string> {
  return eventually<string>(`${file} written`, (resolve) => {
    const check = (): void => {
      const text = existsSync(file) ? readFileSync(file, "utf8") : "";
      if (text !== "" && accept(text)) resolve(text);
    };
    const watcher = watch(path.dirname(file), check);
    // Written before the watch began: no event will tell.
    check();
    return () => watcher.close();
  });
}

/** Resolves with the first line the server printed (already, or from now on) that matches. */
export function lineFrom(
  server: ServerProcess,
  what: string,
  matches: (message: Record<string, any>) => boolean,
): Promise<Record<string, any>> {
  return eventually<Record<string, any>>(what, (resolve) => {
    let seen = 0;
    const check = (): void => {
      // ServerProcess listened first, so its lines already hold this chunk's.
      for (; seen < server.lines.length; seen += 1) {
        const message = JSON.parse(server.lines[seen] as string) as Record<string, any>;
        if (matches(message)) return resolve(message);
      }
    };
    server.child.stdout.on("data", check);
    check();
    return () => void server.child.stdout.off("data", check);
  });
}
