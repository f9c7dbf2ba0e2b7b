/**
 * Builds dist/ in two passes (docs/development.md, "Build and test").
 *
 * Pass 1 is esbuild's code splitting: main.js, the chunks that main.js imports statically, and the chunks
 * that the program loads when a mode or feature needs them (dynamic import()). Node's ES module loader
 * resolves, reads, compiles and links every file of the static graph before main runs a line, at a cost for each
 * file that the server's start pays (BENCHMARKS.md, (a)).
 *
 * Pass 2 puts main.js and its whole static graph into one file. A chunk is a module: one that both the
 * static graph and a lazy chunk import must stay one instance (a class compared with instanceof, a shared
 * cache), so a lazy chunk's import of a chunk now inside main.js becomes an import of main.js, which
 * re-exports what those chunks exported. main.js has no top-level await, so it has finished evaluating
 * before any lazy chunk imports it.
 */
import { build } from "esbuild";
import fs from "node:fs";
import path from "node:path";

const OUT = "dist";
const COMMON = { bundle: true, platform: "node", format: "esm", target: "node20", logLevel: "warning" };

// A fixed name: the path comments esbuild leaves in main.js stay the same from build to build.
const scratch = `${OUT}-pass1`;
fs.rmSync(scratch, { recursive: true, force: true });
try {
  const pass1 = await build({
    ...COMMON,
    entryPoints: ["src/main.ts"],
    splitting: true,
    outdir: scratch,
    chunkNames: "[name]-[hash]",
    metafile: true,
  });
  const outputs = Object.fromEntries(
    Object.entries(pass1.metafile.outputs).map(([file, output]) => [path.basename(file), output]),
  );
  const staticGraph = staticallyImported(outputs, "main.js");
  const exported = exportsOf(outputs, staticGraph);

  fs.rmSync(OUT, { recursive: true, force: true });
  fs.mkdirSync(OUT);
  // main.js is imported first, so the chunks evaluate in pass 1's order; the re-exports add no evaluation.
  const entry = [
    `import "./main.js";`,
    ...[...exported].map(([chunk, names]) => `export { ${names.join(", ")} } from "./${chunk}";`),
  ].join("\n");
  await build({
    ...COMMON,
    stdin: { contents: entry, resolveDir: scratch, sourcefile: "main-entry.js" },
    outfile: path.join(OUT, "main.js"),
    // The package's bin: a package manager's shim executes it. Pass 1 kept src/main.ts's line; stdin has none.
    banner: { js: "#!/usr/bin/env node" },
    // The lazy chunks stay files of their own, loaded when asked for.
    plugins: [keepExternal((file) => !staticGraph.has(file))],
  });
  fs.chmodSync(path.join(OUT, "main.js"), 0o755);

  for (const file of Object.keys(outputs)) {
    if (staticGraph.has(file)) continue;
    const text = fs.readFileSync(path.join(scratch, file), "utf8");
    fs.writeFileSync(path.join(OUT, file), pointedAtMain(text, staticGraph, file));
  }
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}

/** main.js and every chunk it reaches by static imports. */
function staticallyImported(outputs, root) {
  const seen = new Set([root]);
  const pending = [root];
  while (pending.length > 0) {
    const output = outputs[pending.pop()];
    for (const imported of output?.imports ?? []) {
      if (imported.external || imported.kind !== "import-statement") continue;
      const file = path.basename(imported.path);
      if (!seen.has(file)) {
        seen.add(file);
        pending.push(file);
      }
    }
  }
  return seen;
}

/**
 * What each chunk of the static graph exports, by chunk, as main.js re-exports it: under a name with the
 * chunk's own suffix, since two chunks may export one name.
 */
function exportsOf(outputs, staticGraph) {
  const byChunk = new Map();
  for (const file of staticGraph) {
    if (file === "main.js") continue;
    const names = outputs[file].exports;
    if (names.length > 0)
      byChunk.set(
        file,
        names.map((name) => `${name} as ${aliasOf(name, file)}`),
      );
  }
  return byChunk;
}

/** The name under which main.js re-exports a chunk's export. */
function aliasOf(name, chunk) {
  return `${name}$${chunk.replace(/\.js$/, "").replace(/[^A-Za-z0-9_$]/g, "_")}`;
}

/** Imports of files that pass the test stay imports, by the same relative path. */
function keepExternal(isExternal) {
  return {
    name: "keep-lazy-chunks-external",
    setup(builder) {
      builder.onResolve({ filter: /^\.\/.*\.js$/ }, (args) =>
        args.importer !== "" && isExternal(path.basename(args.path)) ? { path: args.path, external: true } : undefined,
      );
    },
  };
}

/** A lazy chunk's imports of chunks now inside main.js, made imports of main.js under its aliases. */
function pointedAtMain(text, staticGraph, file) {
  const changed = text
    .replace(/import\s*\{([^}]*)\}\s*from\s*"\.\/([^"]+)";/g, (statement, names, chunk) => {
      if (!staticGraph.has(chunk) || chunk === "main.js") return statement;
      const aliased = names
        .split(",")
        .map((each) => each.trim())
        .filter(Boolean)
        .map((each) => {
          const [imported, local = imported] = each.split(/\s+as\s+/);
          return `${aliasOf(imported, chunk)} as ${local}`;
        });
      return `import { ${aliased.join(", ")} } from "./main.js";`;
    })
    .replace(/import\s*"\.\/([^"]+)";/g, (statement, chunk) =>
      staticGraph.has(chunk) && chunk !== "main.js" ? `import "./main.js";` : statement,
    );
  for (const chunk of staticGraph) {
    if (chunk !== "main.js" && changed.includes(`"./${chunk}"`)) {
      throw new Error(`build: ${file} refers to ${chunk} in a way this build does not rewrite`);
    }
  }
  return changed;
}
