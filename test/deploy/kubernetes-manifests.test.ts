import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ConfigMap, PersistentVolumeClaim, Secret, Service } from "kubernetes-models/v1";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { parseAllDocuments } from "yaml";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load-config.js";

/*
 * The manifests in deploy/kubernetes, checked against the Kubernetes API
 * schemas (kubernetes-models: the OpenAPI schemas of Kubernetes, compiled to
 * validators), and against the service's own config schema.
 */

const ROOT = resolve(import.meta.dirname, "../../deploy/kubernetes");

/** Every kind the manifests use, with its schema. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "apps/v1/Deployment": Deployment,
  "apps/v1/StatefulSet": StatefulSet,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
};

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

function load(variant: string): Array<{ file: string; doc: Manifest }> {
  const dir = join(ROOT, variant);
  return readdirSync(dir)
    .filter((file) => file.endsWith(".yaml"))
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(dir, file), "utf8")).map((document) => {
        expect(document.errors, file).toEqual([]);
        return { file, doc: document.toJS() as Manifest };
      }),
    );
}

const byKind = (docs: Array<{ doc: Manifest }>, kind: string) =>
  docs.filter(({ doc }) => doc.kind === kind).map(({ doc }) => doc);

describe.each(["single", "replicas"])("deploy/kubernetes/%s", (variant) => {
  const docs = load(variant);

  it("validates every manifest against the Kubernetes schema of its kind", () => {
    expect(docs.length).toBeGreaterThan(3);
    for (const { file, doc } of docs) {
      const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      expect(Model, `${file}: ${doc.apiVersion} ${doc.kind}`).toBeDefined();
      expect(() => new Model!(doc as never).validate(), file).not.toThrow();
    }
  });

  it("catches a broken manifest (the check can fail)", () => {
    const deployment = structuredClone(byKind(docs, "Deployment")[0]!) as unknown as {
      spec: { replicas: unknown };
    };
    deployment.spec.replicas = "three";
    expect(() => new Deployment(deployment as never).validate()).toThrow(/replicas/);
  });

  it("holds a config the service accepts, with the Secret's variables", () => {
    const config = byKind(docs, "ConfigMap")[0] as unknown as { data: Record<string, string> };
    const secret = byKind(docs, "Secret")[0] as unknown as { stringData: Record<string, string> };
    const raw = parseAllDocuments(config.data["config.yaml"]!)[0]!.toJS() as unknown;
    const parsed = parseConfig(raw, secret.stringData);
    expect(parsed.store.url).toMatch(variant === "single" ? /^sqlite:\/\// : /^redis:\/\//);
    if (variant === "single") {
      // Beside the database, on its volume.
      expect(parsed.images.url).toBe("file:///app/data/images");
      return;
    }
    // Replicas share an S3-compatible bucket, its settings and keys from the Secret only.
    const { images } = parsed;
    expect(images.url).toBe(`s3://${secret.stringData.S3_BUCKET}/image-task-sidecar`);
    expect(images.s3).toEqual({
      endpoint: secret.stringData.S3_ENDPOINT,
      region: secret.stringData.S3_REGION,
      forcePathStyle: true,
      accessKeyId: secret.stringData.S3_ACCESS_KEY_ID,
      secretAccessKey: secret.stringData.S3_SECRET_ACCESS_KEY,
    });
    expect(config.data["config.yaml"]).not.toContain(secret.stringData.S3_SECRET_ACCESS_KEY!);
    // AWS S3 itself: no endpoint, and the SDK's default chain when no keys are given.
    const aws = parseConfig(raw, {
      ...secret.stringData,
      S3_ENDPOINT: "",
      S3_ACCESS_KEY_ID: "",
      S3_SECRET_ACCESS_KEY: "",
      S3_FORCE_PATH_STYLE: "",
    });
    expect(aws.images.s3).toEqual({ region: "us-east-1", forcePathStyle: false });
  });

  it("probes /healthz and /readyz, and gives the drain more time than it takes", () => {
    const config = byKind(docs, "ConfigMap")[0] as unknown as { data: Record<string, string> };
    const secret = byKind(docs, "Secret")[0] as unknown as { stringData: Record<string, string> };
    const { server } = parseConfig(
      parseAllDocuments(config.data["config.yaml"]!)[0]!.toJS(),
      secret.stringData,
    );
    const deployment = new Deployment(byKind(docs, "Deployment")[0] as never);
    const pod = deployment.spec!.template.spec!;
    const container = pod.containers[0]!;
    expect(container.livenessProbe?.httpGet?.path).toBe("/healthz");
    expect(container.readinessProbe?.httpGet?.path).toBe("/readyz");
    const preStop = Number(container.lifecycle?.preStop?.exec?.command?.[1] ?? 0);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStop + server.shutdownGraceSec);
    // The Service and the budget select the Deployment's pods.
    const labels = deployment.spec!.template.metadata!.labels!;
    const service = byKind(docs, "Service").find(
      (doc) => doc.metadata.name === deployment.metadata!.name,
    );
    expect(
      (service as unknown as { spec: { selector: Record<string, string> } }).spec.selector,
    ).toEqual(labels);
    for (const budget of byKind(docs, "PodDisruptionBudget")) {
      expect(
        (budget as unknown as { spec: { selector: { matchLabels: unknown } } }).spec.selector
          .matchLabels,
      ).toEqual(labels);
    }
  });

  it(
    variant === "single"
      ? "keeps one replica, replaced with Recreate: the SQLite file belongs to one process"
      : "runs several replicas with a disruption budget",
    () => {
      const deployment = new Deployment(byKind(docs, "Deployment")[0] as never);
      if (variant === "single") {
        expect(deployment.spec!.replicas).toBe(1);
        expect(deployment.spec!.strategy?.type).toBe("Recreate");
      } else {
        expect(deployment.spec!.replicas).toBeGreaterThan(1);
        expect(byKind(docs, "PodDisruptionBudget")).toHaveLength(1);
      }
    },
  );
});
