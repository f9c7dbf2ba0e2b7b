/**
 * Where Claude Code's runtime was before the seams (issue 12): re-exports,
 * so importers move over one at a time. New code imports ./index.js and the
 * neutral types from agent/.
 */
import path from "node:path";

import { createAgents, type Agents } from "../../agent/launcher.js";
import type { AttachRequest, ChildHandle, SpawnRequest } from "../../agent/host.js";
import { claudeRuntime } from "./index.js";

export * from "./index.js";
export { PERMISSION_MODES, type AgentOptions, type PermissionMode } from "../../agent/options.js";
export type * from "../../agent/types.js";
export type { StateDisk, OutputSource } from "../../agent/runtime.js";

export interface ClaudeLauncherOptions {
  start(request: SpawnRequest): ChildHandle;
  attach(request: AttachRequest): ChildHandle;
  files?: {
    readRange(file: string, offset: number, length: number): Buffer | undefined;
    create(file: string): { write(text: string): void; close(): void };
    freeBytes?(dir: string): number | undefined;
  };
  bin: string;
  env: Readonly<Record<string, string | undefined>>;
  maxLineBytes: number;
  transcriptChars: number;
  stderrTailBytes: number;
  onMalformedLine?(line: string): void;
}

export type ClaudeAgents = Agents;

export function createClaudeAgents(options: ClaudeLauncherOptions): Agents {
  const { start, attach, files, bin, ...rest } = options;
  return createAgents({
    ...rest,
    runtime: claudeRuntime(bin),
    host: { start, attach },
    ...(files ? { files: { ...files, folderOf: (file: string) => path.dirname(file) } } : {}),
  });
}
