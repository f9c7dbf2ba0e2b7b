/**
 * runCli in process for the command-line tests: an environment built from
 * nothing but the state directory (the runner's never leaks in), captured
 * stdout and stderr, and whatever the test injects in place of the clock,
 * the process layer and running programs.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import path from "node:path";
import { PassThrough } from "node:stream";

import { runCli, type CliIo } from "../src/cli/index.js";
import { systemClock, type Clock } from "../src/core/clock.js";
import { StateStore } from "../src/store/state-store.js";
import { localHosts, machineOf } from "./host-fakes.js";

export const HOME = "/home/tester";

export interface CliSetup {
  stateDir: string;
  /** Default: a fixed 2025-06-01T12:00:00Z with real timers. */
  clock?: Clock;
  terminal?: boolean;
  interrupted?: AbortSignal;
  processControl?: CliIo["processControl"];
  /** More of the environment, such as COLUMNS: laid over the state directory and an empty PATH. */
  env?: Record<string, string>;
  /** What a terminal on stdout says its size is. */
  terminalSize?: CliIo["terminalSize"];
  /** stdin: a fake terminal the test types into. */
  stdin?: CliIo["stdin"];
  trapInterrupts?: CliIo["trapInterrupts"];
}

/** A command under way: its output so far, and its exit code once it returns. */
export interface StartedCli {
  stdout(): string;
  stderr(): string;
  code: Promise<number>;
}

export function startCli(args: string[], setup: CliSetup): StartedCli {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    env: { CLAUDE_DISPATCH_STATE_DIR: setup.stateDir, PATH: "", ...setup.env },
    machine: machineOf({ home: HOME }),
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    stdoutIsTerminal: setup.terminal,
    interrupted: setup.interrupted,
    terminalSize: setup.terminalSize,
    stdin: setup.stdin,
    trapInterrupts: setup.trapInterrupts,
    clock: setup.clock ?? { now: () => Date.parse("2025-06-01T12:00:00.000Z"), setTimer: systemClock.setTimer },
    processControl: setup.processControl ?? (async () => assert.fail("this command never loads the process layer")),
    hosts: async (processes) => localHosts(processes, { pid: 31337 }),
    nodePath: "/usr/bin/node",
    mainPath: "/opt/claude-dispatch/dist/main.js",
    runFile: async () => assert.fail("no command here runs a program"),
    identity: () => ({ pid: 31337 }),
    randomName: () => randomUUID(),
  };
  return { stdout: () => stdout, stderr: () => stderr, code: runCli(args, io) };
}

export async function runCliCaptured(
  args: string[],
  setup: CliSetup,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const started = startCli(args, setup);
  const code = await started.code;
  return { code, stdout: started.stdout(), stderr: started.stderr() };
}

/** A fresh state directory under scratch, opened as a server would. */
export function newStateIn(scratch: string): { dir: string; store: StateStore } {
  const dir = mkdtempSync(path.join(scratch, "state-"));
  const store = new StateStore(dir, { randomName: () => randomUUID() });
  store.open();
  return { dir, store };
}

/** A keyboard on a terminal: the modes the command sets, and the keys the test types. */
export class FakeTerminal extends PassThrough {
  readonly isTTY = true;
  readonly modes: boolean[] = [];

  setRawMode(raw: boolean): this {
    this.modes.push(raw);
    return this;
  }

  type(keys: string): void {
    this.write(keys);
  }
}
