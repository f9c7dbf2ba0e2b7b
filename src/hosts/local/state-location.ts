/**
 * Where the state directory is by default (PROTOCOL.md §15.1): a platform
 * convention, so it lives with the platform's other knowledge.
 */
import path from "node:path";

import { StateError } from "../../store/records.js";
import { isWindowsPlatform } from "./self.js";

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Where state lives: CLAUDE_DISPATCH_STATE_DIR, else $XDG_STATE_HOME/claude-dispatch,
 * else ~/.local/state/claude-dispatch; on Windows %LOCALAPPDATA%\claude-dispatch.
 */
export function stateDirectory(env: Env, platform: string, home: string): string {
  const explicit = env.CLAUDE_DISPATCH_STATE_DIR?.trim();
  if (explicit) {
    if (!path.isAbsolute(explicit))
      throw new StateError(`CLAUDE_DISPATCH_STATE_DIR must be an absolute path, got ${JSON.stringify(explicit)}`);
    return path.resolve(explicit);
  }
  if (isWindowsPlatform(platform)) {
    const local = env.LOCALAPPDATA?.trim();
    if (local && path.win32.isAbsolute(local)) return path.win32.join(local, "claude-dispatch");
    return path.win32.join(home, "AppData", "Local", "claude-dispatch");
  }
  // The XDG spec says a relative XDG_STATE_HOME is invalid and must be ignored.
  const xdg = env.XDG_STATE_HOME?.trim();
  if (xdg && path.isAbsolute(xdg)) return path.join(xdg, "claude-dispatch");
  if (!home) throw new StateError("no home directory: set CLAUDE_DISPATCH_STATE_DIR");
  return path.join(home, ".local", "state", "claude-dispatch");
}
