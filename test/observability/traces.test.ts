import OpenAI from "openai";
import { describe, expect, it, onTestFinished } from "vitest";
import { tracingFromEnv } from "../../src/config/tracing-env.js";
import { encodePng } from "../../src/demo/png-encoder.js";
import type { TracingOptions } from "../../src/tracing/tracing-options.js";
import { OTLP_SPAN_KIND, startOtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";
import { startFakeUpstream } from "../support/fake-upstream.js";
import { deleteKeys, uniquePrefix } from "../support/redis.js";
import { startTestApp, UPSTREAM_KEY } from "../support/start-test-app.js";
import { waitForStatus } from "../tasks/task-api.js";
import { startWebhookReceiver } from "../webhooks/webhook-receiver.js";
import { startFakeAsyncChannel } from "../tasks/async/fake-async-channel.js";

/*
 * Traces as an operator's collector receives them: an OTLP/HTTP receiver the
 * test starts, configured only through the standard OTEL_* variables, in both
 * protocols.
 */

/** Tracing as `loadConfig` reads it from these variables. */
function tracingOf(env: Record<string, string>): TracingOptions {
  const problems: string[] = [];
  const options = tracingFromEnv(env, problems);
  expect(problems).toEqual([]);
  return options!;
}

async function receiver() {
  const started = await startOtlpReceiver();
  onTestFinished(() => started.close());
  return started;
}

const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";

/** No key, prompt or image in any attribute of any span. */
function expectNothingSecret(spans: ReceivedSpan[], secrets: string[]): void {
  const text = JSON.stringify(spans);
  for (const secret of secrets) expect(text).not.toContain(secret);
}

describe("traces", () => {
  it("off without an endpoint; the variables name what is wrong", () => {
    const problems: string[] = [];
    expect(tracingFromEnv({}, problems)).toBeUndefined();
    expect(
      tracingFromEnv(
        { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" },
        problems,
      ),
    ).toBeDefined();
    expect(problems).toEqual([
      "OTEL_EXPORTER_OTLP_PROTOCOL: must be http/protobuf or http/json (grpc is not supported)",
    ]);
    expect(
      tracingOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/",
        OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=a%20b",
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod",
      }),
    ).toMatchObject({
      endpoint: "http://c:4318/v1/traces",
      protocol: "http/protobuf",
      headers: { "x-api-key": "a b" },
      serviceName: "image-task-sidecar",
      resourceAttributes: { "deployment.environment": "prod" },
    });
  });

  it("with tracing.trustParent a chat continues the caller's trace, its channel try is a GenAI client span, and the channel gets its traceparent (http/json)", async () => {
    const otlp = await receiver();
    const app = await startTestApp({
      tracing: tracingOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "sidecar-under-test",
      }),
      config: { tracing: { trustParent: true } },
    });
    onTestFinished(() => app.close());
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const prompt = "a prompt that is never an attribute";
    await client.chat.completions.create(
      { model: "gpt-4o-mini", messages: [{ role: "user", content: prompt }] },
      { headers: { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` } },
    );
    const spans = await otlp.waitForSpans((all) => all.length >= 2, 10_000);
    const server = spans.find((span) => span.kind === OTLP_SPAN_KIND.SERVER)!;
    const tryClient = spans.find((span) => span.kind === OTLP_SPAN_KIND.CLIENT)!;
    expect(server).toMatchObject({
      traceId: CALLER_TRACE,
      parentSpanId: CALLER_SPAN,
      name: "POST /v1/chat/completions",
      attributes: {
        "http.request.method": "POST",
        "http.route": "/v1/chat/completions",
        "http.response.status_code": 200,
      },
      resource: { "service.name": "sidecar-under-test" },
    });
    expect(tryClient).toMatchObject({
      traceId: CALLER_TRACE,
      parentSpanId: server.spanId,
      name: "chat gpt-4o-mini",
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "server.address": "127.0.0.1",
        "http.response.status_code": 200,
        "image_task_sidecar.channel": "fake",
      },
    });
    expect(tryClient.attributes["gen_ai.usage.input_tokens"]).toEqual(expect.any(Number));
    const sent = app.upstream.requests.at(-1)?.headers.traceparent;
    expect(sent).toBe(`00-${CALLER_TRACE}-${tryClient.spanId}-01`);
    expect(otlp.requests[0]).toMatchObject({ contentType: "application/json", status: 200 });
    expectNothingSecret(spans, [prompt, app.key, UPSTREAM_KEY]);
  });

  it("a task is one trace: its submission, its run with its status changes, its channel try, its webhook (http/protobuf)", async () => {
    const otlp = await receiver();
    const hooks = await startWebhookReceiver();
    onTestFinished(() => hooks.close());
    const app = await startTestApp({
      tracing: tracingOf({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${otlp.url}/v1/traces` }),
      config: {
        webhooks: {
          secret: `whsec_${Buffer.alloc(32, 3).toString("base64")}`,
          allowPrivateNetworks: true,
        },
      },
    });
    onTestFinished(() => app.close());
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const task = await client.post<{ id: string }>("/images/tasks", {
      body: {
        model: "gpt-image-1",
        prompt: "a task prompt, never an attribute",
        webhook_url: `${hooks.url}/hook`,
      },
    });
    await client.get(`/images/tasks/${task.id}`, { query: { wait: 10 } });
    const spans = await otlp.waitForSpans(
      (all) =>
        all.some((span) => span.name === "image_task.run") &&
        all.some((span) => span.name === "webhook.deliver"),
      10_000,
    );
    const submission = spans.find((span) => span.name === "POST /v1/images/tasks")!;
    const webhook = spans.find((span) => span.name === "webhook.deliver")!;
    expect(webhook).toMatchObject({
      traceId: submission.traceId,
      kind: OTLP_SPAN_KIND.CLIENT,
      attributes: { "image_task.id": task.id, "http.response.status_code": 200 },
    });
    const run = spans.find((span) => span.name === "image_task.run")!;
    const generation = spans.find((span) => span.name === "image_generation gpt-image-1")!;
    expect(submission.events.map((event) => event.name)).toContain("image.task.queued");
    expect(run).toMatchObject({
      traceId: submission.traceId,
      parentSpanId: submission.spanId,
      attributes: { "image_task.id": task.id, "gen_ai.request.model": "gpt-image-1" },
    });
    expect(run.events.map((event) => event.name)).toEqual([
      "image.task.in_progress",
      "image.task.completed",
    ]);
    expect(generation).toMatchObject({
      traceId: submission.traceId,
      parentSpanId: run.spanId,
      kind: OTLP_SPAN_KIND.CLIENT,
      // The channel's image usage, as a synchronous image call's span carries it.
      attributes: {
        "gen_ai.operation.name": "image_generation",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 100,
      },
    });
    expect(otlp.requests[0]?.contentType).toBe("application/x-protobuf");
    expectNothingSecret(spans, ["a task prompt", app.key, UPSTREAM_KEY]);
  });
});

