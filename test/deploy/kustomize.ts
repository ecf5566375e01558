import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { parseAllDocuments } from "yaml";

/*
 * Renders the Kustomize tree in deploy/kubernetes as an operator would:
 * a kustomization of their own (in a temp dir) that takes an overlay and adds
 * components, built with `kubectl kustomize`.
 */

export const ROOT = resolve(import.meta.dirname, "../..");
export const KUSTOMIZE_ROOT = join(ROOT, "deploy/kubernetes");
export const OVERLAYS = ["single", "replicas"] as const;
export const COMPONENTS = [
  "ingress-nginx",
  "gateway-api",
  "keda",
  "monitoring",
  "network-policy",
] as const;
/** kubectl's environment: a kubeconfig whose cluster refuses at once (see the file). */
export const KUBECTL_ENV = {
  ...process.env,
  KUBECONFIG: join(import.meta.dirname, "no-cluster.kubeconfig"),
};
export type Overlay = (typeof OVERLAYS)[number];
export type Component = (typeof COMPONENTS)[number];

/** Components that need an overlay with replicas to work on (KEDA replaces its HPA). */
export const REPLICAS_ONLY: ReadonlySet<Component> = new Set(["keda"]);

/** The components one overlay takes. */
export const componentsFor = (overlay: Overlay): Component[] =>
  COMPONENTS.filter((component) => overlay === "replicas" || !REPLICAS_ONLY.has(component));

/** A rendered Kubernetes object. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/**
 * Why rendering cannot run here, or undefined when it can: `kubectl` with an
 * embedded Kustomize that knows components (v4 and later; kubectl 1.21+).
 */
function kustomizeMissing(): string | undefined {
  const run = spawnSync("kubectl", ["version", "--client", "-o", "json"], {
    encoding: "utf8",
    env: KUBECTL_ENV,
  });
  if (run.error || run.status !== 0) {
    return "kubectl is not on PATH (scripts/ensure-test-tools.sh installs it where it can)";
  }
  const version = (JSON.parse(run.stdout) as { kustomizeVersion?: string }).kustomizeVersion ?? "";
  const major = Number(/^v(\d+)/.exec(version)?.[1] ?? 0);
  return major >= 4
    ? undefined
    : `kubectl's Kustomize is ${version || "missing"}, components need v4+`;
}

/** Why `kubectl kustomize` cannot run here ("" when it can), once looked up. */
let checked: string | undefined;

/** The result of one `kubectl kustomize`. */
export interface Rendered {
  ok: boolean;
  objects: K8sObject[];
  stderr: string;
}

/**
 * Renders `overlay` with `components` added, through a kustomization in a
 * temp dir that names them by relative path (Kustomize refuses absolute ones).
 */
export function render(overlay: Overlay, components: readonly string[] = []): Rendered {
  const dir = mkdtempSync(join(tmpdir(), "kustomize-"));
  try {
    const path = (to: string) => relative(dir, join(KUSTOMIZE_ROOT, to));
    const kustomization = [
      "apiVersion: kustomize.config.k8s.io/v1beta1",
      "kind: Kustomization",
      `resources: [${JSON.stringify(path(`overlays/${overlay}`))}]`,
      `components: [${components.map((name) => JSON.stringify(path(`components/${name}`))).join(", ")}]`,
      "",
    ].join("\n");
    writeFileSync(join(dir, "kustomization.yaml"), kustomization);
    return kustomize(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One way an operator may build an overlay: alone, with one component, with all it takes. */
export interface Build {
  overlay: Overlay;
  components: string[];
  label: string;
}

/** Every {@link Build}: each overlay alone, with each component it takes, and with all of them. */
export const BUILDS: readonly Build[] = OVERLAYS.flatMap((overlay) => [
  { overlay, components: [], label: `${overlay}` },
  ...componentsFor(overlay).map((component) => ({
    overlay,
    components: [component],
    label: `${overlay} + ${component}`,
  })),
  { overlay, components: componentsFor(overlay), label: `${overlay} + every component` },
]);

const renderings = new Map<string, Rendered>();

/** {@link render}, once per overlay and components in a test file. */
export function renderOnce(overlay: Overlay, components: readonly string[] = []): Rendered {
  const key = `${overlay}:${components.join(",")}`;
  let rendered = renderings.get(key);
  if (!rendered) {
    rendered = render(overlay, components);
    renderings.set(key, rendered);
  }
  return rendered;
}

/** `kubectl kustomize DIR`. */
export function kustomize(dir: string): Rendered {
  // A machine without it fails these tests with the reason, never skips them.
  checked ??= kustomizeMissing() ?? "";
  if (checked) throw new Error(`kubectl kustomize cannot run: ${checked}`);
  const run = spawnSync("kubectl", ["kustomize", dir], {
    encoding: "utf8",
    env: KUBECTL_ENV,
  });
  if (run.status !== 0) return { ok: false, objects: [], stderr: run.stderr };
  return { ok: true, objects: parseYamlStream(run.stdout), stderr: run.stderr };
}

/** Every document of a YAML stream, as objects; throws on a syntax error. */
export function parseYamlStream(text: string): K8sObject[] {
  return parseAllDocuments(text).map((document) => {
    if (document.errors.length > 0) throw document.errors[0];
    return document.toJS() as K8sObject;
  });
}

/** The objects of a kind (and name) in a rendering. */
export function ofKind<T = K8sObject>(objects: K8sObject[], kind: string, name?: string): T[] {
  return objects.filter(
    (object) => object.kind === kind && (name === undefined || object.metadata.name === name),
  ) as T[];
}

/** The variables of an overlay's Secret, from its `secret.example.env` (`kubectl create secret --from-env-file`). */
export function secretExample(overlay: Overlay): Record<string, string> {
  const text = readFileSync(
    join(KUSTOMIZE_ROOT, "overlays", overlay, "secret.example.env"),
    "utf8",
  );
  const entries = text
    .split("\n")
    .filter((line) => line.trim() && !line.trimStart().startsWith("#"))
    .map((line) => {
      const at = line.indexOf("=");
      return [line.slice(0, at), line.slice(at + 1)] as const;
    });
  return Object.fromEntries(entries);
}

/**
 * The Secret's variables as an operator fills them in: the example's values with their
 * placeholders (`change-me`) replaced, which start-up refuses as written.
 */
export function secretFilledIn(overlay: Overlay): Record<string, string> {
  return Object.fromEntries(
    Object.entries(secretExample(overlay)).map(([name, value]) => [
      name,
      value.replaceAll("change-me", "k3pT-9vQx-2mWz"),
    ]),
  );
}

/** The configuration file a rendered ConfigMap holds (the one the pods mount). */
export function configText(objects: K8sObject[]): string {
  const [configMap] = ofKind<{ data: Record<string, string> }>(objects, "ConfigMap").filter(
    (map) => "config.yaml" in map.data,
  );
  if (!configMap) throw new Error("no ConfigMap with a config.yaml");
  return configMap.data["config.yaml"]!;
}
