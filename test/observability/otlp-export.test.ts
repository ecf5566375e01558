import { ROOT_CONTEXT } from "@opentelemetry/api";
import { SamplingDecision, TraceIdRatioBasedSampler } from "@opentelemetry/sdk-trace-base";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it, onTestFinished } from "vitest";
import { tracingFromEnv } from "../../src/config/tracing-env.js";
import { createOtlpTracer } from "../../src/tracing/otlp-tracer.js";
import { createSampler } from "../../src/tracing/create-sampler.js";
import type { TracingOptions } from "../../src/tracing/tracing-options.js";
import {
  OTLP_SPAN_KIND,
  OTLP_STATUS_CODE,
  startOtlpReceiver,
  type ReceivedSpan,
} from "../support/otlp-receiver.js";

/*
 * The service's own OTLP exporter, as a collector receives it over real HTTP
 * (decoded by the receiver's own protobuf reader, or parsed as OTLP/JSON):
 * every field the service sets, in both protocols; the samplers as
 * OpenTelemetry's decide; and what it does when the queue is full or the
 * collector is down.
 */

const CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

function optionsFor(endpoint: string, more: Partial<TracingOptions> = {}): TracingOptions {
  return {
    endpoint,
    protocol: "http/protobuf",
    headers: { "x-api-key": "collector-key" },
    serviceName: "export-test",
    resourceAttributes: { "service.instance.id": "replica-1", "deployment.environment": "t" },
    sampler: { name: "parentbased_always_on", ratio: 1 },
    ...more,
  };
}

/**
 * A server span with a caller's link and a client span under it, every kind of value set; the
 * client's parent named by its `traceparent`, or given as the span itself.
 */
function makeTwoSpans(tracer: ReturnType<typeof createOtlpTracer>, parentAsSpan = false) {
  const server = tracer.startSpan("POST", {
    kind: "server",
    callerParent: CALLER,
    attributes: { "http.request.method": "POST", skipped: undefined },
  });
  const client = tracer.startSpan("chat gpt-4o-mini", {
    kind: "client",
    parent: parentAsSpan ? server : server.traceparent,
    attributes: { "gen_ai.request.model": "gpt-4o-mini", "server.port": 8080 },
  });
  client.setAttributes({
    "server.port": 9090,
    negative: -3,
    big: 2 ** 60,
    ratio: 0.25,
    streamed: true,
    "non.ascii": "café ☕ ü",
    long: "x".repeat(300),
  });
  client.addEvent("image.task.partial_image", { "image_task.partial_image_index": 1 });
  client.addEvent("image.task.handover");
  client.setError("status 502");
  client.end();
  client.end();
  client.setName("after end, ignored");
  server.setName("POST /v1/chat/completions");
  server.setAttributes({ "http.route": "/v1/chat/completions", "http.response.status_code": 200 });
  server.end();
  return { server, client };
}