describe("an image task whose channel answers image URLs", () => {
  it("carries the channel's usage on its channel span, though the images are downloaded after the call", async () => {
    const otlp = await receiver();
    const app = await startTestApp({
      tracing: tracingOf({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${otlp.url}/v1/traces` }),
    });
    onTestFinished(() => app.close());
    const png = encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12) });
    // Downloaded well after the call's answer ended (and its span with it).
    app.upstream.serve("/files/fox.png", (_req, res) => {
      setTimeout(() => res.writeHead(200, { "content-type": "image/png" }).end(png), 100);
    });
    app.upstream.behave("images", {
      kind: "status",
      status: 200,
      body: {
        created: 1,
        data: [{ url: `${app.upstream.origin}/files/fox.png` }],
        usage: { input_tokens: 7, output_tokens: 70, total_tokens: 77 },
      },
    });
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const task = await client.post<{ id: string }>("/images/tasks", {
      body: { model: "gpt-image-1", prompt: "a fox by URL" },
    });
    await waitForStatus(app, task.id, ["completed"]);
    const spans = await otlp.waitForSpans(
      (all) => all.some((span) => span.name === "image_generation gpt-image-1"),
      10_000,
    );
    const generation = spans.find((span) => span.name === "image_generation gpt-image-1")!;
    expect(generation.attributes).toMatchObject({
      "gen_ai.usage.input_tokens": 7,
      "gen_ai.usage.output_tokens": 70,
    });
  });
});

describe("an image task on a channel with an async API", () => {
  it("carries the job's usage on its run span (its submission's span ended long before)", async () => {
    const otlp = await receiver();
    const jobs = await startFakeAsyncChannel();
    onTestFinished(() => jobs.close());
    const app = await startTestApp({
      tracing: tracingOf({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${otlp.url}/v1/traces` }),
      config: {
        channels: [
          {
            name: "jobs",
            baseUrl: jobs.baseUrl,
            apiKey: UPSTREAM_KEY,
            models: ["gpt-image-1"],
            async: "sub2api",
            pollSec: 1,
          },
        ],
      },
    });
    onTestFinished(() => app.close());
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const task = await client.post<{ id: string }>("/images/tasks", {
      body: { model: "gpt-image-1", prompt: "a fox, polled", response_format: "b64_json" },
    });
    const done = await waitForStatus(app, task.id, ["completed"]);
    const spans = await otlp.waitForSpans(
      (all) => all.some((span) => span.name === "image_task.run"),
      10_000,
    );
    const run = spans.find((span) => span.name === "image_task.run")!;
    expect(done.body.usage).toMatchObject({ input_tokens: 10, output_tokens: 20 });
    expect(run.attributes).toMatchObject({
      "gen_ai.usage.input_tokens": 10,
      "gen_ai.usage.output_tokens": 20,
    });
  });
});

