import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { IContainer, IPodSpec, IVolume } from "kubernetes-models/v1";
import { parse as parseYaml } from "yaml";
import { beforeAll, describe, expect, it } from "vitest";
import type { Config } from "../../src/config/config-schema.js";
import { parseConfig } from "../../src/config/load-config.js";
import {
  OVERLAYS,
  ROOT,
  componentsFor,
  configText,
  ofKind,
  render,
  secretExample,
  secretFilledIn,
  type K8sObject,
  type Overlay,
} from "./kustomize.js";

/*
 * The pods as the kubelet would run them: the security every workload runs
 * with, the service's probes, drain, volumes, configuration and credentials,
 * checked on each overlay rendered with every component it takes.
 */

interface Workload {
  kind: string;
  metadata: { name: string };
  spec: {
    replicas?: number;
    strategy?: { type: string };
    template: { metadata: { labels: Record<string, string> }; spec: IPodSpec };
  };
}

const workloads = (objects: K8sObject[]) => [
  ...ofKind<Workload>(objects, "Deployment"),
  ...ofKind<Workload>(objects, "StatefulSet"),
];

const rendered = (overlay: Overlay) => render(overlay, componentsFor(overlay)).objects;

/** The service's Deployment, its pod and its one container. */
function servicePod(objects: K8sObject[]) {
  const [deployment] = ofKind<Workload>(objects, "Deployment", "image-task-sidecar");
  const pod = deployment!.spec.template.spec;
  expect(pod.containers).toHaveLength(1);
  return { deployment: deployment!, pod, container: pod.containers[0]! };
}

/** The volume mounted at `path` in the container. */
function volumeAt(pod: IPodSpec, container: IContainer, path: string): IVolume | undefined {
  const mount = container.volumeMounts?.find((m) => m.mountPath === path);
  return pod.volumes?.find((volume) => volume.name === mount?.name);
}

/** The numeric user of the Dockerfile's last `USER`. */
function dockerfileUser(): number {
  const users = [...readFileSync(join(ROOT, "Dockerfile"), "utf8").matchAll(/^USER\s+(\S+)/gm)];
  return Number(users.at(-1)![1]!.split(":")[0]);
}

