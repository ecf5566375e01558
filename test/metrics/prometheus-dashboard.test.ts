import { slow } from "../support/time-factor.js";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REDIS_URL } from "../support/redis.js";
import { startTestApp, TEST_KEYS, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";
import { startWebhookReceiver, type WebhookReceiver } from "../webhooks/webhook-receiver.js";
import { PANEL_QUERIES, concrete } from "./dashboard.js";

// A real Prometheus scrapes the real service; every dashboard query must run against it.
/** The `pod` label the Prometheus operator gives a pod's target; here set by hand. */
const POD = "image-task-sidecar-7d9f8-x2k4q";
const dir = mkdtempSync(join(tmpdir(), "sidecar-prom-"));
const PROMPT = "a prompt that must not become a label 7f3a";

let app: TestApp;
let receiver: WebhookReceiver;
let prometheus: ChildProcess;
let promUrl: string;
let exposition: string;
let taskId: string;

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

async function query(expr: string): Promise<{ status: string; data: { result: unknown[] } }> {
  const url = `${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`;
  return (await (await fetch(url)).json()) as { status: string; data: { result: unknown[] } };
}

async function traffic(): Promise<void> {
  const auth = { authorization: `Bearer ${TEST_KEYS.default}` };
  await fetch(`${app.baseURL}/chat/completions`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
  });
  // Token usage, plain and from the last event of a stream.
  await (
    await fetch(`${app.baseURL}/chat/completions`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: true },
      }),
    })
  ).text();
  await (
    await fetch(`${app.baseURL}/responses`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ model: "gpt-4o-mini", input: "hi", stream: true }),
    })
  ).text();
  await fetch(`${app.baseURL}/models`, { headers: { authorization: "Bearer sk-wrong" } });
  // A synchronous image call: image tokens by model and group.
  await (
    await fetch(`${app.baseURL}/images/generations`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ model: "gpt-image-1", prompt: "a boat" }),
    })
  ).text();
  const submitted = await fetch(`${app.baseURL}/images/tasks`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ model: "gpt-image-1", prompt: PROMPT, webhook_url: receiver.url }),
  });
  const { id } = (await submitted.json()) as { id: string };
  taskId = id;
  for (let i = 0; i < 200; i += 1) {
    const task = (await (
      await fetch(`${app.baseURL}/images/tasks/${id}`, { headers: auth })
    ).json()) as { status: string };
    if (task.status === "completed" || task.status === "failed") break;
    await new Promise((r) => setTimeout(r, 25));
  }
  await receiver.received(1);
  // The finished task's event stream: its final event at once.
  await (await fetch(`${app.baseURL}/images/tasks/${id}/events`, { headers: auth })).text();
}

