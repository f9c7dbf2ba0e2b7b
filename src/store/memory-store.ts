/**
 * A job store in memory, with the state directory's interface (PROTOCOL.md
 * §15) but no files: for the unit tests, and for a server at the depth limit,
 * which must not touch the state directory (§7.4). It keeps no prompt (the
 * job keeps it until its agent has it) and gives agents no output files
 * (their output comes through pipes), so nothing it holds outlives its server.
 */
import { isFinishedStatus, type JobRecord } from "./records.js";

export class MemoryStore {
  private readonly records = new Map<string, JobRecord>();
  private readonly results = new Map<string, string>();

  create(record: JobRecord, _prompt: string): void {
    this.records.set(record.id, structuredClone(record));
  }

  write(record: JobRecord): number | undefined {
    this.records.set(record.id, structuredClone(record));
    return isFinishedStatus(record.status) ? this.size(record.id) : undefined;
  }

  read(id: string): JobRecord | undefined {
    const record = this.records.get(id);
    return record && structuredClone(record);
  }

  outputFiles(_id: string): undefined {
    return undefined;
  }

  promptFile(_id: string): undefined {
    return undefined;
  }

  hasPrompt(_id: string): boolean {
    return false;
  }

  writeResult(id: string, text: string): void {
    this.results.set(id, text);
  }

  readResult(id: string): string | undefined {
    return this.results.get(id);
  }

  readResultHead(id: string, maxChars: number): string | undefined {
    return this.results.get(id)?.slice(0, maxChars);
  }

  killRequested(_id: string): string | undefined {
    return undefined;
  }

  requestKill(_id: string, _by: string, _at: number): void {}

  jobIds(): string[] {
    return [...this.records.keys()];
  }

  /** Nothing else writes a store in memory. */
  watchRecord(_id: string, _onChange: () => void): undefined {
    return undefined;
  }


  size(_id: string): number {
    return 0;
  }

  remove(id: string): void {
    this.records.delete(id);
    this.results.delete(id);
  }

  /** One server only: every claim is its own. */
  async claimJob(): Promise<boolean> {
    return true;
  }

  claimStart(): boolean {
    return true;
  }

  dropClaimsBefore(): void {}
}
