import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load-config.js";
import { schemaProblem } from "./k8s-models.js";
import { KUSTOMIZE_ROOT, configText, ofKind, render, secretFilledIn } from "./kustomize.js";

/*
 * components/redis-sentinel and components/redis-cluster: the replicas overlay on a Sentinel
 * set or a Cluster instead of its bundled Redis, rendered as an operator would, the config
 * put through the service's own check.
 */

const HA = [
  { component: "redis-sentinel", mode: "sentinel" },
  { component: "redis-cluster", mode: "cluster" },
] as const;

const read = (path: string) => readFileSync(join(KUSTOMIZE_ROOT, path), "utf8");

describe.each(HA)("components/$component", ({ component, mode }) => {
  it("keeps the replicas overlay's configuration but for its store section", () => {
    const { store: own, ...ownRest } = parseYaml(read(`components/${component}/config.yaml`)) as {
      store: Record<string, unknown>;
    };
    const { store: overlay, ...overlayRest } = parseYaml(read("overlays/replicas/config.yaml")) as {
      store: Record<string, unknown>;
    };
    expect(ownRest).toEqual(overlayRest);
    expect(own.prefix).toBe(overlay.prefix);
  });

  it("renders on overlays/replicas: the config on the Redis deployment, no bundled Redis or its budget", () => {
    const { ok, stderr, objects } = render("replicas", [component]);
    expect(ok, stderr).toBe(true);
    for (const object of objects) expect(schemaProblem(object)).toBeUndefined();
    expect(ofKind(objects, "StatefulSet", "image-task-sidecar-redis")).toEqual([]);
    expect(ofKind(objects, "Service", "image-task-sidecar-redis")).toEqual([]);
    expect(ofKind(objects, "PodDisruptionBudget", "image-task-sidecar-redis")).toEqual([]);
    const env = { ...secretFilledIn("replicas"), REDIS_SENTINEL_PASSWORD: "sentinel-secret" };
    const warnings: string[] = [];
    const config = parseConfig(parseYaml(configText(objects)), env, warnings);
    expect(warnings).toEqual([]);
    const { taskStore } = config.deployment;
    expect(taskStore.kind === "redis" && taskStore.topology.mode).toBe(mode);
    expect(config.deployment.shared).toBe(true);
    // The Deployment still mounts the ConfigMap the component's config went into.
    const [configMap] = ofKind(objects, "ConfigMap").filter((map) =>
      map.metadata.name.startsWith("image-task-sidecar-config"),
    );
    expect(JSON.stringify(ofKind(objects, "Deployment"))).toContain(configMap!.metadata.name);
  });
});
