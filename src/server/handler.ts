/**
 * createRequestHandler(deps): the whole MCP surface as one total function
 * from a parsed JSON value to exactly one response, or null for a
 * notification (PROTOCOL.md §1–§5). It never throws and imports no node:
 * module; processes, files and time come in through deps.
 */
import {
  MODERN_PROTOCOL_VERSIONS,
  PROTOCOL_VERSION_KEY,
  TASKS_EXTENSION,
  modernResult,
  readEnvelope,
  type ModernRequest,
  type ModernResultType,
} from "./eras.js";
import { DispatchError, describeThrown, quoted, toDispatchError } from "../core/errors.js";
import type { Job } from "../jobs/registry.js";
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
  type JsonRpcResponse,
  type RequestId,
} from "./jsonrpc.js";
import { ApprovalAsker } from "./approvals.js";
import { describeActivity, followProgress, type ProgressToken } from "./progress.js";
import { createTaskMethods, type TaskTool } from "./tasks.js";
import { paramsProblem, requestKey, taskProblem, withoutExecution } from "./request-checks.js";
import { ToolCalls } from "./tool-calls.js";
import type { HandlerDeps } from "./deps.js";

export type { HandlerDeps } from "./deps.js";
import { becomesTask, createTaskExtension, type TaskExtensionMethod } from "./tasks-extension.js";
import { renderFailure, renderJob, type CallToolResult } from "../tools/results.js";
import { isToolName, toolDefinitions, type ToolSettings } from "../tools/definitions.js";
import { gateReason, initializeAnswer, instructionsOf, isGated, type OpeningFacts } from "./opening.js";

/**
 * server/discover and tools/list never change while the process lives; an hour
 * bounds trust across a reconfigured restart (§16.2).
 */
export const LISTING_TTL_MS = 3_600_000;

/** How long a 2026-07-28 client may keep a listing (§16.2). */
const CACHEABLE = { ttlMs: LISTING_TTL_MS, cacheScope: "public" } as const;

/** The methods that start, follow or read jobs: they wait for HandlerDeps.ready. */
const JOB_METHODS: ReadonlySet<string> = new Set([
  "tools/call",
  "tasks/get",
  "tasks/list",
  "tasks/result",
  "tasks/cancel",
  "tasks/update",
]);

export type RequestHandler = (message: unknown) => Promise<JsonRpcResponse | null>;

export function createRequestHandler(deps: HandlerDeps): RequestHandler {
  const handler = new Handler(deps);
  return (message) => handler.handle(message);
}

/** The MCP surface (§1–§5, §14, §16): one instance per connection; its state is the requests in flight. */
class Handler {
  private readonly opening: OpeningFacts;
  private readonly gated: boolean;
  private readonly instructions: string;
  private readonly settings: ToolSettings;
  private readonly calls: ToolCalls;
  /** tools/list's answers, built at the first tools/list: initialize does not need them (BENCHMARKS.md (a)). */
  private listings:
    { legacy: ReturnType<typeof serializedOnce>; modern: ReturnType<typeof serializedOnce> } | undefined;
  private readonly discovery: ReturnType<typeof serializedOnce>;
  private readonly tasks: ReturnType<typeof createTaskMethods>;
  private readonly taskExtension: ReturnType<typeof createTaskExtension>;
  /** In-flight requests by id, so notifications/cancelled can abort them (§4). */
  private readonly inFlight = new Map<string, AbortController>();
  /** Asks this connection's client about permission requests (§18). */
  private readonly asker: ApprovalAsker;

