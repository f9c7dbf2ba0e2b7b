/**
 * Source files as TypeScript's own parser reads them: one parse per file, the
 * imports each one makes, and where a finding is (line, enclosing declaration).
 * The checks work on a virtual file map, so each is also shown failing on
 * planted text.
 */
import { builtinModules, createRequire } from "node:module";
import path from "node:path";
import type * as TS from "typescript";

/** The compiler, loaded with require: through tsx's import hook its 9 MB take over a second, here a quarter. */
export const ts: typeof TS = createRequire(import.meta.url)("typescript");
export type { TS };

/** Path relative to src/ (posix separators) → source text. */
export type Files = ReadonlyMap<string, string>;

export interface ImportRef {
  /** The specifier, or undefined for a dynamic import of a computed one. */
  specifier: string | undefined;
  /** `import type`, `export type`, `typeof import()`: erased, so no run-time edge. */
  typeOnly: boolean;
  node: TS.Node;
}

export type Target =
  | { kind: "file"; file: string }
  | { kind: "builtin"; name: string }
  | { kind: "package"; name: string }
  | { kind: "missing"; reason: string };

export interface Module {
  file: string;
  source: TS.SourceFile;
  /**
   * The identifiers, strings, template chunks and regexes, in source order: every node a rule starts from
   * (it looks at the parents for the rest), so that no check walks the whole tree again.
   */
  words: readonly TS.Node[];
  imports: ReadonlyArray<ImportRef & { target: Target }>;
}

export interface Violation {
  rule: string;
  file: string;
  line: number;
  /** What the allowlist names: the enclosing declaration and what it does, stable while lines move. */
  key: string;
  message: string;
  /** The offending line as written. */
  text: string;
}

export function parse(file: string, text: string): TS.SourceFile {
  const kind = /\.[cm]?js$/.test(file) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  // No rule reads comments, so JSDoc is left unparsed, which is faster.
  const options = { languageVersion: ts.ScriptTarget.Latest, jsDocParsingMode: ts.JSDocParsingMode.ParseNone };
  return ts.createSourceFile(file, text, options, true, kind);
}

export function allNodes(source: TS.SourceFile): TS.Node[] {
  const nodes: TS.Node[] = [];
  const visit = (node: TS.Node): void => {
    nodes.push(node);
    ts.forEachChild(node, visit);
  };
  ts.forEachChild(source, visit);
  return nodes;
}

/** A string literal or a template without substitutions: its value. */
export function literalText(node: TS.Node | undefined): string | undefined {
  if (node === undefined) return undefined;
  return ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) ? node.text : undefined;
}

function specifierOf(node: TS.Node | undefined): string | undefined {
  if (node !== undefined && ts.isLiteralTypeNode(node)) return literalText(node.literal);
  return literalText(node);
}

/**
 * Static imports and re-exports, side-effect imports, `import()` and `import("…")` types.
 * `import { type A } from "x"` is a run-time import: verbatimModuleSyntax keeps it as `import {} from "x"`.
 */
export function importsOf(nodes: readonly TS.Node[]): ImportRef[] {
  const found: ImportRef[] = [];
  for (const node of nodes) {
    if (ts.isImportDeclaration(node)) {
      const typeOnly = node.importClause?.isTypeOnly === true;
      found.push({ specifier: specifierOf(node.moduleSpecifier), typeOnly, node });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined) {
      found.push({ specifier: specifierOf(node.moduleSpecifier), typeOnly: node.isTypeOnly, node });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      found.push({ specifier: specifierOf(node.arguments[0]), typeOnly: false, node });
    } else if (ts.isImportTypeNode(node)) {
      found.push({ specifier: specifierOf(node.argument), typeOnly: true, node });
    } else if (ts.isExternalModuleReference(node)) {
      found.push({ specifier: specifierOf(node.expression), typeOnly: false, node });
    }
  }
  return found;
}

const BUILTINS = new Set(builtinModules);

