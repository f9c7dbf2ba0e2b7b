/**
 * The approver (PROTOCOL.md §18) as Claude Code runs it: the built program in its approver mode, on stdio,
 * fed the frames the pinned CLI was seen to send (test/fixtures/permission-prompt.json).
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readFileSync, watch } from "node:fs";

import type { JobRecord } from "../src/store/records.js";
import type { StateStore } from "../src/store/state-store.js";
import { minimalEnvironment, SERVER_MAIN } from "./server-process.js";

const FIXTURE_FILE = new URL("./fixtures/permission-prompt.json", import.meta.url);
const FIXTURE = JSON.parse(readFileSync(FIXTURE_FILE, "utf8")) as { frames: Array<Record<string, any>> };

/** A frame the CLI sent, as recorded: a copy to change. */
export const frame = (method: string): Record<string, any> =>
  structuredClone(
    FIXTURE.frames.find((candidate) => candidate.method === method) ?? assert.fail(`no ${method} in the fixture`),
  );

/** What the CLI reads from the approver's answer. */
export const answerOf = (response: Record<string, any>): Record<string, unknown> =>
  JSON.parse(response.result.content[0].text);

export class Approver {
  readonly child: ChildProcessWithoutNullStreams;
  private buffer = "";
  private readonly waiting = new Map<string, (message: Record<string, any>) => void>();
  readonly exited: Promise<number | null>;

  constructor(args: string[]) {
    this.child = spawn(process.execPath, [SERVER_MAIN, "approver", ...args], {
      env: minimalEnvironment(),
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk: string) => {
      this.buffer += chunk;
      for (let newline = this.buffer.indexOf("\n"); newline >= 0; newline = this.buffer.indexOf("\n")) {
        const message = JSON.parse(this.buffer.slice(0, newline)) as Record<string, any>;
        this.buffer = this.buffer.slice(newline + 1);
        this.waiting.get(JSON.stringify(message.id))?.(message);
      }
    });
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
  }

  send(message: Record<string, unknown>): Promise<Record<string, any>> {
    const answered = new Promise<Record<string, any>>((resolve) =>
      this.waiting.set(JSON.stringify(message.id), resolve),
    );
    this.child.stdin.write(`${JSON.stringify(message)}\n`);
    return answered;
  }

  notify(message: Record<string, unknown>): void {
    this.child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  /** The CLI's own handshake, as recorded. */
  async handshake(): Promise<void> {
    const discover = await this.send(frame("server/discover"));
    assert.equal(discover.error?.code, -32601, "the CLI falls back to initialize on -32601");
    const init = await this.send(frame("initialize"));
    assert.equal(init.result.protocolVersion, "2025-11-25");
    this.notify(frame("notifications/initialized"));
    const tools = await this.send(frame("tools/list"));
    assert.deepEqual(
      tools.result.tools.map((tool: { name: string }) => tool.name),
      ["approve"],
    );
  }
}

/** Resolves once the job's folder has request `n` on file. */
export function requestFiled(store: StateStore, id: string, n: string): Promise<void> {
  return new Promise((resolve) => {
    const watcher = watch(store.jobDir(id), () => {
      if (store.approval(id, n)) {
        watcher.close();
        resolve();
      }
    });
    if (store.approval(id, n)) {
      watcher.close();
      resolve();
    }
  });
}

/** A running job of this process, in `store`, whose requests an approver files: what both approvers need of it. */
export function createRunningJob(store: StateStore, id: string, cwd: string): void {
  const record: JobRecord = {
    format: 1,
    runtime: "claude",
    host: "local",
    id,
    kind: "start",
    cwd,
    prompt_preview: "x",
    options: {},
    status: "running",
    submitted_at: Date.now(),
    owner: { pid: process.pid },
    generation: 0,
  };
  store.create(record, "x");
}
