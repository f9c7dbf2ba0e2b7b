/** JSON-RPC 2.0 message shapes and the reserved error codes (PROTOCOL.md §1). */

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
/** MCP 2026-07-28 codes, from the part of the server-error range the spec reserves for itself (§16). */
export const MISSING_REQUIRED_CLIENT_CAPABILITY = -32021;
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;

export type RequestId = string | number;

export interface JsonRpcRequest {
  jsonrpc: "2.0";
  id: RequestId;
  method: string;
  params?: unknown;
}

export interface JsonRpcSuccess {
  jsonrpc: "2.0";
  id: RequestId;
  result: unknown;
}

export interface JsonRpcFailure {
  jsonrpc: "2.0";
  id: RequestId | null;
  error: { code: number; message: string; data?: unknown };
}

export type JsonRpcResponse = JsonRpcSuccess | JsonRpcFailure;

export interface JsonRpcNotification {
  jsonrpc: "2.0";
  method: string;
  params?: Record<string, unknown>;
}

/** Requests go out too: elicitation/create (§18). */
export type OutgoingMessage = JsonRpcResponse | JsonRpcNotification | JsonRpcRequest;

/** Where a result's JSON text is cached, off the enumerable fields that tests and JSON.stringify see. */
export const SERIALIZED = Symbol("serialized JSON");

/** Marks a result that never changes, so the writer serializes it once, not per response. */
export function serializedOnce<T extends object>(result: T): T {
  Object.defineProperty(result, SERIALIZED, { value: JSON.stringify(result), enumerable: false });
  return result;
}

export function respond(id: RequestId, result: unknown): JsonRpcSuccess {
  return { jsonrpc: "2.0", id, result };
}

export function fail(id: RequestId | null, code: number, message: string, data?: unknown): JsonRpcFailure {
  return { jsonrpc: "2.0", id, error: data === undefined ? { code, message } : { code, message, data } };
}

export { isRecord } from "../core/values.js";

export function isRequestId(value: unknown): value is RequestId {
  return typeof value === "string" || (typeof value === "number" && Number.isFinite(value));
}
