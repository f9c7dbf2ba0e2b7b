/**
 * What carries the channel to `claude-dispatch remote` (PROTOCOL.md §21.2): each transport's argv, the environment
 * it passes on, and how its own failures are told from the far end's. The sessions themselves: ssh-*.test.ts and
 * container-hosts.test.ts.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { ContainerTransport } from "../src/hosts/container/transport.js";
import { PodTransport } from "../src/hosts/pod/transport.js";
import { farEndCommand } from "../src/hosts/remote/entry.js";
import { describeEnd } from "../src/hosts/remote/session.js";
import type { ContainerHostConfig } from "../src/hosts/container/config.js";
import type { PodHostConfig } from "../src/hosts/pod/config.js";

const REMOTE = {
  roots: ["/work"],
  command: ["node", "/opt/claude-dispatch/dist/main.js"],
  stateDir: "/state dir",
  agents: ["claude"],
  programs: {},
  permissionModes: undefined,
};
const CONTAINER: ContainerHostConfig = {
  kind: "container",
  name: "dev",
  container: "dev-1",
  engine: "podman",
  engineBin: undefined,
  user: undefined,
  ...REMOTE,
};
const POD: PodHostConfig = {
  kind: "pod",
  name: "cluster",
  pod: "agents-0",
  namespace: undefined,
  container: undefined,
  context: undefined,
  kubectlBin: undefined,
  ...REMOTE,
};
const ENV = { PATH: "/usr/bin", HOME: "/home/me", CONTAINERS_CONF: "/c.conf", KUBECONFIG: "/k", API_KEY: "secret" };
const end = (exitCode: number | null, stderr = "") => ({ exitCode, signal: null, stderr });

describe("a container engine's exec", () => {
  test("exec -i, the container, then the far end's command as argv words: no shell, nothing quoted", () => {
    const transport = new ContainerTransport(CONTAINER, ENV);
    assert.equal(transport.program, "podman");
    assert.deepEqual(transport.sessionArgs(farEndCommand(CONTAINER)), [
      "exec",
      "-i",
      "dev-1",
      "node",
      "/opt/claude-dispatch/dist/main.js",
      "remote",
      "--state-dir=/state dir",
    ]);
    const docker = new ContainerTransport(
      { ...CONTAINER, engine: "docker", engineBin: "/opt/docker", user: "1000" },
      ENV,
    );
    assert.equal(docker.program, "/opt/docker");
    assert.deepEqual(docker.sessionArgs(["x"]), ["exec", "-i", "--user", "1000", "dev-1", "x"]);
  });

  test("only what the engine needs of this machine's environment goes to it", () => {
    assert.deepEqual(new ContainerTransport(CONTAINER, ENV).env, {
      PATH: "/usr/bin",
      HOME: "/home/me",
      CONTAINERS_CONF: "/c.conf",
    });
  });

  test("125, 126 and 127 are the engine's; any other exit is the far end's", () => {
    const transport = new ContainerTransport(CONTAINER, ENV);
    assert.equal(
      describeEnd(end(125, 'Error: no container with name or ID "dev-1" found: no such container\n'), transport),
      'podman could not exec in container dev-1: Error: no container with name or ID "dev-1" found: no such container',
    );
    assert.match(describeEnd(end(127), transport), /^the command was not found in container dev-1$/);
    assert.equal(
      describeEnd(end(2, "claude-dispatch: bad setting"), transport),
      "the remote command exited 2: claude-dispatch: bad setting",
    );
    assert.equal(
      describeEnd({ ...end(null), spawnError: "spawn podman ENOENT" }, transport),
      "podman could not be run: spawn podman ENOENT",
    );
  });
});

describe("kubectl exec", () => {
  test("context, namespace and container when set, the pod, --, then the far end's command", () => {
    const minimal = new PodTransport(POD, ENV);
    assert.equal(minimal.program, "kubectl");
    assert.deepEqual(minimal.sessionArgs(["claude-dispatch", "remote"]), [
      "exec",
      "-i",
      "agents-0",
      "--",
      "claude-dispatch",
      "remote",
    ]);
    const full = new PodTransport(
      { ...POD, namespace: "ci", container: "agent", context: "prod", kubectlBin: "/opt/kubectl" },
      ENV,
    );
    assert.equal(full.program, "/opt/kubectl");
    assert.deepEqual(full.sessionArgs(["claude-dispatch", "remote"]), [
      "--context",
      "prod",
      "exec",
      "-i",
      "--namespace",
      "ci",
      "--container",
      "agent",
      "agents-0",
      "--",
      "claude-dispatch",
      "remote",
    ]);
    assert.deepEqual(full.env, { PATH: "/usr/bin", HOME: "/home/me", KUBECONFIG: "/k" });
  });

  test("kubectl's own failures are told by what it printed, the far end's exit by the rest", () => {
    const transport = new PodTransport(POD, ENV);
    assert.equal(
      describeEnd(end(1, 'Error from server (NotFound): pods "agents-0" not found'), transport),
      'kubectl failed: Error from server (NotFound): pods "agents-0" not found',
    );
    assert.equal(
      describeEnd(end(2, "claude-dispatch: no"), transport),
      "the remote command exited 2: claude-dispatch: no",
    );
  });
});
