/**
 * Builds dist/ (docs/development.md, "Build and test").
 *
 * Pass 1 is esbuild's code splitting: main.js, the chunks that main.js imports statically, and the chunks
 * that the program loads when a mode or feature needs them (dynamic import()). Node's ES module loader
 * resolves, reads, compiles and links every file it loads, at a cost for each file that the server's start pays
 * (BENCHMARKS.md, (a) and (d)).
 *
 * Then each group becomes one file: main.js with its whole static graph, loaded before `initialize` is answered;
 * and the job layer (src/wiring/serving.ts) with what it alone reaches, which a server loads just after. A chunk is
 * a module: one that a group and a file outside it both import must stay one instance (a class compared with
 * instanceof, a shared cache), so an outside file's import of a chunk now inside a group becomes an import of the
 * group's file, which re-exports what its chunks exported under aliases. A group's file has no top-level await,
 * so it has finished evaluating before anything that imports it runs.
 */
import { build } from "esbuild";
import fs from "node:fs";
import path from "node:path";

const OUT = "dist";
const COMMON = { bundle: true, platform: "node", format: "esm", target: "node20", logLevel: "warning" };
/** The job layer's module: a server loads it, and all it reaches, while the front door answers. */
const JOB_LAYER = "src/wiring/serving.ts";

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
  const mainGroup = staticallyImported(outputs, "main.js");
  const jobLayer = Object.keys(outputs).find((file) => outputs[file].entryPoint === JOB_LAYER);
  if (!jobLayer) throw new Error(`build: no chunk has ${JOB_LAYER} as its entry`);
  const jobLayerGroup = new Set([...staticallyImported(outputs, jobLayer)].filter((file) => !mainGroup.has(file)));
  refuseLoadedByName(outputs, jobLayerGroup, jobLayer);

  fs.rmSync(OUT, { recursive: true, force: true });
  fs.mkdirSync(OUT);
  // The package's bin: a package manager's shim executes it. Pass 1 kept src/main.ts's line; a group's entry has none.
  await bundleGroup({ from: scratch, root: "main.js", members: mainGroup, outputs, banner: "#!/usr/bin/env node" });
  fs.chmodSync(path.join(OUT, "main.js"), 0o755);
  for (const file of Object.keys(outputs)) {
    if (mainGroup.has(file)) continue;
    const text = fs.readFileSync(path.join(scratch, file), "utf8");
    fs.writeFileSync(path.join(OUT, file), pointedAt(text, mainGroup, "main.js", file));
  }

  // From dist/, where its chunks already import main.js: main.js stays a file of its own.
  await bundleGroup({ from: OUT, root: jobLayer, members: jobLayerGroup, outputs });
  for (const file of jobLayerGroup) if (file !== jobLayer) fs.rmSync(path.join(OUT, file));
  for (const file of Object.keys(outputs)) {
    if (mainGroup.has(file) || jobLayerGroup.has(file)) continue;
    const at = path.join(OUT, file);
    fs.writeFileSync(at, pointedAt(fs.readFileSync(at, "utf8"), jobLayerGroup, jobLayer, file));
  }
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}

/** A root chunk and every chunk it reaches by static imports. */
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
 * A chunk loaded by name with import() must stay a file: merged into a group, its name would be gone, and the
 * group would import it while it imports the group.
 */
function refuseLoadedByName(outputs, group, root) {
  for (const [file, output] of Object.entries(outputs)) {
    for (const imported of output.imports) {
      const target = path.basename(imported.path);
      if (imported.kind === "dynamic-import" && group.has(target) && target !== root) {
        throw new Error(`build: ${file} loads ${target} with import(), but ${root} imports it statically`);
      }
    }
  }
}

/**
 * The group as one file, named as its root: the root first, so the chunks evaluate in pass 1's order, then its
 * members' exports under aliases, for the files outside that import them. The re-exports add no evaluation.
 */
async function bundleGroup({ from, root, members, outputs, banner }) {
  const entry = [`export * from "./${root}";`];
  for (const file of members) {
    const names = file === root ? [] : outputs[file].exports;
    if (names.length > 0) {
      entry.push(`export { ${names.map((name) => `${name} as ${aliasOf(name, file)}`).join(", ")} } from "./${file}";`);
    }
  }
  // Written aside first: the root's own file is among the inputs.
  const outfile = path.join(OUT, `${root}.tmp`);
  await build({
    ...COMMON,
    stdin: { contents: entry.join("\n"), resolveDir: from, sourcefile: `${root}-group-entry.js` },
    outfile,
    ...(banner ? { banner: { js: banner } } : {}),
    // Files outside the group stay files of their own, loaded when asked for.
    plugins: [keepExternal((file) => !members.has(file))],
  });
  fs.renameSync(outfile, path.join(OUT, root));
}

/** The name under which a group's file re-exports a chunk's export: two chunks may export one name. */
function aliasOf(name, chunk) {
  return `${name}$${chunk.replace(/\.js$/, "").replace(/[^A-Za-z0-9_$]/g, "_")}`;
}

/** Imports of files that pass the test stay imports, by the same relative path. */
function keepExternal(isExternal) {
  return {
    name: "keep-other-files-external",
    setup(builder) {
      builder.onResolve({ filter: /^\.\/.*\.js$/ }, (args) =>
        args.importer !== "" && isExternal(path.basename(args.path)) ? { path: args.path, external: true } : undefined,
      );
    },
  };
}

/** A file's imports of chunks now inside a group, made imports of the group's file under its aliases. */
function pointedAt(text, group, groupFile, file) {
  const changed = text
    .replace(/import\s*\{([^}]*)\}\s*from\s*"\.\/([^"]+)";/g, (statement, names, chunk) => {
      if (!group.has(chunk) || chunk === groupFile) return statement;
      const aliased = names
        .split(",")
        .map((each) => each.trim())
        .filter(Boolean)
        .map((each) => {
          const [imported, local = imported] = each.split(/\s+as\s+/);
          return `${aliasOf(imported, chunk)} as ${local}`;
        });
      return `import { ${aliased.join(", ")} } from "./${groupFile}";`;
    })
    .replace(/import\s*"\.\/([^"]+)";/g, (statement, chunk) =>
      group.has(chunk) && chunk !== groupFile ? `import "./${groupFile}";` : statement,
    );
  for (const chunk of group) {
    if (chunk !== groupFile && changed.includes(`"./${chunk}"`)) {
      throw new Error(`build: ${file} refers to ${chunk} in a way this build does not rewrite`);
    }
  }
  return changed;
}