describe("a task's trace across replicas (Redis)", () => {
  it("is one trace from its submission on one replica to its end on another", async () => {
    const otlp = await receiver();
    const prefix = uniquePrefix("trace");
    onTestFinished(() => deleteKeys(prefix).then(() => undefined));
    const upstream = await startFakeUpstream();
    onTestFinished(() => upstream.close());
    const tracing = tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url });
    const replica = (name: string) =>
      startTestApp({
        upstream,
        redis: { prefix },
        tracing,
        config: { server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 1, replicaName: name } },
      });
    // Submitted to A, which starts it; A stops and hands it back; B runs it to its end.
    upstream.behave("images", { kind: "hang" });
    const a = await replica("replica-a");
    let aClosed = false;
    onTestFinished(() => (aClosed ? undefined : a.close()));
    const client = new OpenAI({ apiKey: a.key, baseURL: a.baseURL, maxRetries: 0 });
    const task = await client.post<{ id: string }>("/images/tasks", {
      body: { model: "gpt-image-1", prompt: "across replicas" },
    });
    await waitForStatus(a, task.id, ["in_progress"]);
    const b = await replica("replica-b");
    onTestFinished(() => b.close());
    upstream.reset();
    await a.server.close(200);
    aClosed = true;
    const done = await waitForStatus(b, task.id, ["completed", "failed"], 20_000);
    expect(done.body.status).toBe("completed");

    const spans = await otlp.waitForSpans(
      (all) =>
        all.some(
          (span) =>
            span.name === "image_task.run" && span.resource["service.instance.id"] === "replica-b",
        ),
      15_000,
    );
    const submission = spans.find(
      (span) =>
        span.name === "POST /v1/images/tasks" &&
        span.resource["service.instance.id"] === "replica-a",
    )!;
    const runs = spans.filter((span) => span.name === "image_task.run");
    expect(runs.map((run) => run.resource["service.instance.id"]).sort()).toEqual([
      "replica-a",
      "replica-b",
    ]);
    for (const run of runs) {
      expect(run.traceId).toBe(submission.traceId);
      expect(run.parentSpanId).toBe(submission.spanId);
    }
    const last = runs.find((run) => run.resource["service.instance.id"] === "replica-b")!;
    expect(last.events.map((event) => event.name)).toContain("image.task.completed");
  });
});
