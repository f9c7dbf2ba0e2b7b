/**
 * The approval endpoint (PROTOCOL.md §18): the approver of every job of a state directory, served over HTTP on
 * 127.0.0.1 by the server (or carrier) that holds its port, so that no process runs beside each agent to forward
 * its permission prompts. Claude Code reaches it as an MCP server of type "http" (docs/approvals.md). Each job has
 * its own path and token; a tool call is answered on an event stream that names its request, so that when the
 * holder goes (a restart, a handover) the agent reconnects after RESUME_AFTER_MS, to whoever holds the port then,
 * and gets the answer there. Requests and answers are the job's files, as the per-agent approver keeps them.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { Socket } from "node:net";

import type { Clock } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { isRecord } from "../core/values.js";
import { isJobId } from "../store/records.js";
import type { Approver } from "./approver.js";

/** How long an agent whose stream broke waits before it reconnects: a holder gone longer loses its calls. */
export const RESUME_AFTER_MS = 10_000;
/** A comment on each open stream this often, so that nothing between gives up on a quiet one. */
const KEEPALIVE_MS = 25_000;
/** A tool call's input may carry a whole file; more than this is refused. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;
/** After a stream broke, its request is withdrawn unless the agent came back within this. */
const WITHDRAW_AFTER_MS = RESUME_AFTER_MS * 3;

/** A job's token: what its agent must present, made from the state directory's secret (docs/approvals.md). */
export function tokenFor(secret: string, jobId: string): string {
  return createHmac("sha256", secret).update(`approver:${jobId}`).digest("hex");
}

/** A job's URL at the endpoint on this port: the path `serve` answers. */
export function jobUrl(port: number, jobId: string): string {
  return `http://127.0.0.1:${port}/jobs/${jobId}`;
}

export interface EndpointOptions {
  /** The state directory's secret, which every job's token is made from. */
  secret: string;
  /** The approver of a job of the state directory; undefined when there is none to ask for it. */
  approverFor(jobId: string): Approver | undefined;
  clock: Clock;
  logger: Logger;
}

export class ApprovalEndpoint {
  private server: http.Server | undefined;
  private port: number | undefined;
  private readonly sockets = new Set<Socket>();
  /** Streams cut by the holder's going, and withdrawals due for streams the agent cut. */
  private readonly open = new Set<() => void>();
  private readonly withdrawals = new Map<string, () => void>();

  constructor(private readonly options: EndpointOptions) {}

  /** The port served, once listening. */
  get listening(): number | undefined {
    return this.port;
  }

  /** Listens on 127.0.0.1:port (0: any); "in use" when another process holds that port. */
  listen(port: number): Promise<number | "in use"> {
    const server = http.createServer((request, response) => this.serve(request, response));
    // Hosts' browsers never come here; agents send small headers. Node's own limits bound the rest.
    server.maxHeadersCount = 64;
    server.on("connection", (socket) => {
      this.sockets.add(socket);
      socket.once("close", () => this.sockets.delete(socket));
    });
    return new Promise((resolve, reject) => {
      server.once("error", (error: NodeJS.ErrnoException) => {
        if (error.code === "EADDRINUSE") resolve("in use");
        else reject(error);
      });
      server.listen({ port, host: "127.0.0.1", exclusive: true }, () => {
        server.removeAllListeners("error");
        server.on("error", (error) => this.options.logger.warn(`approval endpoint: ${error.message}`));
        const address = server.address();
        this.server = server;
        this.port = typeof address === "object" && address ? address.port : port;
        resolve(this.port);
      });
    });
  }