  constructor(private readonly deps: HandlerDeps) {
    this.settings = {
      defaultTimeoutMs: deps.policy.defaultTimeoutMs,
      maxResultChars: deps.maxResultChars,
      agents: deps.policy.agents,
      homeAgent: deps.policy.homeAgent,
      ...(deps.policy.hosts ? { hosts: deps.policy.hosts } : {}),
    };
    this.opening = { server: deps.server, depth: deps.depth };
    this.gated = isGated(this.opening);
    this.instructions = instructionsOf(this.opening);
    this.calls = new ToolCalls(deps, this.settings);
    const capabilities = this.gated
      ? { tools: { listChanged: false } }
      : { tools: { listChanged: false }, extensions: { [TASKS_EXTENSION]: {} } };
    this.discovery = serializedOnce(
      this.forModernEra({
        supportedVersions: [...MODERN_PROTOCOL_VERSIONS],
        capabilities,
        instructions: this.instructions,
        ...CACHEABLE,
      }),
    );
    const now = (): number => deps.clock.now();
    /** Tasks of this connection (§14): a task is a job, and goes with it. */
    this.tasks = createTaskMethods({
      jobs: deps.jobs,
      now,
      logger: deps.logger,
      notify: (notification) => deps.notify(notification),
      finalResult: (job) => this.finalResult(job),
      followProgress: (token, job) => followProgress(deps, token, job, true),
      retentionMs: deps.jobRetentionMs,
    });
    this.asker = new ApprovalAsker({
      jobs: deps.jobs,
      send: (frame) => deps.notify(frame),
      logger: deps.logger,
      isTask: (job) => this.tasks.has(job),
    });
    if (!this.gated) {
      deps.jobs.approvals.onRequest((job, request) => this.askAbout(job, request));
    }
    /** The 2026-07-28 tasks extension (§16.4): stateless, it reads the jobs themselves. */
    this.taskExtension = createTaskExtension({
      jobs: deps.jobs,
      now,
      logger: deps.logger,
      retentionMs: deps.jobRetentionMs,
      activity: (job) => describeActivity(job, now()),
      finalResult: (job) => this.forModernEra(this.finalResult(job)),
      shape: (result, resultType) => this.forModernEra(result, resultType),
    });
  }

  async handle(message: unknown): Promise<JsonRpcResponse | null> {
    try {
      return await this.dispatch(message);
    } catch (error) {
      // dispatch is meant to be total; this keeps "exactly one response" true even if it is not.
      this.deps.logger.error(`unexpected failure: ${describeThrown(error)}`);
      const id = isRecord(message) && isRequestId(message.id) ? message.id : null;
      return fail(id, INTERNAL_ERROR, "Internal error");
    }
  }

  private askAbout(job: Job, request: Parameters<ApprovalAsker["ask"]>[1]): void {
    this.asker
      .ask(job, request)
      .catch((error: unknown) =>
        this.deps.logger.error(`job ${job.id}: asking about request ${request.id}: ${String(error)}`),
      );
  }

  private forModernEra(result: object, resultType?: ModernResultType): Record<string, unknown> {
    return modernResult(result, this.deps.server, resultType);
  }

  /** What a claude_run or claude_start call would have returned had it waited for its job to end. */
  private finalResult(job: Job): CallToolResult<unknown> {
    try {
      const { clock, maxResultChars } = this.deps;
      return renderJob(job, clock.now(), { forRun: job.kind === "run", maxResultChars });
    } catch (error) {
      // A result file that cannot be read (§15.1) fails the call that asked for it, not the server.
      return renderFailure(this.classify(error, `job ${job.id}`), job.id);
    }
  }

  /** A failure as the model sees it; an unexpected one's text and stack go to the log only (§9). */
  private classify(error: unknown, during: string): DispatchError {
    const classified = toDispatchError(error);
    if (!(error instanceof DispatchError)) this.deps.logger.error(`${during}: ${describeThrown(error)}`);
    return classified;
  }

