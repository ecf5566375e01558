import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { blocksOf } from "../docs/markdown.js";
import { schemaProblem } from "./k8s-models.js";
import {
  BUILDS,
  COMPONENTS,
  KUSTOMIZE_ROOT,
  OVERLAYS,
  ROOT,
  componentsFor,
  kustomize,
  ofKind,
  render,
  type K8sObject,
  type Overlay,
} from "./kustomize.js";

/*
 * Every overlay rendered with `kubectl kustomize`, alone, with each component
 * and with all of them, as an operator adds them; every object checked against
 * its kind's schema (Kubernetes' and the CRDs'), and the parts wired together
 * by name and label.
 */

/** The rendering of an overlay with every component it takes. */
const full = (overlay: Overlay) => render(overlay, componentsFor(overlay)).objects;

const podLabels = (objects: K8sObject[]) =>
  ofKind<{ spec: { template: { metadata: { labels: Record<string, string> } } } }>(
    objects,
    "Deployment",
    "image-task-sidecar",
  )[0]!.spec.template.metadata.labels;

describe("deploy/kubernetes rendered with kubectl kustomize", () => {
  it.each(BUILDS)("$label renders, every object valid for its kind", ({ overlay, components }) => {
    const { ok, stderr, objects } = render(overlay, components);
    expect(ok, stderr).toBe(true);
    expect(objects.length).toBeGreaterThan(5);
    expect(objects.map(schemaProblem).filter(Boolean)).toEqual([]);
    const ids = objects.map((object) => `${object.kind}/${object.metadata.name}`);
    expect(new Set(ids).size).toBe(ids.length);
    // What each component brings is there.
    const kinds = new Set(objects.map((object) => object.kind));
    const brings: Record<string, string[]> = {
      "ingress-nginx": ["Ingress"],
      "gateway-api": ["HTTPRoute"],
      keda: ["ScaledObject"],
      monitoring: ["ServiceMonitor", "PrometheusRule"],
      "network-policy": ["NetworkPolicy"],
    };
    for (const component of components) {
      for (const kind of brings[component]!) expect(kinds, component).toContain(kind);
    }
  });

  it("covers every component on the replicas overlay, all but keda on single", () => {
    expect(componentsFor("replicas")).toEqual([...COMPONENTS]);
    expect(componentsFor("single")).toEqual(COMPONENTS.filter((name) => name !== "keda"));
  });

  it("refuses keda on single: no HorizontalPodAutoscaler to replace, and SQLite is one process", () => {
    const { ok, stderr } = render("single", ["keda"]);
    expect(ok).toBe(false);
    expect(stderr).toMatch(/HorizontalPodAutoscaler/);
  });

  it("refuses a broken object (the checks can fail)", () => {
    const objects = full("replicas");
    const broken = <T>(kind: string, change: (object: T) => void) => {
      const object = structuredClone(ofKind(objects, kind)[0]!);
      change(object as T);
      return schemaProblem(object);
    };
    expect(
      broken<{ spec: { replicas?: unknown } }>("Deployment", (d) => (d.spec.replicas = "two")),
    ).toMatch(/replicas/);
    type Route = { spec: { rules: Array<{ timeouts: { request: string } }> } };
    expect(
      broken<Route>("HTTPRoute", (r) => (r.spec.rules[0]!.timeouts.request = "an hour")),
    ).toMatch(/request/);
    type Scaled = { spec: { scaleTargetRef?: unknown } };
    expect(broken<Scaled>("ScaledObject", (s) => delete s.spec.scaleTargetRef)).toMatch(
      /scaleTargetRef/,
    );
    expect(schemaProblem({ ...objects[0]!, kind: "Unknown" })).toMatch(/no schema/);
    // And Kustomize itself refuses a component that does not exist.
    expect(render("single", ["no-such-component"]).ok).toBe(false);
  });

  it("replicas: 2 to 10 on CPU by an HPA; with keda a ScaledObject instead, never both", () => {
    const plain = render("replicas").objects;
    const deployment = ofKind<{ spec: { replicas?: number } }>(plain, "Deployment")[0]!;
    // The count is the autoscaler's: one in the manifest would be put back at every apply.
    expect(deployment.spec.replicas).toBeUndefined();
    type Hpa = {
      spec: {
        minReplicas: number;
        maxReplicas: number;
        scaleTargetRef: { kind: string; name: string };
        metrics: Array<{ resource?: { name: string } }>;
      };
    };
    const [hpa] = ofKind<Hpa>(plain, "HorizontalPodAutoscaler");
    expect(hpa!.spec).toMatchObject({ minReplicas: 2, maxReplicas: 10 });
    expect(hpa!.spec.scaleTargetRef).toMatchObject({
      kind: "Deployment",
      name: "image-task-sidecar",
    });
    expect(hpa!.spec.metrics.map((metric) => metric.resource?.name)).toEqual(["cpu"]);

    const keda = render("replicas", ["keda"]).objects;
    expect(ofKind(keda, "HorizontalPodAutoscaler")).toEqual([]);
    type Scaled = {
      spec: {
        minReplicaCount: number;
        maxReplicaCount: number;
        scaleTargetRef: { name: string };
        triggers: Array<{ type: string; metadata: Record<string, string> }>;
      };
    };
    const [scaled] = ofKind<Scaled>(keda, "ScaledObject");
    expect(scaled!.spec).toMatchObject({ minReplicaCount: 2, maxReplicaCount: 10 });
    expect(scaled!.spec.scaleTargetRef.name).toBe("image-task-sidecar");
    expect(scaled!.spec.triggers.map((trigger) => trigger.type)).toEqual(["prometheus", "cpu"]);
    expect(scaled!.spec.triggers[0]!.metadata.query).toContain(
      "image_task_sidecar_task_queue_depth",
    );
  });

  it.each(OVERLAYS)(
    "%s: the Service, ingress routes, monitor and budget find the pods",
    (overlay) => {
      const objects = full(overlay);
      const labels = podLabels(objects);
      type Svc = {
        spec: { selector: Record<string, string>; ports: Array<{ name: string; port: number }> };
      };
      const [service] = ofKind<Svc>(objects, "Service", "image-task-sidecar");
      expect(service!.spec.selector).toEqual(labels);
      type Pdb = { spec: { selector: { matchLabels: Record<string, string> } } };
      expect(ofKind<Pdb>(objects, "PodDisruptionBudget")[0]!.spec.selector.matchLabels).toEqual(
        labels,
      );

      type Ing = {
        spec: {
          rules: Array<{
            http: {
              paths: Array<{ backend: { service: { name: string; port: { name: string } } } }>;
            };
          }>;
        };
      };
      const backend = ofKind<Ing>(objects, "Ingress")[0]!.spec.rules[0]!.http.paths[0]!.backend;
      expect(backend.service.name).toBe("image-task-sidecar");
      expect(service!.spec.ports.map((port) => port.name)).toContain(backend.service.port.name);
      type Route = {
        spec: { rules: Array<{ backendRefs: Array<{ name: string; port: number }> }> };
      };
      const [ref] = ofKind<Route>(objects, "HTTPRoute")[0]!.spec.rules[0]!.backendRefs;
      expect(ref!.name).toBe("image-task-sidecar");
      expect(service!.spec.ports.map((port) => port.port)).toContain(ref!.port);

      type Monitor = {
        spec: {
          selector: { matchLabels: Record<string, string> };
          endpoints: Array<{ port: string; path: string }>;
        };
      };
      const [monitor] = ofKind<Monitor>(objects, "ServiceMonitor");
      const serviceLabels = (service as unknown as K8sObject).metadata.labels ?? {};
      expect(serviceLabels).toMatchObject(monitor!.spec.selector.matchLabels);
      // On the pods' metrics port, which the Service has too.
      expect(monitor!.spec.endpoints[0]).toMatchObject({ port: "metrics", path: "/metrics" });
      expect(service!.spec.ports.map((port) => port.name)).toContain("metrics");
      // Only the service's Service is scraped, not Redis's.
      const scraped = ofKind(objects, "Service").filter((svc) =>
        Object.entries(monitor!.spec.selector.matchLabels).every(
          ([key, value]) => svc.metadata.labels?.[key] === value,
        ),
      );
      expect(scraped.map((svc) => svc.metadata.name)).toEqual(["image-task-sidecar"]);
    },
  );

  it.each(OVERLAYS)(
    "%s: network policies let the ingress and the namespace in on http, Prometheus on metrics; out DNS, Redis, S3, channels",
    (overlay) => {
      const objects = full(overlay);
      type Peer = {
        namespaceSelector?: { matchLabels: Record<string, string> };
        podSelector?: { matchLabels?: Record<string, string> };
        ipBlock?: { cidr: string };
      };
      type Policy = {
        spec: {
          podSelector: { matchLabels: Record<string, string> };
          policyTypes: string[];
          ingress: Array<{ from: Peer[]; ports: Array<{ port: number | string }> }>;
          egress?: Array<{ to: Peer[]; ports: Array<{ port: number | string }> }>;
        };
      };
      const [policy] = ofKind<Policy>(objects, "NetworkPolicy", "image-task-sidecar");
      expect(podLabels(objects)).toMatchObject(policy!.spec.podSelector.matchLabels);
      expect(policy!.spec.policyTypes).toEqual(["Ingress", "Egress"]);
      // Who may reach each port: the public one, and the metrics one (Prometheus alone).
      const peersOf = (port: string) =>
        policy!.spec.ingress
          .filter((rule) => rule.ports.some((p) => p.port === port))
          .flatMap((rule) => rule.from)
          .map(
            (peer) =>
              peer.namespaceSelector?.matchLabels["kubernetes.io/metadata.name"] ??
              (peer.podSelector ? "this namespace" : "?"),
          );
      expect(peersOf("http").sort()).toEqual(["ingress-nginx", "this namespace"]);
      expect(peersOf("metrics")).toEqual(["monitoring"]);
      const opened = policy!.spec.ingress.flatMap((rule) => rule.ports.map((p) => p.port));
      expect(opened.sort()).toEqual(["http", "metrics"]);
      const ports = policy!.spec.egress!.flatMap((rule) => rule.ports.map((port) => port.port));
      expect(ports).toEqual(expect.arrayContaining([53, 6379, 443]));
      const [redis] = ofKind<Policy>(objects, "NetworkPolicy", "image-task-sidecar-redis");
      expect(redis!.spec.ingress[0]!.from).toEqual([
        { podSelector: { matchLabels: policy!.spec.podSelector.matchLabels } },
      ]);
      if (overlay === "replicas") {
        const redisPods = ofKind<{
          spec: { template: { metadata: { labels: Record<string, string> } } };
        }>(objects, "StatefulSet")[0]!.spec.template.metadata.labels;
        expect(redisPods).toMatchObject(redis!.spec.podSelector.matchLabels);
      }
    },
  );

  it("renders the kustomization docs/kubernetes.md shows, beside a checkout", () => {
    const [block] = blocksOf(ROOT, "docs/kubernetes.md").filter(
      (b) => b.lang === "yaml" && b.code.includes("kind: Kustomization"),
    );
    expect(block).toBeDefined();
    const dir = mkdtempSync(join(tmpdir(), "kustomize-docs-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    // The page's layout: the checkout beside the operator's own directory.
    const checkout = `${relative(dir, ROOT)}/`;
    writeFileSync(
      join(dir, "kustomization.yaml"),
      block!.code.replaceAll("../image-task-sidecar/", checkout),
    );
    copyFileSync(join(KUSTOMIZE_ROOT, "overlays/replicas/config.yaml"), join(dir, "config.yaml"));
    const { ok, stderr, objects } = kustomize(dir);
    expect(ok, stderr).toBe(true);
    expect(objects.map(schemaProblem).filter(Boolean)).toEqual([]);
    for (const object of objects)
      expect(object.metadata, object.kind).toMatchObject({ namespace: "images" });
    type Pods = { spec: { template: { spec: { containers: Array<{ image: string }> } } } };
    const [deployment] = ofKind<Pods>(objects, "Deployment", "image-task-sidecar");
    expect(deployment!.spec.template.spec.containers[0]!.image).toBe(
      "registry.example.com/image-task-sidecar:0.1.0",
    );
    type Ing = { spec: { rules: Array<{ host: string }>; tls: Array<{ hosts: string[] }> } };
    const [ingress] = ofKind<Ing>(objects, "Ingress");
    expect(ingress!.spec.rules[0]!.host).toBe("images.mycompany.com");
    expect(ingress!.spec.tls[0]!.hosts).toEqual(["images.mycompany.com"]);
    for (const kind of ["ServiceMonitor", "PrometheusRule"]) {
      expect(ofKind(objects, kind)[0]!.metadata.labels).toMatchObject({
        release: "kube-prometheus-stack",
      });
    }
    // The runbook links point at the operator's copy of docs/runbooks.md, each at its alert.
    type Rules = {
      spec: {
        groups: Array<{ rules: Array<{ alert: string; annotations: Record<string, string> }> }>;
      };
    };
    const rules = ofKind<Rules>(objects, "PrometheusRule")[0]!.spec.groups.flatMap((g) => g.rules);
    expect(rules.length).toBeGreaterThan(5);
    for (const rule of rules) {
      expect(rule.annotations.runbook_url).toBe(
        `https://git.mycompany.com/platform/image-task-sidecar/blob/v0.1.0/docs/runbooks.md#${rule.alert.toLowerCase()}`,
      );
    }
    expect(ofKind(objects, "HorizontalPodAutoscaler")).toEqual([]);
    expect(ofKind(objects, "ScaledObject")).toHaveLength(1);
  });
});
