/** The rules as one list, and the tree they are checked on: src/ for the layering, src/, test/ and bench/ for lines. */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { checkCircles, checkImportsResolve, checkLayers, checkNodeImports, checkProcess } from "./graph.js";
import { LINE_EXEMPT, LINE_ROOTS } from "./rules.js";
import { checkAgentNames, checkAgentVocabulary, checkFlagsListed, checkHosts, checkPlatform } from "./seams.js";
import type { Files, Violation } from "./source.js";

export interface Rule {
  /** The key of its allowlist. */
  name: string;
  title: string;
  check(files: Files): Violation[];
}

export const RULES: readonly Rule[] = [
  { name: "resolve", title: "every import resolves to a file in src/ or a Node builtin", check: checkImportsResolve },
  { name: "process", title: "only src/main.ts names process.", check: checkProcess },
  {
    name: "node",
    title: "nothing server/, tools/, jobs/, agent/ or core/ reaches imports node:",
    check: checkNodeImports,
  },
  { name: "layers", title: "imports follow the layer table", check: checkLayers },
  { name: "circles", title: "no import circle, type-only and dynamic imports included", check: checkCircles },
  { name: "agents", title: "each agent CLI's vocabulary stays in src/runtimes/<name>/", check: checkAgentVocabulary },
  { name: "flags", title: "each runtime's vocabulary lists every flag its folder passes", check: checkFlagsListed },
  { name: "agent-names", title: "no agent compared or defaulted to by name", check: (files) => checkAgentNames(files) },
  {
    name: "hosts",
    title: 'no "local" host by name; host folders imported only where hosts are built',
    check: checkHosts,
  },
  { name: "platform", title: "platform checks stay in src/hosts/local/", check: checkPlatform },
];

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CODE = /\.[cm]?[jt]s$/;

/** Code files under a folder of the repository: relative path (posix separators) → text. */
function readFolder(folder: string, relativeTo: string): Map<string, string> {
  const files = new Map<string, string>();
  const entries = readdirSync(path.join(ROOT, folder), { recursive: true, encoding: "utf8" })
    .map((entry) => path.posix.join(folder, entry.split(path.sep).join("/")))
    .filter((entry) => CODE.test(entry) && !entry.endsWith(".d.ts"))
    .sort();
  for (const entry of entries) {
    files.set(path.posix.relative(relativeTo, entry), readFileSync(path.join(ROOT, entry), "utf8"));
  }
  return files;
}

/** src/'s TypeScript files, by path relative to src/. */
export function readSource(): Files {
  return new Map([...readFolder("src", "src")].filter(([file]) => file.endsWith(".ts")));
}

/** The files whose lines are bounded, by path relative to the repository. */
export function readLineFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const root of LINE_ROOTS) {
    for (const [file, text] of readFolder(root, "")) {
      if (!LINE_EXEMPT.some((prefix) => file.startsWith(prefix))) files.set(file, text);
    }
  }
  return files;
}
