/**
 * The approver (PROTOCOL.md §18): `claude-dispatch approver`, a small MCP
 * server on stdio that a job's agent runs and asks whenever it would have
 * shown a permission prompt. Each question is filed in the job's folder and
 * answered there, by claude_respond, the client's elicitation form, the
 * command line, or the timeout, whichever comes first; so a question outlives
 * the server that saw it, and any server of the state directory can answer
 * it. It offers one tool and dispatches nothing.
 */
import type { Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { SERVER_NAME, SERVER_VERSION } from "../core/version.js";
import { isRecord } from "../core/values.js";
import { LEGACY_PROTOCOL_VERSIONS } from "../server/eras.js";
import {
  METHOD_NOT_FOUND,
  fail,
  isRequestId,
  respond,
  type JsonRpcResponse,
  type RequestId,
} from "../server/jsonrpc.js";
import { answerToOwnRequest, type ApprovalAnswer, type ApprovalRequest, type OwnAnswer } from "../store/approvals.js";
import type { StateStore } from "../store/state-store.js";
import type { PermissionPrompts } from "../agent/runtime.js";
import { PERMISSION_PROMPTS } from "../runtimes/index.js";

/** Without file-system notifications the answer is looked for this often; with them, this is only a safety net. */
const POLL_WITHOUT_WATCH_MS = 250;
const POLL_WITH_WATCH_MS = 2000;

/** What the approver needs of the job's folder (store/state-store.ts). */
export interface ApprovalFiles {
  /** Whether the job's folder and record are there and ours (§15.1): an approver never files into anything else. */
  usable(): boolean;
  /** Files it under the first free number from `from`, with a fresh nonce. */
  file(request: Omit<ApprovalRequest, "id" | "nonce">, from: number): ApprovalRequest;
  /** The answer to a request this approver filed, if one naming its nonce is there; anything else there is removed. */
  answerTo(request: ApprovalRequest): OwnAnswer;
  answer(id: string, answer: ApprovalAnswer): { answer: ApprovalAnswer; won: boolean } | undefined;
  watch(onChange: () => void): (() => void) | undefined;
  /** Request `id` as filed, if it is there and whole. */
  request(id: string): ApprovalRequest | undefined;
}

/**
 * One job's approver: its MCP handler, and the calls a lost connection left open. A transport that can lose a
 * call (the endpoint's HTTP streams) is given a token as each request is filed, and resumes or withdraws by it.
 */
export interface Approver {
  /** One message of the agent: one response or null; `filed` hears each call's token once its request is filed. */
  handle(message: unknown, filed?: (token: string) => void): Promise<JsonRpcResponse | null>;
  /** The response to the call a token names, once its request is answered; undefined when there is no such call. */
  resume(token: string): Promise<JsonRpcResponse> | undefined;
  /** Denies the request a token names, unless it has an answer: nobody waits for it any longer. */
  withdraw(token: string): void;
}

/** What a token holds: the request's number and nonce, the approver tool called, and the call's JSON-RPC id. */
type CallToken = [requestId: string, nonce: string, tool: string, callId: RequestId];

function tokenOf(call: CallToken): string {
  return Buffer.from(JSON.stringify(call)).toString("base64url");
}

/** A token as this approver made it; undefined for anything else (a token comes back from the agent's side). */
function readToken(token: string): CallToken | undefined {
  if (token.length > 1024 || !/^[\w-]+$/.test(token)) return undefined;
  try {
    const call: unknown = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
    if (!Array.isArray(call) || call.length !== 4) return undefined;
    const [requestId, nonce, tool, callId] = call as unknown[];
    if (typeof requestId !== "string" || typeof nonce !== "string" || typeof tool !== "string") return undefined;
    return isRequestId(callId) ? [requestId, nonce, tool, callId] : undefined;
  } catch {
    return undefined;
  }
}

export interface ApproverOptions {
  jobId: string;
  files: ApprovalFiles;
  clock: Clock;
  logger: Logger;
  /** How long a request waits for an answer before it is denied. */
  waitMs: number;
  /** The agent CLIs' sides of the protocol, one tool each; default: every runtime's that forwards its prompts. */
  prompts?: readonly PermissionPrompts[];
}

/** The approver's argv after `approver`: `--state-dir=DIR --wait-ms=N JOB_ID`; undefined when it is not that. */
/**
 * Without --state-dir, the state directory is the one its environment names, as
 * for the server (§15.1): another machine's (§21.3).
 */
export function parseApproverArgs(
  args: readonly string[],
): { stateDir: string | undefined; waitMs: number; jobId: string } | undefined {
  let stateDir: string | undefined;
  let waitMs: number | undefined;
  let jobId: string | undefined;
  for (const arg of args) {
    if (arg.startsWith("--state-dir=")) stateDir = arg.slice("--state-dir=".length);
    else if (arg.startsWith("--wait-ms=")) waitMs = Number(arg.slice("--wait-ms=".length));
    else if (!arg.startsWith("-") && jobId === undefined) jobId = arg;
    else return undefined;
  }
  if (stateDir === "" || jobId === undefined || waitMs === undefined || !Number.isSafeInteger(waitMs) || waitMs < 1)
    return undefined;
  return { stateDir, waitMs, jobId };
}

function minutes(ms: number): string {
  return ms >= 120_000 ? `${Math.round(ms / 60_000)} minutes` : `${Math.round(ms / 1000)} seconds`;
}

/** What the agent is told when a request is denied without a message of the person's. */
export function denialText(answer: ApprovalAnswer, waitMs: number): string {
  if (answer.message) return answer.message;
  if (answer.by === "timeout")
    return (
      `No one answered this permission request within ${minutes(waitMs)}, so it was denied. Do not retry it; ` +
      `finish what you can without it and say what needed approval.`
    );
  return "The person supervising this job denied this tool call.";
}

/** The approver of one job: one response per request, null for notifications and responses. */
export function createApprover(options: ApproverOptions): Approver {
  const { files, clock, logger, waitMs, prompts = PERMISSION_PROMPTS } = options;
  /** Filed requests of tool calls in flight, by JSON-RPC id, so a cancelled call withdraws its request. */
  const filedBy = new Map<string, string>();
  /** Where the next request is filed from: numbers below it are taken, so each filing tries one number (§18). */
  let nextNumber = 1;

  const deny = (message: string): ApprovalAnswer => ({ decision: "deny", by: "server", at: clock.now(), message });

  /** Resolves with the answer that stands: one given meanwhile, or the timeout's. */
  const answerOf = (request: ApprovalRequest): Promise<ApprovalAnswer> =>
    new Promise((resolve) => {
      let settled = false;
      let cancelPoll = (): void => undefined;
      const finish = (answer: ApprovalAnswer): void => {
        if (settled) return;
        settled = true;
        cancelPoll();
        cancelExpiry();
        stopWatching?.();
        resolve(answer);
      };
      const look = (): void => {
        if (settled) return;
        let found: OwnAnswer = {};
        try {
          found = files.answerTo(request);
        } catch (error) {
          logger.warn(`cannot read the answer to request ${request.id}: ${(error as Error).message}`);
        }
        // Written before the request was filed, or for another request of that number: never its answer (§18).
        if (found.removed) logger.warn(`job ${options.jobId}: request ${request.id}: removed an answer not naming it`);
        if (found.answer) finish(found.answer);
      };
      const expire = (): void => {
        let standing: ApprovalAnswer | undefined;
        try {
          standing = files.answer(request.id, { decision: "deny", by: "timeout", at: clock.now() })?.answer;
        } catch (error) {
          logger.warn(`cannot record the timeout of request ${request.id}: ${(error as Error).message}`);
        }
        finish(standing ?? { decision: "deny", by: "timeout", at: clock.now() });
      };
      const stopWatching = files.watch(look);
      const poll = (): void => {
        look();
        if (!settled) cancelPoll = clock.setTimer(poll, stopWatching ? POLL_WITH_WATCH_MS : POLL_WITHOUT_WATCH_MS);
      };
      const cancelExpiry = clock.setTimer(expire, Math.max(0, request.expires_at - clock.now()));
      poll();
    });

  /** The tool's result for an answer: what the agent reads. */
  const render = (id: RequestId, cli: PermissionPrompts, input: unknown, answer: ApprovalAnswer): JsonRpcResponse => {
    const text = cli.answerText(answer.decision, input, answer.decision === "deny" ? denialText(answer, waitMs) : "");
    return respond(id, { content: [{ type: "text", text }] });
  };

  const ask = async (
    id: RequestId,
    cli: PermissionPrompts,
    args: unknown,
    announce?: (token: string) => void,
  ): Promise<JsonRpcResponse> => {
    const asked = cli.read(args);
    if (!asked)
      return respond(id, {
        content: [{ type: "text", text: `INVALID_ARGUMENT: expected ${cli.expected}` }],
        isError: true,
      });
    let answer: ApprovalAnswer;
    let filed: ApprovalRequest | undefined;
    if (!files.usable()) {
      answer = deny(
        "This job's approvals cannot be filed (its folder in the state directory is missing or not this user's), so " +
          "the tool call was denied.",
      );
    } else {
      try {
        const now = clock.now();
        filed = files.file(
          {
            tool_name: asked.toolName,
            input: asked.input,
            ...(asked.toolUseId ? { tool_use_id: asked.toolUseId } : {}),
            preview: cli.preview(asked),
            asked_at: now,
            expires_at: now + waitMs,
          },
          nextNumber,
        );
        nextNumber = Number(filed.id) + 1;
        filedBy.set(String(id), filed.id);
        logger.info(`job ${options.jobId}: request ${filed.id} filed: ${filed.preview}`);
        announce?.(tokenOf([filed.id, filed.nonce ?? "", cli.tool.name, id]));
        answer = await answerOf(filed);
      } catch (error) {
        answer = deny(`The request could not be filed (${(error as Error).message}), so the tool call was denied.`);
      } finally {
        filedBy.delete(String(id));
      }
    }
    if (filed) logger.info(`job ${options.jobId}: request ${filed.id}: ${answer.decision} (by ${answer.by})`);
    return render(id, cli, asked.input, answer);
  };

  /** The request a token names, with the tool called, while it is the one filed under that number. */
  const called = (token: string): { call: CallToken; cli: PermissionPrompts; request: ApprovalRequest } | undefined => {
    const call = readToken(token);
    const cli = call && prompts.find((candidate) => candidate.tool.name === call[2]);
    const request = call && cli ? files.request(call[0]) : undefined;
    return call && cli && request && (request.nonce ?? "") === call[1] ? { call, cli, request } : undefined;
  };

  const resume = (token: string): Promise<JsonRpcResponse> | undefined => {
    const found = called(token);
    if (!found) return undefined;
    const { call, cli, request } = found;
    return answerOf(request).then((answer) => render(call[3], cli, request.input, answer));
  };

  const withdraw = (token: string): void => {
    const found = called(token);
    if (found) files.answer(found.request.id, deny("The agent withdrew this request."));
  };

  const handle = async (message: unknown, announce?: (token: string) => void): Promise<JsonRpcResponse | null> => {
    if (!isRecord(message) || message.jsonrpc !== "2.0") return null;
    const method = message.method;
    const params = isRecord(message.params) ? message.params : {};
    if (!("id" in message)) {
      // A tool call the agent gave up on withdraws its request: nobody is asked about it any longer.
      if (method === "notifications/cancelled" && isRequestId(params.requestId)) {
        const filed = filedBy.get(String(params.requestId));
        if (filed) files.answer(filed, deny("The agent withdrew this request."));
      }
      return null;
    }
    if (!isRequestId(message.id) || typeof method !== "string") return null;
    const id = message.id;
    switch (method) {
      case "initialize": {
        const requested = typeof params.protocolVersion === "string" ? params.protocolVersion : "";
        const version = (LEGACY_PROTOCOL_VERSIONS as readonly string[]).includes(requested)
          ? requested
          : LEGACY_PROTOCOL_VERSIONS[0];
        return respond(id, {
          protocolVersion: version,
          capabilities: { tools: { listChanged: false } },
          serverInfo: { name: `${SERVER_NAME}-approver`, version: SERVER_VERSION },
        });
      }
      case "ping":
        return respond(id, {});
      case "tools/list":
        return respond(id, { tools: prompts.map((cli) => cli.tool) });
      case "tools/call": {
        const cli = prompts.find((candidate) => candidate.tool.name === params.name);
        if (cli) return ask(id, cli, params.arguments, announce);
        const tools =
          `${prompts.length === 1 ? "one tool" : "the tools"}, ` +
          `${prompts.map((each) => each.tool.name).join(", ")}`;
        return respond(id, {
          content: [{ type: "text", text: `INVALID_ARGUMENT: the approver has ${tools}` }],
          isError: true,
        });
      }
      default:
        // server/discover included: the CLI then falls back to initialize.
        return fail(id, METHOD_NOT_FOUND, `Method not found: ${method.slice(0, 60)}`);
    }
  };

  return { handle, resume, withdraw };
}

/** The files of one job's requests in a state directory, trusted only while its folder and record are ours (§15.1). */
export function approvalFilesOf(store: StateStore, jobId: string): ApprovalFiles {
  return {
    usable: () => {
      try {
        store.check();
        return store.read(jobId) !== undefined;
      } catch {
        return false;
      }
    },
    file: (request, from) => store.fileApproval(jobId, request, from),
    answerTo: (request) => answerToOwnRequest(store.jobDir(jobId), request),
    answer: (requestId, answer) => store.answerApproval(jobId, requestId, answer),
    watch: (onChange) => store.watchApprovals(jobId, onChange),
    request: (id) => store.approval(jobId, id)?.request,
  };
}
