/**
 * A job store in memory, with the state directory's interface (PROTOCOL.md
 * §15) but no files: for the unit tests, and for a server at the depth limit,
 * which must not touch the state directory (§7.4). It keeps no prompt (the
 * job keeps it until its agent has it) and gives agents no output files
 * (their output comes through pipes), so nothing it holds outlives its server.
 */
import type { Approval, ApprovalAnswer, ApprovalLookup, ApprovalRequest } from "./approvals.js";
import { isFinishedStatus, type JobRecord } from "./records.js";

export class MemoryStore {
  private readonly records = new Map<string, JobRecord>();
  private readonly results = new Map<string, string>();
  /** Permission requests filed by a test's agent, and who hears of them. */
  private readonly requests = new Map<string, Approval[]>();
  private readonly approvalWatchers = new Map<string, Set<() => void>>();

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

  approvals(id: string): Approval[] {
    return structuredClone(this.requests.get(id) ?? []);
  }

  /** Numbered 1, 2, 3 and on, in the order filed, so request n is the n-th. */
  lookUpApproval(id: string, requestId: string): ApprovalLookup {
    const approval = this.requests.get(id)?.[Number(requestId) - 1];
    return approval && structuredClone(approval);
  }

  fileApproval(id: string, request: Omit<ApprovalRequest, "id" | "nonce">): ApprovalRequest {
    const list = this.requests.get(id) ?? [];
    const filed = { id: String(list.length + 1), ...request };
    list.push({ request: filed });
    this.requests.set(id, list);
    this.changed(id);
    return filed;
  }

  answerApproval(
    id: string,
    requestId: string,
    answer: ApprovalAnswer,
  ): { answer: ApprovalAnswer; won: boolean } | undefined {
    const approval = this.requests.get(id)?.find((entry) => entry.request.id === requestId);
    if (!approval) return undefined;
    if (approval.answer) return { answer: approval.answer, won: false };
    approval.answer = answer;
    this.changed(id);
    return { answer, won: true };
  }

  watchApprovals(id: string, onChange: () => void): () => void {
    const watchers = this.approvalWatchers.get(id) ?? new Set();
    watchers.add(onChange);
    this.approvalWatchers.set(id, watchers);
    return () => watchers.delete(onChange);
  }

  /** Watchers hear of a change after the write that made it returns, as file-system notifications arrive. */
  private changed(id: string): void {
    queueMicrotask(() => {
      for (const watcher of [...(this.approvalWatchers.get(id) ?? [])]) watcher();
    });
  }

  size(_id: string): number {
    return 0;
  }

  remove(id: string): void {
    this.records.delete(id);
    this.results.delete(id);
    this.requests.delete(id);
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
