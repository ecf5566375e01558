import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  SimpleSpanProcessor,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, test } from "vitest";
import {
  OTLP_SPAN_KIND,
  OTLP_STATUS_CODE,
  startOtlpReceiver,
  type OtlpReceiver,
} from "./otlp-receiver.js";

type ExporterConfig = NonNullable<ConstructorParameters<typeof ProtoExporter>[0]>;

const PROTOCOLS = [
  { protocol: "http/protobuf", contentType: "application/x-protobuf", gzip: false },
  { protocol: "http/protobuf", contentType: "application/x-protobuf", gzip: true },
  { protocol: "http/json", contentType: "application/json", gzip: false },
  { protocol: "http/json", contentType: "application/json", gzip: true },
] as const;

let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

/** Exports a parent (server) span and a child (client) span with attributes and events. */
async function exportTwoSpans(exporter: SpanExporter) {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      "service.name": "otlp-receiver-test",
      "deployment.environment.name": "test",
    }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("receiver-smoke", "1.2.3");
  const parent = tracer.startSpan("POST /v1/images/tasks", {
    kind: SpanKind.SERVER,
    attributes: {
      "http.request.method": "POST",
      "http.route": "/v1/images/tasks",
      "http.response.status_code": 202,
    },
  });
  const child = tracer.startSpan(
    "image_generation gpt-image-1",
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "gen_ai.operation.name": "image_generation",
        "gen_ai.usage.input_tokens": 12,
        ratio: 0.25,
        streamed: true,
        tries: [1, 2],
      },
    },
    trace.setSpan(ROOT_CONTEXT, parent),
  );
  child.addEvent("task.started", { attempt: 1 });
  child.addEvent("task.failed", { error_code: "upstream_error" });
  child.setStatus({ code: SpanStatusCode.ERROR, message: "upstream answered 502" });
  child.end();
  parent.end();
  await provider.forceFlush();
  await provider.shutdown();
  return { parent: parent.spanContext(), child: child.spanContext() };
}

