/**
 * The rules about the import graph and the process: only main names `process.`, the node-free layers reach
 * no builtin, imports follow the layer table, no circle, and every import resolves (a hole in the graph would
 * hide violations).
 */
import { LAYERS, NODE_FREE, PROCESS_READERS } from "./rules.js";
import {
  byPlace,
  fileViolation,
  importViolation,
  modules,
  ts,
  under,
  violation,
  type Files,
  type Module,
  type TS,
  type Violation,
} from "./source.js";

/** What `process` is, where it is read: `process.env`, `process[]`, `globalThis.process`; undefined elsewhere. */
function processRead(node: TS.Node): string | undefined {
  if (!ts.isIdentifier(node) || node.text !== "process") return undefined;
  const parent = node.parent;
  if (ts.isPropertyAccessExpression(parent) && parent.name === node) {
    const holder = parent.expression;
    const global = ts.isIdentifier(holder) && (holder.text === "globalThis" || holder.text === "global");
    return global ? "globalThis.process" : undefined;
  }
  if (ts.isPropertyAccessExpression(parent) && parent.expression === node) return `process.${parent.name.text}`;
  return ts.isElementAccessExpression(parent) && parent.expression === node ? "process[]" : undefined;
}

/** `process.x`, `process?.x`, `process["x"]`, `globalThis.process`, outside PROCESS_READERS. */
export function checkProcess(files: Files): Violation[] {
  const found: Violation[] = [];
  const where = PROCESS_READERS.map((file) => `src/${file}`).join(", ");
  for (const module of modules(files).values()) {
    if (under(module.file, PROCESS_READERS)) continue;
    for (const node of module.words) {
      const what = processRead(node);
      if (what !== undefined) found.push(violation("process", module, node, what, `names process. outside ${where}`));
    }
  }
  return byPlace(found);
}

/** A Node builtin imported by a module that a NODE_FREE module reaches through run-time imports. */
export function checkNodeImports(files: Files): Violation[] {
  const all = modules(files);
  // Breadth first from every NODE_FREE module at once: the shortest chain to each module reached.
  const parent = new Map<string, string | undefined>();
  const queue = [...all.keys()].filter((file) => under(file, NODE_FREE)).sort();
  for (const root of queue) parent.set(root, undefined);
  for (let q = 0; q < queue.length; q += 1) {
    for (const ref of all.get(queue[q] ?? "")?.imports ?? []) {
      if (ref.typeOnly || ref.target.kind !== "file" || parent.has(ref.target.file)) continue;
      parent.set(ref.target.file, queue[q]);
      queue.push(ref.target.file);
    }
  }
  const found: Violation[] = [];
  for (const file of queue) {
    const module = all.get(file) as Module;
    const chain: string[] = [];
    for (let at: string | undefined = file; at !== undefined; at = parent.get(at)) chain.unshift(`src/${at}`);
    for (const ref of module.imports) {
      if (ref.typeOnly || ref.target.kind !== "builtin") continue;
      const reached = chain.length === 1 ? "" : `, and ${chain[0]} reaches it at run time`;
      const message = `imports ${ref.target.name}${reached}: ${[...chain, ref.target.name].join(" → ")}`;
      found.push(importViolation("node", module, ref, `import ${ref.target.name}`, message));
    }
  }
  return byPlace(found);
}

/** The LAYERS key that governs a file, with the folder its "*" stands for. */
function layerOf(file: string): { key: string; star: string | undefined } | undefined {
  let best: { key: string; star: string | undefined } | undefined;
  for (const key of Object.keys(LAYERS)) {
    let star: string | undefined;
    if (key.includes("*")) {
      const [before = "", after = ""] = key.split("*");
      const name = file.startsWith(before) ? (file.slice(before.length).split("/")[0] ?? "") : "";
      if (name === "" || !file.startsWith(`${before}${name}${after}`)) continue;
      star = name;
    } else if (!under(file, [key])) {
      continue;
    }
    if (best === undefined || key.length > best.key.length) best = { key, star };
  }
  return best;
}

/** An import (run-time or type) that LAYERS does not allow, and a file in no layer. */
export function checkLayers(files: Files): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    const layer = layerOf(module.file);
    if (layer === undefined) {
      const message = `src/${module.file} belongs to no layer (add it to a folder, or to LAYERS)`;
      found.push(fileViolation("layers", module, "in no layer", message));
      continue;
    }
    const { key, star } = layer;
    const allowed = (LAYERS[key] ?? []).map((entry) => (star === undefined ? entry : entry.replace("*", star)));
    for (const ref of module.imports) {
      if (ref.target.kind !== "file" || under(ref.target.file, allowed)) continue;
      const kind = ref.typeOnly ? "a type import" : "an import";
      const message = `${kind} of src/${ref.target.file}: ${layer.key} may import only ${allowed.join(", ")}`;
      found.push(importViolation("layers", module, ref, `import ${ref.target.file}`, message));
    }
  }
  return byPlace(found);
}

/** Every import names a file in src/ or a Node builtin (no packages: zero dependencies). */
export function checkImportsResolve(files: Files): Violation[] {
  const found: Violation[] = [];
  for (const module of modules(files).values()) {
    for (const ref of module.imports) {
      const { target } = ref;
      const what = `import ${ref.specifier ?? "(computed)"}`;
      if (target.kind === "missing") found.push(importViolation("resolve", module, ref, what, target.reason));
      if (target.kind !== "package") continue;
      const message = `imports the package "${target.name}" (src/ has no dependencies)`;
      found.push(importViolation("resolve", module, ref, what, message));
    }
  }
  return byPlace(found);
}

/**
 * No circle in the import graph, type-only and dynamic imports included: a circle is two modules that can only
 * be understood together. Each circle is reported once, at the import that closes it.
 */
export function checkCircles(files: Files): Violation[] {
  const graph = modules(files);
  const found: Violation[] = [];
  const state = new Map<string, "open" | "done">();
  const trail: string[] = [];
  const visit = (file: string): void => {
    state.set(file, "open");
    trail.push(file);
    const module = graph.get(file) as Module;
    for (const ref of module.imports) {
      if (ref.target.kind !== "file") continue;
      const next = ref.target.file;
      if (state.get(next) === "open") {
        const circle = [...trail.slice(trail.indexOf(next)), next].map((name) => `src/${name}`).join(" -> ");
        found.push(importViolation("circles", module, ref, `import ${next}`, `an import circle: ${circle}`));
      } else if (!state.has(next)) visit(next);
    }
    trail.pop();
    state.set(file, "done");
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return byPlace(found);
}
