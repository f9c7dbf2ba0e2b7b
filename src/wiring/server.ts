/**
 * The MCP server (PROTOCOL.md §2–§3): reads the configuration, opens the state directory and answers the host's
 * `initialize` while the job layer loads (serve-jobs.ts), which takes over the jobs of servers that are gone, serves
 * every other request, and shuts down as §3 describes. Only what comes before that first answer is here.
 */
import { SERVER_NAME, SERVER_VERSION } from "../core/version.js";
import { frontDoor, type OpeningFacts } from "../server/opening.js";
import { createMessageWriter, serveStdio } from "../server/stdio.js";
import { openServer, readConfig } from "./job-layer.js";
import type { ModeLoaders } from "./mode-loaders.js";
import type { ProcessParts } from "./machine.js";

export async function serve(parts: ProcessParts, loaders: ModeLoaders): Promise<void> {
  if (parts.stdin.isTTY) {
    // The same absolute `claude mcp add` line as doctor's; the command line loads only here, so a host's start is
    // no slower.
    const { terminalHint } = await loaders.commandLine();
    const install = { nodePath: parts.execPath, mainPath: parts.mainPath, shell: parts.here.shell };
    parts.stderr.write(terminalHint(install, parts.env));
  }
  const { config, roots } = await readConfig(parts);
  const opened = openServer(parts, config, roots);
  const { gated, logger } = opened;
  const writer = createMessageWriter(parts.stdout, logger);
  const facts: OpeningFacts = {
    server: { name: SERVER_NAME, version: SERVER_VERSION },
    depth: { current: config.depth, max: config.maxDepth },
  };
  // What the host sent at once, its `initialize`, is answered before the job layer loads: loading compiles most of
  // the program, and the host waits on that answer (BENCHMARKS.md (a)). Two turns: one poll of stdin comes between.
  const whole = new Promise((resolve) => setImmediate(() => setImmediate(resolve))).then(async () =>
    (await loaders.serving()).serveJobs(parts, loaders, opened, writer),
  );
  const handle = frontDoor(
    facts,
    whole.then((served) => served.handle),
  );
  const server = serveStdio({ input: parts.stdin, writer, handle, logger, maxLineBytes: config.maxLineBytes });
  if (gated)
    logger.warn(`depth ${config.depth} reaches CLAUDE_DISPATCH_MAX_DEPTH ${config.maxDepth}: no tools are offered`);
  (await whole).serving(server);
}