export function resolveImport(from: string, specifier: string | undefined, files: Files): Target {
  if (specifier === undefined) {
    return { kind: "missing", reason: "a dynamic import of a computed specifier cannot be checked" };
  }
  if (!specifier.startsWith(".") && !specifier.startsWith("/")) {
    if (specifier.startsWith("node:")) return { kind: "builtin", name: specifier };
    const builtin = BUILTINS.has(specifier) || BUILTINS.has(specifier.split("/")[0] ?? "");
    return builtin ? { kind: "builtin", name: `node:${specifier}` } : { kind: "package", name: specifier };
  }
  const joined = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  if (joined.startsWith("../") || joined === ".." || specifier.startsWith("/")) {
    return { kind: "missing", reason: `"${specifier}" leaves src/` };
  }
  const typescript = joined.replace(/\.js$/, ".ts").replace(/\.mjs$/, ".mts");
  const file = [typescript, joined, `${joined}.ts`, `${joined}/index.ts`].find((candidate) => files.has(candidate));
  if (file === undefined) return { kind: "missing", reason: `"${specifier}" resolves to no file in src/` };
  return { kind: "file", file };
}

const parsed = new WeakMap<Files, Map<string, Module>>();

/** Each file parsed once per file map, however many checks read it. */
export function modules(files: Files): Map<string, Module> {
  const known = parsed.get(files);
  if (known !== undefined) return known;
  const result = new Map<string, Module>();
  for (const [file, text] of files) {
    const source = parse(file, text);
    const nodes = allNodes(source);
    const imports = importsOf(nodes).map((ref) => ({ ...ref, target: resolveImport(file, ref.specifier, files) }));
    const words = nodes.filter((node) => identifierOf(node) !== undefined || textOf(node) !== undefined);
    result.set(file, { file, source, words, imports });
  }
  parsed.set(files, result);
  return result;
}

/** A prefix ending in "/" is a folder with its subfolders, "" is everything, anything else one file. */
export function under(file: string, prefixes: readonly string[]): boolean {
  return prefixes.some((prefix) => (prefix === "" || prefix.endsWith("/") ? file.startsWith(prefix) : file === prefix));
}

export function lineOf(source: TS.SourceFile, node: TS.Node): number {
  return source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
}

function lineText(source: TS.SourceFile, line: number): string {
  const start = source.getPositionOfLineAndCharacter(line - 1, 0);
  const text = source.text.slice(start, source.getLineEndOfPosition(start)).trim();
  return text.length > 140 ? `${text.slice(0, 137)}...` : text;
}

/** An identifier's name (`#private` ones too). */
export function identifierOf(node: TS.Node): string | undefined {
  return ts.isIdentifier(node) || ts.isPrivateIdentifier(node) ? node.text : undefined;
}

function declaredName(node: TS.Node): string | undefined {
  if (ts.isConstructorDeclaration(node)) return "constructor";
  const functionValued = (value: TS.Node | undefined): boolean =>
    value !== undefined && (ts.isArrowFunction(value) || ts.isFunctionExpression(value));
  const named =
    ts.isFunctionDeclaration(node) ||
    ts.isClassDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node) ||
    ts.isInterfaceDeclaration(node) ||
    ts.isTypeAliasDeclaration(node) ||
    (ts.isPropertyDeclaration(node) && functionValued(node.initializer)) ||
    (ts.isPropertyAssignment(node) && functionValued(node.initializer));
  if (named) return node.name?.getText();
  if (!ts.isVariableDeclaration(node) || !ts.isIdentifier(node.name)) return undefined;
  const topLevel = ts.isVariableStatement(node.parent.parent) && ts.isSourceFile(node.parent.parent.parent);
  return topLevel || functionValued(node.initializer) ? node.name.text : undefined;
}

/** The declarations around a node, outermost first, at most two: "JobEntry.agent", "toRecord", "(module)". */
export function scopeOf(node: TS.Node): string {
  const names: string[] = [];
  for (let at = node.parent; at !== undefined && !ts.isSourceFile(at); at = at.parent) {
    const name = declaredName(at);
    if (name !== undefined) names.unshift(name);
  }
  return names.length === 0 ? "(module)" : names.slice(-2).join(".");
}

export function violation(rule: string, module: Module, node: TS.Node, what: string, message: string): Violation {
  const line = lineOf(module.source, node);
  const key = `${scopeOf(node)}: ${what}`;
  return { rule, file: module.file, line, key, message, text: lineText(module.source, line) };
}

