import type { IContainer, IPodSpec } from "kubernetes-models/v1";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import type { Config } from "../../src/config/config-schema.js";
import { parseConfig } from "../../src/config/load-config.js";
import {
  BUILDS,
  configText,
  ofKind,
  renderOnce,
  secretFilledIn,
  type Overlay,
} from "./kustomize.js";

/*
 * What the tree does for operations, on every overlay rendered alone, with each component and
 * with all of them: only /v1, /console and /mcp public; /metrics on a port of its own where the
 * ServiceMonitor scrapes it; keep-alive above the ingress's; a drain that lets every started
 * generation finish, and autoscalers that remove no more than one pod per task timeout; the
 * budgets; the bundled Redis's memory with room for its fork.
 */

/** ingress-nginx's default `upstream-keepalive-timeout`: how long it keeps an idle connection to a pod. */
const INGRESS_NGINX_UPSTREAM_KEEPALIVE_SEC = 60;
/** The autoscaler's longest scale-down period (HPA `behavior.scaleDown.policies[].periodSeconds`). */
const MAX_POLICY_PERIOD_SEC = 1800;
/** What clients use, and all that the ingress may route. */
const PUBLIC_PREFIXES = ["/v1", "/console", "/mcp"];

interface Workload {
  spec: {
    strategy?: { type: string; rollingUpdate?: { maxUnavailable?: number | string } };
    template: { metadata: { labels: Record<string, string> }; spec: IPodSpec };
  };
}

interface ScaleDown {
  stabilizationWindowSeconds?: number;
  policies?: Array<{ type: string; value: number; periodSeconds: number }>;
}

interface Budget {
  metadata: { name: string };
  spec: {
    selector: { matchLabels: Record<string, string> };
    minAvailable?: number | string;
    maxUnavailable?: number | string;
    unhealthyPodEvictionPolicy?: string;
  };
}

/** A rendered build with its configuration, checked as the pods would read it. */
function build(overlay: Overlay, components: readonly string[]) {
  const { ok, stderr, objects } = renderOnce(overlay, components);
  expect(ok, stderr).toBe(true);
  const config: Config = parseConfig(parseYaml(configText(objects)), secretFilledIn(overlay));
  const [deployment] = ofKind<Workload>(objects, "Deployment", "image-task-sidecar");
  const pod = deployment!.spec.template.spec;
  return { objects, config, deployment: deployment!, pod, container: pod.containers[0]! };
}

/** The container port a probe or Service names, by name or number. */
function containerPort(container: IContainer, port: number | string | undefined): number {
  const found = container.ports?.find((p) => p.name === port || p.containerPort === port);
  if (!found) throw new Error(`no container port ${String(port)}`);
  return found.containerPort;
}

const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);

/** A Kubernetes memory quantity (`1Gi`, `512Mi`, `1G`) in bytes. */
function kubernetesBytes(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(quantity);
  if (!match) throw new Error(`not a memory quantity: ${quantity}`);
  const units: Record<string, number> = {
    "": 1,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
  };
  return Number(match[1]) * units[match[2] ?? ""]!;
}

/** A Redis memory setting (`400mb`, `1gb`, `512m`, bytes) in bytes, as redis.conf reads it. */
function redisBytes(setting: string): number {
  const match = /^(\d+)(b|k|kb|m|mb|g|gb)?$/i.exec(setting);
  if (!match) throw new Error(`not a Redis memory setting: ${setting}`);
  const units: Record<string, number> = {
    "": 1,
    b: 1,
    k: 1e3,
    kb: 2 ** 10,
    m: 1e6,
    mb: 2 ** 20,
    g: 1e9,
    gb: 2 ** 30,
  };
  return Number(match[1]) * units[(match[2] ?? "").toLowerCase()]!;
}

/** The scale-down a task timeout asks for: one pod per timeout, within the autoscaler's limit. */
function expectScaleDownPerTaskTimeout(scaleDown: ScaleDown | undefined, timeoutSec: number) {
  const period = Math.min(timeoutSec, MAX_POLICY_PERIOD_SEC);
  expect(scaleDown?.policies).toEqual([{ type: "Pods", value: 1, periodSeconds: period }]);
  // The load must have been low for a task timeout too before the first pod goes.
  expect(scaleDown?.stabilizationWindowSeconds).toBeGreaterThanOrEqual(period);
}

