/**
 * createRequestHandler(deps): the whole MCP surface as one total function
 * from a parsed JSON value to exactly one response, or null for a
 * notification (PROTOCOL.md §1–§5). It never throws and imports no node:
 * module; processes, files and time come in through deps.
 */
import type { AgentOptions } from "../agent/options.js";
import { sleep, type CancelTimer, type Clock } from "../core/clock.js";
import type { DirectoryCheck } from "../agent/policy.js";
import {
  LEGACY_PROTOCOL_VERSIONS,
  MODERN_PROTOCOL_VERSIONS,
  PROTOCOL_VERSION_KEY,
  TASKS_EXTENSION,
  modernResult,
  readEnvelope,
  type ModernRequest,
  type ModernResultType,
} from "./eras.js";
import { DispatchError, quoted, toDispatchError } from "../core/errors.js";
import { isUnfinished, type Job, type JobRegistry } from "../jobs/registry.js";
import {
  INTERNAL_ERROR,
  INVALID_PARAMS,
  INVALID_REQUEST,
  METHOD_NOT_FOUND,
  MISSING_REQUIRED_CLIENT_CAPABILITY,
  fail,
  isRecord,
  isRequestId,
  respond,
  serializedOnce,
  type JsonRpcNotification,
  type JsonRpcResponse,
  type RequestId,
} from "./jsonrpc.js";
import type { Logger } from "../core/log.js";
import { admitAgent, type Policy } from "../agent/policy.js";
import { RELATED_TASK, TASK_TOOLS, createTaskMethods, type TaskTool } from "./tasks.js";
import { becomesTask, createTaskExtension, type TaskExtensionMethod } from "./tasks-extension.js";
import {
  activityLine,
  renderFailure,
  renderJob,
  renderKill,
  renderList,
  renderOutputPage,
  renderStarted,
  type CallToolResult,
} from "../tools/results.js";
import {
  isToolName,
  parseKillInput,
  parseListInput,
  parseOutputInput,
  parseRunInput,
  parseStartInput,
  parseWaitInput,
  toolDefinitions,
  type ToolDefinition,
  type ToolName,
  type ToolSettings,
} from "../tools/definitions.js";

/** The versions initialize negotiates, newest first; the first is what we answer when a client asks for a version we do not know (§2). */
export const SUPPORTED_PROTOCOL_VERSIONS = LEGACY_PROTOCOL_VERSIONS;
export const LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0];

/** For the model, in initialize and server/discover alike. */
export const SERVER_INSTRUCTIONS =
  "claude-dispatch runs Claude Code headless in a project directory. Use claude_run for a question or a small edit " +
  "that finishes within about two minutes: it waits and returns the answer. For longer work use claude_start, then " +
  "call claude_wait with the job_id until the job is no longer queued or running. claude_kill stops a job and its " +
  "whole process tree, claude_list finds a job_id again, and claude_output pages a long result or shows what a job " +
  "did. Every result carries a session_id: pass it back to continue the same conversation with its context.";

/** server/discover and tools/list never change while the process lives; an hour bounds trust across a reconfigured restart (§16.2). */
export const LISTING_TTL_MS = 3_600_000;

