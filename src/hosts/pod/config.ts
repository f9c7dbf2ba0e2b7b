/**
 * A host of CLAUDE_DISPATCH_HOSTS (PROTOCOL.md §21.1) that is a pod on a Kubernetes cluster: claude-dispatch in one
 * of its containers is reached with `kubectl exec -i`, which carries the channel as ssh does.
 */
import {
  checkKeys,
  optionalPath,
  optionalWord,
  parseRemoteEntry,
  type EntryParser,
  type RemoteEntry,
} from "../remote/entry.js";

export interface PodHostConfig extends RemoteEntry {
  kind: "pod";
  pod: string;
  /** Its namespace; unset: the context's. */
  namespace: string | undefined;
  /** Which of its containers; unset: the pod's default one. */
  container: string | undefined;
  /** The kubeconfig context; unset: the current one. */
  context: string | undefined;
  /** kubectl's program when the operator names one; unset: `kubectl` on PATH. */
  kubectlBin: string | undefined;
}

const KEYS = ["pod", "namespace", "container", "context", "kubectl_bin"];
/** A DNS subdomain, as Kubernetes names pods. */
const POD_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** A DNS label, as Kubernetes names namespaces and containers. */
const LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** A context's name is the operator's own: printable, no leading dash (it would read as an option). */
const CONTEXT = /^[^\s\-\u0000-\u001f\u007f][^\u0000-\u001f\u007f]{0,252}$/;

/** One host of the setting that holds "pod" (hosts/kinds.ts reads the rest). */
export const parsePodEntry: EntryParser<PodHostConfig> = (name, entry, agents, fail) => {
  checkKeys(entry, KEYS, fail);
  const pod = entry.pod;
  if (typeof pod !== "string" || !POD_NAME.test(pod))
    fail('needs "pod": the name of a running pod (lower-case letters, digits, - and ., at most 253)');
  return {
    kind: "pod",
    ...parseRemoteEntry(name, entry, agents, fail),
    pod: pod as string,
    namespace: optionalWord(entry.namespace, "namespace", LABEL, "a namespace's name", fail),
    container: optionalWord(entry.container, "container", LABEL, "a container's name", fail),
    context: optionalWord(entry.context, "context", CONTEXT, "a context's name", fail),
    kubectlBin: optionalPath(entry.kubectl_bin, "kubectl_bin", fail),
  };
};