describe.each(BUILDS)("deploy/kubernetes $label", ({ overlay, components }) => {
  it("routes /v1, /console and /mcp only to the public port, from the Ingress and the HTTPRoute", () => {
    const { objects } = build(overlay, components);
    type Ingress = {
      spec: {
        rules: Array<{
          http: {
            paths: Array<{
              path: string;
              pathType: string;
              backend: { service: { name: string; port: { name: string } } };
            }>;
          };
        }>;
      };
    };
    for (const ingress of ofKind<Ingress>(objects, "Ingress")) {
      const paths = ingress.spec.rules.flatMap((rule) => rule.http.paths);
      expect(paths.map((path) => path.path)).toEqual(PUBLIC_PREFIXES);
      for (const path of paths) {
        expect(path.pathType).toBe("Prefix");
        expect(path.backend.service).toEqual({
          name: "image-task-sidecar",
          port: { name: "http" },
        });
      }
    }
    type Route = {
      spec: {
        rules: Array<{
          matches: Array<{ path: { type: string; value: string } }>;
          backendRefs: Array<{ name: string; port: number }>;
        }>;
      };
    };
    type Svc = { spec: { ports: Array<{ name: string; port: number }> } };
    const [service] = ofKind<Svc>(objects, "Service", "image-task-sidecar");
    const httpPort = service!.spec.ports.find((port) => port.name === "http")!.port;
    for (const route of ofKind<Route>(objects, "HTTPRoute")) {
      const matches = route.spec.rules.flatMap((rule) => rule.matches);
      expect(matches.map((match) => match.path)).toEqual(
        PUBLIC_PREFIXES.map((value) => ({ type: "PathPrefix", value })),
      );
      for (const rule of route.spec.rules) {
        expect(rule.backendRefs).toEqual([{ name: "image-task-sidecar", port: httpPort }]);
      }
    }
    if (components.includes("ingress-nginx")) expect(ofKind(objects, "Ingress")).toHaveLength(1);
    if (components.includes("gateway-api")) expect(ofKind(objects, "HTTPRoute")).toHaveLength(1);
  });

  it("serves /metrics on metrics.port, the pod's and Service's `metrics` port, where the ServiceMonitor scrapes; probes on the main port", () => {
    const { objects, config, container } = build(overlay, components);
    expect(config.metrics.port).toBeDefined();
    expect(config.metrics.port).not.toBe(config.server.port);
    expect(containerPort(container, "metrics")).toBe(config.metrics.port);
    expect(containerPort(container, "http")).toBe(config.server.port);
    type Svc = { spec: { ports: Array<{ name: string; targetPort: string | number }> } };
    const [service] = ofKind<Svc>(objects, "Service", "image-task-sidecar");
    const metricsPort = service!.spec.ports.find((port) => port.name === "metrics");
    expect(containerPort(container, metricsPort?.targetPort)).toBe(config.metrics.port);
    for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"] as const) {
      expect(containerPort(container, container[probe]?.httpGet?.port), probe).toBe(
        config.server.port,
      );
    }
    type Monitor = { spec: { endpoints: Array<{ port: string; path: string }> } };
    for (const monitor of ofKind<Monitor>(objects, "ServiceMonitor")) {
      expect(monitor.spec.endpoints).toEqual([
        expect.objectContaining({ port: "metrics", path: "/metrics" }),
      ]);
    }
  });

  it("keeps idle connections open longer than the ingress does (its upstream keep-alive is 60 s)", () => {
    const { config } = build(overlay, components);
    expect(config.server.keepAliveTimeoutSec).toBeGreaterThan(INGRESS_NGINX_UPSTREAM_KEEPALIVE_SEC);
  });

  it("lets every started generation finish on SIGTERM: shutdownGraceSec and the pod's grace above imageTasks.timeoutSec + 30", () => {
    const { config, pod, container, objects } = build(overlay, components);
    // Set in the file, not left to the service's default: the grace below is sized from it.
    const raw = parseYaml(configText(objects)) as { server: { shutdownGraceSec?: number } };
    expect(raw.server.shutdownGraceSec).toBe(config.server.shutdownGraceSec);
    const { timeoutSec } = config.imageTasks;
    expect(config.server.shutdownGraceSec).toBeGreaterThanOrEqual(timeoutSec + 30);
    const preStop = Number(container.lifecycle?.preStop?.exec?.command?.[1] ?? 0);
    const grace = pod.terminationGracePeriodSeconds ?? 30;
    expect(grace).toBeGreaterThan(timeoutSec + 30);
    // The pause, the drain, and a few seconds to hand back what is left and close the stores.
    expect(grace).toBeGreaterThanOrEqual(preStop + config.server.shutdownGraceSec + 5);
  });

  it("removes at most one pod per task timeout, from the HPA or the KEDA ScaledObject, and rolls without losing capacity", () => {
    const { objects, config, deployment } = build(overlay, components);
    const { timeoutSec } = config.imageTasks;
    type Hpa = { spec: { behavior?: { scaleDown?: ScaleDown } } };
    type Scaled = {
      spec: {
        advanced?: { horizontalPodAutoscalerConfig?: { behavior?: { scaleDown?: ScaleDown } } };
      };
    };
    const hpas = ofKind<Hpa>(objects, "HorizontalPodAutoscaler");
    const scaled = ofKind<Scaled>(objects, "ScaledObject");
    for (const hpa of hpas) expectScaleDownPerTaskTimeout(hpa.spec.behavior?.scaleDown, timeoutSec);
    for (const object of scaled) {
      const behavior = object.spec.advanced?.horizontalPodAutoscalerConfig?.behavior;
      expectScaleDownPerTaskTimeout(behavior?.scaleDown, timeoutSec);
    }
    if (overlay === "replicas") {
      expect(hpas.length + scaled.length).toBe(1);
      expect(deployment.spec.strategy?.type).toBe("RollingUpdate");
      expect(deployment.spec.strategy?.rollingUpdate?.maxUnavailable).toBe(0);
    } else {
      expect(hpas.length + scaled.length).toBe(0);
    }
  });

  it("has budgets that a pod that is not ready never blocks; the bundled Redis its own", () => {
    const { objects, deployment } = build(overlay, components);
    const budgets = ofKind<Budget>(objects, "PodDisruptionBudget");
    for (const budget of budgets) {
      expect(budget.spec.unhealthyPodEvictionPolicy, budget.metadata.name).toBe("AlwaysAllow");
    }
    const servicePods = deployment.spec.template.metadata.labels;
    expect(budgets.filter((b) => selects(b.spec.selector.matchLabels, servicePods))).toHaveLength(
      1,
    );
    const [redis] = ofKind<Workload>(objects, "StatefulSet", "image-task-sidecar-redis");
    if (overlay === "single") {
      expect(redis).toBeUndefined();
      expect(budgets).toHaveLength(1);
      return;
    }
    const redisPods = redis!.spec.template.metadata.labels;
    const redisBudgets = budgets.filter((b) => selects(b.spec.selector.matchLabels, redisPods));
    expect(redisBudgets.map((b) => b.metadata.name)).toEqual(["image-task-sidecar-redis"]);
    // Neither budget covers the other's pods.
    expect(selects(redisBudgets[0]!.spec.selector.matchLabels, servicePods)).toBe(false);
  });

  it("gives the bundled Redis a memory limit at least twice its maxmemory (an AOF rewrite forks it)", () => {
    const { objects } = build(overlay, components);
    const [redis] = ofKind<Workload>(objects, "StatefulSet", "image-task-sidecar-redis");
    if (overlay === "single") return expect(redis).toBeUndefined();
    const container = redis!.spec.template.spec.containers[0]!;
    const args = container.args ?? [];
    const setting = (name: string) => args[args.indexOf(`--${name}`) + 1];
    expect(setting("appendonly")).toBe("yes");
    expect(setting("maxmemory-policy")).toBe("noeviction");
    const maxmemory = redisBytes(setting("maxmemory")!);
    const limit = kubernetesBytes(String(container.resources?.limits?.memory));
    expect(maxmemory).toBeGreaterThan(0);
    expect(limit).toBeGreaterThanOrEqual(2 * maxmemory);
    expect(kubernetesBytes(String(container.resources?.requests?.memory))).toBeGreaterThan(
      maxmemory,
    );
  });
});