/** Echo a version we support; otherwise offer our latest and let the client decide (§2). */
export function negotiateVersion(requested: string): string {
  return (SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
}

export interface HandlerDeps {
  jobs: Pick<JobRegistry, "start" | "get" | "kill" | "list" | "recover">;
  /** Checks a cwd or add_dirs entry (§5): absolute, existing, inside the operator's roots. */
  checkDirectory(dir: string): Promise<DirectoryCheck>;
  /** Sends a notification frame through the one serialized writer. */
  notify(notification: JsonRpcNotification): void;
  policy: Policy;
  /** Inline result text is cut here (§5.7). */
  maxResultChars: number;
  /** Longest quiet spell between progress notifications (§5.8). */
  heartbeatMs: number;
  clock: Clock;
  logger: Logger;
  server: { name: string; version: string };
  /** Recursion guard (§7.4): at or above max, no tool is listed or runs. */
  depth: { current: number; max: number };
  /** Only for the JOB_NOT_FOUND message. */
  jobRetentionMs: number;
}

export type RequestHandler = (message: unknown) => Promise<JsonRpcResponse | null>;

function describeDuration(ms: number): string {
  if (ms < 120_000) return `${Math.round(ms / 1000)} seconds`;
  if (ms < 2 * 3_600_000) return `${Math.round(ms / 60_000)} minutes`;
  if (ms < 2 * 86_400_000) return `${Math.round(ms / 3_600_000)} hours`;
  return `${Math.round(ms / 86_400_000)} days`;
}

function requestKey(id: RequestId): string {
  return `${typeof id}:${String(id)}`;
}

/** Bursts of agent events are coalesced into at most one progress notification per this interval. */
const PROGRESS_MIN_GAP_MS = 500;

type ProgressToken = string | number;

/** "12s · turn 2 · Bash · npm test", or "3s · queued at position 2": progress (§5.8) and a working task's statusMessage (§16.4). */
function describeActivity(job: Job, now: number): string {
  const elapsed = Math.max(0, Math.round((now - job.startedAt) / 1000));
  return job.status === "queued" ? `${elapsed}s · queued at position ${job.queuePosition() ?? "?"}` : activityLine(job.live(), elapsed);
}

/** execution.taskSupport is 2025-11-25 vocabulary: in 2026-07-28 the server alone decides what becomes a task (§16.4). */
function withoutExecution(tool: ToolDefinition): Omit<ToolDefinition, "execution"> {
  const { execution: _decidedByTheServer, ...rest } = tool;
  return rest;
}

export function createRequestHandler(deps: HandlerDeps): RequestHandler {
  const { jobs, clock, logger } = deps;
  const settings: ToolSettings = {
    defaultTimeoutMs: deps.policy.defaultTimeoutMs,
    maxResultChars: deps.maxResultChars,
    permissionModes: deps.policy.permissionModes,
  };

  const gated = deps.depth.current >= deps.depth.max;
  const definitions = gated ? [] : toolDefinitions(settings);
  const instructions = gated ? `claude-dispatch offers no tools here: ${gateReason()}.` : SERVER_INSTRUCTIONS;
  const forModernEra = (result: object, resultType?: ModernResultType): Record<string, unknown> => modernResult(result, deps.server, resultType);
  // tools/list is asked often and never changes: its JSON is built once (BENCHMARKS.md (c)); so is server/discover's.
  const toolList = serializedOnce({ tools: definitions });
  const cacheable = { ttlMs: LISTING_TTL_MS, cacheScope: "public" } as const;
  const modernToolList = serializedOnce(forModernEra({ tools: definitions.map(withoutExecution), ...cacheable }));
  const discovery = serializedOnce(
    forModernEra({
      supportedVersions: [...MODERN_PROTOCOL_VERSIONS],
      capabilities: gated ? { tools: { listChanged: false } } : { tools: { listChanged: false }, extensions: { [TASKS_EXTENSION]: {} } },
      instructions,
      ...cacheable,
    }),
  );
  /** In-flight requests by id, so notifications/cancelled can abort them (§4). */
  const inFlight = new Map<string, AbortController>();


  function handleNotification(method: string, params: unknown): void {
    if (method === "notifications/cancelled") {
      const requestId = isRecord(params) ? params.requestId : undefined;
      if (isRequestId(requestId)) {
        const controller = inFlight.get(requestKey(requestId));
        if (controller) {
          logger.debug(`request ${String(requestId)} cancelled by the client`);
          controller.abort();
        }
      }
      return;
    }
    if (method === "notifications/initialized") return;
    logger.debug(`ignored notification ${quoted(method)}`);
  }

  function initialize(id: RequestId, params: Record<string, unknown>): JsonRpcResponse {
    const requested = params.protocolVersion;
    if (typeof requested !== "string") {
      return fail(id, INVALID_PARAMS, "initialize requires params.protocolVersion (a string)");
    }
    const negotiatedVersion = negotiateVersion(requested);
    logger.info(`initialize: client asked for ${quoted(requested)}, using ${negotiatedVersion}`);
    return respond(id, {
      protocolVersion: negotiatedVersion,
      capabilities: gated
        ? { tools: { listChanged: false } }
        : { tools: { listChanged: false }, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      serverInfo: { name: deps.server.name, version: deps.server.version },
      instructions,
    });
  }

  /**
   * Applies the policy and checks every directory, then whether the request was
   * cancelled meanwhile: a job started after its request was cancelled would run
   * with nobody to collect or kill it. (That error text reaches no one: a
   * cancelled request gets no response.)
   */
  async function prepareAgent(cwd: string, requested: AgentOptions, signal: AbortSignal): Promise<{ cwd: string; options: AgentOptions }> {
    const admitted = await admitAgent(cwd, requested, deps.policy, deps.checkDirectory);
    if (signal.aborted) throw new DispatchError("INVALID_ARGUMENT", "the request was cancelled before the job started");
    return admitted;
  }

  /**
   * Sends notifications/progress for a job while a request waits on it (§5.8):
   * on agent activity (coalesced), and a heartbeat after every quiet spell.
   * The returned stop must run before the response, so none follows it.
   */
  function followProgress(token: ProgressToken, job: Job, relatedTask = false): () => void {
    // 2025-11-25: every message about a task names it (its related-task _meta).
    const meta = relatedTask ? { _meta: { [RELATED_TASK]: { taskId: job.id } } } : {};
    let progress = 0;
    let stopped = false;
    let lastSentAt = Number.NEGATIVE_INFINITY;
    let cancelTimer: CancelTimer | undefined;
    const send = (): void => {
      cancelTimer?.();
      cancelTimer = undefined;
      if (stopped || !isUnfinished(job)) return;
      progress += 1;
      lastSentAt = clock.now();
      const message = describeActivity(job, lastSentAt);
      deps.notify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: token, progress, message, ...meta } });
      cancelTimer = clock.setTimer(send, deps.heartbeatMs);
    };
    const unsubscribe = job.onActivity(() => {
      if (stopped) return;
      const wait = lastSentAt + PROGRESS_MIN_GAP_MS - clock.now();
      if (wait <= 0) return send();
      cancelTimer?.();
      cancelTimer = clock.setTimer(send, wait);
    });
    send();
    return () => {
      stopped = true;
      cancelTimer?.();
      unsubscribe();
    };
  }

  /** A job this server knows, or one it takes over now from the state directory (§15.3): a server that died since this one started. */
  async function requireJob(jobId: string): Promise<Job> {
    const job = jobs.get(jobId) ?? (await jobs.recover(jobId));
    if (job) return job;
    throw new DispatchError(
      "JOB_NOT_FOUND",
      `no job with id ${quoted(jobId)}; finished jobs are forgotten ${describeDuration(deps.jobRetentionMs)} after they end, and a job another running claude-dispatch server owns is served by that server (claude-dispatch jobs lists every job)`,
    );
  }

  /** Waits until the job finishes, the hold runs out, or the request is cancelled; no polling (§5.3). */
  async function hold(job: Job, holdMs: number, signal: AbortSignal): Promise<void> {
    if (!isUnfinished(job) || holdMs === 0) return;
    const stop = new AbortController();
    const onCancel = (): void => stop.abort();
    signal.addEventListener("abort", onCancel, { once: true });
    // A listener dropped when the hold ends: a job polled for days does not collect one per call.
    const stopWatching = job.whenDone(onCancel);
    try {
      await sleep(clock, holdMs, stop.signal);
    } finally {
      signal.removeEventListener("abort", onCancel);
      stopWatching();
    }
  }

  /** Runs work while sending progress for the job, when the request asked for it. */
  async function withProgress<T>(token: ProgressToken | undefined, job: Job, work: () => Promise<T>): Promise<T> {
    const stop = token === undefined ? undefined : followProgress(token, job);
    try {
      return await work();
    } finally {
      stop?.();
    }
  }

  /** Validates a claude_run or claude_start call and starts its job (or queues it). */
  async function startJob(name: TaskTool, args: Record<string, unknown>, signal: AbortSignal): Promise<Job> {
    const run = name === "claude_run" ? parseRunInput(args, settings) : undefined;
    const input = run ?? parseStartInput(args, settings);
    const { cwd, options } = await prepareAgent(input.cwd, input.options, signal);
    const spec = { prompt: input.prompt, cwd, resumeSessionId: input.sessionId, options };
    return run ? jobs.start(spec, "run", run.timeoutMs) : jobs.start(spec, "start");
  }

  /** Waits for a claude_run's job and returns its result; a cancelled run is killed, as nobody is left to read it. */
  async function awaitRun(job: Job, signal: AbortSignal, progressToken: ProgressToken | undefined): Promise<CallToolResult<unknown>> {
    let onCancel = (): void => undefined;
    const cancelled = new Promise<void>((resolve) => {
      onCancel = (): void => {
        void jobs.kill(job.id, "cancelled").catch(() => undefined);
        resolve();
      };
    });
    signal.addEventListener("abort", onCancel, { once: true });
    try {
      await withProgress(progressToken, job, () => Promise.race([job.done, cancelled]));
    } finally {
      signal.removeEventListener("abort", onCancel);
    }
    return renderJob(job, clock.now(), { forRun: true, maxResultChars: deps.maxResultChars });
  }

  async function runTool(
    name: ToolName,
    args: Record<string, unknown>,
    signal: AbortSignal,
    progressToken: ProgressToken | undefined,
  ): Promise<CallToolResult<unknown>> {
    const now = (): number => clock.now();
    switch (name) {
      case "claude_run":
        return awaitRun(await startJob(name, args, signal), signal, progressToken);
      case "claude_start": {
        return renderStarted(await startJob(name, args, signal), now());
      }
      case "claude_wait": {
        const input = parseWaitInput(args);
        const job = await requireJob(input.jobId);
        if (isUnfinished(job) && input.holdMs > 0) await withProgress(progressToken, job, () => hold(job, input.holdMs, signal));
        return renderJob(job, now(), { maxResultChars: deps.maxResultChars });
      }
      case "claude_kill": {
        const input = parseKillInput(args);
        const job = await requireJob(input.jobId);
        const { killed, survivors } = await jobs.kill(job.id, "claude_kill");
        return renderKill(job, now(), killed, survivors, deps.maxResultChars);
      }
      case "claude_list": {
        parseListInput(args);
        return renderList(jobs.list(), now());
      }
      case "claude_output": {
        const input = parseOutputInput(args, settings);
        return renderOutputPage(await requireJob(input.jobId), input.view, input.offset, input.limit);
      }
    }
  }

  /** What a claude_run or claude_start call would have returned had it waited for its job to end. */
  const finalResult = (job: Job): CallToolResult<unknown> =>
    renderJob(job, clock.now(), { forRun: job.kind === "run", maxResultChars: deps.maxResultChars });

  /** Tasks of this connection (§14): a task is a job, and goes with it. */
  const tasks = createTaskMethods({
    jobs,
    now: () => clock.now(),
    logger,
    notify: (notification) => deps.notify(notification),
    finalResult,
    followProgress: (token, job) => followProgress(token, job, true),
    retentionMs: deps.jobRetentionMs,
  });

  /** The 2026-07-28 tasks extension (§16.4): stateless, it reads the jobs themselves. */
  const taskExtension = createTaskExtension({
    jobs,
    now: () => clock.now(),
    logger,
    retentionMs: deps.jobRetentionMs,
    activity: (job) => describeActivity(job, clock.now()),
    finalResult: (job) => forModernEra(finalResult(job)),
    shape: forModernEra,
  });

  function gateReason(): string {
    const { current, max } = deps.depth;
    if (current === 0) return `CLAUDE_DISPATCH_MAX_DEPTH is ${max}: the operator turned dispatch off`;
    return `this server runs inside an agent that claude-dispatch started (depth ${current}, limit ${max}); nested dispatch is off to prevent runaway recursion`;
  }

  /** `modern` is the request's 2026-07-28 envelope, or undefined for a legacy request. */
  async function callTool(id: RequestId, params: Record<string, unknown>, signal: AbortSignal, modern: ModernRequest | undefined): Promise<JsonRpcResponse> {
    const name = params.name;
    if (typeof name !== "string") return fail(id, INVALID_PARAMS, "tools/call requires params.name (a string)");
    const rawArgs = params.arguments;
    if (rawArgs !== undefined && rawArgs !== null && !isRecord(rawArgs)) {
      return fail(id, INVALID_PARAMS, "tools/call params.arguments must be an object");
    }
    if (!isToolName(name)) return fail(id, INVALID_PARAMS, `Unknown tool: ${quoted(name)}`);
    // 2025-11-25 task augmentation; a 2026-07-28 client cannot ask for a task, the server decides (§16.4).
    // Under the recursion guard no tasks capability is declared, so the augmentation is ignored, as the spec requires.
    const task = modern || gated ? undefined : params.task;
    if (task !== undefined) {
      const ttl = isRecord(task) ? task.ttl : undefined;
      if (!isRecord(task) || (ttl !== undefined && !(typeof ttl === "number" && Number.isFinite(ttl) && ttl >= 0))) {
        return fail(id, INVALID_PARAMS, "params.task must be an object with an optional non-negative ttl");
      }
      if (!TASK_TOOLS.includes(name)) return fail(id, METHOD_NOT_FOUND, `Method not found: ${name} cannot run as a task (it has no execution.taskSupport)`);
    }
    const answer = (result: CallToolResult<unknown>): JsonRpcResponse => respond(id, modern ? forModernEra(result) : result);
    if (gated) return answer(renderFailure(new DispatchError("DEPTH_LIMIT", gateReason())));
    const args = isRecord(rawArgs) ? rawArgs : {};
    try {
      const meta = isRecord(params._meta) ? params._meta : {};
      const token = typeof meta.progressToken === "string" || typeof meta.progressToken === "number" ? meta.progressToken : undefined;
      if (task !== undefined) {
        return respond(id, tasks.adopt(await startJob(name as TaskTool, args, signal), token));
      }
      if (modern?.tasksExtension && (name === "claude_run" || name === "claude_start")) {
        const job = await startJob(name, args, signal);
        // No progress follows a task: its token dies with this response (§16.4).
        if (becomesTask(job)) return respond(id, taskExtension.created(job));
        return answer(await awaitRun(job, signal, token));
      }
      return answer(await runTool(name, args, signal, token));
    } catch (error) {
      const classified = toDispatchError(error);
      if (classified.code === "INTERNAL_ERROR") logger.error(`${name}: ${classified.message}`);
      const aboutJob = (name === "claude_wait" || name === "claude_kill" || name === "claude_output") && typeof args.job_id === "string";
      return answer(renderFailure(classified, aboutJob ? (args.job_id as string) : undefined));
    }
  }

  /** Checks what every request may carry: object params, an object _meta, a string or number progressToken. */
  function paramsProblem(message: Record<string, unknown>): string | undefined {
    if (!("params" in message) || message.params === undefined) return undefined;
    const params = message.params;
    if (!isRecord(params)) return "params must be an object";
    const meta = params._meta;
    if (meta === undefined) return undefined;
    if (!isRecord(meta)) return "params._meta must be an object";
    const token = meta.progressToken;
    if (token !== undefined && typeof token !== "string" && !(typeof token === "number" && Number.isFinite(token))) {
      return "params._meta.progressToken must be a string or a number";
    }
    return undefined;
  }

  /** Runs a request that notifications/cancelled may abort; an aborted one gets no response (§4). */
  async function cancellable(id: RequestId, work: (signal: AbortSignal) => Promise<JsonRpcResponse>): Promise<JsonRpcResponse | null> {
    const key = requestKey(id);
    const controller = new AbortController();
    inFlight.set(key, controller);
    try {
      const response = await work(controller.signal);
      return controller.signal.aborted ? null : response;
    } finally {
      if (inFlight.get(key) === controller) inFlight.delete(key);
    }
  }

  /** A 2026-07-28 request (§16): only its own envelope counts, and only that era's methods exist. */
  async function handleModernRequest(id: RequestId, method: string, params: Record<string, unknown>, modern: ModernRequest): Promise<JsonRpcResponse | null> {
    switch (method) {
      case "server/discover":
        return respond(id, discovery);
      case "tools/list":
        if (params.cursor !== undefined) return fail(id, INVALID_PARAMS, "tools/list: unknown cursor (this server lists every tool in one page)");
        return respond(id, modernToolList);
      case "tools/call":
        return cancellable(id, (signal) => callTool(id, params, signal, modern));
      case "tasks/get":
      case "tasks/update":
      case "tasks/cancel": {
        if (!modern.tasksExtension) {
          return fail(id, MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability", {
            requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
          });
        }
        const taskMethod: TaskExtensionMethod = method;
        // Only tasks/cancel waits (for its kill), so only it can be cancelled (§4); the others answer at once.
        if (taskMethod !== "tasks/cancel") return taskExtension.handle(id, taskMethod, params);
        return cancellable(id, () => taskExtension.handle(id, taskMethod, params));
      }
      default:
        // initialize, ping, tasks/result and tasks/list belong to the legacy era only.
        return fail(id, METHOD_NOT_FOUND, `Method not found: ${quoted(method)} (in protocol version ${modern.version})`);
    }
  }

  async function handleRequest(id: RequestId, method: string, message: Record<string, unknown>): Promise<JsonRpcResponse | null> {
    const problem = paramsProblem(message);
    if (problem) return fail(id, INVALID_PARAMS, problem);
    const params = isRecord(message.params) ? message.params : {};
    const envelope = readEnvelope(params);
    if (envelope.era === "refused") return fail(id, envelope.code, envelope.message, envelope.data);
    if (envelope.era === "modern") return handleModernRequest(id, method, params, envelope.request);

    switch (method) {
      case "initialize":
        return initialize(id, params);
      case "ping":
        return respond(id, {});
      case "tools/list":
        // One page, no cursor ever issued: a cursor can only be invalid.
        if (params.cursor !== undefined) return fail(id, INVALID_PARAMS, "tools/list: unknown cursor (this server lists every tool in one page)");
        return respond(id, toolList);
      case "tools/call": {
        if (!isRecord(message.params)) return fail(id, INVALID_PARAMS, "tools/call requires params");
        return cancellable(id, (signal) => callTool(id, params, signal, undefined));
      }
      case "tasks/get":
      case "tasks/list":
        // They answer at once: a cancellation naming them is ignored (§4).
        return tasks.handle(id, method, params, new AbortController().signal);
      case "tasks/result":
      case "tasks/cancel":
        return cancellable(id, (signal) => tasks.handle(id, method, params, signal));
      case "server/discover":
        // Only a 2026-07-28 method, and such a request must say so in _meta (§16.1).
        return fail(id, INVALID_PARAMS, `server/discover requires params._meta["${PROTOCOL_VERSION_KEY}"]`);
      default:
        return fail(id, METHOD_NOT_FOUND, `Method not found: ${quoted(method)}`);
    }
  }

  async function dispatch(message: unknown): Promise<JsonRpcResponse | null> {
    if (Array.isArray(message)) return fail(null, INVALID_REQUEST, "Invalid Request: batches are not supported");
    if (!isRecord(message)) return fail(null, INVALID_REQUEST, "Invalid Request: expected a JSON object");

    const method = message.method;
    const hasId = "id" in message;
    const id = isRequestId(message.id) ? message.id : null;

    // A response from the client to a request we never sent: nothing to answer.
    if (method === undefined && hasId && ("result" in message || "error" in message) && message.jsonrpc === "2.0") {
      // Never stringify the id itself: a deeply nested one overflows the stack (the fuzzer found it).
      logger.debug(`ignored a response with id ${isRequestId(message.id) ? JSON.stringify(message.id) : `of type ${typeof message.id}`}`);
      return null;
    }
    if (message.jsonrpc !== "2.0") return fail(id, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"');
    if (typeof method !== "string") return fail(id, INVALID_REQUEST, 'Invalid Request: "method" must be a string');
    if (!hasId) {
      handleNotification(method, message.params);
      return null;
    }
    if (id === null) return fail(null, INVALID_REQUEST, 'Invalid Request: "id" must be a string or a number');
    return handleRequest(id, method, message);
  }

  return async (message: unknown): Promise<JsonRpcResponse | null> => {
    try {
      return await dispatch(message);
    } catch (error) {
      // dispatch is meant to be total; this keeps "exactly one response" true even if it is not.
      logger.error(`unexpected failure: ${(error as Error)?.stack ?? String(error)}`);
      const id = isRecord(message) && isRequestId(message.id) ? message.id : null;
      return fail(id, INTERNAL_ERROR, "Internal error");
    }
  };
}
