import { slow } from "../support/time-factor.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { parse as parseYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_FILE, parseConfig } from "../../src/config/load-config.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { PANEL_QUERIES, concrete } from "../metrics/dashboard.js";
import { ruleGroups } from "./monitoring.js";
import { KUSTOMIZE_ROOT } from "./kustomize.js";

/*
 * Every metric the alert rules, the KEDA trigger and the Grafana dashboard
 * read is one the service exports, with the labels they select and group on:
 * the service runs in-process on the demo defaults plus a channel that cannot
 * be reached, serves chat calls (one failing), an image call and image tasks,
 * answers /readyz, and is scraped.
 */

/** Labels Prometheus puts on every scraped series (from the target), not the service. */
const TARGET_LABELS = new Set(["namespace", "job", "pod", "instance", "service", "container"]);

/** The metrics a scrape declares (`# TYPE`), whether or not they have a sample yet. */
function declaredIn(text: string): Set<string> {
  return new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]!));
}

/** The samples of a scrape, by series name, each as its labels. */
function samplesOf(text: string): Map<string, Array<Record<string, string>>> {
  const samples = new Map<string, Array<Record<string, string>>>();
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? /.exec(line);
    if (!match) continue;
    const labels = Object.fromEntries(
      [...(match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]),
    );
    samples.set(match[1]!, [...(samples.get(match[1]!) ?? []), labels]);
  }
  return samples;
}

/** What a PromQL expression reads: each metric with its matchers, and the labels it groups by. */
function readsOf(expr: string) {
  const metrics = [...expr.matchAll(/\b(image_task_sidecar_\w+)(?:\{([^}]*)\})?/g)].map(
    (match) => ({
      name: match[1]!,
      matchers: [...(match[2] ?? "").matchAll(/(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)].map((m) => ({
        label: m[1]!,
        op: m[2]!,
        value: m[3]!,
      })),
    }),
  );
  const grouping = [...expr.matchAll(/\b(?:by|on|without)\s*\(([^)]*)\)/g)].flatMap((match) =>
    match[1]!.split(",").map((label) => label.trim()),
  );
  return { metrics, grouping };
}

/** Does a sample's value for `label` pass a matcher (anchored, as PromQL's are)? */
function passes(value: string | undefined, op: string, pattern: string): boolean {
  const actual = value ?? "";
  const regex = new RegExp(`^(?:${pattern})$`);
  return op === "="
    ? actual === pattern
    : op === "!="
      ? actual !== pattern
      : op === "=~"
        ? regex.test(actual)
        : !regex.test(actual);
}

/** Why an expression cannot be answered from a scrape, or [] when it can. */
function unanswered(expr: string, samples: Map<string, Array<Record<string, string>>>): string[] {
  const { metrics, grouping } = readsOf(expr);
  const problems: string[] = [];
  const ownLabels = new Set<string>(["le"]);
  for (const { name, matchers } of metrics) {
    const series = samples.get(name) ?? [];
    if (series.length === 0) {
      problems.push(`${name}: not exported`);
      continue;
    }
    for (const labels of series) for (const label of Object.keys(labels)) ownLabels.add(label);
    const own = matchers.filter((m) => !TARGET_LABELS.has(m.label));
    // A series the equalities select (what a negative matcher leaves out may not have happened).
    const matching = series.filter((labels) =>
      own.every((m) => m.op.startsWith("!") || passes(labels[m.label], m.op, m.value)),
    );
    if (matching.length === 0) {
      problems.push(
        `${name}: no series matches {${own.map((m) => `${m.label}${m.op}"${m.value}"`)}}`,
      );
    }
    for (const m of own) {
      if (!series.some((labels) => m.label in labels))
        problems.push(`${name}: no label ${m.label}`);
    }
  }
  for (const label of grouping) {
    if (!TARGET_LABELS.has(label) && !ownLabels.has(label))
      problems.push(`no label ${label} to group by`);
  }
  return problems;
}