describe("the OTLP exporter", () => {
  it.each(["http/protobuf", "http/json"] as const)(
    "sends every field of the spans it made (%s)",
    async (protocol) => {
      const otlp = await startOtlpReceiver();
      onTestFinished(() => otlp.close());
      const tracer = createOtlpTracer(optionsFor(`${otlp.url}/v1/traces`, { protocol }));
      const made = makeTwoSpans(tracer);
      await tracer.shutdown();
      const spans = otlp.spans();
      expect(spans).toHaveLength(2);
      const [client, server] = spans as [ReceivedSpan, ReceivedSpan];
      expect(made.server.traceparent).toBe(`00-${server.traceId}-${server.spanId}-01`);
      expect(made.client.traceparent).toBe(`00-${server.traceId}-${client.spanId}-01`);
      const resource = {
        "service.name": "export-test",
        "service.instance.id": "replica-1",
        "deployment.environment": "t",
      };
      expect(server).toEqual({
        traceId: made.server.traceId,
        spanId: server.spanId,
        parentSpanId: undefined,
        traceState: undefined,
        name: "POST /v1/chat/completions",
        kind: OTLP_SPAN_KIND.SERVER,
        startTimeUnixNano: expect.any(String),
        endTimeUnixNano: expect.any(String),
        attributes: {
          "http.request.method": "POST",
          "http.route": "/v1/chat/completions",
          "http.response.status_code": 200,
        },
        events: [],
        links: [
          {
            traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
            spanId: "00f067aa0ba902b7",
            attributes: {},
          },
        ],
        status: { code: OTLP_STATUS_CODE.UNSET, message: undefined },
        resource,
        scope: { name: "image-task-sidecar", version: undefined },
      });
      expect(client).toMatchObject({
        traceId: server.traceId,
        parentSpanId: server.spanId,
        name: "chat gpt-4o-mini",
        kind: OTLP_SPAN_KIND.CLIENT,
        events: [
          {
            name: "image.task.partial_image",
            attributes: { "image_task.partial_image_index": 1 },
          },
          { name: "image.task.handover", attributes: {} },
        ],
        links: [],
        status: { code: OTLP_STATUS_CODE.ERROR, message: "status 502" },
        resource,
      });
      // Set again, an attribute keeps its place.
      expect(Object.entries(client.attributes)).toEqual([
        ["gen_ai.request.model", "gpt-4o-mini"],
        ["server.port", 9090],
        ["negative", -3],
        ["big", 2n ** 60n],
        ["ratio", 0.25],
        ["streamed", true],
        ["non.ascii", "café ☕ ü"],
        ["long", "x".repeat(300)],
      ]);
      for (const span of spans) {
        const start = BigInt(span.startTimeUnixNano);
        expect(BigInt(span.endTimeUnixNano)).toBeGreaterThanOrEqual(start);
        expect(Math.abs(Number(start / 1_000_000n) - Date.now())).toBeLessThan(60_000);
      }
      expect(BigInt(client.events[0]!.timeUnixNano)).toBeGreaterThanOrEqual(
        BigInt(client.startTimeUnixNano),
      );
      expect(otlp.requests).toHaveLength(1);
      expect(otlp.requests[0]!.headers["x-api-key"]).toBe("collector-key");
    },
  );

  it("sends spans made again, from the encodings it kept, as it sent the first ones", async () => {
    const otlp = await startOtlpReceiver();
    onTestFinished(() => otlp.close());
    const tracer = createOtlpTracer(optionsFor(`${otlp.url}/v1/traces`));
    makeTwoSpans(tracer);
    makeTwoSpans(tracer, true);
    await tracer.shutdown();
    const spans = otlp.spans();
    expect(spans).toHaveLength(4);
    // The same but for ids and times: a client's parent is the server span of its own round.
    const sameParts = (span: ReceivedSpan, server: ReceivedSpan) => {
      expect(span.traceId).toBe(server.traceId);
      const {
        traceId: _traceId,
        spanId: _spanId,
        parentSpanId,
        startTimeUnixNano: _start,
        endTimeUnixNano: _end,
        ...rest
      } = span;
      return {
        ...rest,
        parent: parentSpanId === undefined ? undefined : parentSpanId === server.spanId,
        events: span.events.map(({ name, attributes }) => ({ name, attributes })),
      };
    };
    const [client1, server1, client2, server2] = spans as [
      ReceivedSpan,
      ReceivedSpan,
      ReceivedSpan,
      ReceivedSpan,
    ];
    expect(sameParts(client2, server2)).toEqual(sameParts(client1, server1));
    expect(sameParts(server2, server2)).toEqual(sameParts(server1, server1));
    expect(sameParts(client2, server2).parent).toBe(true);
  });

  it("sends a batch when it is full, and the rest within the delay", async () => {
    const otlp = await startOtlpReceiver();
    onTestFinished(() => otlp.close());
    const tracer = createOtlpTracer(
      optionsFor(`${otlp.url}/v1/traces`, { batch: { maxBatchSize: 3, delayMs: 50 } }),
    );
    onTestFinished(() => tracer.shutdown());
    for (let i = 0; i < 7; i++) tracer.startSpan(`span ${i}`, { kind: "internal" }).end();
    await otlp.waitForSpans((spans) => spans.length === 7);
    expect(otlp.requests.map((request) => request.spanCount)).toEqual([3, 3, 1]);
    expect(otlp.spans().map((span) => span.name)).toEqual(
      Array.from({ length: 7 }, (_, i) => `span ${i}`),
    );
  });

  it("drops spans past its queue while the collector is down, says so once, and does not hold the shutdown", async () => {
    const down = createServer((req) => req.socket.destroy());
    await new Promise<void>((resolve) => down.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => new Promise<void>((resolve) => down.close(() => resolve())));
    const { port } = down.address() as AddressInfo;
    const warnings: Array<[Record<string, unknown>, string]> = [];
    const tracer = createOtlpTracer(
      optionsFor(`http://127.0.0.1:${port}/v1/traces`, {
        batch: { maxQueueSize: 4, maxBatchSize: 2, delayMs: 10 },
      }),
      { trustParent: false },
      { warn: (fields, message) => void warnings.push([fields, message]) },
    );
    for (let i = 0; i < 10; i++) tracer.startSpan("span", { kind: "internal" }).end();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = Date.now();
    await tracer.shutdown();
    expect(Date.now() - started).toBeLessThan(4000);
    expect(warnings.map(([, message]) => message)).toEqual([
      "tracing: the span queue is full; spans are dropped",
      "tracing: a batch of spans could not be exported",
    ]);
    // Told at the first drop, with the count so far (a later warning, a minute on, the total).
    expect(warnings[0]![0]).toEqual({ spans_dropped: 1 });
  });
});

