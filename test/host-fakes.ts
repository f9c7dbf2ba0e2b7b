/**
 * Hosts for tests: this machine's host over a fake process table, as the job layer and the command line ask it
 * where a recorded agent is (src/hosts/local/locate.ts), and which agents a job layer runs.
 */
import assert from "node:assert/strict";

import type { NamedProcess } from "../src/agent/host.js";
import { LocalHost } from "../src/hosts/local/host.js";
import { locateInTable, type ProcessTable, type Self } from "../src/hosts/local/locate.js";
import type { ProcessControl } from "../src/hosts/local/types.js";
import type { IsAlive, JobHost, JobHosts, JobRegistryOptions } from "../src/jobs/types.js";
import { GitWorktrees } from "../src/worktrees/git-worktrees.js";
import { HostSet } from "../src/wiring/hosts.js";
import type { ThisMachine } from "../src/agent/machine.js";
import { thisMachine, type MachineFacts } from "../src/hosts/local/machine.js";

export const HOME = "local";

/** This machine as a Linux box with no home unless the test names what differs (src/hosts/local/machine.ts). */
export function machineOf(facts: Partial<MachineFacts> = {}): ThisMachine {
  return thisMachine({ platform: "linux", home: "/nonexistent", ...facts });
}

/**
 * The agents and hosts of a job layer whose jobs run here: "claude" unless a call names another; admitted as they
 * are; nothing of an earlier server to attach to unless the test says.
 */
export function homeOnly(
  table: Partial<ProcessTable> = {},
  self: Self = { pid: 1 },
): Pick<JobRegistryOptions, "hosts" | "agents" | "admit" | "attach"> {
  return {
    hosts: tableHosts(table, self),
    agents: { home: "claude", known: ["claude", "codex", "gemini"] },
    admit: async (spec) => spec,
    attach: () => {
      throw new Error("this test has no jobs of earlier servers to attach to");
    },
  };
}

/** This machine's host, its process table answering as the test says: by default, nothing is alive. */
export function tableHosts(table: Partial<ProcessTable>, self: Self = { pid: 1 }): JobHosts {
  const answers: ProcessTable = {
    isAlive: table.isAlive ?? (async () => false),
    findMarked: table.findMarked ?? (async () => undefined),
    ...(table.isOwnTree ? { isOwnTree: table.isOwnTree } : {}),
  };
  const home: JobHost = {
    name: HOME,
    locate: (recorded, othersAgent: (agent: NamedProcess) => boolean) =>
      locateInTable(recorded, answers, self, othersAgent),
    canFollow: (recorded) => recorded.agent?.pid !== undefined,
    approver: (jobId, waitMs) => ({ command: "node", args: ["main.js", "approver", jobId], waitMs }),
  };
  return { home, get: (name) => (name === HOME ? home : undefined) };
}

/** A process table answering from an IsAlive over records' names, as the job layer's tests give one. */
export function tableOf(isAlive: IsAlive): Partial<ProcessTable> {
  return {
    isAlive: (pid, startTime, marker) =>
      isAlive({ pid, ...(startTime ? { start_time: startTime } : {}), ...(marker ? { tree_marker: marker } : {}) }),
  };
}

/** This machine's whole host, over a process layer the test makes, for the command line. */
export function localHosts(processes: () => Promise<ProcessControl>, self: Self = { pid: 31337 }): HostSet {
  return new HostSet(
    new LocalHost({
      name: HOME,
      loadProcesses: processes,
      self: async () => self,
      roots: undefined,
      worktrees: new GitWorktrees({
        git: async () => assert.fail("no git here"),
        root: "/nonexistent",
        branchPrefix: "dispatch/",
      }),
      approverCommand: { command: "/usr/bin/node", args: ["/opt/claude-dispatch/dist/main.js"] },
      programOf: (agent) => agent,
      agents: () => [],
      env: {},
      platform: "linux",
      version: "0.0.0-test",
      stateDir: "/nonexistent",
    }),
  );
}
