/**
 * Directory checks for cwd and add_dirs (PROTOCOL.md §5, §5.6): an absolute
 * path to an existing directory, and, when the operator set roots, one whose
 * real path lies inside a root, so neither a symlink nor `..` can leave it.
 */
import { realpath, stat } from "node:fs/promises";
import path from "node:path";

import { quoted } from "../../core/errors.js";

/** Paths are echoed quoted (§10), cut longer than other values: a real path is often past 60 characters. */
const PATH_ECHO_CHARS = 500;
const shown = (dir: string): string => quoted(dir, PATH_ECHO_CHARS);

import type { DirectoryCheck } from "../../agent/policy.js";

export type { DirectoryCheck };

export async function checkDirectory(
  dir: string,
  roots?: readonly string[],
  pathApi: typeof path = path,
): Promise<DirectoryCheck> {
  if (!pathApi.isAbsolute(dir))
    return { ok: false, code: "INVALID_ARGUMENT", problem: `must be an absolute path, got ${shown(dir)}` };
  // With roots, a path outside them is refused before anything is said about whether it exists.
  if (roots !== undefined && !roots.some((root) => isInside(pathApi.resolve(dir), root, pathApi))) {
    const real = await realpath(dir).catch(() => undefined);
    if (real === undefined || !roots.some((root) => isInside(real, root, pathApi))) return outsideRoots(dir, real);
  }
  try {
    const info = await stat(dir);
    if (!info.isDirectory())
      return { ok: false, code: "INVALID_ARGUMENT", problem: `is not a directory: ${shown(dir)}` };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR")
      return { ok: false, code: "INVALID_ARGUMENT", problem: `does not exist: ${shown(dir)}` };
    return {
      ok: false,
      code: "INVALID_ARGUMENT",
      problem: `cannot be used (${code ?? (error as Error).message}): ${shown(dir)}`,
    };
  }
  if (roots === undefined) return { ok: true, path: dir };
  // The agent runs in the real path, so a symlink swapped after this check cannot move it.
  const real = await realpath(dir);
  if (roots.some((root) => isInside(real, root, pathApi))) return { ok: true, path: real };
  return outsideRoots(dir, real);
}

function outsideRoots(dir: string, real: string | undefined): DirectoryCheck {
  const where = real === undefined || real === dir ? "" : ` (it resolves to ${shown(real)})`;
  return {
    ok: false,
    code: "POLICY_DENIED",
    problem: `is outside the allowed roots (CLAUDE_DISPATCH_ROOTS): ${shown(dir)}${where}`,
  };
}

/** Compares path components, not string prefixes: /root2 is not inside /root. */
export function isInside(candidate: string, root: string, pathApi: typeof path = path): boolean {
  const relative = pathApi.relative(root, candidate);
  if (relative === "") return true;
  return relative !== ".." && !relative.startsWith(`..${pathApi.sep}`) && !pathApi.isAbsolute(relative);
}

/** Resolves the operator's roots at startup; each must be an existing directory. */
export async function resolveRoots(list: readonly string[]): Promise<string[]> {
  const roots: string[] = [];
  for (const root of list) {
    const check = await checkDirectory(root);
    if (!check.ok) throw new Error(`CLAUDE_DISPATCH_ROOTS entry ${check.problem}`);
    roots.push(await realpath(root));
  }
  return roots;
}
