/**
 * Windows: finding the program the way Windows would (PATH, PATHEXT), and running an npm shim's target
 * directly, so that no user data ever reaches a shell (§6).
 */
import path from "node:path";

import type { WindowsPlatform } from "../types.js";

export interface Invocation {
  command: string;
  args: string[];
  /** Only for the cmd.exe fallback, whose single argument we quote ourselves. */
  verbatim: boolean;
}

/** Arguments that may pass through cmd.exe unquoted: our constant flags and validated UUIDs. */
const CMD_SAFE_ARGUMENT = /^[A-Za-z0-9._:=/-]+$/;

/**
 * Resolves `claude` the way Windows would, without ever giving user data to a
 * shell. npm installs a `.cmd` shim; we read the target it wraps and run that
 * directly (an .exe, or a script under our own node). Only if the shim is not
 * one we recognise do we go through cmd.exe, and then only with arguments
 * that need no quoting.
 */
export function resolveWindowsInvocation(bin: string, args: readonly string[], platform: WindowsPlatform): Invocation {
  const win = path.win32;
  const found = findOnWindowsPath(bin, platform);
  if (!found) {
    const error = new Error(`spawn ${bin} ENOENT`) as NodeJS.ErrnoException;
    error.code = "ENOENT";
    throw error;
  }
  const extension = win.extname(found).toLowerCase();
  if (extension !== ".cmd" && extension !== ".bat") return { command: found, args: [...args], verbatim: false };

  const target = parseNpmShimTarget(platform.readTextFile(found) ?? "", win.dirname(found));
  if (target && platform.fileExists(target)) {
    const targetExtension = win.extname(target).toLowerCase();
    if (targetExtension === ".exe") return { command: target, args: [...args], verbatim: false };
    if ([".js", ".cjs", ".mjs"].includes(targetExtension)) {
      return { command: platform.nodePath, args: [target, ...args], verbatim: false };
    }
  }

  for (const arg of args) {
    if (!CMD_SAFE_ARGUMENT.test(arg))
      throw new Error(`refusing to pass argument ${JSON.stringify(arg)} through cmd.exe`);
  }
  return {
    command: win.join(systemRoot(platform.env), "System32", "cmd.exe"),
    args: ["/d", "/s", "/c", `""${found}" ${args.join(" ")}"`],
    verbatim: true,
  };
}

/**
 * The file the server runs for bin on Windows: each PATH entry in order, with
 * each PATHEXT extension (none when bin has one).
 */
export function findOnWindowsPath(
  bin: string,
  platform: Pick<WindowsPlatform, "env" | "fileExists">,
): string | undefined {
  const win = path.win32;
  const extensions = win.extname(bin)
    ? [""]
    : (platform.env.PATHEXT ?? ".COM;.EXE;.BAT;.CMD").split(";").filter(Boolean);
  const directories =
    bin.includes("\\") || bin.includes("/")
      ? [""]
      : (platform.env.PATH ?? platform.env.Path ?? "").split(";").filter(Boolean);
  for (const directory of directories) {
    for (const extension of extensions) {
      const candidate = directory ? win.join(directory, bin + extension) : bin + extension;
      if (platform.fileExists(candidate)) return candidate;
    }
  }
  return undefined;
}

/** Finds the program an npm cmd-shim runs: the quoted `%dp0%\…` path right before `%*`. */
export function parseNpmShimTarget(shim: string, shimDirectory: string): string | undefined {
  const match = /"%(?:~dp0|dp0%)\\([^"]+)"\s*%\*/.exec(shim);
  if (!match?.[1]) return undefined;
  return path.win32.join(shimDirectory, match[1]);
}

/** The Windows directory, where cmd.exe and taskkill.exe live. */
export function systemRoot(env: Readonly<Record<string, string | undefined>>): string {
  return env.SystemRoot ?? env.SYSTEMROOT ?? "C:\\Windows";
}