describe("the batch variables", () => {
  it("are read as OpenTelemetry names them; a wrong one is named", () => {
    const problems: string[] = [];
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
    expect(tracingFromEnv(base, problems)?.batch).toBeUndefined();
    expect(
      tracingFromEnv(
        {
          ...base,
          OTEL_BSP_MAX_QUEUE_SIZE: "4096",
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "256",
          OTEL_BSP_SCHEDULE_DELAY: "500",
          OTEL_EXPORTER_OTLP_TIMEOUT: "5000",
        },
        problems,
      )?.batch,
    ).toEqual({ maxQueueSize: 4096, maxBatchSize: 256, delayMs: 500, timeoutMs: 5000 });
    expect(problems).toEqual([]);
    tracingFromEnv(
      { ...base, OTEL_BSP_MAX_QUEUE_SIZE: "10", OTEL_BSP_SCHEDULE_DELAY: "soon" },
      problems,
    );
    expect(problems).toEqual([
      "OTEL_BSP_SCHEDULE_DELAY: must be a whole number from 0",
      "OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must not exceed OTEL_BSP_MAX_QUEUE_SIZE",
    ]);
  });
});

describe("the samplers", () => {
  it("decide a trace id's ratio as OpenTelemetry's TraceIdRatioBased does", () => {
    for (const ratio of [0, 0.1, 0.5, 0.9, 1]) {
      const ours = createSampler({ name: "traceidratio", ratio });
      const theirs = new TraceIdRatioBasedSampler(ratio);
      for (let i = 0; i < 500; i++) {
        const traceId = [...crypto.getRandomValues(new Uint8Array(16))]
          .map((byte) => byte.toString(16).padStart(2, "0"))
          .join("");
        const decision = theirs.shouldSample(ROOT_CONTEXT, traceId);
        expect(ours(traceId, undefined)).toBe(
          decision.decision === SamplingDecision.RECORD_AND_SAMPLED,
        );
      }
    }
  });

  it("follow a parent's flag when parent-based, and an unsampled span still carries its trace", async () => {
    const otlp = await startOtlpReceiver();
    onTestFinished(() => otlp.close());
    const tracer = createOtlpTracer(
      optionsFor(`${otlp.url}/v1/traces`, {
        sampler: { name: "parentbased_traceidratio", ratio: 0 },
      }),
    );
    const root = tracer.startSpan("root", { kind: "server", callerParent: CALLER });
    expect(root.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(root.traceId).not.toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    const child = tracer.startSpan("child", { kind: "client", parent: root.traceparent });
    expect(child.traceparent).toMatch(new RegExp(`^00-${root.traceId}-[0-9a-f]{16}-00$`));
    const underSampled = tracer.startSpan("under a sampled parent", {
      kind: "internal",
      parent: CALLER,
    });
    for (const span of [root, child, underSampled]) span.end();
    await tracer.shutdown();
    expect(otlp.spans().map((span) => [span.name, span.traceId, span.parentSpanId])).toEqual([
      ["under a sampled parent", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"],
    ]);
  });
});
