/**
 * `claude-dispatch remote` (PROTOCOL.md §21.3): the far end of an SSH host, run by ssh for one request. A start
 * becomes a job in this machine's state directory, its agent detached from the session, so a dropped connection
 * stops nothing; a follow streams a job's stdout from a byte offset until the job ends; a kill kills its tree.
 * Each is done by the job layer that serves local jobs, which main builds and hands in as RemoteSide.
 */
import { DispatchError, describeThrown, toDispatchError, type ErrorCode } from "../../core/errors.js";
import type { Clock } from "../../core/clock.js";
import { PollPace } from "../../core/pace.js";
import { ApprovalFollower } from "../../store/approval-follower.js";
import type { ApprovalAnswer, ApprovalLookup, ApprovalRequest } from "../../store/approvals.js";
import {
  MAX_REQUEST_BYTES,
  OUTPUT_CHUNK_BYTES,
  parseRequest,
  type EndFrame,
  type RemoteFrame,
  type StartRequest,
  type WorktreeRequest,
} from "./protocol.js";

/** A job as the remote end follows it. */
export interface RemoteJobView {
  readonly id: string;
  readonly done: Promise<void>;
  /** Set once done. */
  outcome(): EndFrame["outcome"] & { exit?: EndFrame["exit"] };
  /** When it finished here, once done: its agent's end, when that was found late (§15.3). */
  finishedAt?(): number | undefined;
}

export interface RemoteSide {
  /** The job made and started (or the one a start sent before made). Throws an error with a `code` to refuse it. */
  start(request: StartRequest): Promise<RemoteJobView>;
  find(id: string): Promise<RemoteJobView | undefined>;
  kill(id: string): Promise<{ killed: boolean; survivors: number[] }>;
  check(agents: string[], programs: Record<string, string>): Promise<Extract<RemoteFrame, { type: "check" }>>;
  /** Up to length bytes of the job's stdout from offset; empty at its end for now. */
  readOutput(id: string, offset: number, length: number): Buffer;
  stderrTail(id: string): Promise<string>;
  /** One of the job's permission requests here, with its answer; with `known`, only its answer is read (§18). */
  lookUpApproval(id: string, requestId: string, known?: ApprovalRequest): ApprovalLookup;
  /** Calls onChange when the job's permission files change, where the system notifies; the result stops it. */
  watchApprovals(id: string, onChange: () => void): (() => void) | undefined;
  /** Answers one unless it has an answer: the one that stands; undefined for no such request. */
  answer(id: string, requestId: string, answer: ApprovalAnswer): { answer: ApprovalAnswer; won: boolean } | undefined;
  /** A worktree operation (§19) with git there; throws an error with a `code` to refuse it. */
  worktree(request: WorktreeRequest): Promise<unknown>;
  /** Stops following; running agents stay, on disk, for the next follow (§15.3). */
  leave(): Promise<void>;
}

export interface RemoteChannel {
  input: AsyncIterable<Buffer | string>;
  /** Writes one frame line; resolves once it is taken (backpressure). Rejects when the channel is gone. */
  write(line: string): Promise<void>;
  clock: Clock;
  /** How often a running job's stdout is read for more while it grows (slower while it does not: PollPace). */
  followMs?: number;
  /** Where an unexpected failure's details go (this end's stderr); the other end is told a fixed sentence (§9). */
  logger?: { error(message: string): void };
}

/** Serves one request; resolves to the exit code. */
export async function serveRemote(channel: RemoteChannel, side: RemoteSide): Promise<number> {
  const reading = readFirstLine(channel.input);
  const first = await reading.line;
  const send = (frame: RemoteFrame): Promise<void> => channel.write(`${JSON.stringify(frame)}\n`);
  const fail = async (code: ErrorCode, message: string): Promise<number> => {
    await send({ type: "error", code, message }).catch(() => undefined);
    return 3;
  };
  if (first === undefined) return fail("INVALID_ARGUMENT", "no request line came");
  const request = parseRequest(first);
  if (typeof request === "string") return fail("INVALID_ARGUMENT", request);
  try {
    switch (request.op) {
      case "check":
        await send(await side.check(request.agents, request.programs));
        return 0;
      // Said at once, before what may take a while (a kill's grace, git): the other
      // end bounds the wait for a first frame (§21.2).
      case "kill": {
        const job = await side.find(request.job_id);
        if (!job) return fail("JOB_NOT_FOUND", `no job ${request.job_id} in this state directory`);
        await send({ type: "accepted" });
        await send({ type: "killed", ...(await side.kill(request.job_id)) });
        return 0;
      }
      case "worktree":
        await send({ type: "accepted" });
        await send({ type: "worktree", result: await side.worktree(request) });
        return 0;
      case "answer": {
        const answered = side.answer(request.job_id, request.request_id, request.answer);
        if (!answered)
          return fail("INVALID_ARGUMENT", `job ${request.job_id} has no permission request ${request.request_id} here`);
        await send({ type: "answered", ...answered });
        return 0;
      }
      case "start":
      case "follow": {
        const job = request.op === "start" ? await side.start(request) : await side.find(request.job_id);
        if (!job) return fail("JOB_NOT_FOUND", `no job ${request.job_id} in this state directory`);
        await send({ type: "accepted" });
        return await stream(channel, side, job, request.offset, reading.ended, send);
      }
    }
  } catch (error) {
    // A refusal keeps its code and words; anything else (an errno's code is no ErrorCode) is told as §9 says.
    if (!(error instanceof DispatchError)) channel.logger?.error(`remote ${request.op}: ${describeThrown(error)}`);
    const failure = toDispatchError(error);
    return fail(failure.code, failure.message);
  } finally {
    await side.leave();
  }
}