beforeAll(async () => {
  const which = spawnSync("prometheus", ["--version"]);
  if (which.error) {
    throw new Error("prometheus is not installed: `apt-get install prometheus` (.ci/run does)");
  }
  receiver = await startWebhookReceiver();
  // The whole /metrics output, Node's process metrics included, on Redis as replicas run it (the
  // Redis panels need its metrics).
  app = await startTestApp({
    defaultMetrics: true,
    redis: true,
    config: {
      webhooks: { secret: `whsec_${"A".repeat(32)}`, allowPrivateNetworks: true },
    },
  });
  await traffic();
  exposition = await (await fetch(`${app.url}/metrics`)).text();

  const port = await freePort();
  promUrl = `http://127.0.0.1:${port}`;
  const target = new URL(app.url).host;
  writeFileSync(
    join(dir, "prometheus.yml"),
    [
      "global: { scrape_interval: 1s, evaluation_interval: 1s }",
      "scrape_configs:",
      "  - job_name: image-task-sidecar",
      `    static_configs: [{ targets: ["${target}"], labels: { pod: "${POD}" } }]`,
      "",
    ].join("\n"),
  );
  prometheus = spawn(
    "prometheus",
    [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: "ignore" },
  );
  // Wait for three scrapes, so rate() over them has points.
  for (let i = 0; i < 200; i += 1) {
    try {
      const up = await query('count_over_time(up{job="image-task-sidecar"}[1m])');
      const samples = Number((up.data.result[0] as { value?: [number, string] })?.value?.[1] ?? 0);
      if (samples >= 3) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}, slow(60_000));

afterAll(async () => {
  prometheus?.kill("SIGKILL");
  await app?.close();
  await receiver?.close();
  rmSync(dir, { recursive: true, force: true });
});

const expressions = PANEL_QUERIES;

describe("metrics and the Grafana dashboard, against a real Prometheus", () => {
  it("exposes text that promtool accepts, under one prefix, without keys or task ids", () => {
    const lint = spawnSync("promtool", ["check", "metrics"], { input: exposition });
    expect(lint.status, String(lint.stdout) + String(lint.stderr)).toBe(0);
    const names = exposition
      .split("\n")
      .filter((line) => line && !line.startsWith("#"))
      .map((line) => line.split(/[{ ]/)[0]);
    expect(names.every((name) => name?.startsWith("image_task_sidecar_"))).toBe(true);
    for (const secret of [...Object.values(TEST_KEYS), UPSTREAM_KEY, "sk-wrong"]) {
      expect(exposition).not.toContain(secret);
    }
    expect(taskId).toMatch(/^task_/);
    expect(exposition).not.toContain(taskId);
    expect(exposition).not.toContain(PROMPT);
  });

  it("uses only metrics the service exports", () => {
    const exported = new Set(
      exposition
        .split("\n")
        .filter((line) => line.startsWith("# TYPE "))
        .map((line) => line.split(" ")[2] as string),
    );
    const used = new Set(
      expressions.flatMap(({ expr }) => expr.match(/image_task_sidecar_\w+/g) ?? []),
    );
    expect(used.size).toBeGreaterThan(5);
    for (const name of used) {
      const base = name.replace(/_(bucket|sum|count)$/, "");
      expect(exported.has(base) || exported.has(name), name).toBe(true);
    }
  });

  it.each(expressions)("panel '$title' runs: $expr", async ({ expr }) => {
    const answer = await query(concrete(expr));
    expect(answer.status).toBe("success");
  });

  it("shows the traffic it saw: requests, an upstream call, a finished task", async () => {
    const seen = async (expr: string) => (await query(expr)).data.result.length;
    expect(await seen('image_task_sidecar_http_requests_total{route="/v1/chat/completions"}')).toBe(
      1,
    );
    expect(await seen('image_task_sidecar_http_requests_total{status="401"}')).toBeGreaterThan(0);
    expect(
      await seen('image_task_sidecar_upstream_requests_total{channel="fake"}'),
    ).toBeGreaterThan(0);
    expect(
      await seen('image_task_sidecar_tasks_finished_total{status="completed",reason="ok"}'),
    ).toBe(1);
    expect(await seen("image_task_sidecar_task_queue_depth")).toBe(1);
    expect(await seen('image_task_sidecar_webhook_deliveries_total{result="delivered"}')).toBe(1);
    expect(await seen('image_task_sidecar_task_events_sent_total{event="completed"}')).toBe(1);
    expect(await seen("image_task_sidecar_task_event_watchers")).toBe(1);
    expect(
      await seen('image_task_sidecar_image_store_operations_total{op="put",outcome="ok"}'),
    ).toBe(1);
    expect(await seen("image_task_sidecar_image_store_written_bytes_total")).toBe(1);
    // The one task's queue wait reads as what it was (its sum), to within its bucket: buckets
    // from 5 ms, each at most 2.5 times the one below. With a first bucket half a second wide, a
    // wait of milliseconds read 0.475 s at p95.
    const valueOf = async (expr: string) =>
      Number(((await query(expr)).data.result as Array<{ value: [number, string] }>)[0]!.value[1]);
    const waited = await valueOf("sum(image_task_sidecar_task_queue_wait_seconds_sum)");
    const p95 = await valueOf(
      "histogram_quantile(0.95, sum by (le) (image_task_sidecar_task_queue_wait_seconds_bucket))",
    );
    expect(p95).toBeLessThanOrEqual(Math.max(0.005, 2.5 * waited) + 1e-9);
  });

  it("shows the health row: both stores and the channel up, the Redis primary", async () => {
    const values = async (expr: string) =>
      (
        (await query(expr)).data.result as Array<{
          metric: Record<string, string>;
          value: [number, string];
        }>
      )
        .map(({ metric, value }) => `${Object.values(metric).join(",")}=${value[1]}`)
        .sort();
    expect(await values('min by (store) (image_task_sidecar_store_up{job=~".+"})')).toEqual([
      "images=1",
      "tasks=1",
    ]);
    expect(await values('min by (channel) (image_task_sidecar_channel_up{job=~".+"})')).toEqual([
      "fake=1",
    ]);
    expect(
      await values('count by (address) (image_task_sidecar_redis_primary_info{job=~".+"} == 1)'),
    ).toEqual([`${new URL(REDIS_URL).host}=1`]);
  });

  it("counts token usage by channel, model, group and type, from plain answers and streams", async () => {
    const value = async (expr: string) =>
      Number(((await query(expr)).data.result[0] as { value?: [number, string] })?.value?.[1]);
    const labels = 'channel="fake",model="gpt-4o-mini",group="default"';
    // Chat: 5 in, 4 out, plain and streamed; responses: 7 in, 4 out.
    expect(await value(`image_task_sidecar_tokens_total{${labels},type="input"}`)).toBe(17);
    expect(await value(`image_task_sidecar_tokens_total{${labels},type="output"}`)).toBe(12);
    expect(exposition).toContain("process_cpu_seconds_total");
  });

  it("shows data on every panel: no panel says No data, refusals count from 0", async () => {
    const results = new Map<string, number>();
    for (const { title, expr } of expressions) {
      const series = (await query(concrete(expr))).data.result.length;
      results.set(title, (results.get(title) ?? 0) + series);
    }
    expect([...results].filter(([, series]) => series === 0).map(([title]) => title)).toEqual([]);
    // Nothing was refused or given up here, and their series are there, at 0.
    const zeros = async (expr: string) =>
      (
        (await query(expr)).data.result as Array<{
          metric: Record<string, string>;
          value: [number, string];
        }>
      )
        .filter(({ value }) => value[1] === "0")
        .map(({ metric }) => metric.reason ?? metric.result)
        .sort();
    expect(await zeros("image_task_sidecar_task_submissions_refused_total")).toEqual([
      "queue_full",
      "shutting_down",
      "storage_unavailable",
      "store_unavailable",
      "too_many_tasks",
    ]);
    expect(await zeros("image_task_sidecar_connections_refused_total")).toEqual([
      "max_connections",
      "metrics_listener",
      "per_ip",
    ]);
    expect(await zeros("image_task_sidecar_task_event_streams_refused_total")).toEqual([
      "per_key",
      "total",
    ]);
    expect(await zeros("image_task_sidecar_task_event_watchers_cut_total")).toEqual([
      "slow_reader",
      "unread_bytes",
    ]);
    expect(
      await zeros('image_task_sidecar_webhook_deliveries_total{result=~"exhausted|refused"}'),
    ).toEqual(["exhausted", "refused"]);
    // Nothing ran again, was handed over or lapsed: those series are there, at 0.
    expect(await zeros("image_task_sidecar_task_reruns_total")).toEqual(["grace", "lost"]);
    expect(await zeros("image_task_sidecar_task_handovers_total")).toEqual(["lost", "stop"]);
    expect((await query("image_task_sidecar_task_lease_lapses_total")).data.result).toMatchObject([
      { value: [expect.any(Number), "0"] },
    ]);
  });

  it("shows each replica by its pod: requests, tasks, CPU, memory, event-loop lag", async () => {
    const titles = [
      "Requests per pod",
      "Tasks per pod",
      "CPU per pod",
      "Memory per pod",
      "Event-loop lag per pod",
    ];
    for (const title of titles) {
      const queries = expressions.filter((q) => q.title === title);
      expect(queries.length, title).toBeGreaterThan(0);
      const perPod = queries.filter((q) => q.legendFormat?.includes("{{pod}}"));
      expect(perPod.length, title).toBeGreaterThan(0);
      for (const { expr } of perPod) {
        const { result } = (await query(concrete(expr))).data as {
          result: Array<{ metric: Record<string, string>; value: [number, string] }>;
        };
        expect(
          result.map(({ metric }) => metric.pod),
          `${title}: ${expr}`,
        ).toEqual([POD]);
        expect(Number(result[0]!.value[1]), `${title}: ${expr}`).toBeGreaterThanOrEqual(0);
      }
    }
    // The one task ran 1 s or less: well under one task at once over 10 minutes.
    const [tasks] = expressions.filter((q) => q.title === "Tasks per pod");
    const running = (await query(concrete(tasks!.expr))).data.result as Array<{
      value: [number, string];
    }>;
    expect(Number(running[0]!.value[1])).toBeLessThan(1);
  });

  it("counts image tokens by model (GenAI, operation image_generation) and by group", async () => {
    const values = async (title: string) => {
      const [panel] = expressions.filter((q) => q.title === title);
      const { result } = (await query(concrete(panel!.expr))).data as {
        result: Array<{ metric: Record<string, string>; value: [number, string] }>;
      };
      return result.map(({ metric }) => Object.values(metric).sort().join(",")).sort();
    };
    // The fake channel's image answer: 10 input tokens, 100 output.
    expect(await values("Image tokens by model")).toEqual([
      "gpt-image-1,input",
      "gpt-image-1,output",
    ]);
    expect(await values("Image tokens by group")).toEqual([
      "default,gpt-image-1,input",
      "default,gpt-image-1,output",
    ]);
    const stat = async (title: string) => {
      const [panel] = expressions.filter((q) => q.title === title);
      const { result } = (await query(concrete(panel!.expr))).data as {
        result: Array<{ value: [number, string] }>;
      };
      return Number(result[0]!.value[1]);
    };
    // The totals are a value (0) at once; an image call made while Prometheus watches adds to
    // them (the first call made each series, which increase() cannot see grow).
    expect(await stat("Image input tokens (24h)")).toBe(0);
    const image = await fetch(`${app.baseURL}/images/generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${TEST_KEYS.default}` },
      body: JSON.stringify({ model: "gpt-image-1", prompt: "another boat" }),
    });
    expect(image.status).toBe(200);
    await image.text();
    for (let i = 0; i < 100 && (await stat("Image output tokens (24h)")) === 0; i += 1) {
      await new Promise((r) => setTimeout(r, 100));
    }
    // increase() extrapolates over the scrapes it saw: about 10 and 100, in that order.
    expect(await stat("Image input tokens (24h)")).toBeGreaterThan(0);
    expect(await stat("Image output tokens (24h)")).toBeGreaterThan(
      await stat("Image input tokens (24h)"),
    );
  });
});
