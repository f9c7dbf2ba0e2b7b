/**
 * The two protocol eras one connection may mix (PROTOCOL.md §2, §16). The
 * legacy era settles a version once, with initialize. The 2026-07-28 era
 * declares the version and the client's capabilities on every request, in
 * params._meta, so each request is read on its own and nothing is remembered.
 */
import { INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, isRecord } from "./jsonrpc.js";

/** Negotiated by initialize, newest first (§2). */
export const LEGACY_PROTOCOL_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] as const;
/** Declared on each request; initialize never negotiates these (§16.1). */
export const MODERN_PROTOCOL_VERSIONS = ["2026-07-28"] as const;

export const PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion";
export const CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities";
export const SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo";
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** What a 2026-07-28 request says about its client; only that request counts. */
export interface ModernRequest {
  version: string;
  /** The client declared the tasks extension in this request's capabilities. */
  tasksExtension: boolean;
}

export type Envelope =
  | { era: "legacy" }
  | { era: "modern"; request: ModernRequest }
  | { era: "refused"; code: number; message: string; data?: unknown };

/**
 * The era of one request: the protocol version key in _meta makes it a
 * 2026-07-28 request, which is refused unless its version is one we serve
 * and it declares its capabilities (§16.1).
 */
export function readEnvelope(params: Record<string, unknown>): Envelope {
  const meta = params._meta;
  if (!isRecord(meta) || !Object.hasOwn(meta, PROTOCOL_VERSION_KEY)) return { era: "legacy" };
  const version = meta[PROTOCOL_VERSION_KEY];
  if (typeof version !== "string") {
    return {
      era: "refused",
      code: INVALID_PARAMS,
      message: `params._meta["${PROTOCOL_VERSION_KEY}"] must be a string`,
    };
  }
  if (!(MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(version)) {
    // Only versions a request envelope may name: after -32022 a client must not
    // fall back to initialize (stdio transport rules).
    const supported = [...MODERN_PROTOCOL_VERSIONS];
    return {
      era: "refused",
      code: UNSUPPORTED_PROTOCOL_VERSION,
      message: "Unsupported protocol version",
      data: { supported, requested: version },
    };
  }
  const capabilities = meta[CLIENT_CAPABILITIES_KEY];
  if (!isRecord(capabilities)) {
    return {
      era: "refused",
      code: INVALID_PARAMS,
      message: `params._meta["${CLIENT_CAPABILITIES_KEY}"] is required on every ${version} request (an object)`,
    };
  }
  const extensions = capabilities.extensions;
  return {
    era: "modern",
    request: { version, tasksExtension: isRecord(extensions) && isRecord(extensions[TASKS_EXTENSION]) },
  };
}

export type ModernResultType = "complete" | "task";

/** Every 2026-07-28 result names its type, and the server names itself in its _meta (§16.3). */
export function modernResult(
  result: object,
  server: { name: string; version: string },
  resultType: ModernResultType = "complete",
): Record<string, unknown> {
  const meta = (result as { _meta?: unknown })._meta;
  return { resultType, ...result, _meta: { ...(isRecord(meta) ? meta : {}), [SERVER_INFO_KEY]: server } };
}