let server: RunningServer;
let scrape: Map<string, Array<Record<string, string>>>;
let declared: Set<string>;
const DEMO_KEY = "sk-demo-image-task-sidecar";

/** The demo defaults, quick, with a channel nothing answers at (port 1 is never open). */
function config() {
  const raw = parseYaml(readFileSync(DEFAULT_CONFIG_FILE, "utf8")) as {
    channels: Array<Record<string, unknown>>;
  };
  raw.channels[0]!.imageDelayMs = 50;
  raw.channels.push({
    name: "down",
    baseUrl: "http://127.0.0.1:1/v1",
    apiKey: "sk-down",
    models: ["gpt-down"],
  });
  return parseConfig(raw, { PORT: "0", STORE_URL: "memory://", DEMO_API_KEY: DEMO_KEY });
}

beforeAll(async () => {
  server = await startServer({ config: config(), logger: pino({ level: "silent" }) });
  const call = (path: string, body?: unknown) =>
    fetch(`${server.url}${path}`, {
      method: body ? "POST" : "GET",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    });
  expect((await call("/readyz")).status).toBe(200);
  const chat = await call("/v1/chat/completions", {
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: "hi" }],
  });
  expect(chat.status).toBe(200);
  // A passthrough call that fails (5xx): the channel for its model cannot be reached.
  const failed = await call("/v1/chat/completions", {
    model: "gpt-down",
    messages: [{ role: "user", content: "hi" }],
  });
  expect(failed.status).toBeGreaterThanOrEqual(500);
  // A synchronous image call: image tokens, by model and group.
  const image = await call("/v1/images/generations", { model: "gpt-image-1", prompt: "a boat" });
  expect(image.status).toBe(200);
  const submitted = await call("/v1/images/tasks", {
    model: "gpt-image-1",
    prompt: "a lighthouse",
  });
  expect(submitted.status).toBe(202);
  // And one the demo channel refuses, so that failed tasks are counted too.
  const refused = await call("/v1/images/tasks", { model: "gpt-image-1", prompt: "!fail" });
  expect(refused.status).toBe(202);
  for (const [answer, status] of [
    [submitted, "completed"],
    [refused, "failed"],
  ] as const) {
    const { id } = (await answer.json()) as { id: string };
    const done = (await (await call(`/v1/images/tasks/${id}?wait=30`)).json()) as {
      status: string;
    };
    expect(done.status).toBe(status);
  }
  const text = await (await fetch(`${server.url}/metrics`)).text();
  scrape = samplesOf(text);
  declared = declaredIn(text);
}, slow(60_000));

afterAll(() => server?.close(1000));

