/** What the wiring needs of the process it runs in: main.ts reads it, once, and hands it in. */
import type { ThisMachine } from "../agent/machine.js";

/** What the job layer and the hosts are built from. */
export interface Machine {
  env: Readonly<Record<string, string | undefined>>;
  platform: string;
  pid: number;
  execPath: string;
  /** This program's entry point, for the approver's command line. */
  mainPath: string;
  kill(pid: number, signal: "SIGTERM" | "SIGKILL"): void;
}

/** The whole process as a mode (server, carrier, command line, approver, far end) runs in it. */
export interface ProcessParts extends Machine {
  env: NodeJS.ProcessEnv;
  /** Undefined where the platform has no user ids. */
  uid: number | undefined;
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  cwd(): string;
  /** This machine, as the configuration and the command line know it. */
  here: ThisMachine;
  exit(code?: number): never;
  /** Calls `listener` on each of `signals` from now on; the function returned stops that. */
  onSignals(signals: readonly NodeJS.Signals[], listener: (signal: NodeJS.Signals) => void): () => void;
  /** An exception nothing caught, or a rejection nothing handled: the process is in a state nobody planned. */
  onCrash(listener: (error: unknown) => void): void;
}

/** Says why on stderr and exits 2, as every mode does for a usage or configuration error (§11, §17). */
export function exitForUsage(parts: ProcessParts, message: string): never {
  parts.stderr.write(`claude-dispatch: ${message}\n`);
  return parts.exit(2);
}
