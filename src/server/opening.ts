/**
 * The opening of a connection (PROTOCOL.md §2): what `initialize` answers, which needs nothing of the job layer.
 * The handler answers it with these functions; so does the front door, while the rest of the server still loads
 * (BENCHMARKS.md (a)). A small module on purpose: everything it imports is loaded before the first answer.
 */
import { LEGACY_PROTOCOL_VERSIONS } from "./eras.js";
import { INVALID_PARAMS, fail, isRecord, isRequestId, respond, type JsonRpcResponse } from "./jsonrpc.js";

/**
 * The versions initialize negotiates, newest first; the first is what we answer
 * when a client asks for a version we do not know (§2).
 */
export const SUPPORTED_PROTOCOL_VERSIONS = LEGACY_PROTOCOL_VERSIONS;
export const LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0];

/**
 * For the model, in initialize and server/discover alike: how the tools fit together, which no description says (§5).
 */
export const SERVER_INSTRUCTIONS =
  "claude-dispatch runs coding agents headless as jobs. claude_run waits for a short task; for longer work, " +
  "claude_start, then claude_wait until the job is neither queued nor running. Pass a result's session_id back to " +
  "continue its conversation (claude_sessions finds older ones). claude_kill stops a job, claude_list finds jobs, " +
  "claude_output pages a long result or a transcript. A job input_required asks permission: ask the user, then " +
  "claude_respond. worktree: true gives a job its own git worktree for claude_worktree to diff, merge or discard.";

/** What the opening is made of: who we are, and the recursion guard (§7.4). */
export interface OpeningFacts {
  server: { name: string; version: string };
  depth: { current: number; max: number };
}

/** Echo a version we support; otherwise offer our latest and let the client decide (§2). */
export function negotiateVersion(requested: string): string {
  return (SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
}

/** At or above the depth limit no tool is listed or runs (§7.4). */
export function isGated(facts: OpeningFacts): boolean {
  return facts.depth.current >= facts.depth.max;
}

/** Why no tool is offered at or above the depth limit: the instructions say it, and DEPTH_LIMIT. */
export function gateReason(facts: OpeningFacts): string {
  const { current, max } = facts.depth;
  if (current === 0) return `CLAUDE_DISPATCH_MAX_DEPTH is ${max}: the operator turned dispatch off`;
  return (
    `this server runs inside an agent that claude-dispatch started (depth ${current}, limit ${max}); nested ` +
    `dispatch is off to prevent runaway recursion`
  );
}

/** The instructions of initialize and server/discover: what the tools are for, or why there are none. */
export function instructionsOf(facts: OpeningFacts): string {
  return isGated(facts) ? `claude-dispatch offers no tools here: ${gateReason(facts)}.` : SERVER_INSTRUCTIONS;
}

/** initialize's answer, and what was settled: the version, and whether the client can be asked (§18.2). */
export function initializeAnswer(
  facts: OpeningFacts,
  id: string | number,
  params: Record<string, unknown>,
): { response: JsonRpcResponse; settled?: { requested: string; version: string; canElicit: boolean } } {
  const requested = params.protocolVersion;
  if (typeof requested !== "string") {
    return { response: fail(id, INVALID_PARAMS, "initialize requires params.protocolVersion (a string)") };
  }
  const version = negotiateVersion(requested);
  // Elicitation came with 2025-06-18; a form is all we ask for (§18).
  const capabilities = isRecord(params.capabilities) ? params.capabilities : {};
  const canElicit = version >= "2025-06-18" && isRecord(capabilities.elicitation);
  return {
    response: respond(id, {
      protocolVersion: version,
      capabilities: isGated(facts)
        ? { tools: { listChanged: false } }
        : { tools: { listChanged: false }, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      serverInfo: { name: facts.server.name, version: facts.server.version },
      instructions: instructionsOf(facts),
    }),
    settled: { requested, version, canElicit },
  };
}

/** A request handler (handler.ts's RequestHandler): a parsed message in, one response or null out. */
type Handle = (message: unknown) => Promise<JsonRpcResponse | null>;

/**
 * A handler that answers a plain `initialize` itself until `later` (the whole handler) is ready, then hands it
 * every message, the initializes it answered first, so the handler's state is what it would have been. A plain
 * initialize is a JSON-RPC 2.0 request whose params are an object without `_meta`: for it, the handler's checks
 * before routing (§1, §16.1) find nothing, so the answer is the handler's own. Anything else waits for `later`.
 */
export function frontDoor(facts: OpeningFacts, later: Promise<Handle>): Handle {
  let handler: Handle | undefined;
  const answered: unknown[] = [];
  const ready = later.then(async (whole) => {
    // Its answers were given already; replaying settles the version and asks about requests waiting (§18.2).
    for (const message of answered) await whole(message);
    handler = whole;
    return whole;
  });
  return async (message) => {
    if (handler) return handler(message);
    if (
      isRecord(message) &&
      message.jsonrpc === "2.0" &&
      message.method === "initialize" &&
      isRequestId(message.id) &&
      isRecord(message.params) &&
      message.params._meta === undefined
    ) {
      answered.push(message);
      return initializeAnswer(facts, message.id, message.params).response;
    }
    return (await ready)(message);
  };
}
