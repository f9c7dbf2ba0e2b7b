import { stat } from "node:fs/promises";
import path from "node:path";

/** The cwd check of §5: an absolute path to an existing directory. Returns the problem, or undefined. */
export async function checkDirectory(cwd: string, pathApi: typeof path = path): Promise<string | undefined> {
  if (!pathApi.isAbsolute(cwd)) return `must be an absolute path, got ${JSON.stringify(cwd)}`;
  try {
    const info = await stat(cwd);
    return info.isDirectory() ? undefined : `is not a directory: ${cwd}`;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return `does not exist: ${cwd}`;
    return `cannot be used (${code ?? (error as Error).message}): ${cwd}`;
  }
}
