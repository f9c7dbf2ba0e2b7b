/** Shared fakes: a manual clock and a scriptable agent launcher. No module mocking. */
import path from "node:path";

import type { AttachRequest, ChildExit, ChildHandle, SpawnRequest } from "../src/agent/host.js";
import { createAgents, type AgentFiles, type Agents, type LauncherOptions } from "../src/agent/launcher.js";
import { memoryPersistence } from "../src/jobs/memory.js";
import { claudeRuntime, type ClaudeStream } from "../src/runtimes/claude/index.js";
import type { AgentIdentity } from "../src/hosts/local/index.js";
import type { AgentLauncher, AgentOutcome, AgentRun, AgentSpec, LiveSummary } from "../src/agent/types.js";
import type { CancelTimer, Clock } from "../src/core/clock.js";
import { createRequestHandler, type HandlerDeps, type RequestHandler } from "../src/server/handler.js";
import { JobRegistry } from "../src/jobs/registry.js";
import type { JsonRpcNotification, JsonRpcRequest, JsonRpcResponse } from "../src/server/jsonrpc.js";
import { MemoryStore } from "../src/store/memory-store.js";
import type { Logger } from "../src/core/log.js";
import { DEFAULT_POLICY } from "../src/config.js";
import { Transcript } from "../src/core/transcript.js";
import { bounded, Watch } from "./support/events.js";
import { homeOnly, localHosts } from "./host-fakes.js";

/** Lets pending promise reactions run (several hops deep). */
export async function settle(rounds = 10): Promise<void> {
  for (let i = 0; i < rounds; i += 1) await new Promise<void>((resolve) => setImmediate(resolve));
}

export class FakeClock implements Clock {
  private time = 1_000_000;
  private timers: Array<{ at: number; fn: () => void; id: number }> = [];
  private nextId = 0;
  private readonly watch = new Watch();

  now(): number {
    return this.time;
  }

  setTimer(fn: () => void, ms: number): CancelTimer {
    const id = (this.nextId += 1);
    this.timers.push({ at: this.time + Math.max(0, ms), fn, id });
    this.watch.changed();
    return () => {
      this.timers = this.timers.filter((timer) => timer.id !== id);
    };
  }

  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Resolves once at least count timers are pending: the code under test has set the timer awaited. */
  async pending(count: number): Promise<void> {
    await this.watch.until(`${count} timers pending`, () => (this.timers.length >= count ? true : undefined));
  }

  /** Moves time forward, firing due timers in order and letting promises settle between them. */
  async advance(ms: number): Promise<void> {
    const target = this.time + ms;
    for (;;) {
      await settle();
      const due = this.timers.filter((timer) => timer.at <= target).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers = this.timers.filter((timer) => timer.id !== due.id);
      this.time = Math.max(this.time, due.at);
      due.fn();
    }
    this.time = target;
    await settle();
  }
}

export class FakeAgent implements AgentRun {
  readonly pid = 4242;
  readonly marker = "fake-marker";
  readonly outcome: Promise<AgentOutcome>;
  /** Resolved at once unless a test holds it, as an adopted agent's first read of its output. */
  ready: Promise<void> = Promise.resolve();
  killCalls = 0;
  survivors: number[] = [];
  /** False: the agent survives its kill (think of a process stuck in the kernel). */
  exitsOnKill = true;
  readonly transcript = new Transcript(1_000_000);
  private summary: LiveSummary = { turns: 0, events: 0 };
  private readonly listeners = new Set<() => void>();
  private resolveOutcome!: (outcome: AgentOutcome) => void;

  constructor(readonly spec: AgentSpec) {
    this.outcome = new Promise((resolve) => (this.resolveOutcome = resolve));
  }

  async identity(): Promise<AgentIdentity> {
    return { pid: this.pid, startTime: "fake-start", marker: "fake-marker" };
  }

  live(): LiveSummary {
    return { ...this.summary };
  }

