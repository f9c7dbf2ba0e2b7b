/**
 * The state directory (PROTOCOL.md §15): one folder per job holding its
 * record, its prompt, the agent's stdout and stderr, and its result. The
 * server and the human CLI both read it through this file. Records are
 * replaced atomically (temporary file, then rename), so a reader sees the old
 * record or the new one, never half of one.
 *
 *   <state>/jobs/<id>/record.json   what PROTOCOL.md §15.2 lists
 *   <state>/jobs/<id>/prompt.txt    the whole prompt, so a queued job can start after a restart
 *   <state>/jobs/<id>/stdout.jsonl  the agent's stdout, written by the agent itself
 *   <state>/jobs/<id>/stderr.log    the agent's stderr, likewise
 *   <state>/jobs/<id>/result.txt    the final answer, whole
 *   <state>/jobs/<id>/claim.N[.S]   who adopted the job after restart N (slot S; created exclusively)
 *   <state>/jobs/<id>/kill          a kill asked for by the CLI
 *   <state>/jobs/<id>/approval.N[.answer].json  permission request N and its answer (approvals.ts)
 *   <state>/jobs/<id>/approval.N.told          CLAUDE_DISPATCH_ON_INPUT ran for request N (approvals.ts)
 */
import { lstatSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";

import { readFileRange, writeAtomically, writeNewFile, writeTextFile } from "./atomic.js";
import {
  answerRequest,
  fileRequest,
  isApprovalFile,
  lookUpApproval,
  markTold,
  readApproval,
  readApprovals,
  type Approval,
  type ApprovalAnswer,
  type ApprovalLookup,
  type ApprovalRequest,
} from "./approvals.js";
import { claimHolder, claimJob, claimSlot, dropClaimsBefore, type HolderAlive } from "./claims.js";
import { readInChunks, readTextFile, refuseSpecialFile, watchFolder } from "./files.js";
import { appendToIndex, compactIndex, readIndex } from "./finished-index.js";
import { checkFolders, jobFolderProblem, openFolders, stateFolders } from "./ownership.js";
import { SlotFiles } from "./slots.js";
import {
  StateError,
  asStateError,
  bySubmission,
  isFinishedStatus,
  isJobId,
  parseRecord,
  type IndexedJob,
  type JobRecord,
  type ProcessIdentity,
} from "./records.js";

export interface LoadedRecords {
  records: JobRecord[];
  /** Folders whose record is missing or unreadable, with why. */
  skipped: { id: string; reason: string }[];
}

export interface StartupRecords extends LoadedRecords {
  /** Finished jobs known from the index: their records are read only when a job is asked for. */
  finished: IndexedJob[];
}

export interface StateStoreOptions {
  /**
   * The user the directory must belong to (process.getuid()); undefined where
   * there are no uids (Windows). A folder of another user's is never trusted:
   * a job planted there would run as this one (§15.1).
   */
  uid?: number | undefined;
  /** A fresh random name for a temporary file: two writers (a server, the CLI) never share one. */
  randomName(): string;
}

export class StateStore {
  readonly jobsDir: string;
  /** The agent slots of every server on this directory (§15.7). */
  readonly slotsDir: string;
  private readonly uid: number | undefined;
  private readonly randomName: () => string;
  /** What open() makes private and check() checks: the directory itself, jobs/, slots/, servers/ and carrier/. */
  private readonly folders: readonly string[];

  constructor(
    readonly root: string,
    options: StateStoreOptions,
  ) {
    this.jobsDir = path.join(root, "jobs");
    this.slotsDir = path.join(root, "slots");
    this.folders = stateFolders(root);
    this.uid = options.uid;
    this.randomName = options.randomName;
  }

  /**
   * Creates the directory, private to this user (0700), or checks that the one there is ours (§15.1; see
   * ownership.ts). Throws StateError saying what is wrong.
   */
  open(): void {
    openFolders(this.root, this.folders, this.uid);
  }

  /**
   * Checks the directory without creating or changing anything (the CLI, doctor):
   * throws StateError when it is not ours. A directory that does not exist yet is fine.
   */
  check(): void {
    checkFolders(this.root, this.folders, this.uid);
  }

  jobDir(id: string): string {
    if (!isJobId(id)) throw new StateError(`not a job id: ${JSON.stringify(id)}`);
    return path.join(this.jobsDir, id);
  }

  outputFiles(id: string): { stdoutPath: string; stderrPath: string; resultPath: string } {
    return {
      stdoutPath: this.file(id, "stdout.jsonl"),
      stderrPath: this.file(id, "stderr.log"),
      resultPath: this.file(id, "result.txt"),
    };
  }

  file(id: string, name: "record.json" | "prompt.txt" | "stdout.jsonl" | "stderr.log" | "result.txt" | "kill"): string {
    return path.join(this.jobDir(id), name);
  }

  promptFile(id: string): string {
    return this.file(id, "prompt.txt");
  }

  hasPrompt(id: string): boolean {
    try {
      return lstatSync(this.promptFile(id)).isFile();
    } catch {
      return false;
    }
  }

  /**
   * Makes the job's folder and stores its prompt, then its first record,
   * flushed to disk: the caller is told the job exists only after this.
   */
  create(record: JobRecord, prompt: string): void {
    this.writing(this.jobDir(record.id), () => {
      // Recursive: the state directory may have been removed while the server ran.
      mkdirSync(this.jobDir(record.id), { recursive: true, mode: 0o700 });
      try {
        // Created exclusively in the new folder, without a temporary file: nothing reads it before the record exists.
        // Flushed for a queued job, which a later server may have to start; one that starts now hands it to its
        // agent at once, and a power failure that loses the file takes that agent with it.
        writeNewFile(this.file(record.id, "prompt.txt"), prompt, record.status === "queued");
        writeAtomically(this.file(record.id, "record.json"), `${JSON.stringify(record)}\n`, true, this.randomName);
      } catch (error) {
        // A fresh id's folder, half made (a full disk): gone again, so no folder without a record is left behind.
        rmSync(this.jobDir(record.id), { recursive: true, force: true });
        throw error;
      }
    });
  }

  /** Runs a write of the state directory: any failure is a StateError naming where, a full disk said so (§9). */
  private writing<T>(where: string, write: () => T): T {
    try {
      return write();
    } catch (error) {
      throw asStateError(error, where);
    }
  }

  /**
   * Replaces the record. Not flushed: a crash of the server loses nothing
   * (the rename is atomic), and a running job's end is in its output file
   * anyway; only a power failure might keep an older record.
   */
  write(record: JobRecord): number | undefined {
    const file = this.file(record.id, "record.json");
    this.writing(file, () => writeAtomically(file, `${JSON.stringify(record)}\n`, false, this.randomName));
    if (!isFinishedStatus(record.status)) return undefined;
    return this.index(record);
  }

  /** Adds a finished job to the index; the bytes its folder uses. */
  private index(record: JobRecord): number {
    const bytes = this.size(record.id);
    appendToIndex(this.root, { id: record.id, finished_at: record.finished_at ?? record.submitted_at, bytes });
    return bytes;
  }

  /**
   * What a starting server must read (§15.5): the records of jobs that are not
   * finished (or not indexed yet), and the index's entries for the rest, whose
   * records are left on disk until asked for.
   */
  loadForStartup(): StartupRecords {
    const indexed = readIndex(this.root);
    const records: JobRecord[] = [];
    const skipped: LoadedRecords["skipped"] = [];
    const finished: IndexedJob[] = [];
    for (const id of this.jobIds()) {
      const entry = indexed.get(id);
      if (entry) {
        finished.push(entry);
        continue;
      }
      const loaded = this.readChecked(id);
      if ("reason" in loaded) {
        skipped.push({ id, reason: loaded.reason });
        continue;
      }
      records.push(loaded.record);
      if (isFinishedStatus(loaded.record.status)) this.index(loaded.record);
    }
    records.sort(bySubmission);
    compactIndex(this.root, indexed.size, finished, this.randomName);
    return { records, skipped, finished };
  }

  /** The job folders' names (job ids), in no order. */
  jobIds(): string[] {
    try {
      return readdirSync(this.jobsDir).filter(isJobId);
    } catch {
      return [];
    }
  }

  /** A job's record, read only when its folder and record are ours (§15.1), or why not. */
  private readChecked(id: string): { record: JobRecord } | { reason: string } {
    const problem = jobFolderProblem(this.jobsDir, id, this.uid);
    if (problem !== undefined) return { reason: problem };
    const text = readTextFile(this.file(id, "record.json"));
    if (text === undefined) return { reason: "record.json cannot be read" };
    const record = parseRecord(text, id);
    return record ? { record } : { reason: "record.json is not a valid record" };
  }

  read(id: string): JobRecord | undefined {
    const loaded = this.readChecked(id);
    return "record" in loaded ? loaded.record : undefined;
  }

  refuseSpecialRecord(id: string): void {
    refuseSpecialFile(this.file(id, "record.json"));
  }

  readPrompt(id: string): string | undefined {
    return readTextFile(this.file(id, "prompt.txt"));
  }

  /** Written in place, without a temporary file: a record names the result only once it is whole (§15.4). */
  writeResult(id: string, text: string): void {
    const file = this.file(id, "result.txt");
    this.writing(file, () => writeTextFile(file, text));
  }

  /** The whole result; a FIFO or the like in its place is STATE_ERROR naming it (§15.1), a missing one undefined. */
  readResult(id: string): string | undefined {
    const file = this.file(id, "result.txt");
    refuseSpecialFile(file);
    return readTextFile(file);
  }

  /** The result's first maxChars UTF-16 characters, reading at most 4 bytes for each; refused as readResult is. */
  readResultHead(id: string, maxChars: number): string | undefined {
    const file = this.file(id, "result.txt");
    refuseSpecialFile(file);
    // Each UTF-16 unit takes at most 3 bytes of UTF-8 (a surrogate pair: 4
    // bytes for 2), so this many bytes hold maxChars.
    const bytes = readFileRange(file, 0, maxChars * 3 + 4);
    return bytes?.toString("utf8").slice(0, maxChars);
  }

  /**
   * Hands a job's output to a runtime's reader again, for its transcript and
   * progress: a piece at a time, long lines left in the file (§15.4), and
   * nothing written. Give the reader outputSource(id) to read those back.
   */
  replay<Reader extends { push(chunk: Buffer): void; end(): void }>(id: string, reader: Reader): Reader {
    this.readChunks(id, "stdout.jsonl", (chunk) => reader.push(chunk));
    reader.end();
    return reader;
  }

  /** The job's stdout.jsonl, for a reader to read a long line back from (§15.4). */
  outputSource(id: string): { read(offset: number, length: number): Buffer | undefined } {
    const stdoutPath = this.file(id, "stdout.jsonl");
    return { read: (offset, length) => readFileRange(stdoutPath, offset, length) };
  }

  /** Hands a job's file to onChunk a piece at a time, never whole; a FIFO or the like in its place is STATE_ERROR. */
  readChunks(id: string, name: "stdout.jsonl" | "stderr.log", onChunk: (chunk: Buffer) => void): void {
    readInChunks(this.file(id, name), onChunk);
  }

  /** Every job folder's record. Leftover temporary files are never read: a torn write is ignored. */
  loadAll(): LoadedRecords {
    const records: JobRecord[] = [];
    const skipped: LoadedRecords["skipped"] = [];
    for (const id of this.jobIds()) {
      const loaded = this.readChecked(id);
      if ("record" in loaded) records.push(loaded.record);
      else skipped.push({ id, reason: loaded.reason });
    }
    records.sort(bySubmission);
    return { records, skipped };
  }

  /** Claims the job for whoever takes it over after restart `generation` (§15.3); see claims.ts. */
  claimJob(id: string, generation: number, claimer: ProcessIdentity, isAlive: HolderAlive): Promise<boolean> {
    return claimJob(this.jobDir(id), generation, claimer, isAlive, this.randomName).catch((error: unknown) => {
      throw asStateError(error, this.jobDir(id));
    });
  }

  /** The start of a queued job, by whichever server claims it first (§15.7). */
  claimStart(id: string, generation: number, claimer: ProcessIdentity): boolean {
    return this.claim(id, generation, 0, claimer);
  }

  claim(id: string, generation: number, slot: number, claimer: ProcessIdentity): boolean {
    const dir = this.jobDir(id);
    return this.writing(dir, () => claimSlot(dir, generation, slot, claimer, this.randomName));
  }

  claimHolder(id: string, generation: number, slot: number): ProcessIdentity | undefined {
    return claimHolder(this.jobDir(id), generation, slot);
  }

  dropClaimsBefore(id: string, generation: number): void {
    dropClaimsBefore(this.jobDir(id), generation);
  }

  /**
   * The agent slots every server on this directory shares (§15.7), `count` of them, held in this
   * holder's name; a holder that isAlive says is gone gives up its slot unless its job still runs.
   */
  slotPool(count: number, holder: ProcessIdentity, isAlive: HolderAlive) {
    return new SlotFiles({
      dir: this.slotsDir,
      count,
      holder,
      jobRunning: (id) => isJobId(id) && this.read(id)?.status === "running",
    }).pool(isAlive);
  }

  /** Records that a kill was asked for outside the owning server (the CLI, or another server's claude_kill). */
  requestKill(id: string, by: string, at: number): void {
    const file = this.file(id, "kill");
    this.writing(file, () => writeAtomically(file, `${JSON.stringify({ by, at })}\n`, true, this.randomName));
  }

  /** Who asked for the job's kill outside its server ("cli" when the request does not say), or undefined. */
  killRequested(id: string): string | undefined {
    const text = readTextFile(this.file(id, "kill"));
    if (text === undefined) return undefined;
    try {
      const { by } = JSON.parse(text) as { by?: unknown };
      return typeof by === "string" && by !== "" ? by : "cli";
    } catch {
      return "cli";
    }
  }

  /**
   * Calls onChange when the job's record is replaced, through the file system's notifications; undefined
   * where they cannot be had (the caller then polls). The returned function stops it.
   */
  watchRecord(id: string, onChange: () => void): (() => void) | undefined {
    // The agent's output changes far more often than its record: only the record's name is news.
    return this.watchJob(id, (name) => name === "record.json", onChange);
  }

  /** As watchRecord, for the job's approval files (§18). */
  watchApprovals(id: string, onChange: () => void): (() => void) | undefined {
    return this.watchJob(id, isApprovalFile, onChange);
  }

  private watchJob(id: string, isNews: (name: string) => boolean, onChange: () => void): (() => void) | undefined {
    return watchFolder(this.jobDir(id), isNews, onChange);
  }

  /** The job's permission requests, oldest first, with their answers (§18). */
  approvals(id: string): Approval[] {
    return readApprovals(this.jobDir(id));
  }

  approval(id: string, requestId: string): Approval | undefined {
    return readApproval(this.jobDir(id), requestId);
  }

  /** Request `requestId`, or only its answer when the request is `known` (§18): what the job layer follows. */
  lookUpApproval(id: string, requestId: string, known?: ApprovalRequest): ApprovalLookup {
    return lookUpApproval(this.jobDir(id), requestId, known);
  }

  /** Files a request under the first free number from `from` (§18). */
  fileApproval(id: string, request: Omit<ApprovalRequest, "id" | "nonce">, from?: number): ApprovalRequest {
    return fileRequest(this.jobDir(id), request, this.randomName, from);
  }

  /**
   * Answers a request unless it has an answer: the standing answer and whether
   * it is this one; undefined for no such request.
   */
  answerApproval(
    id: string,
    requestId: string,
    answer: ApprovalAnswer,
  ): { answer: ApprovalAnswer; won: boolean } | undefined {
    return this.writing(this.jobDir(id), () => answerRequest(this.jobDir(id), requestId, answer, this.randomName));
  }

  /** Marks request `requestId` told of (CLAUDE_DISPATCH_ON_INPUT, §18): true only for the caller that made it. */
  markTold(id: string, requestId: string): boolean {
    return this.writing(this.jobDir(id), () => markTold(this.jobDir(id), requestId));
  }

  /** Bytes used by one job's folder. */
  size(id: string): number {
    let total = 0;
    try {
      for (const name of readdirSync(this.jobDir(id))) {
        try {
          total += lstatSync(path.join(this.jobDir(id), name)).size;
        } catch {
          // Removed meanwhile.
        }
      }
    } catch {
      return 0;
    }
    return total;
  }

  remove(id: string): void {
    rmSync(this.jobDir(id), { recursive: true, force: true });
  }
}