  private async dispatch(message: unknown): Promise<JsonRpcResponse | null> {
    if (Array.isArray(message)) return fail(null, INVALID_REQUEST, "Invalid Request: batches are not supported");
    if (!isRecord(message)) return fail(null, INVALID_REQUEST, "Invalid Request: expected a JSON object");
    const method = message.method;
    const hasId = "id" in message;
    const id = isRequestId(message.id) ? message.id : null;
    // A response from the client to a request we never sent: nothing to answer.
    if (method === undefined && hasId && ("result" in message || "error" in message) && message.jsonrpc === "2.0") {
      if (this.asker.receive(message)) return null;
      // Never stringify the id itself: a deeply nested one overflows the stack (the fuzzer found it).
      this.deps.logger.debug(
        `ignored a response with id ` +
          `${isRequestId(message.id) ? JSON.stringify(message.id) : `of type ${typeof message.id}`}`,
      );
      return null;
    }
    if (message.jsonrpc !== "2.0") return fail(id, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"');
    if (typeof method !== "string") return fail(id, INVALID_REQUEST, 'Invalid Request: "method" must be a string');
    if (!hasId) {
      this.handleNotification(method, message.params);
      return null;
    }
    if (id === null) return fail(null, INVALID_REQUEST, 'Invalid Request: "id" must be a string or a number');
    return this.handleRequest(id, method, message);
  }

  private handleNotification(method: string, params: unknown): void {
    const { logger } = this.deps;
    if (method === "notifications/cancelled") {
      const requestId = isRecord(params) ? params.requestId : undefined;
      if (isRequestId(requestId)) {
        const controller = this.inFlight.get(requestKey(requestId));
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

  private async handleRequest(
    id: RequestId,
    method: string,
    message: Record<string, unknown>,
  ): Promise<JsonRpcResponse | null> {
    const problem = paramsProblem(message);
    if (problem) return fail(id, INVALID_PARAMS, problem);
    const params = isRecord(message.params) ? message.params : {};
    const envelope = readEnvelope(params);
    if (envelope.era === "refused") return fail(id, envelope.code, envelope.message, envelope.data);
    // Known before anything is awaited, so a cancellation sent right behind its request finds it (§4).
    const key = requestKey(id);
    const controller = new AbortController();
    this.inFlight.set(key, controller);
    try {
      if (JOB_METHODS.has(method)) await this.deps.ready?.();
      return await this.route(id, method, message, params, envelope, controller);
    } finally {
      if (this.inFlight.get(key) === controller) this.inFlight.delete(key);
    }
  }

  private async route(
    id: RequestId,
    method: string,
    message: Record<string, unknown>,
    params: Record<string, unknown>,
    envelope: Exclude<ReturnType<typeof readEnvelope>, { era: "refused" }>,
    controller: AbortController,
  ): Promise<JsonRpcResponse | null> {
    if (envelope.era === "modern") return this.handleModernRequest(id, method, params, envelope.request, controller);
    switch (method) {
      case "initialize":
        return this.initialize(id, params);
      case "ping":
        return respond(id, {});
      case "tools/list":
        // One page, no cursor ever issued: a cursor can only be invalid.
        if (params.cursor !== undefined)
          return fail(id, INVALID_PARAMS, "tools/list: unknown cursor (this server lists every tool in one page)");
        return respond(id, this.toolListings().legacy);
      case "tools/call": {
        if (!isRecord(message.params)) return fail(id, INVALID_PARAMS, "tools/call requires params");
        return this.cancellable(controller, (signal) => this.callTool(id, params, signal, undefined));
      }
      case "tasks/get":
      case "tasks/list":
        // They answer at once: a cancellation naming them is ignored (§4).
        return this.tasks.handle(id, method, params, new AbortController().signal);
      case "tasks/result":
      case "tasks/cancel":
        return this.cancellable(controller, (signal) => this.tasks.handle(id, method, params, signal));
      case "server/discover":
        // Only a 2026-07-28 method, and such a request must say so in _meta (§16.1).
        return fail(id, INVALID_PARAMS, `server/discover requires params._meta["${PROTOCOL_VERSION_KEY}"]`);
      default:
        return fail(id, METHOD_NOT_FOUND, `Method not found: ${quoted(method)}`);
    }
  }

  /** A 2026-07-28 request (§16): only its own envelope counts, and only that era's methods exist. */
  private async handleModernRequest(
    id: RequestId,
    method: string,
    params: Record<string, unknown>,
    modern: ModernRequest,
    controller: AbortController,
  ): Promise<JsonRpcResponse | null> {
    switch (method) {
      case "server/discover":
        return respond(id, this.discovery);
      case "tools/list":
        if (params.cursor !== undefined)
          return fail(id, INVALID_PARAMS, "tools/list: unknown cursor (this server lists every tool in one page)");
        return respond(id, this.toolListings().modern);
      case "tools/call":
        return this.cancellable(controller, (signal) => this.callTool(id, params, signal, modern));
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
        if (taskMethod !== "tasks/cancel") return this.taskExtension.handle(id, taskMethod, params);
        return this.cancellable(controller, () => this.taskExtension.handle(id, taskMethod, params));
      }
      default:
        // initialize, ping, tasks/result and tasks/list belong to the legacy era only.
        return fail(
          id,
          METHOD_NOT_FOUND,
          `Method not found: ${quoted(method)} (in protocol version ${modern.version})`,
        );
    }
  }

  private initialize(id: RequestId, params: Record<string, unknown>): JsonRpcResponse {
    const { response, settled } = initializeAnswer(this.opening, id, params);
    if (!settled) return response;
    this.asker.canElicit = settled.canElicit;
    // Requests that came before this client did (found at the takeover that precedes the first request) are asked now.
    if (!this.gated)
      for (const job of this.deps.jobs.running())
        for (const request of job.pendingApprovals()) this.askAbout(job, request);
    this.deps.logger.info(`initialize: client asked for ${quoted(settled.requested)}, using ${settled.version}`);
    return response;
  }

  /** Runs a request that notifications/cancelled may abort; an aborted one gets no response (§4). */
  private async cancellable(
    controller: AbortController,
    work: (signal: AbortSignal) => Promise<JsonRpcResponse>,
  ): Promise<JsonRpcResponse | null> {
    const response = await work(controller.signal);
    return controller.signal.aborted ? null : response;
  }

  /**
   * tools/list is asked often and never changes: its JSON is built once (BENCHMARKS.md (c)); so is server/discover's.
   */
  private toolListings(): NonNullable<typeof this.listings> {
    if (this.listings) return this.listings;
    const definitions = this.gated ? [] : toolDefinitions(this.settings);
    this.listings = {
      legacy: serializedOnce({ tools: definitions }),
      modern: serializedOnce(this.forModernEra({ tools: definitions.map(withoutExecution), ...CACHEABLE })),
    };
    return this.listings;
  }

  /** `modern` is the request's 2026-07-28 envelope, or undefined for a legacy request. */
  private async callTool(
    id: RequestId,
    params: Record<string, unknown>,
    signal: AbortSignal,
    modern: ModernRequest | undefined,
  ): Promise<JsonRpcResponse> {
    const name = params.name;
    if (typeof name !== "string") return fail(id, INVALID_PARAMS, "tools/call requires params.name (a string)");
    const rawArgs = params.arguments;
    if (rawArgs !== undefined && rawArgs !== null && !isRecord(rawArgs)) {
      return fail(id, INVALID_PARAMS, "tools/call params.arguments must be an object");
    }
    if (!isToolName(name)) return fail(id, INVALID_PARAMS, `Unknown tool: ${quoted(name)}`);
    // 2025-11-25 task augmentation; a 2026-07-28 client cannot ask for a task, the server decides (§16.4).
    // Under the recursion guard no tasks capability is declared, so the augmentation is ignored, as the spec requires.
    const task = modern || this.gated ? undefined : params.task;
    const badTask = task === undefined ? undefined : taskProblem(id, name, task);
    if (badTask) return badTask;
    const answer = (result: CallToolResult<unknown>): JsonRpcResponse =>
      respond(id, modern ? this.forModernEra(result) : result);
    if (this.gated) return answer(renderFailure(new DispatchError("DEPTH_LIMIT", gateReason(this.opening))));
    const args = isRecord(rawArgs) ? rawArgs : {};
    const meta = isRecord(params._meta) ? params._meta : {};
    const token =
      typeof meta.progressToken === "string" || typeof meta.progressToken === "number" ? meta.progressToken : undefined;
    try {
      if (task !== undefined)
        return respond(id, this.tasks.adopt(await this.calls.startJob(name as TaskTool, args, signal), token));
      if (modern?.tasksExtension && (name === "claude_run" || name === "claude_start")) {
        const job = await this.calls.startJob(name, args, signal);
        // No progress follows a task: its token dies with this response (§16.4).
        if (becomesTask(job)) return respond(id, this.taskExtension.created(job));
        return answer(await this.calls.awaitRun(job, signal, token));
      }
      return answer(await this.calls.run(name, args, signal, token as ProgressToken | undefined));
    } catch (error) {
      const classified = this.classify(error, name);
      const aboutJob =
        (name === "claude_wait" || name === "claude_kill" || name === "claude_output" || name === "claude_respond") &&
        typeof args.job_id === "string";
      return answer(renderFailure(classified, aboutJob ? (args.job_id as string) : undefined));
    }
  }
}
