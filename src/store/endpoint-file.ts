/**
 * approvals-endpoint.json in the state directory (PROTOCOL.md §18): where the directory's approval endpoint
 * listens and the secret its tokens are made from. Read as every state file is, regular and ours or not at all.
 */
import path from "node:path";

import { writeAtomically, writeNewFile } from "./atomic.js";
import { readTextFile } from "./files.js";
import { asStateError } from "./records.js";

/** Port 0: the secret is made, the port not chosen yet. */
export interface EndpointRecord {
  port: number;
  secret: string;
}

export class EndpointFile {
  private readonly file: string;

  constructor(
    root: string,
    private readonly randomName: () => string,
  ) {
    this.file = path.join(root, "approvals-endpoint.json");
  }

  /** The record, or undefined when there is none yet, or the file is not a whole one of ours. */
  read(): EndpointRecord | undefined {
    const text = readTextFile(this.file);
    try {
      const { port, secret } = ((text === undefined ? undefined : JSON.parse(text)) ?? {}) as Record<string, unknown>;
      const valid = typeof port === "number" && Number.isInteger(port) && port >= 0 && port < 65536;
      return valid && typeof secret === "string" && /^[0-9a-f]{64}$/.test(secret) ? { port, secret } : undefined;
    } catch {
      return undefined;
    }
  }

  /** Records it first: false when another process recorded one already. */
  create(record: EndpointRecord): boolean {
    try {
      writeNewFile(this.file, `${JSON.stringify(record)}\n`, true);
      return true;
    } catch (error) {
      if ((error as { code?: unknown }).code === "EEXIST") return false;
      throw asStateError(error, this.file);
    }
  }

  /** Replaces it, whole or not at all. */
  write(record: EndpointRecord): void {
    try {
      writeAtomically(this.file, `${JSON.stringify(record)}\n`, true, this.randomName);
    } catch (error) {
      throw asStateError(error, this.file);
    }
  }
}