describe.each(OVERLAYS)("deploy/kubernetes/overlays/%s pods", (overlay) => {
  let objects: K8sObject[] = [];
  let config: Config;
  beforeAll(() => {
    objects = rendered(overlay);
    config = parseConfig(parseYaml(configText(objects)), secretFilledIn(overlay));
  });

  it("every workload runs non-root, read-only, unprivileged, seccomp RuntimeDefault, within limits", () => {
    const all = workloads(objects);
    expect(all.length).toBe(overlay === "replicas" ? 2 : 1);
    for (const { metadata, spec } of all) {
      const pod = spec.template.spec;
      expect(pod.automountServiceAccountToken, metadata.name).toBe(false);
      for (const container of pod.containers) {
        const where = `${metadata.name}/${container.name}`;
        const security = { ...pod.securityContext, ...container.securityContext };
        expect(security.runAsNonRoot, where).toBe(true);
        expect(security.runAsUser, where).toBeGreaterThan(0);
        expect(Number.isInteger(security.runAsUser), where).toBe(true);
        expect(container.securityContext?.allowPrivilegeEscalation, where).toBe(false);
        expect(container.securityContext?.readOnlyRootFilesystem, where).toBe(true);
        expect(container.securityContext?.capabilities?.drop, where).toEqual(["ALL"]);
        expect(container.securityContext?.privileged, where).not.toBe(true);
        expect(security.seccompProfile?.type, where).toBe("RuntimeDefault");
        for (const part of ["requests", "limits"] as const) {
          expect(Object.keys(container.resources?.[part] ?? {}).sort(), `${where} ${part}`).toEqual(
            ["cpu", "memory"],
          );
        }
        for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"] as const) {
          expect(container[probe], `${where} ${probe}`).toBeDefined();
        }
      }
    }
  });

  it("runs as the image's user (the node image's 1000), by number", () => {
    const { pod, container } = servicePod(objects);
    expect(dockerfileUser()).toBe(1000);
    expect(container.securityContext?.runAsUser).toBe(dockerfileUser());
    expect(pod.securityContext?.runAsUser).toBe(dockerfileUser());
  });

  it("probes /healthz for start and life, /readyz for readiness, on the service's port", () => {
    const { container } = servicePod(objects);
    expect(container.startupProbe?.httpGet?.path).toBe("/healthz");
    expect(container.livenessProbe?.httpGet?.path).toBe("/healthz");
    expect(container.readinessProbe?.httpGet?.path).toBe("/readyz");
    const port = container.ports?.find((p) => p.name === container.readinessProbe?.httpGet?.port);
    expect(port?.containerPort).toBe(config.server.port);
    // Inside a pod the service listens on every interface, not the demo's 127.0.0.1.
    expect(config.server.host).toBe("0.0.0.0");
  });

  it("gives the drain more time than the preStop pause plus server.shutdownGraceSec", () => {
    const { pod, container } = servicePod(objects);
    const preStop = Number(container.lifecycle?.preStop?.exec?.command?.[1] ?? 0);
    expect(preStop).toBeGreaterThan(0);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(
      preStop + config.server.shutdownGraceSec,
    );
    // And above the service's own default, should an operator drop the field.
    const raw = parseYaml(configText(objects)) as { server: Record<string, unknown> };
    delete raw.server.shutdownGraceSec;
    const byDefault = parseConfig(raw, secretFilledIn(overlay)).server.shutdownGraceSec;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStop + byDefault);
  });

  it("spreads across nodes and has a disruption budget", () => {
    const { deployment, pod } = servicePod(objects);
    const keys = pod.topologySpreadConstraints?.map((constraint) => constraint.topologyKey);
    expect(keys).toContain("kubernetes.io/hostname");
    for (const constraint of pod.topologySpreadConstraints ?? []) {
      expect(deployment.spec.template.metadata.labels).toMatchObject(
        constraint.labelSelector?.matchLabels ?? { missing: "selector" },
      );
    }
    type Pdb = { spec: { selector: { matchLabels: Record<string, string> } } };
    const budgets = ofKind<Pdb>(objects, "PodDisruptionBudget").filter((pdb) =>
      Object.entries(pdb.spec.selector.matchLabels).every(
        ([key, value]) => deployment.spec.template.metadata.labels[key] === value,
      ),
    );
    expect(budgets).toHaveLength(1);
  });

  it("reads its configuration from the rendered ConfigMap (CONFIG_FILE), credentials only from the Secret", () => {
    const { pod, container } = servicePod(objects);
    const file = container.env?.find((variable) => variable.name === "CONFIG_FILE")?.value;
    expect(file).toMatch(/\/config\.yaml$/);
    const mount = container.volumeMounts!.find((m) => file!.startsWith(`${m.mountPath}/`));
    expect(mount?.readOnly).toBe(true);
    const volume = pod.volumes!.find((v) => v.name === mount!.name)!;
    const [configMap] = ofKind(objects, "ConfigMap");
    expect(volume.configMap?.name).toBe(configMap!.metadata.name);
    // Plain values are not credentials: the only one is the file's path.
    expect(container.env?.filter((variable) => variable.value !== undefined)).toEqual([
      { name: "CONFIG_FILE", value: file },
    ]);
    expect(container.envFrom).toEqual([{ secretRef: { name: "image-task-sidecar-secrets" } }]);
    // The ConfigMap holds no credential of the Secret.
    const text = configText(objects);
    const credentials = Object.entries(secretExample(overlay)).filter(([name]) =>
      /KEY|SECRET|PASSWORD|TOKEN/.test(name),
    );
    expect(credentials.length).toBeGreaterThan(2);
    for (const [name, value] of credentials) expect(text, name).not.toContain(value);
  });

  it("writes only to its volumes: /tmp for uploads, the SQLite volume in single", () => {
    const { pod, container } = servicePod(objects);
    const writable = container.volumeMounts!.filter((m) => !m.readOnly).map((m) => m.mountPath);
    expect(writable.sort()).toEqual(overlay === "single" ? ["/app/data", "/tmp"] : ["/tmp"]);
    expect(volumeAt(pod, container, "/tmp")?.emptyDir).toBeDefined();
    if (overlay === "single") {
      const data = volumeAt(pod, container, "/app/data");
      const [claim] = ofKind(objects, "PersistentVolumeClaim");
      expect(data?.persistentVolumeClaim?.claimName).toBe(claim!.metadata.name);
      // The database, its lock files and the images all lie on that volume.
      expect(config.store.url).toMatch(/^sqlite:\/\/\/app\/data\//);
      expect(config.images.url).toMatch(/^file:\/\/\/app\/data\//);
      // The volume's files belong to the pod's group.
      expect(pod.securityContext?.fsGroup).toBe(pod.securityContext?.runAsGroup);
    } else {
      expect(config.store.url).toMatch(/^redis:\/\//);
      expect(config.images.url).toMatch(/^s3:\/\//);
    }
  });

  it(
    overlay === "single"
      ? "keeps one replica, replaced with Recreate: the SQLite file belongs to one process"
      : "leaves the count to the autoscaler, at least 2, rolling one new pod at a time",
    () => {
      const { deployment } = servicePod(objects);
      if (overlay === "single") {
        expect(deployment.spec.replicas).toBe(1);
        expect(deployment.spec.strategy?.type).toBe("Recreate");
        return;
      }
      expect(deployment.spec.replicas).toBeUndefined();
      expect(deployment.spec.strategy?.type).toBe("RollingUpdate");
      type Scaled = { spec: { minReplicaCount: number } };
      expect(ofKind<Scaled>(objects, "ScaledObject")[0]!.spec.minReplicaCount).toBeGreaterThan(1);
    },
  );
});