describe("startOtlpReceiver", () => {
  test.each(PROTOCOLS)(
    "decodes spans the OpenTelemetry SDK exports over $protocol (gzip: $gzip)",
    async ({ protocol, contentType, gzip }) => {
      receiver = await startOtlpReceiver();
      const config: ExporterConfig = {
        url: `${receiver.url}/v1/traces`,
        headers: { authorization: "Bearer collector-token" },
        ...(gzip ? { compression: "gzip" as ExporterConfig["compression"] } : {}),
      };
      const exporter =
        protocol === "http/json" ? new JsonExporter(config) : new ProtoExporter(config);
      const sent = await exportTwoSpans(exporter);

      const spans = await receiver.waitForSpans((all) => all.length >= 2);
      const parent = spans.find((span) => span.name === "POST /v1/images/tasks");
      const child = spans.find((span) => span.name === "image_generation gpt-image-1");
      expect(parent).toMatchObject({
        traceId: sent.parent.traceId,
        spanId: sent.parent.spanId,
        parentSpanId: undefined,
        kind: OTLP_SPAN_KIND.SERVER,
        attributes: {
          "http.request.method": "POST",
          "http.route": "/v1/images/tasks",
          "http.response.status_code": 202,
        },
        events: [],
        status: { code: OTLP_STATUS_CODE.UNSET },
        resource: { "service.name": "otlp-receiver-test", "deployment.environment.name": "test" },
        scope: { name: "receiver-smoke", version: "1.2.3" },
      });
      expect(child).toMatchObject({
        traceId: sent.parent.traceId,
        spanId: sent.child.spanId,
        parentSpanId: sent.parent.spanId,
        kind: OTLP_SPAN_KIND.CLIENT,
        attributes: {
          "gen_ai.operation.name": "image_generation",
          "gen_ai.usage.input_tokens": 12,
          ratio: 0.25,
          streamed: true,
          tries: [1, 2],
        },
        events: [
          { name: "task.started", attributes: { attempt: 1 } },
          { name: "task.failed", attributes: { error_code: "upstream_error" } },
        ],
        status: { code: OTLP_STATUS_CODE.ERROR, message: "upstream answered 502" },
      });
      for (const span of [parent!, child!]) {
        expect(BigInt(span.endTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(span.startTimeUnixNano));
        // Within a day of now: the nanoseconds were read whole, not as a wrong-sized integer.
        const ms = Number(BigInt(span.startTimeUnixNano) / 1_000_000n);
        expect(Math.abs(ms - Date.now())).toBeLessThan(86_400_000);
      }
      expect(BigInt(child!.events[0]!.timeUnixNano)).toBeGreaterThanOrEqual(
        BigInt(child!.startTimeUnixNano),
      );
      expect(receiver.requests.length).toBeGreaterThan(0);
      for (const request of receiver.requests) {
        expect(request).toMatchObject({
          method: "POST",
          path: "/v1/traces",
          contentType,
          contentEncoding: gzip ? "gzip" : "identity",
          status: 200,
        });
        expect(request.headers.authorization).toBe("Bearer collector-token");
      }
    },
  );

  test("answers an empty ExportTraceServiceResponse in the request's encoding", async () => {
    receiver = await startOtlpReceiver();
    const json = await fetch(`${receiver.url}/v1/traces`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
      body: gzipSync(JSON.stringify(jsonRequest())),
    });
    expect(json.status).toBe(200);
    expect(json.headers.get("content-type")).toBe("application/json");
    expect(await json.json()).toEqual({});

    const proto = await fetch(`${receiver.url}/v1/traces`, {
      method: "POST",
      headers: { "content-type": "application/x-protobuf" },
      body: new Uint8Array(),
    });
    expect(proto.status).toBe(200);
    expect(proto.headers.get("content-type")).toBe("application/x-protobuf");
    expect((await proto.arrayBuffer()).byteLength).toBe(0);

    expect(receiver.spans()).toEqual([
      expect.objectContaining({
        traceId: "5b8efff798038103d269b633813fc60c",
        spanId: "eee19b7ec3c1b174",
        parentSpanId: undefined,
        name: "from-json",
        kind: OTLP_SPAN_KIND.INTERNAL,
        startTimeUnixNano: "1700000000000000001",
        attributes: { big: 9007199254740993n, list: ["a", 1], nested: { ok: true } },
        status: { code: OTLP_STATUS_CODE.OK, message: undefined },
        resource: { "service.name": "hand-made" },
      }),
    ]);
  });

  test("refuses what is not an OTLP/HTTP trace export", async () => {
    receiver = await startOtlpReceiver();
    const post = (path: string, type: string, body: string | Uint8Array) =>
      fetch(`${receiver!.url}${path}`, {
        method: "POST",
        headers: { "content-type": type },
        body,
      }).then((res) => res.status);
    expect(await post("/v1/metrics", "application/json", "{}")).toBe(404);
    expect(await post("/v1/traces", "text/plain", "hello")).toBe(415);
    expect(await post("/v1/traces", "application/json", "{not json")).toBe(400);
    // A field header announcing 100 bytes that are not there.
    expect(
      await post("/v1/traces", "application/x-protobuf", new Uint8Array([0x0a, 0x64, 1])),
    ).toBe(400);
    expect(receiver.spans()).toEqual([]);
    expect(receiver.requests.map((r) => r.status)).toEqual([404, 415, 400, 400]);
    await expect(receiver.waitForSpans((spans) => spans.length > 0, 200)).rejects.toThrow(
      /received 0 spans/,
    );
  });
});

function jsonRequest() {
  return {
    resourceSpans: [
      {
        resource: { attributes: [{ key: "service.name", value: { stringValue: "hand-made" } }] },
        scopeSpans: [
          {
            scope: { name: "by-hand" },
            spans: [
              {
                traceId: "5B8EFFF798038103D269B633813FC60C",
                spanId: "EEE19B7EC3C1B174",
                parentSpanId: "",
                name: "from-json",
                kind: 1,
                startTimeUnixNano: "1700000000000000001",
                endTimeUnixNano: "1700000000000000002",
                attributes: [
                  { key: "big", value: { intValue: "9007199254740993" } },
                  {
                    key: "list",
                    value: { arrayValue: { values: [{ stringValue: "a" }, { intValue: 1 }] } },
                  },
                  {
                    key: "nested",
                    value: { kvlistValue: { values: [{ key: "ok", value: { boolValue: true } }] } },
                  },
                ],
                status: { code: "STATUS_CODE_OK" },
              },
            ],
          },
        ],
      },
    ],
  };
}