describe("the checks above", () => {
  it("read quantities as Kubernetes and Redis do, and can fail", () => {
    expect(kubernetesBytes("1Gi")).toBe(2 ** 30);
    expect(kubernetesBytes("512Mi")).toBe(2 ** 29);
    expect(kubernetesBytes("1G")).toBe(1e9);
    expect(() => kubernetesBytes("1 GiB")).toThrow(/memory quantity/);
    expect(redisBytes("400mb")).toBe(400 * 2 ** 20);
    expect(redisBytes("400m")).toBe(400e6);
    expect(redisBytes("1GB")).toBe(2 ** 30);
    expect(() => redisBytes("400 MiB")).toThrow(/Redis memory/);
    // 512Mi would leave no room for a fork of 400mb.
    expect(kubernetesBytes("512Mi")).toBeLessThan(2 * redisBytes("400mb"));
  });

  it("refuse a scale-down faster than one pod per task timeout", () => {
    const fast: ScaleDown = {
      stabilizationWindowSeconds: 300,
      policies: [{ type: "Pods", value: 1, periodSeconds: 60 }],
    };
    expect(() => expectScaleDownPerTaskTimeout(fast, 600)).toThrow();
    const slow: ScaleDown = { ...fast, policies: [{ type: "Pods", value: 1, periodSeconds: 600 }] };
    expect(() => expectScaleDownPerTaskTimeout(slow, 600)).toThrow(); // the window is short
    expectScaleDownPerTaskTimeout({ ...slow, stabilizationWindowSeconds: 600 }, 600);
    // Past the autoscaler's limit, the limit.
    expectScaleDownPerTaskTimeout(
      {
        stabilizationWindowSeconds: 3600,
        policies: [{ type: "Pods", value: 1, periodSeconds: 1800 }],
      },
      3000,
    );
  });

  it("know a Service's port by name or number", () => {
    const container = { name: "c", ports: [{ name: "metrics", containerPort: 9464 }] };
    expect(containerPort(container, "metrics")).toBe(9464);
    expect(containerPort(container, 9464)).toBe(9464);
    expect(() => containerPort(container, "http")).toThrow(/no container port/);
  });
});