/** An import's violation: its key is what it imports, wherever in the file the import is. */
export function importViolation(
  rule: string,
  module: Module,
  ref: ImportRef,
  what: string,
  message: string,
): Violation {
  return { ...violation(rule, module, ref.node, what, message), key: what };
}

/** A violation of the whole file (a file in no layer), on its first line. */
export function fileViolation(rule: string, module: Module, what: string, message: string): Violation {
  return { rule, file: module.file, line: 1, key: what, message, text: lineText(module.source, 1) };
}

export function byPlace(found: Violation[]): Violation[] {
  return found.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line));
}

/**
 * Every match of a word in `text`, `-` counting as a word character (so
 * --resume is not --resumed). A path word (/proc) is also not the start of a
 * file name (./posix/proc.js).
 */
export function wordMatches(text: string, word: string): number {
  const escaped = word.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  const after = word.startsWith("/") ? "(?![\\w$-])(?!\\.[\\w$])" : "(?![\\w$-])";
  return [...text.matchAll(new RegExp(`(?<![\\w$-])${escaped}${after}`, "g"))].length;
}

/** The text of strings, template chunks and regexes: what a word in "code and strings, not comments" means there. */
export function textOf(node: TS.Node): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) return node.text;
  if (ts.isRegularExpressionLiteral(node)) return node.text;
  return undefined;
}

export const COMPARISONS: ReadonlySet<TS.SyntaxKind> = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsToken,
]);

/** A fallback: `x ?? value`, `x || value`. */
export const FALLBACKS: ReadonlySet<TS.SyntaxKind> = new Set([
  ts.SyntaxKind.QuestionQuestionToken,
  ts.SyntaxKind.BarBarToken,
]);

export type Use = { kind: "comparison" | "fallback"; operator: string };

/**
 * How a value is used: compared (`x === v`, `v !== x`, `case v:`) or given as a fallback (`x ?? v`,
 * `x || v`, a parameter's or binding's default); undefined when it is neither.
 */
export function useOf(node: TS.Node): Use | undefined {
  const parent = node.parent;
  if (ts.isCaseClause(parent) && parent.expression === node) return { kind: "comparison", operator: "case" };
  if ((ts.isParameter(parent) || ts.isBindingElement(parent)) && parent.initializer === node) {
    return { kind: "fallback", operator: "=" };
  }
  if (!ts.isBinaryExpression(parent)) return undefined;
  const operator = parent.operatorToken.kind;
  const written = ts.tokenToString(operator) ?? "";
  if (COMPARISONS.has(operator)) return { kind: "comparison", operator: written };
  if (FALLBACKS.has(operator) && parent.right === node) return { kind: "fallback", operator: written };
  return undefined;
}

const constantsByFiles = new WeakMap<Files, Map<string, string>>();

/**
 * Module-level `const NAME = "value"` across the files: `agent !== DEFAULT_AGENT` compares with "claude" as
 * surely as `agent !== "claude"` does. A runtime's own constants are left out: `bin ?? DEFAULT_CODEX_BIN`
 * names its program, not an agent.
 */
export function stringConstants(files: Files): ReadonlyMap<string, string> {
  const known = constantsByFiles.get(files);
  if (known !== undefined) return known;
  const constants = new Map<string, string>();
  for (const module of modules(files).values()) {
    if (/^runtimes\/[^/]+\//.test(module.file)) continue;
    for (const statement of module.source.statements) {
      if (!ts.isVariableStatement(statement)) continue;
      if ((statement.declarationList.flags & ts.NodeFlags.Const) === 0) continue;
      for (const declaration of statement.declarationList.declarations) {
        let value = declaration.initializer;
        if (value !== undefined && ts.isAsExpression(value)) value = value.expression;
        const text = literalText(value);
        if (text !== undefined && ts.isIdentifier(declaration.name)) constants.set(declaration.name.text, text);
      }
    }
  }
  constantsByFiles.set(files, constants);
  return constants;
}

/** A string literal's value, or the value of a module-level string constant it names. */
export function valueOf(node: TS.Node, constants: ReadonlyMap<string, string>): string | undefined {
  if (ts.isIdentifier(node)) return useOf(node) === undefined ? undefined : constants.get(node.text);
  return literalText(node);
}
