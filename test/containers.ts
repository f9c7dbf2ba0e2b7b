/**
 * A private podman engine for tests that need "another machine" in a
 * container: the container twin of test/sshd.ts. Everything podman keeps (its
 * configuration, image store, run state, locks, events, temporary files) lives
 * in one fresh temporary directory, named to podman through CONTAINERS_CONF,
 * CONTAINERS_STORAGE_CONF and CONTAINERS_REGISTRIES_CONF; the machine's own
 * configuration (/etc/containers, ~/.config/containers) is never read or
 * changed. Nothing is pulled: buildImage() imports a root filesystem made from
 * this machine's files (node, a shell, a few tools and their libraries, the
 * built dist/ and the fake agent).
 *
 * Rootful podman with runc and cgroupfs (the default crun fails on the test
 * machines), so root on Linux only. Without podman, runc, conmon or catatonit
 * a suite fails under CI=true (.ci/run installs them) and is skipped, with one
 * loud line, elsewhere (containerSkipReason).
 *
 * Nothing is registered globally: the caller calls stop() in an `after` hook.
 */
import { execFile, type ExecFileException } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { onPath } from "./processes.js";

export interface PodmanResult {
  /** The exit code. */
  code: number;
  stdout: string;
  stderr: string;
}

export interface PodmanOptions {
  /** Written to podman's stdin, which is then closed (closed at once without it). */
  input?: string;
  /** SIGKILL and a rejection after this long; PODMAN_TIMEOUT_MS by default. */
  timeoutMs?: number;
}

export interface ContainerMount {
  /** An absolute path on this machine. */
  source: string;
  /** An absolute path in the container: the same as source for a sandbox's working folder. */
  target: string;
  readOnly?: boolean;
}

export interface ContainerOptions {
  image: string;
  /** Default: dispatch-test-N. */
  name?: string;
  mounts?: ContainerMount[];
  /** Given to the container's processes, `podman exec` ones included, on top of the image's PATH and HOME. */
  env?: Record<string, string>;
  /** Default "none": only lo. */
  network?: "none" | "host";
}

export interface Container {
  name: string;
  id: string;
}

export interface Engine {
  /** The temporary directory holding everything of this engine. */
  dir: string;
  /**
   * Exactly what a podman client needs to use this engine, from named variables
   * only: give it to a server under test for the podman it runs.
   */
  env: Record<string, string>;
  /** `podman ARGS` with `env`, argv only; resolves with any exit code, rejects on a timeout or a failed spawn. */
  podman(args: string[], options?: PodmanOptions): Promise<PodmanResult>;
  /**
   * Builds the test image (once per engine and tag) and resolves to its name,
   * e.g. localhost/dispatch-test:1. Needs a built dist/ (`npm run build`).
   */
  buildImage(tag?: string): Promise<string>;
  /** A long-lived container (`/usr/bin/sleep infinity` under catatonit as PID 1), removed by stop(). */
  runContainer(options: ContainerOptions): Promise<Container>;
  /** `podman exec -i CONTAINER ARGS`, `input` on stdin. */
  execIn(container: Container | string, args: string[], input?: string): Promise<PodmanResult>;
  /** The command line of every process in the container (`podman top CONTAINER args`), PID 1 first. */
  processesIn(container: Container | string): Promise<string[]>;
  /**
   * Removes every container and image, waits for (then kills) any process
   * whose command line names `dir` (conmon, podman's cleanup), unmounts what is
   * still mounted under `dir`, then removes `dir`. Idempotent.
   */
  stop(): Promise<void>;
}

/** Where the built server and the fake agent are in the image. */
export const IMAGE_DISPATCH_DIR = "/opt/claude-dispatch";
export const IMAGE_MAIN = `${IMAGE_DISPATCH_DIR}/dist/main.js`;
export const IMAGE_FAKE_CLAUDE = "/opt/fixtures/fake-claude.mjs";
export const DEFAULT_IMAGE_TAG = "localhost/dispatch-test:1";

/** The bound on one podman command unless the caller gives another. */
export const PODMAN_TIMEOUT_MS = 60_000;
const IMPORT_TIMEOUT_MS = 120_000;
const TOOL_TIMEOUT_MS = 30_000;
/** How long conmon and podman's cleanup may take to go after `rm`, before they are SIGKILLed. */
const EXIT_TIMEOUT_MS = 10_000;
const POLL_MS = 50;