  /** Stops listening and cuts every stream: their agents reconnect to the next holder (RESUME_AFTER_MS). */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.port = undefined;
    for (const cut of [...this.open]) cut();
    for (const cancel of this.withdrawals.values()) cancel();
    this.withdrawals.clear();
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private serve(request: http.IncomingMessage, response: http.ServerResponse): void {
    const refuse = (status: number, text: string): void => {
      response.writeHead(status, { "content-type": "text/plain" }).end(`${text}\n`);
      request.resume();
    };
    const jobId = /^\/jobs\/([^/?#]+)$/.exec(request.url ?? "")?.[1];
    // A browser's page must not reach it (a rebound name, or a form posted here): no Origin, our own Host.
    if (request.headers.origin !== undefined || request.headers.host !== `127.0.0.1:${this.port}`)
      return refuse(403, "forbidden");
    if (jobId === undefined || !isJobId(jobId)) return refuse(404, "no such job");
    if (!this.authorized(jobId, request.headers.authorization)) return refuse(401, "unauthorized");
    const approver = this.options.approverFor(jobId);
    if (!approver) return refuse(404, "no such job");
    if (request.method === "GET") {
      const token = request.headers["last-event-id"];
      // No stream of its own is offered; a broken call's stream is resumed by its token.
      if (typeof token !== "string") return refuse(405, "method not allowed");
      const resumed = approver.resume(token);
      if (!resumed) return refuse(404, "no such call");
      this.withdrawals.get(token)?.();
      this.withdrawals.delete(token);
      request.resume();
      return this.stream(response, approver, (announce) => {
        announce(token);
        return resumed;
      });
    }
    if (request.method !== "POST") return refuse(405, "method not allowed");
    readBody(request, MAX_BODY_BYTES).then(
      (body) => this.post(response, approver, body),
      () => refuse(413, "too large"),
    );
  }

  private authorized(jobId: string, header: string | undefined): boolean {
    const presented = Buffer.from(header ?? "");
    const expected = Buffer.from(`Bearer ${tokenFor(this.options.secret, jobId)}`);
    return presented.length === expected.length && timingSafeEqual(presented, expected);
  }

  private post(response: http.ServerResponse, approver: Approver, body: string): void {
    let message: unknown;
    try {
      message = JSON.parse(body);
    } catch {
      message = undefined;
    }
    if (!isRecord(message)) {
      const error = { code: -32700, message: "Parse error: one JSON-RPC message a request" };
      response.writeHead(400, { "content-type": "application/json" });
      response.end(JSON.stringify({ jsonrpc: "2.0", id: null, error }));
      return;
    }
    if (!("id" in message) || message.method === undefined) {
      void approver.handle(message);
      response.writeHead(202).end();
      return;
    }
    if (message.method === "tools/call") {
      this.stream(response, approver, (announce) => approver.handle(message, announce));
      return;
    }
    void approver.handle(message).then((answer) => {
      if (answer === null) response.writeHead(202).end();
      else response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
    });
  }

  /**
   * Answers a tool call on an event stream: its token first (once its request is filed), then the response.
   * A stream the agent cut is withdrawn unless it comes back; one the holder cuts is left for the next holder.
   */
  private stream(
    response: http.ServerResponse,
    approver: Approver,
    answer: (announce: (token: string) => void) => Promise<unknown>,
  ): void {
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store" });
    let token: string | undefined;
    const answered = answer((filed) => {
      token = filed;
      response.write(`id: ${filed}\nretry: ${RESUME_AFTER_MS}\ndata: \n\n`);
    });
    let ended = false;
    let holderLeaving = false;
    const cancelKeepalive = this.every(KEEPALIVE_MS, () => response.write(": waiting for an answer\n\n"));
    const cut = (): void => {
      holderLeaving = true;
      response.destroy();
    };
    this.open.add(cut);
    response.once("close", () => {
      cancelKeepalive();
      this.open.delete(cut);
      const filed = token;
      if (ended || holderLeaving || filed === undefined) return;
      // The agent went, or lost us: if it does not come back for its answer, nobody waits for it (§18).
      const cancel = this.options.clock.setTimer(() => {
        this.withdrawals.delete(filed);
        approver.withdraw(filed);
      }, WITHDRAW_AFTER_MS);
      this.withdrawals.set(filed, cancel);
    });
    void answered.then((answer) => {
      if (response.destroyed) return;
      ended = true;
      response.end(`data: ${JSON.stringify(answer)}\n\n`);
    });
  }

  private every(ms: number, tick: () => void): () => void {
    let cancel = (): void => undefined;
    const next = (): void => {
      cancel = this.options.clock.setTimer(() => {
        tick();
        next();
      }, ms);
    };
    next();
    return () => cancel();
  }
}

/** The request's body as text, or a rejection past `limit` bytes. */
function readBody(request: http.IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        request.destroy();
        reject(new Error("too large"));
      } else chunks.push(chunk);
    });
    request.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.once("error", reject);
  });
}