  onActivity(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get activityListeners(): number {
    return this.listeners.size;
  }

  /** The agent reports something: the summary changes and listeners hear of it. */
  report(update: Partial<LiveSummary>, transcriptLine?: string): void {
    this.summary = { ...this.summary, ...update, events: this.summary.events + 1 };
    if (transcriptLine !== undefined) this.transcript.append(transcriptLine);
    for (const listener of this.listeners) listener();
  }

  /** The agent exits with this outcome. */
  finish(outcome: AgentOutcome): void {
    this.resolveOutcome(outcome);
  }

  succeed(text = "done", sessionId = "8f01635f-202a-449c-ab8a-05f75520788e"): void {
    this.finish({ ok: true, result: { text, sessionId, costUsd: 0.5, numTurns: 3, durationMs: 1500 } });
  }

  async kill(): Promise<{ survivors: number[] }> {
    this.killCalls += 1;
    // A killed agent exits without a result, as the real one does on SIGTERM.
    if (this.exitsOnKill)
      this.finish({ ok: false, code: "AGENT_EXITED", detail: "claude was killed by SIGTERM and printed no result" });
    return { survivors: this.survivors };
  }
}

export class FakeLauncher {
  readonly agents: FakeAgent[] = [];
  private readonly watch = new Watch();
  readonly launch: AgentLauncher = (spec) => {
    const agent = new FakeAgent(spec);
    this.agents.push(agent);
    this.watch.changed();
    return agent;
  };

  /** The count-th agent (from 1) once that many have been launched: the launch itself, not some turns of the loop. */
  launched(count: number): Promise<FakeAgent> {
    return this.watch.until(`agent ${count} launched`, () => this.agents[count - 1]);
  }

