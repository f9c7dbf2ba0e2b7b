/**
 * `claude-dispatch approver`: the MCP server a job's agent asks for permission (§18). Not a command for
 * people: the server names it in each agent's MCP configuration. It ends with its stdin or a signal.
 */
import { approvalFilesOf, createApprover, parseApproverArgs } from "../approver/approver.js";
import { systemClock } from "../core/clock.js";
import { createLogger } from "../core/log.js";
import { StateStore } from "../store/state-store.js";
import { createMessageWriter, serveStdio } from "../server/stdio.js";
import { exitForUsage, type ProcessParts } from "./machine.js";

export function serveApprover(parts: ProcessParts, args: string[]): void {
  const parsed = parseApproverArgs(args);
  if (!parsed) {
    exitForUsage(
      parts,
      "usage: claude-dispatch approver [--state-dir=DIR] --wait-ms=N JOB_ID (started by the server for each agent)",
    );
  }
  const { jobId } = parsed;
  const logger = createLogger(parts.stderr, "warn");
  const stateDir = parsed.stateDir ?? parts.here.stateDirectory(parts.env);
  const store = new StateStore(stateDir, { uid: parts.uid, randomName: () => crypto.randomUUID() });
  const approver = createApprover({
    jobId,
    clock: systemClock,
    logger,
    waitMs: parsed.waitMs,
    files: approvalFilesOf(store, jobId),
  });
  const server = serveStdio({
    input: parts.stdin,
    writer: createMessageWriter(parts.stdout, logger),
    handle: (message) => approver.handle(message),
    logger,
  });
  // The agent closes our stdin, or sends SIGINT, when it ends; a request still open stays on file, unanswered.
  void server.ended.then(() => parts.exit(0));
  parts.onSignals(["SIGTERM", "SIGINT", "SIGHUP"], () => parts.exit(0));
}
