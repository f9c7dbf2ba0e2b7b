/** What the wiring needs of the process it runs in: main.ts reads it. */

export interface Machine {
  env: Readonly<Record<string, string | undefined>>;
  platform: string;
  pid: number;
  execPath: string;
  /** This program's entry point, for the approver's command line. */
  mainPath: string;
  kill(pid: number, signal: "SIGTERM" | "SIGKILL"): void;
}
