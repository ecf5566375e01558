import {
  ROOT_CONTEXT,
  SpanKind as OtelSpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span as OtelSpan,
  type SpanContext,
} from "@opentelemetry/api";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtobufExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
} from "@opentelemetry/sdk-trace-base";
import {
  parseTraceparent,
  type Span,
  type SpanAttributes,
  type SpanKind,
  type Tracer,
} from "./tracer.js";
import type { TracingOptions } from "./tracing-options.js";

const KINDS: Record<SpanKind, OtelSpanKind> = {
  server: OtelSpanKind.SERVER,
  client: OtelSpanKind.CLIENT,
  internal: OtelSpanKind.INTERNAL,
  producer: OtelSpanKind.PRODUCER,
  consumer: OtelSpanKind.CONSUMER,
};

/**
 * {@link Tracer} on OpenTelemetry's SDK: a tracer provider of its own (not
 * registered globally), spans batched to an OTLP/HTTP exporter (protobuf or
 * JSON), the sampler and resource as the options say. Parents travel as
 * `traceparent` strings, so no context manager is needed. A client's
 * `traceparent` (`callerParent`) is continued only with `trustParent`;
 * otherwise it is a link of a new trace, whose sampling is the service's own.
 */
export function createOtelTracer(
  options: TracingOptions,
  trust: { trustParent: boolean } = { trustParent: false },
): Tracer {
  const exporterOptions = { url: options.endpoint, headers: options.headers };
  const exporter =
    options.protocol === "http/json"
      ? new JsonExporter(exporterOptions)
      : new ProtobufExporter(exporterOptions);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      ...options.resourceAttributes,
      "service.name": options.serviceName,
    }),
    sampler: samplerOf(options.sampler),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 1000 })],
  });
  const tracer = provider.getTracer("image-task-sidecar");
  return {
    enabled: true,
    startSpan(name, spanOptions) {
      const caller = trust.trustParent ? undefined : remoteContext(spanOptions.callerParent);
      const parent =
        spanOptions.parent ?? (trust.trustParent ? spanOptions.callerParent : undefined);
      const span = tracer.startSpan(
        name,
        {
          kind: KINDS[spanOptions.kind],
          attributes: clean(spanOptions.attributes),
          ...(caller ? { links: [{ context: caller }] } : {}),
        },
        parentContext(parent),
      );
      return wrap(span);
    },
    async shutdown() {
      // A collector that is down must not hold the shutdown.
      await provider.shutdown().catch(() => undefined);
    },
  };
}

function samplerOf(sampler: TracingOptions["sampler"]): Sampler {
  switch (sampler.name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(sampler.ratio);
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(sampler.ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** A `traceparent` as OpenTelemetry's span context, or undefined when it is not one. */
function remoteContext(traceparent: string | undefined): SpanContext | undefined {
  const parsed = parseTraceparent(traceparent);
  if (!parsed) return undefined;
  return {
    traceId: parsed.traceId,
    spanId: parsed.spanId,
    traceFlags: parsed.sampled ? 1 : 0,
    isRemote: true,
  };
}

/** The context a span starts in: under `parent`, or a new trace. */
function parentContext(parent: string | undefined) {
  const context = remoteContext(parent);
  return context ? trace.setSpanContext(ROOT_CONTEXT, context) : ROOT_CONTEXT;
}

function clean(attributes: SpanAttributes | undefined): Attributes | undefined {
  if (!attributes) return undefined;
  const kept: Attributes = {};
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined) kept[name] = value;
  }
  return kept;
}

function wrap(span: OtelSpan): Span {
  const context = span.spanContext();
  const flags = context.traceFlags.toString(16).padStart(2, "0");
  return {
    traceId: context.traceId,
    traceparent: `00-${context.traceId}-${context.spanId}-${flags}`,
    setName: (name) => void span.updateName(name),
    setAttributes: (attributes) => void span.setAttributes(clean(attributes) ?? {}),
    addEvent: (name, attributes) => void span.addEvent(name, clean(attributes)),
    setError: (description) =>
      void span.setStatus({ code: SpanStatusCode.ERROR, message: description }),
    end: () => span.end(),
  };
}
