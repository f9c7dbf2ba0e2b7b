/**
 * A job's agent on another machine, as this server follows it (PROTOCOL.md §21.3): its output arrives over ssh and
 * is written to the job's own stdout file here before the reader sees it, so the local copy is the offset to resume
 * from after a dropped connection or a restart, and everything that reads output files works on it unchanged.
 */
import { closeSync, fstatSync, readSync, writeSync } from "node:fs";

import type { ChildExit, ChildHandle, KillReport, OutputFiles } from "../../agent/host.js";
import type { CancelTimer, Clock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { Approval, ApprovalAnswer, ApprovalRequest } from "../../store/approvals.js";
import { writeTextFile } from "../../store/atomic.js";
import { openForUpdating, openForWriting, readRegularTextFile } from "../../store/files.js";
import type { EndFrame, RemoteFrame, RemoteRequest, StartRequest } from "./protocol.js";
import type { Session, SessionEnd } from "./session.js";

/** What a remote agent needs of its host. */
/** How often a start whose channel was cut before its acceptance came back is sent again. */
const START_RETRIES = 2;

export interface RemoteHostLink {
  readonly name: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly backoffMs: { first: number; max: number };
  open(request: RemoteRequest, onFrame: (frame: RemoteFrame) => boolean | void): Session;
  kill(jobId: string): Promise<KillReport>;
  /** Sends an answer there; false when the host could not be reached (it is sent again later). */
  answer(jobId: string, requestId: string, answer: ApprovalAnswer): Promise<boolean>;
  /** Why a session ended, in a phrase. */
  describe(closed: SessionEnd): string;
}

/**
 * The job's approval files here (§18): the requests its approver files there are mirrored, under the same ids,
 * so that this server's callers are asked as for a local job, and their answers go back.
 */
export interface LocalApprovals {
  /** Files a request under its own id; false when it is there already. */
  fileAs(request: ApprovalRequest): boolean;
  read(requestId: string): Approval | undefined;
  /** Records the answer given there (its approver's timeout, its command line). */
  answer(requestId: string, answer: ApprovalAnswer): void;
  watch(onChange: () => void): (() => void) | undefined;
}

export type Following = { kind: "start"; request: StartRequest } | { kind: "follow"; jobId: string };

const READ_CHUNK_BYTES = 64 * 1024;

export class RemoteAgent implements ChildHandle {
  readonly pid = undefined;
  readonly marker = undefined;
  readonly exited: Promise<ChildExit>;
  readonly settled: Promise<void>;
  readonly ready: Promise<void>;
  private offset = 0;
  private fd: number | undefined;
  private session: Session | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  private killWanted = false;
  /** The far end said the job is killed (or was over): its end is due, and no reconnect waits for it (§21.3). */
  private killedThere = false;
  /** Requests mirrored here, by id: whether an answer given here is still to be sent there. */
  private readonly mirrored = new Map<string, "waiting" | "sending" | "settled">();
  private readonly stopWatching: (() => void) | undefined;

  constructor(
    private readonly host: RemoteHostLink,
    private readonly following: Following,
    private readonly output: OutputFiles,
    private readonly onStdout: (chunk: Buffer) => void,
    private readonly approvals?: LocalApprovals,
  ) {
    // A start writes the output afresh; a follow goes on from what an earlier server received.
    this.ready = Promise.resolve().then(() => (following.kind === "start" ? this.openFresh() : this.catchUp()));
    this.stopWatching = approvals?.watch(() => this.sendAnswers());
    this.exited = this.ready
      .then(() => this.follow())
      .finally(() => {
        this.closeFile();
        this.stopWatching?.();
      });
    this.settled = this.exited.then(() => undefined);
  }

  private get jobId(): string {
    return this.following.kind === "start" ? this.following.request.job_id : this.following.jobId;
  }

  async identity(): Promise<{ pid: undefined; startTime: undefined; marker: undefined }> {
    return { pid: undefined, startTime: undefined, marker: undefined };
  }

  async killTree(): Promise<KillReport> {
    const report = await this.host.kill(this.jobId);
    // Out of reach: it is killed at the next session that gets through (a timeout must not lapse with the connection).
    this.killWanted = report.undetermined === true;
    this.killedThere ||= report.undetermined !== true;
    // Its end is on the way: no need to sit out a backoff first.
    this.wake?.();
    return report.undetermined ? { ...report, pending: true } : report;
  }

  /** The server is leaving: the agent runs on there, and the next server follows it (§21.3). */
  stop(): void {
    this.stopped = true;
    this.session?.stop();
    this.wake?.();
    this.closeFile();
    this.stopWatching?.();
  }

  /**
   * The requests there that are new or newly answered, as the far end lists them: filed here, and answered as there.
   */
  private mirror(list: readonly Approval[]): void {
    const approvals = this.approvals;
    if (!approvals) return;
    for (const { request, answer } of list) {
      // Answered and recorded here already: nothing to file or read again (an earlier far end lists them all).
      if (this.mirrored.get(request.id) === "settled") continue;
      approvals.fileAs(request);
      if (answer) {
        if (!approvals.read(request.id)?.answer) approvals.answer(request.id, answer);
        this.mirrored.set(request.id, "settled");
      } else if (!this.mirrored.has(request.id)) {
        this.mirrored.set(request.id, "waiting");
      }
    }
    this.sendAnswers();
  }

  /** Each answer given here (claude_respond, a form, the command line) goes there, once it is sent. */
  private sendAnswers(): void {
    const approvals = this.approvals;
    if (!approvals) return;
    for (const [id, state] of this.mirrored) {
      const answer = state === "waiting" ? approvals.read(id)?.answer : undefined;
      if (!answer) continue;
      this.mirrored.set(id, "sending");
      void this.host.answer(this.jobId, id, answer).then((sent) => this.mirrored.set(id, sent ? "settled" : "waiting"));
    }
  }

  private openFresh(): void {
    // Never through a link, never waiting on a FIFO planted there (§15.1).
    this.fd = openForWriting(this.output.stdoutPath);
  }

  /** What earlier servers received, read again so that the reader's transcript and summary start whole. */
  private catchUp(): void {
    // Not append mode: each chunk is written at its own offset, so another server following
    // the same job writes the same bytes in the same place.
    this.fd = openForUpdating(this.output.stdoutPath);
    const size = fstatSync(this.fd).size;
    const buffer = Buffer.alloc(READ_CHUNK_BYTES);
    while (this.offset < size) {
      const read = readSync(this.fd, buffer, 0, Math.min(READ_CHUNK_BYTES, size - this.offset), this.offset);
      if (read === 0) break;
      this.offset += read;
      this.onStdout(Buffer.from(buffer.subarray(0, read)));
    }
  }

  private closeFile(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }

  /**
   * Sessions, one after another, until the remote end says the job ended: a
   * dropped one is followed again from the byte we had.
   */
  private async follow(): Promise<ChildExit> {
    const { backoffMs, logger, name } = this.host;
    let wait = backoffMs.first;
    let accepted = this.following.kind === "follow";
    let startsAgain = START_RETRIES;
    for (;;) {
      if (this.stopped) return new Promise<ChildExit>(() => undefined);
      const before = this.offset;
      let end: EndFrame | undefined;
      let refused: { code: EndFrame["outcome"]["code"]; message: string } | undefined;
      this.session = this.host.open(this.request(), (frame) => {
        if (frame.type === "accepted") {
          accepted = true;
          if (this.killWanted) void this.killTree().catch(() => undefined);
        } else if (frame.type === "output") this.received(Buffer.from(frame.data, "base64"));
        else if (frame.type === "approvals") this.mirror(frame.approvals);
        else if (frame.type === "end") end = frame;
        else if (frame.type === "error") refused = { code: frame.code, message: frame.message };
        return end === undefined && refused === undefined;
      });
      const closed = await this.session.ended;
      this.session = undefined;
      if (end && end.size <= this.offset) return this.ended(end);
      if (refused) return this.refusedExit(refused.code, refused.message);
      if (!accepted) {
        // Its channel killed before the acceptance came back, the start may have reached the far end: sent again, it
        // follows the job it made there, or starts it (§21.3). A host that refused, or kept silent, is answered now.
        const cutShort = closed.signal !== null && closed.silentMs === undefined && closed.spawnError === undefined;
        if (!cutShort || startsAgain === 0 || this.stopped) return this.unreachable(closed);
        startsAgain -= 1;
        logger.warn(
          `job ${this.jobId} on host ${name}: the start's channel ended (${this.host.describe(closed)}); sent again`,
        );
        await this.pause(wait);
        continue;
      }
      if (this.stopped) continue;
      // Killed there: a claude_kill is not held up by a connection that cannot bring the end (§5.4).
      if (this.killedThere) return this.killedUnread(closed);
      if (this.offset > before) wait = backoffMs.first;
      const why = this.host.describe(closed);
      logger.warn(
        `job ${this.jobId} on host ${name}: the connection ended (${why}); following again in ${wait} ` +
          `ms from byte ${this.offset}`,
      );
      await this.pause(wait);
      wait = Math.min(backoffMs.max, wait * 2);
    }
  }

  private request(): RemoteRequest {
    return this.following.kind === "start"
      ? { ...this.following.request, offset: this.offset }
      : { op: "follow", job_id: this.following.jobId, offset: this.offset };
  }

  private received(chunk: Buffer): void {
    if (this.fd === undefined || chunk.length === 0) return;
    // On disk first: the offset we resume from is what the file holds.
    writeSync(this.fd, chunk, 0, chunk.length, this.offset);
    this.offset += chunk.length;
    this.onStdout(chunk);
  }

  private ended(end: EndFrame): ChildExit {
    if (end.stderr_tail !== "") writeTextFile(this.output.stderrPath, end.stderr_tail);
    const code = end.outcome.ok ? undefined : end.outcome.code;
    // A program that could not be started there is named there; which machine, here (§21.3).
    const detail =
      code === "SPAWN_FAILED" ? `on host ${this.host.name}: ${end.outcome.detail ?? ""}` : (end.outcome.detail ?? "");
    const failure = code ? { code, detail } : undefined;
    return {
      exitCode: end.exit?.code ?? null,
      signal: end.exit?.signal ?? null,
      stderrTail: end.stderr_tail,
      ...(end.exit ? {} : { unobserved: true as const }),
      // The far end's age of the end, on this clock (§21.3).
      ...(end.exit || end.ended_ms_ago === undefined ? {} : { endedAt: this.host.clock.now() - end.ended_ms_ago }),
      ...(failure ? { failure } : {}),
    };
  }

  private refusedExit(code: EndFrame["outcome"]["code"], message: string): ChildExit {
    const lost = code === "JOB_NOT_FOUND";
    const detail = lost
      ? `host ${this.host.name} has no record of the job: ${message}`
      : `on host ${this.host.name}: ${message}`;
    return {
      exitCode: null,
      signal: null,
      stderrTail: "",
      unobserved: true,
      failure: { code: lost ? "AGENT_LOST" : (code ?? "HOST_FAILED"), detail },
    };
  }

  private killedUnread(closed: SessionEnd): ChildExit {
    const detail = `killed on host ${this.host.name}; its end could not be read (${this.host.describe(closed)})`;
    return { exitCode: null, signal: null, stderrTail: "", unobserved: true, failure: { code: "KILLED", detail } };
  }

  /** The job never reached the other end: its transport could not reach it, or claude-dispatch did not run there. */
  private unreachable(closed: SessionEnd): ChildExit {
    const detail = `cannot start it on host ${this.host.name}: ${this.host.describe(closed)}`;
    return {
      exitCode: null,
      signal: null,
      stderrTail: closed.stderr,
      unobserved: true,
      failure: { code: "HOST_FAILED", detail },
    };
  }

  private pause(ms: number): Promise<void> {
    let cancel: CancelTimer = () => undefined;
    return new Promise<void>((resolve) => {
      this.wake = resolve;
      cancel = this.host.clock.setTimer(resolve, ms);
    }).finally(() => {
      cancel();
      this.wake = undefined;
    });
  }
}

/** The prompt, as the agent would read it from stdin. */
export function promptOf(stdin: string | { file: string }): string {
  return typeof stdin === "string" ? stdin : readRegularTextFile(stdin.file);
}
