/**
 * What every request is checked for before it is routed (PROTOCOL.md §1, §14, §16): the shape of its params and
 * _meta, a tools/call's task augmentation, and the key a request is known by while it is in flight.
 */
import { INVALID_PARAMS, METHOD_NOT_FOUND, fail, isRecord, type JsonRpcResponse, type RequestId } from "./jsonrpc.js";
import { TASK_TOOLS } from "./tasks.js";
import type { ToolDefinition } from "../tools/definitions.js";

/** A request's id as a map key: 1 and "1" are different requests. */
export function requestKey(id: RequestId): string {
  return `${typeof id}:${String(id)}`;
}

/**
 * execution.taskSupport is 2025-11-25 vocabulary: in 2026-07-28 the server alone decides what becomes a task (§16.4).
 */
export function withoutExecution(tool: ToolDefinition): Omit<ToolDefinition, "execution"> {
  const { execution: _decidedByTheServer, ...rest } = tool;
  return rest;
}

/** Checks what every request may carry: object params, an object _meta, a string or number progressToken. */
export function paramsProblem(message: Record<string, unknown>): string | undefined {
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

/**
 * A tools/call's task augmentation (2025-11-25), checked: undefined when there is none, a failure when it is malformed.
 */
export function taskProblem(id: RequestId, name: string, task: unknown): JsonRpcResponse | undefined {
  const ttl = isRecord(task) ? task.ttl : undefined;
  if (!isRecord(task) || (ttl !== undefined && !(typeof ttl === "number" && Number.isFinite(ttl) && ttl >= 0))) {
    return fail(id, INVALID_PARAMS, "params.task must be an object with an optional non-negative ttl");
  }
  if (!(TASK_TOOLS as readonly string[]).includes(name))
    return fail(
      id,
      METHOD_NOT_FOUND,
      `Method not found: ${name} cannot run as a task (it has no execution.taskSupport)`,
    );
  return undefined;
}