  get last(): FakeAgent {
    const agent = this.agents.at(-1);
    if (!agent) throw new Error("no agent was launched");
    return agent;
  }
}

export class RecordingLogger implements Logger {
  readonly lines: string[] = [];
  debug(message: string): void {
    this.lines.push(`debug ${message}`);
  }
  info(message: string): void {
    this.lines.push(`info ${message}`);
  }
  warn(message: string): void {
    this.lines.push(`warn ${message}`);
  }
  error(message: string): void {
    this.lines.push(`error ${message}`);
  }
}

export interface HandlerHarness {
  handle: RequestHandler;
  notifications: JsonRpcNotification[];
  /** Requests the server sent the client (elicitation/create). */
  requests: JsonRpcRequest[];
  /** The registry's store in memory: a test files permission requests in it as an agent's approver would. */
  store: MemoryStore;
  clock: FakeClock;
  launcher: FakeLauncher;
  jobs: JobRegistry;
  logger: RecordingLogger;
  checkedDirectories: string[];
  /** Resolves once count notifications have been sent. */
  notified(count: number): Promise<void>;
}

/** A handler over a real JobRegistry with a fake clock and fake agents. */
export function handlerHarness(
  overrides: Partial<HandlerDeps> = {},
  registry: { maxRunning?: number; approvals?: boolean } = {},
): HandlerHarness {
  const clock = new FakeClock();
  const launcher = new FakeLauncher();
  const logger = new RecordingLogger();
  const store = new MemoryStore();
  let nextId = 0;
  const jobs = new JobRegistry({
    launch: launcher.launch,
    clock,
    newId: () => `job-${(nextId += 1)}`,
    logger,
    retentionMs: 600_000,
    maxFinishedJobs: 1000,
    finishedTranscriptChars: 10_000_000,
    maxRunning: registry.maxRunning ?? 1000,
    // Permission requests forwarded unless a test says otherwise; a fake agent files them in the store in memory.
    ...homeOnly(),
    ...((registry.approvals ?? true) ? { approvals: {} } : {}),
    persistence: memoryPersistence({ store }),
  });
  const checkedDirectories: string[] = [];
  const notifications: JsonRpcNotification[] = [];
  const requests: JsonRpcRequest[] = [];
  const sent = new Watch();
  const handle = createRequestHandler({
    jobs,
    checkDirectory: async (dir) => {
      checkedDirectories.push(dir);
      if (dir.startsWith("/missing")) return { ok: false, code: "INVALID_ARGUMENT", problem: `does not exist: ${dir}` };
      if (dir.startsWith("/outside"))
        return {
          ok: false,
          code: "POLICY_DENIED",
          problem: `is outside the allowed roots (CLAUDE_DISPATCH_ROOTS): ${dir}`,
        };
      return { ok: true, path: dir };
    },
    notify: (frame) => {
      if ("id" in frame) requests.push(frame);
      else notifications.push(frame);
      sent.changed();
    },
    policy: DEFAULT_POLICY,
    maxResultChars: 20_000,
    heartbeatMs: 15_000,
    clock,
    logger,
    server: { name: "claude-dispatch", version: "0.0.0-test" },
    depth: { current: 0, max: 1 },
    jobRetentionMs: 600_000,
    // This machine only: its name is the one a listing leaves out.
    hosts: localHosts(async () => {
      throw new Error("the handler's tests never load the process layer");
    }),
    ...overrides,
  });
  const notified = async (count: number): Promise<void> => {
    await sent.until(`${count} notifications`, () => (notifications.length >= count ? true : undefined));
  };
  return { handle, notifications, requests, clock, launcher, jobs, logger, checkedDirectories, store, notified };
}

export interface Tracked<T> {
  readonly done: boolean;
  readonly value: T | undefined;
  readonly promise: Promise<T>;
}

/** Lets a test ask whether a promise has settled yet, without awaiting it. */
export function track<T>(promise: Promise<T>): Tracked<T> {
  const state: { done: boolean; value: T | undefined; promise: Promise<T> } = {
    done: false,
    value: undefined,
    promise,
  };
  promise.then((value) => {
    state.done = true;
    state.value = value;
  });
  return state;
}

/** Resolves once the job has finished (its record written, its waiters told). */
export function jobFinished(h: Pick<HandlerHarness, "jobs">, id: string): Promise<void> {
  const job = h.jobs.get(id);
  if (!job) throw new Error(`no job ${id}`);
  return bounded(`job ${id} finished`, job.done);
}

/** Sends notifications/cancelled for a request id; the handler answers notifications with null. */
export function cancel(h: HandlerHarness, requestId: unknown): Promise<JsonRpcResponse | null> {
  return h.handle({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId, reason: "test" } });
}

/**
 * What the tests give createClaudeAgents: the launcher's options, with the host's two calls and Claude Code's program.
 */
export interface ClaudeLauncherOptions extends Omit<LauncherOptions<ClaudeStream>, "runtime" | "host" | "files"> {
  start(request: SpawnRequest): ChildHandle;
  attach(request: AttachRequest): ChildHandle;
  files?: Omit<AgentFiles, "folderOf">;
  bin: string;
}

/** An agent that printed stdout and ended as exit says (exit 0 by default), for a launcher: no process. */
export function finishedChild(
  onStdout: (chunk: Buffer) => void,
  stdout: string,
  exit: Partial<ChildExit> = {},
): ChildHandle {
  if (stdout !== "") onStdout(Buffer.from(stdout));
  return {
    pid: 4242,
    marker: undefined,
    identity: async () => ({ pid: 4242, startTime: undefined, marker: undefined }),
    exited: Promise.resolve({ exitCode: 0, signal: null, stderrTail: "", ...exit }),
    killTree: async () => ({ signalled: 0, survivors: [] }),
    settled: Promise.resolve(),
  };
}

/** Claude Code's runtime on the given start and attach, as main.ts puts them together. */
export function createClaudeAgents(options: ClaudeLauncherOptions): Agents {
  const { start, attach, files, bin, ...rest } = options;
  return createAgents({
    ...rest,
    runtime: claudeRuntime(bin),
    host: { start, attach },
    ...(files ? { files: { ...files, folderOf: (file: string) => path.dirname(file) } } : {}),
  });
}