const RUNC = "/usr/sbin/runc";
const CATATONITS = ["/usr/libexec/podman/catatonit", "/usr/bin/catatonit"];
const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));
/**
 * The programs copied into the image's /usr/bin (with /bin a link to it), each
 * with the libraries `ldd` lists; node is the one running this process. The
 * fake agent spawns node and git (@commit); Claude Code's Bash tool needs
 * bash; tests' shell commands use the rest.
 */
const IMAGE_PROGRAMS = [
  "sh",
  "bash",
  "env",
  "sleep",
  "cat",
  "echo",
  "true",
  "false",
  "ls",
  "mkdir",
  "rm",
  "touch",
  "git",
];

// ---------------------------------------------------------------------------
// Whether it can run here
// ---------------------------------------------------------------------------

const catatonit = (): string | undefined => CATATONITS.find((candidate) => existsSync(candidate));

/**
 * undefined when podman can run containers here; else why not (e.g. "podman
 * is not on PATH: apt-get install podman").
 */
export function containersMissing(): string | undefined {
  if (process.platform !== "linux") return "the podman harness runs rootful podman and reads /proc (Linux only)";
  if (process.getuid?.() !== 0) return "the podman harness runs rootful podman: it needs root";
  if (!onPath("podman")) return "podman is not on PATH: apt-get install podman";
  if (!onPath("conmon") && !existsSync("/usr/libexec/podman/conmon")) {
    return "conmon is missing: apt-get install podman";
  }
  if (!existsSync(RUNC)) return `${RUNC} is missing: apt-get install runc`;
  if (!catatonit()) return `catatonit (for --init) is not in ${CATATONITS.join(" or ")}: apt-get install catatonit`;
  return undefined;
}

/**
 * For a suite: under CI=true a missing podman fails (throw with the reason); otherwise it prints one loud line on
 * stderr and returns the skip reason for node:test's `skip` option.
 */
export function containerSkipReason(suite: string): string | undefined {
  const why = containersMissing();
  if (why === undefined) return undefined;
  if (process.env.CI === "true" && process.platform === "linux") {
    throw new Error(`${suite} needs podman, runc and catatonit: ${why} (.ci/run installs them)`);
  }
  process.stderr.write(`\n!!! SKIPPING the container tests (${suite}): ${why}.\n\n`);
  return why;
}

// ---------------------------------------------------------------------------
// Programs
// ---------------------------------------------------------------------------

/** The PATH of what this helper runs, and of podman. */
const toolPath = (): string => process.env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** `program ARGS` with `env`, argv only: resolves with any exit code; rejects on a timeout or a failed spawn. */
function run(program: string, args: string[], env: Record<string, string>, options: PodmanOptions = {}): Promise<Ran> {
  const timeoutMs = options.timeoutMs ?? PODMAN_TIMEOUT_MS;
  const what = `${program} ${args.join(" ")}`;
  return new Promise((resolve, reject) => {
    const child = execFile(
      program,
      args,
      { env, timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (error: ExecFileException | null, stdout: string, stderr: string) => {
        if (error === null) return resolve({ code: 0, stdout, stderr });
        if (typeof error.code === "number") return resolve({ code: error.code, stdout, stderr });
        if (error.killed) return reject(new Error(`${what}: no end after ${timeoutMs} ms; stderr: ${stderr}`));
        reject(new Error(`${what}: ${error.signal ? `killed by ${error.signal}` : error.message}; stderr: ${stderr}`));
      },
    );
    // The process may exit before reading all its input.
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(options.input ?? "");
  });
}

async function succeed(program: string, args: string[], env: Record<string, string>, timeoutMs?: number) {
  const result = await run(program, args, env, timeoutMs === undefined ? {} : { timeoutMs });
  if (result.code !== 0) {
    throw new Error(`${program} ${args.join(" ")} exited ${result.code}: ${result.stderr.trim()}`);
  }
  return result;
}

// ---------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------

/**
 * Pids of the live processes whose command line holds `text` (zombies have
 * none): with an engine's dir, its conmon processes and podman's cleanup.
 */
export function processesNaming(text: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "latin1").includes(text)) found.push(Number(entry));
    } catch {
      // gone
    }
  }
  return found;
}

