/**
 * The rules that keep the two seams whole (issue 27): which agent is the runtime's business (its vocabulary
 * stays in runtimes/<name>/, nobody compares or defaults its name), where it runs is the host's (nobody tells
 * "local" from another host by name, only the builders import a host's folder, platform checks stay in
 * hosts/local/).
 */
import {
  DEFAULT_RUNTIME_HOME,
  HOST_BUILDERS,
  HOST_KINDS,
  HOSTS,
  LOCAL_HOST,
  OUR_OWN_FLAGS,
  PLATFORM_HOME,
  PLATFORM_NAMES,
  PLATFORM_READERS,
  PLATFORM_STRINGS,
  PLATFORM_WORDS,
  RUNTIME_NAME_HOME,
  RUNTIME_VOCABULARY,
  type RuntimeVocabulary,
} from "./rules.js";
import {
  byPlace,
  identifierOf,
  importViolation,
  literalText,
  modules,
  stringConstants,
  textOf,
  ts,
  under,
  useOf,
  valueOf,
  violation,
  wordMatches,
  type Files,
  type Module,
  type TS,
  type Violation,
} from "./source.js";

const homeRuntime = (file: string): string | undefined => /^runtimes\/([^/]+)\//.exec(file)?.[1];
const folders = (prefixes: readonly string[]): string => prefixes.map((prefix) => `src/${prefix}`).join(", ");

/** How often a word node names a word: an identifier that is it, or a string, template chunk or regex holding it. */
function mentions(node: TS.Node, word: string): number {
  const name = identifierOf(node);
  if (name !== undefined) return name === word ? 1 : 0;
  const text = textOf(node) ?? "";
  return text.includes(word) ? wordMatches(text, word) : 0;
}

interface Word {
  word: string;
  runtime: string;
  vocabulary: RuntimeVocabulary;
}

interface Foreign {
  /** Every foreign word, for the search in strings. */
  all: readonly Word[];
  /** The same by word, for identifiers. */
  byWord: ReadonlyMap<string, readonly Word[]>;
  /** Values forbidden as whole string literals. */
  byString: ReadonlyMap<string, readonly Word[]>;
}

function grouped(words: readonly Word[]): Map<string, Word[]> {
  const byWord = new Map<string, Word[]>();
  for (const entry of words) byWord.set(entry.word, [...(byWord.get(entry.word) ?? []), entry]);
  return byWord;
}

/** The vocabulary of the runtimes other than `home`, less what `home` shares with them. */
function foreignTo(runtimes: Readonly<Record<string, RuntimeVocabulary>>, home: string | undefined): Foreign {
  const own = home === undefined ? undefined : runtimes[home];
  const ownWords = new Set([...(own?.flags ?? []), ...(own?.words ?? [])]);
  const others = Object.entries(runtimes).filter(([runtime]) => runtime !== home);
  const all = others.flatMap(([runtime, vocabulary]) =>
    [...vocabulary.flags, ...vocabulary.words].map((word) => ({ word, runtime, vocabulary })),
  );
  const strings = others.flatMap(([runtime, vocabulary]) =>
    vocabulary.strings.map((word) => ({ word, runtime, vocabulary })),
  );
  const foreign = all.filter(({ word }) => !ownWords.has(word));
  const byString = grouped(strings.filter(({ word }) => !own?.strings.includes(word)));
  return { all: foreign, byWord: grouped(foreign), byString };
}

/**
 * Each agent CLI's flags, output vocabulary, permission modes and variables outside its runtime's folder (code
 * and strings, not comments). A word two CLIs share (say --model) may appear in both folders, and nowhere else.
 */
export function checkAgentVocabulary(
  files: Files,
  runtimes: Readonly<Record<string, RuntimeVocabulary>> = RUNTIME_VOCABULARY,
): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    const foreign = foreignTo(runtimes, homeRuntime(module.file));
    const report = (node: TS.Node, { runtime, vocabulary }: Word, what: string): void => {
      const message = `names ${vocabulary.label}'s ${what} outside src/runtimes/${runtime}/`;
      found.push(violation("agents", module, node, what, message));
    };
    for (const node of module.words) {
      const name = identifierOf(node);
      if (name !== undefined) for (const entry of foreign.byWord.get(name) ?? []) report(node, entry, entry.word);
      const text = name === undefined ? (textOf(node) ?? "") : "";
      for (const entry of text === "" ? [] : foreign.all) {
        if (!text.includes(entry.word)) continue;
        for (let n = wordMatches(text, entry.word); n > 0; n -= 1) report(node, entry, entry.word);
      }
      const value = literalText(node);
      for (const entry of foreign.byString.get(value ?? "") ?? []) report(node, entry, `"${value}"`);
    }
  }
  return byPlace(found);
}

/**
 * An agent named in code rather than asked of its runtime: a comparison with a runtime's name outside
 * runtimes/ (`agent === "codex"`), and a fallback to one (`?? "claude"`) outside the one place records are
 * normalised. Module-level constants holding a name count as the name.
 */