describe("metrics the deployment reads", () => {
  it("every alert rule reads exported metrics, with the labels it selects and groups on", () => {
    const exprs = ruleGroups().flatMap((group) => group.rules.map((rule) => rule.expr));
    expect(exprs.length).toBe(11);
    for (const expr of exprs) expect(unanswered(expr, scrape), expr).toEqual([]);
    const read = new Set(exprs.flatMap((expr) => readsOf(expr).metrics.map((m) => m.name)));
    expect([...read].sort()).toEqual([
      "image_task_sidecar_channel_up",
      "image_task_sidecar_http_requests_total",
      "image_task_sidecar_nodejs_eventloop_lag_p99_seconds",
      "image_task_sidecar_store_up",
      "image_task_sidecar_task_images_missing_total",
      "image_task_sidecar_task_queue_depth",
      "image_task_sidecar_tasks_finished_total",
      "image_task_sidecar_upstream_request_duration_seconds_bucket",
      "image_task_sidecar_upstream_request_duration_seconds_count",
      "image_task_sidecar_webhook_deliveries_total",
    ]);
    // The channel nobody answers at is down; the demo channel is up.
    expect(scrape.get("image_task_sidecar_channel_up")).toEqual(
      expect.arrayContaining([{ channel: "demo" }, { channel: "down" }]),
    );
  });

  it("the KEDA trigger's query reads the queue depth the service exports", () => {
    type Scaled = { spec: { triggers: Array<{ type: string; metadata: { query?: string } }> } };
    const scaled = parseYaml(
      readFileSync(join(KUSTOMIZE_ROOT, "components/keda/scaled-object.yaml"), "utf8"),
    ) as Scaled;
    const query = scaled.spec.triggers.find((t) => t.type === "prometheus")!.metadata.query!;
    expect(readsOf(query).metrics.map((m) => m.name)).toEqual([
      "image_task_sidecar_task_queue_depth",
    ]);
    expect(unanswered(query, scrape)).toEqual([]);
    // `job` is the Service's name, as the ServiceMonitor labels what it scrapes.
    expect(query).toContain('job="image-task-sidecar"');
  });

  it("every dashboard query reads exported metrics, with the labels it selects and groups on", () => {
    // What only traffic this test does not make moves (webhook attempts, event streams, partial
    // images), or only a Redis store exports: declared here, with samples in the dashboard's
    // own test (test/metrics/prometheus-dashboard.test.ts), whose traffic has them.
    const elsewhere = new Set([
      "image_task_sidecar_webhook_attempts_total",
      "image_task_sidecar_webhook_attempt_duration_seconds_bucket",
      "image_task_sidecar_webhook_delivery_attempts_bucket",
      "image_task_sidecar_task_events_sent_total",
      "image_task_sidecar_task_partial_images_total",
      "image_task_sidecar_redis_primary_info",
    ]);
    const unsampled = new Set<string>();
    for (const { title, expr } of PANEL_QUERIES) {
      const query = concrete(expr);
      const names = readsOf(query).metrics.map((m) => m.name);
      for (const name of names) {
        const base = name.replace(/_(bucket|sum|count)$/, "");
        expect(declared.has(base) || declared.has(name), `${title}: ${name}`).toBe(true);
        if (!scrape.has(name)) unsampled.add(name);
      }
      // Labels can be checked only where samples show them.
      if (names.some((name) => unsampled.has(name))) continue;
      expect(unanswered(query, scrape), `${title}: ${query}`).toEqual([]);
    }
    expect([...unsampled].filter((name) => !elsewhere.has(name))).toEqual([]);
    // The per-pod panels read Node's process metrics, exported under the prefix.
    for (const name of [
      "image_task_sidecar_process_cpu_seconds_total",
      "image_task_sidecar_process_resident_memory_bytes",
      "image_task_sidecar_nodejs_eventloop_lag_p99_seconds",
    ]) {
      expect(
        PANEL_QUERIES.some((q) => q.expr.includes(name)),
        name,
      ).toBe(true);
      expect(scrape.has(name), name).toBe(true);
    }
  });

  it("the store gauge says both stores answered the readiness check", () => {
    expect(scrape.get("image_task_sidecar_store_up")).toEqual(
      expect.arrayContaining([{ store: "tasks" }, { store: "images" }]),
    );
  });

  it("catches a metric or label the service does not export (the check can fail)", () => {
    expect(unanswered("rate(image_task_sidecar_no_such_total[5m])", scrape)).toEqual([
      "image_task_sidecar_no_such_total: not exported",
    ]);
    expect(
      unanswered('sum by (reason) (image_task_sidecar_tasks_finished_total{kind="x"})', scrape),
    ).toEqual([
      'image_task_sidecar_tasks_finished_total: no series matches {kind="x"}',
      "image_task_sidecar_tasks_finished_total: no label kind",
    ]);
    expect(unanswered("sum by (model) (image_task_sidecar_task_queue_depth)", scrape)).toEqual([
      "no label model to group by",
    ]);
    expect(
      unanswered('image_task_sidecar_tasks_finished_total{status="lost"}', scrape),
    ).toHaveLength(1);
    // A histogram is read through its _bucket, _sum and _count series.
    expect(scrape.has("image_task_sidecar_upstream_request_duration_seconds")).toBe(false);
  });
});