/** The mount points in this process's mount namespace that are `dir` or under it, in mount order. */
export function mountsUnder(dir: string): string[] {
  const points: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "latin1").split("\n")) {
    const field = line.split(" ")[4];
    if (field === undefined) continue;
    // Spaces, tabs, line breaks and backslashes are written as octal escapes.
    const point = field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
    if (point === dir || point.startsWith(`${dir}/`)) points.push(point);
  }
  return points;
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function waitUntilNone(dir: string, ms: number): Promise<number[]> {
  const deadline = Date.now() + ms;
  for (;;) {
    const left = processesNaming(dir);
    if (left.length === 0 || Date.now() > deadline) return left;
    await delay(POLL_MS);
  }
}

// ---------------------------------------------------------------------------
// The image
// ---------------------------------------------------------------------------

/** The libraries `ldd` lists for `program` (absolute paths), none for a static one. */
async function libraries(program: string, env: Record<string, string>): Promise<string[]> {
  const result = await run("ldd", [program], env, { timeoutMs: TOOL_TIMEOUT_MS });
  if (result.code !== 0) {
    if (/not a dynamic executable|statically linked/.test(result.stdout + result.stderr)) return [];
    throw new Error(`ldd ${program} exited ${result.code}: ${result.stderr.trim()}`);
  }
  const found: string[] = [];
  for (const line of result.stdout.split("\n")) {
    if (/=>\s*not found/.test(line)) throw new Error(`ldd ${program}: ${line.trim()}`);
    // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)"
    const match = /(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line);
    if (match?.[1]) found.push(match[1]);
  }
  return found;
}

/** Copies `source` (following links) to `target` under `root`, with its mode. */
function copyInto(root: string, source: string, target = source): void {
  const destination = path.join(root, target);
  mkdirSync(path.dirname(destination), { recursive: true });
  copyFileSync(source, destination);
  chmodSync(destination, statSync(source).mode & 0o7777);
}

/**
 * The root filesystem of the test image in `root`: merged /usr (/bin, /sbin,
 * /lib and /lib64 link into it), node and IMAGE_PROGRAMS in /usr/bin with their
 * libraries at the paths ldd names, the built dist/ and package.json at
 * /opt/claude-dispatch (dist/ is ESM: package.json says "type": "module"),
 * the fake agent at /opt/fixtures (with /dist linked to the built dist/, where
 * its @nested-server looks), root in /etc/passwd and /etc/group, /tmp, /root,
 * and empty /proc and /dev for podman to mount on.
 */
async function makeRootfs(root: string, env: Record<string, string>): Promise<void> {
  const dist = path.join(REPO_ROOT, "dist");
  if (!existsSync(path.join(dist, "main.js"))) {
    throw new Error(`${dist}/main.js is missing: the container image needs the built server (npm run build)`);
  }
  // git warns on `git init` without its templates folder.
  const dirs = ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "usr/share/git-core/templates", "etc", "proc", "dev"];
  for (const dir of dirs) {
    mkdirSync(path.join(root, dir), { recursive: true });
  }
  for (const link of ["bin", "sbin", "lib", "lib64"]) symlinkSync(`usr/${link}`, path.join(root, link));

  const programs = new Map<string, string>([["node", realpathSync(process.execPath)]]);
  for (const name of IMAGE_PROGRAMS) {
    const found = onPath(name) ?? [`/usr/bin/${name}`, `/bin/${name}`].find((candidate) => existsSync(candidate));
    if (!found) throw new Error(`${name} is not on PATH: the container image needs it`);
    programs.set(name, realpathSync(found));
  }
  const libs = new Set<string>();
  for (const [name, source] of programs) {
    copyInto(root, source, `/usr/bin/${name}`);
    for (const lib of await libraries(source, env)) libs.add(lib);
  }
  for (const lib of libs) copyInto(root, lib);

  const opt = path.join(root, IMAGE_DISPATCH_DIR);
  cpSync(dist, path.join(opt, "dist"), { recursive: true, dereference: true });
  copyInto(root, path.join(REPO_ROOT, "package.json"), `${IMAGE_DISPATCH_DIR}/package.json`);
  copyInto(root, path.join(REPO_ROOT, "test/fixtures/fake-claude.mjs"), IMAGE_FAKE_CLAUDE);
  chmodSync(path.join(root, IMAGE_FAKE_CLAUDE), 0o755);
  symlinkSync(`.${IMAGE_DISPATCH_DIR}/dist`, path.join(root, "dist"));

  // An unprivileged user too, as an image for agents should have (Claude Code refuses to skip its checks as root).
  writeFileSync(
    path.join(root, "etc/passwd"),
    "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000::/home/agent:/bin/sh\n",
  );
  writeFileSync(path.join(root, "etc/group"), "root:x:0:\nagent:x:1000:\n");
  // tar gives every file to root: the user's home is open to it by its mode.
  mkdirSync(path.join(root, "home/agent"), { recursive: true });
  chmodSync(path.join(root, "home/agent"), 0o1777);
  mkdirSync(path.join(root, "tmp"));
  chmodSync(path.join(root, "tmp"), 0o1777);
  mkdirSync(path.join(root, "root"), { mode: 0o700 });
}