export function checkAgentNames(
  files: Files,
  runtimeNames: readonly string[] = Object.keys(RUNTIME_VOCABULARY),
): Violation[] {
  const found: Violation[] = [];
  const constants = stringConstants(files);
  for (const module of modules(files).values()) {
    for (const node of module.words) {
      const value = valueOf(node, constants);
      const use = value !== undefined && runtimeNames.includes(value) ? useOf(node) : undefined;
      if (use === undefined) continue;
      const what = `${use.operator} "${value}"`;
      if (use.kind === "fallback" && !under(module.file, DEFAULT_RUNTIME_HOME)) {
        const message = `falls back to the agent "${value}" (${use.operator}) outside ${folders(DEFAULT_RUNTIME_HOME)}`;
        found.push(violation("agent-names", module, node, what, `${message}, where records are normalised`));
      } else if (use.kind === "comparison" && !under(module.file, RUNTIME_NAME_HOME)) {
        const message = `compares with the agent name "${value}" outside ${folders(RUNTIME_NAME_HOME)}`;
        found.push(violation("agent-names", module, node, what, `${message}: ask the runtime instead`));
      }
    }
  }
  return byPlace(found);
}

/**
 * "Is this the local host?" asked by name outside hosts/ (a comparison with "local", or a fallback to it), and
 * a host's folder imported (type imports too) outside the places that build hosts.
 */
export function checkHosts(files: Files): Violation[] {
  const found: Violation[] = [];
  const constants = stringConstants(files);
  for (const module of modules(files).values()) {
    if (!under(module.file, HOSTS)) {
      for (const node of module.words) {
        const use = valueOf(node, constants) === LOCAL_HOST ? useOf(node) : undefined;
        if (use === undefined) continue;
        const verb = use.kind === "comparison" ? "compares a host with" : "falls back to the host";
        const message = `${verb} "${LOCAL_HOST}" (${use.operator}) outside ${folders(HOSTS)}: ask the host`;
        found.push(violation("hosts", module, node, `${use.operator} "${LOCAL_HOST}"`, message));
      }
    }
    if (under(module.file, HOST_BUILDERS)) continue;
    for (const ref of module.imports) {
      if (ref.target.kind !== "file" || !under(ref.target.file, HOSTS) || ref.target.file === HOST_KINDS) continue;
      const kind = ref.typeOnly ? "a type import" : "an import";
      const message = `${kind} of src/${ref.target.file} outside where hosts are built (${folders(HOST_BUILDERS)})`;
      found.push(importViolation("hosts", module, ref, `import ${ref.target.file}`, message));
    }
  }
  return byPlace(found);
}

/**
 * Whether a word node reads a platform: `x.platform`, `x?.platform`, `x["platform"]`, `{ platform } = x`; not
 * `{ platform: x.platform }`, which passes it on to whoever checks it.
 */
function readsPlatform(node: TS.Node): boolean {
  const parent = node.parent;
  if (ts.isBindingElement(parent) && ts.isObjectBindingPattern(parent.parent)) {
    return identifierOf(node) === "platform" && (parent.propertyName ?? parent.name) === node;
  }
  const read =
    (ts.isPropertyAccessExpression(parent) && parent.name === node && identifierOf(node) === "platform") ||
    (ts.isElementAccessExpression(parent) && parent.argumentExpression === node && literalText(node) === "platform");
  if (!read) return false;
  const holder = parent.parent;
  return !(ts.isPropertyAssignment(holder) && holder.initializer === parent && holder.name.getText() === "platform");
}

function platformFindings(module: Module, node: TS.Node): Array<[what: string, message: string]> {
  const where = `outside src/${PLATFORM_HOME}`;
  const found: Array<[string, string]> = [];
  for (const word of PLATFORM_WORDS) {
    for (let n = mentions(node, word); n > 0; n -= 1) found.push([word, `names ${word} ${where}`]);
  }
  const value = literalText(node);
  const use = value === undefined ? undefined : useOf(node);
  if (value !== undefined && PLATFORM_STRINGS.includes(value)) {
    found.push([`"${value}"`, `names the platform "${value}" ${where}`]);
  } else if (value !== undefined && PLATFORM_NAMES.includes(value) && use?.kind === "comparison") {
    found.push([`${use.operator} "${value}"`, `compares with the platform name "${value}" ${where}`]);
  }
  if (readsPlatform(node) && !under(module.file, PLATFORM_READERS)) {
    const readers = PLATFORM_READERS.map((file) => `src/${file}`).join(", ");
    found.push([".platform", `reads .platform ${where} and ${readers} (pass it on as { platform: … })`]);
  }
  return found;
}

/** Platform checks outside PLATFORM_HOME (code and strings, not comments). */
export function checkPlatform(files: Files): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    if (module.file.startsWith(PLATFORM_HOME)) continue;
    for (const node of module.words) {
      for (const [what, message] of platformFindings(module, node)) {
        found.push(violation("platform", module, node, what, message));
      }
    }
  }
  return byPlace(found);
}

/** Every flag a runtime's folder passes is in its vocabulary, so that checkAgentVocabulary keeps it there. */
export function checkFlagsListed(files: Files): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    const home = homeRuntime(module.file);
    if (home === undefined) continue;
    const flags = RUNTIME_VOCABULARY[home]?.flags ?? [];
    for (const node of module.words) {
      for (const match of (textOf(node) ?? "").matchAll(/(?<![\w-])--[a-zA-Z][\w-]*/g)) {
        if (flags.includes(match[0]) || OUR_OWN_FLAGS.includes(match[0])) continue;
        const message = `passes ${match[0]}, which RUNTIME_VOCABULARY.${home}.flags (test/architecture/rules.ts) lacks`;
        found.push(violation("flags", module, node, match[0], message));
      }
    }
  }
  return byPlace(found);
}