/** The job's stdout from offset, with backpressure, until it ends (then the end frame) or this side is gone. */
async function stream(
  channel: RemoteChannel,
  side: RemoteSide,
  job: RemoteJobView,
  from: number,
  gone: Promise<void>,
  send: (frame: RemoteFrame) => Promise<void>,
): Promise<number> {
  let offset = from;
  let finished = false;
  let left = false;
  void job.done.then(() => (finished = true));
  void gone.then(() => (left = true));
  // The job's permission requests go along as they come and are answered, so the caller can be asked (§18): those of
  // the job so far at the start, then each new one and each answer once, read without going through them all again.
  const approvals = new ApprovalFollower((requestId, known) => side.lookUpApproval(job.id, requestId, known));
  const sendApprovals = async (): Promise<boolean> => {
    const news = approvals.news();
    if (news.length > 0) await send({ type: "approvals", approvals: news });
    return news.length > 0;
  };
  // A quiet job is read less and less often; a permission request still goes at once, since a watch on the job's
  // folder cuts the wait short. Without that watch the pace stays fast, or a request could wait a second.
  const pace = new PollPace(channel.followMs ?? 100);
  let stirred = false;
  let wake = (): void => undefined;
  const stopWatching = side.watchApprovals(job.id, () => {
    stirred = true;
    wake();
  });
  let grew = false;
  try {
    for (;;) {
      // What changes from here on is seen by this look, or wakes the wait after it.
      stirred = false;
      // Read once more after the end is known: what the agent wrote last is in the file by then.
      const last = finished;
      const chunk = side.readOutput(job.id, offset, OUTPUT_CHUNK_BYTES);
      if (chunk.length > 0) {
        await send({ type: "output", data: chunk.toString("base64") });
        offset += chunk.length;
        grew = true;
        continue;
      }
      if (left) return 0;
      const told = await sendApprovals();
      if (last) break;
      if (grew || told || !stopWatching) pace.found();
      else pace.foundNothing();
      grew = false;
      if (stirred) continue;
      let cancel = (): void => undefined;
      await Promise.race([
        job.done,
        gone,
        new Promise<void>((resolve) => {
          wake = resolve;
          cancel = channel.clock.setTimer(resolve, pace.ms);
        }),
      ]);
      wake = () => undefined;
      cancel();
    }
  } finally {
    stopWatching?.();
  }
  const { exit, ...outcome } = job.outcome();
  const finishedAt = job.finishedAt?.();
  // An agent whose exit was not seen here may have ended long before this frame: how long, for the record there.
  const endedMsAgo = finishedAt === undefined ? undefined : Math.max(0, Math.round(channel.clock.now() - finishedAt));
  const ago = exit || endedMsAgo === undefined ? {} : { ended_ms_ago: endedMsAgo };
  const stderr_tail = await side.stderrTail(job.id);
  await send({ type: "end", outcome, ...(exit ? { exit } : {}), ...ago, stderr_tail, size: offset });
  return 0;
}

/** The first line of input, bounded; `ended` resolves when the input closes (the local server went away). */
function readFirstLine(input: AsyncIterable<Buffer | string>): {
  line: Promise<string | undefined>;
  ended: Promise<void>;
} {
  let deliver: (line: string | undefined) => void = () => undefined;
  const line = new Promise<string | undefined>((resolve) => (deliver = resolve));
  const ended = (async () => {
    const parts: Buffer[] = [];
    let size = 0;
    let delivered = false;
    try {
      for await (const data of input) {
        if (delivered) continue;
        const chunk = typeof data === "string" ? Buffer.from(data) : data;
        const newline = chunk.indexOf(0x0a);
        parts.push(newline === -1 ? chunk : chunk.subarray(0, newline));
        size += chunk.length;
        if (newline !== -1 || size > MAX_REQUEST_BYTES) {
          delivered = true;
          deliver(newline === -1 ? undefined : Buffer.concat(parts).toString("utf8"));
          parts.length = 0;
        }
      }
    } catch {
      // A broken channel is an ended one.
    }
    if (!delivered) deliver(parts.length > 0 ? Buffer.concat(parts).toString("utf8") : undefined);
  })();
  return { line, ended };
}
