/**
 * `kubectl exec -i` as a transport (PROTOCOL.md §21.2): kubectl's stdin and stdout are those of claude-dispatch in
 * its remote mode in a pod's container. kubectl keeps nothing between sessions.
 */
import { environmentOf, type Transport } from "../remote/transport.js";
import type { PodHostConfig } from "./config.js";

/** What kubectl needs of this machine's environment to reach the cluster; nothing else goes to it. */
const KUBECTL_ENVIRONMENT = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "KUBECONFIG", "XDG_CACHE_HOME"];

export class PodTransport implements Transport {
  readonly label = "kubectl";
  readonly program: string;
  readonly env: Readonly<Record<string, string | undefined>>;

  constructor(
    private readonly config: PodHostConfig,
    env: Readonly<Record<string, string | undefined>>,
  ) {
    this.program = config.kubectlBin ?? "kubectl";
    this.env = environmentOf(env, KUBECTL_ENVIRONMENT);
  }

  sessionArgs(remote: readonly string[]): string[] {
    const { pod, namespace, container, context } = this.config;
    // -i: our frames on its stdin; no -t. Everything after -- is the command in the container, word by word.
    return [
      ...(context ? ["--context", context] : []),
      "exec",
      "-i",
      ...(namespace ? ["--namespace", namespace] : []),
      ...(container ? ["--container", container] : []),
      pod,
      "--",
      ...remote,
    ];
  }

  /**
   * kubectl passes the command's exit on, and exits 1 for its own failures too (no such pod, refused, unreachable):
   * those are told by what it printed.
   */
  failure(exitCode: number | null, stderr: string): string | undefined {
    return exitCode !== 0 && /^(error:|Error from server|Unable to connect)/im.test(stderr)
      ? "kubectl failed"
      : undefined;
  }
}