// ---------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const VARIABLE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** podman's --mount for `mount`; throws on what podman would read otherwise (it parses the option as CSV). */
function mountOption(mount: ContainerMount): string {
  for (const [what, value] of [
    ["source", mount.source],
    ["target", mount.target],
  ] as const) {
    if (!path.isAbsolute(value)) throw new Error(`mount ${what} ${JSON.stringify(value)} is not absolute`);
    if (/[,"\n\r]/.test(value)) {
      throw new Error(`mount ${what} ${JSON.stringify(value)} holds a comma, a quote or a line break`);
    }
  }
  return `type=bind,source=${mount.source},target=${mount.target}${mount.readOnly ? ",readonly=true" : ""}`;
}

const nameOf = (container: Container | string): string => (typeof container === "string" ? container : container.name);

/**
 * Makes the engine's directory and configuration; runs nothing yet (podman
 * starts nothing that stays until a container runs).
 */
export async function startEngine(): Promise<Engine> {
  const missing = containersMissing();
  if (missing) throw new Error(`cannot start a podman engine: ${missing}`);
  const init = catatonit() ?? "";

  const dir = mkdtempSync(path.join(tmpdir(), "dispatch-podman-"));
  const file = (name: string): string => path.join(dir, name);
  for (const name of ["home", "tmp", "engine-tmp", "networks"]) mkdirSync(file(name));
  mkdirSync(file("xdg-runtime"), { mode: 0o700 });
  const toml = (value: string): string => JSON.stringify(value);
  writeFileSync(
    file("containers.conf"),
    [
      "[containers]",
      'default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]',
      `init_path = ${toml(init)}`,
      "[network]",
      // Never the machine's /etc/cni/net.d: containers run with --network none or host.
      `network_config_dir = ${toml(file("networks"))}`,
      "[engine]",
      'runtime = "runc"',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      'lock_type = "file"',
      `tmp_dir = ${toml(file("engine-tmp"))}`,
      "[engine.runtimes]",
      `runc = [${toml(RUNC)}]`,
      "",
    ].join("\n"),
  );
  writeFileSync(
    file("storage.conf"),
    ["[storage]", 'driver = "overlay"', `graphroot = ${toml(file("root"))}`, `runroot = ${toml(file("run"))}`, ""].join(
      "\n",
    ),
  );
  writeFileSync(file("registries.conf"), "unqualified-search-registries = []\n");
  writeFileSync(file("policy.json"), `${JSON.stringify({ default: [{ type: "insecureAcceptAnything" }] })}\n`);

  const env: Record<string, string> = {
    PATH: toolPath(),
    HOME: file("home"),
    TMPDIR: file("tmp"),
    XDG_RUNTIME_DIR: file("xdg-runtime"),
    CONTAINERS_CONF: file("containers.conf"),
    CONTAINERS_STORAGE_CONF: file("storage.conf"),
    CONTAINERS_REGISTRIES_CONF: file("registries.conf"),
  };

  let stopped = false;
  let stopping: Promise<void> | undefined;
  let built = 0;
  let made = 0;
  const images = new Map<string, Promise<string>>();
  const live = (): void => {
    if (stopped) throw new Error(`the podman engine in ${dir} is stopped`);
  };
  const podman = (args: string[], options?: PodmanOptions): Promise<PodmanResult> => run("podman", args, env, options);

  const build = async (image: string): Promise<string> => {
    built += 1;
    const root = file(`rootfs-${built}`);
    const tarball = `${root}.tar`;
    try {
      await makeRootfs(root, { PATH: toolPath() });
      await succeed(
        "tar",
        ["-C", root, "--owner=0", "--group=0", "--numeric-owner", "-cf", tarball, "."],
        { PATH: toolPath() },
        IMPORT_TIMEOUT_MS,
      );
      const imported = await podman(["import", "--signature-policy", file("policy.json"), tarball, image], {
        timeoutMs: IMPORT_TIMEOUT_MS,
      });
      if (imported.code !== 0) throw new Error(`podman import exited ${imported.code}: ${imported.stderr.trim()}`);
      return image;
    } finally {
      rmSync(root, { recursive: true, force: true });
      rmSync(tarball, { force: true });
    }
  };

  return {
    dir,
    env,
    async podman(args, options) {
      live();
      return podman(args, options);
    },
    buildImage(tag = DEFAULT_IMAGE_TAG) {
      try {
        live();
      } catch (error) {
        return Promise.reject(error);
      }
      const image = tag.includes("/") ? tag : `localhost/${tag}`;
      let building = images.get(image);
      if (!building) {
        building = build(image);
        images.set(image, building);
        building.catch(() => images.delete(image));
      }
      return building;
    },
    async runContainer(options) {
      live();
      made += 1;
      const name = options.name ?? `dispatch-test-${made}`;
      if (!NAME.test(name)) throw new Error(`${JSON.stringify(name)} is not a container name`);
      const args = ["run", "--detach", "--init", "--pull=never", "--name", name];
      args.push("--network", options.network ?? "none");
      for (const mount of options.mounts ?? []) args.push("--mount", mountOption(mount));
      for (const [variable, value] of Object.entries(options.env ?? {})) {
        if (!VARIABLE.test(variable)) throw new Error(`${JSON.stringify(variable)} is not a variable name`);
        args.push("--env", `${variable}=${value}`);
      }
      args.push(options.image, "/usr/bin/sleep", "infinity");
      const result = await podman(args);
      const id = result.stdout.trim().split("\n").pop() ?? "";
      if (result.code !== 0 || !/^[0-9a-f]{64}$/.test(id)) {
        throw new Error(`podman ${args.join(" ")} exited ${result.code}: ${result.stderr.trim()}`);
      }
      return { name, id };
    },
    async execIn(container, args, input) {
      live();
      return podman(["exec", "-i", nameOf(container), ...args], input === undefined ? {} : { input });
    },
    async processesIn(container) {
      live();
      const result = await podman(["top", nameOf(container), "args"]);
      if (result.code !== 0) throw new Error(`podman top exited ${result.code}: ${result.stderr.trim()}`);
      // A header line (COMMAND), then one line a process, padded with a space.
      return result.stdout
        .split("\n")
        .slice(1)
        .map((line) => line.trimEnd())
        .filter((line) => line !== "");
    },
    stop() {
      stopped = true;
      stopping ??= (async () => {
        const problems: string[] = [];
        for (const args of [
          ["rm", "--all", "--force", "--time", "0"],
          ["rmi", "--all", "--force"],
        ]) {
          try {
            const result = await podman(args);
            if (result.code !== 0) problems.push(`podman ${args.join(" ")} exited ${result.code}: ${result.stderr}`);
          } catch (error) {
            problems.push(error instanceof Error ? error.message : String(error));
          }
        }
        // conmon exits with its container, then runs podman's cleanup: both name dir.
        let left = await waitUntilNone(dir, EXIT_TIMEOUT_MS);
        if (left.length > 0) {
          problems.push(`still running ${EXIT_TIMEOUT_MS} ms after podman rm, SIGKILLed: ${left.join(", ")}`);
          for (const pid of left) {
            try {
              process.kill(pid, "SIGKILL");
            } catch {
              // gone
            }
          }
          left = await waitUntilNone(dir, EXIT_TIMEOUT_MS);
          if (left.length > 0) throw new Error(`processes naming ${dir} survive SIGKILL: ${left.join(", ")}`);
        }
        // The newest mount first: one may be on top of another.
        for (const point of mountsUnder(dir).reverse()) {
          const umount = (args: string[]): Promise<Ran> =>
            run("umount", args, { PATH: toolPath() }, { timeoutMs: TOOL_TIMEOUT_MS });
          if ((await umount([point])).code !== 0) await umount(["-l", point]);
        }
        const mounted = mountsUnder(dir);
        // rm -rf through a mount would reach what is mounted there.
        if (mounted.length > 0) throw new Error(`still mounted, ${dir} is left: ${mounted.join(", ")}`);
        rmSync(dir, { recursive: true, force: true });
        if (problems.length > 0) throw new Error(`stopping the podman engine: ${problems.join("; ")}`);
      })();
      return stopping;
    },
  };
}
