import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load-config.js";
import { schemaProblem } from "./k8s-models.js";
import {
  KUBECTL_ENV,
  KUSTOMIZE_ROOT,
  OVERLAYS,
  configText,
  ofKind,
  parseYamlStream,
  render,
  secretExample,
  secretFilledIn,
  type Overlay,
} from "./kustomize.js";

/*
 * The configuration each overlay's ConfigMap carries, put through the
 * service's own config check with the Secret's variables as the pods'
 * environment; and the Secret an operator makes from secret.example.env.
 */

const sourceConfig = (overlay: Overlay) =>
  readFileSync(join(KUSTOMIZE_ROOT, "overlays", overlay, "config.yaml"), "utf8");

/** The `${VAR}`s without a `:-default` in the file's values: the Secret must set each. */
function requiredVariables(text: string): string[] {
  const strings = (value: unknown): string[] =>
    typeof value === "string"
      ? [value]
      : value && typeof value === "object"
        ? Object.values(value).flatMap(strings)
        : [];
  return strings(parseYaml(text)).flatMap((value) =>
    [...value.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((match) => match[1]!),
  );
}

describe.each(OVERLAYS)("deploy/kubernetes/overlays/%s configuration", (overlay) => {
  it("passes the service's config check with the Secret's variables, warning about none", () => {
    const text = sourceConfig(overlay);
    // As an operator fills it in: its placeholders as written are refused (see test/config).
    const env = secretFilledIn(overlay);
    const required = requiredVariables(text);
    expect(required).toContain("UPSTREAM_KEY");
    for (const name of required) expect(Object.keys(env)).toContain(name);
    const warnings: string[] = [];
    const config = parseConfig(parseYaml(text), env, warnings);
    expect(warnings).toEqual([]);
    expect(config.server.host).toBe("0.0.0.0");
    expect(config.server.publicBaseUrl).toBe(env.PUBLIC_BASE_URL);
    expect(config.channels[0]).toMatchObject({
      baseUrl: env.UPSTREAM_BASE_URL,
      apiKey: env.UPSTREAM_KEY,
    });
    if (overlay === "single") {
      expect(config.store.url).toBe("sqlite:///app/data/sidecar.db");
      expect(config.images.url).toBe("file:///app/data/images");
      return;
    }
    // Redis with its password from the Secret; an S3-compatible bucket from the Secret.
    expect(config.store.url).toBe(`redis://:${env.REDIS_PASSWORD}@image-task-sidecar-redis:6379/0`);
    expect(config.images.url).toBe(`s3://${env.S3_BUCKET}/image-task-sidecar`);
    expect(config.images.s3).toEqual({
      endpoint: env.S3_ENDPOINT,
      region: env.S3_REGION,
      forcePathStyle: true,
      accessKeyId: env.S3_ACCESS_KEY_ID,
      secretAccessKey: env.S3_SECRET_ACCESS_KEY,
    });
    // AWS S3 itself: no endpoint, and the SDK's default chain (an IAM role) without keys.
    const aws = parseConfig(parseYaml(text), {
      ...env,
      S3_ENDPOINT: "",
      S3_ACCESS_KEY_ID: "",
      S3_SECRET_ACCESS_KEY: "",
      S3_FORCE_PATH_STYLE: "",
    });
    expect(aws.images.s3).toEqual({ region: "us-east-1", forcePathStyle: false });
  });

  it("refuses a broken configuration, naming the field (the check can fail)", () => {
    const raw = parseYaml(sourceConfig(overlay)) as { store: { url: string } };
    raw.store.url = "mysql://db:3306/tasks";
    expect(() => parseConfig(raw, secretFilledIn(overlay))).toThrow(/store\.url/);
    const { UPSTREAM_KEY: _dropped, ...withoutKey } = secretFilledIn(overlay);
    const warnings: string[] = [];
    parseConfig(parseYaml(sourceConfig(overlay)), withoutKey, warnings);
    expect(warnings.join("\n")).toMatch(/channels\[0\]\.apiKey: environment variable UPSTREAM_KEY/);
  });

  it("is what the rendered ConfigMap holds, under a name the pods mount", () => {
    const objects = render(overlay).objects;
    expect(configText(objects)).toBe(sourceConfig(overlay));
    // A hash of the content in the name: a changed configuration rolls the pods.
    const [configMap] = ofKind(objects, "ConfigMap");
    expect(configMap!.metadata.name).toMatch(/^image-task-sidecar-config-[a-z0-9]{10}$/);
  });

  it("makes a valid Secret with `kubectl create secret --from-env-file`, the one the pods read", () => {
    const run = spawnSync(
      "kubectl",
      [
        "create",
        "secret",
        "generic",
        "image-task-sidecar-secrets",
        `--from-env-file=${join(KUSTOMIZE_ROOT, "overlays", overlay, "secret.example.env")}`,
        "--dry-run=client",
        "-o",
        "yaml",
      ],
      { encoding: "utf8", env: KUBECTL_ENV },
    );
    expect(run.status, run.stderr).toBe(0);
    const [secret] = parseYamlStream(run.stdout);
    expect(schemaProblem(secret!)).toBeUndefined();
    const data = secret!.data as Record<string, string>;
    const decoded = Object.fromEntries(
      Object.entries(data).map(([key, value]) => [key, Buffer.from(value, "base64").toString()]),
    );
    expect(decoded).toEqual(secretExample(overlay));
    // Every reference to a Secret in the rendering names this one, and a key it has.
    const rendered = JSON.stringify(render(overlay).objects);
    const names = [...rendered.matchAll(/"secretRef":\{"name":"([^"]+)"/g)].map((m) => m[1]);
    const keys = [...rendered.matchAll(/"secretKeyRef":\{"name":"([^"]+)","key":"([^"]+)"/g)];
    expect(names).toEqual([secret!.metadata.name]);
    for (const [, name, key] of keys) {
      expect(name).toBe(secret!.metadata.name);
      expect(Object.keys(decoded)).toContain(key);
    }
  });
});
