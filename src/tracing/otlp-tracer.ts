import { BatchExporter, type ExportWarnings } from "./batch-exporter.js";
import { createSampler } from "./create-sampler.js";
import { otlpJsonFormat } from "./otlp-json-batch.js";
import { otlpProtobufFormat } from "./otlp-protobuf-batch.js";
import { createExportPoster } from "./post-export.js";
import { RecordedSpan, UnsampledSpan, type RecordedLink } from "./recorded-span.js";
import { OTLP_KINDS } from "./span-batch.js";
import { newRootIds, newSpanId } from "./span-ids.js";
import { parseTraceparent, type Span, type StartSpanOptions, type Tracer } from "./tracer.js";
import { BATCH_DEFAULTS, type TracingOptions } from "./tracing-options.js";

/** The instrumentation scope of every span. */
const SCOPE = "image-task-sidecar";

/**
 * {@link Tracer} exporting OTLP/HTTP (protobuf or JSON) itself: spans are
 * small objects, sampled as OpenTelemetry's samplers decide, encoded into a
 * batch as they end and sent in batches off the request path (see
 * {@link BatchExporter}). Parents travel as `traceparent` strings. A client's
 * `traceparent` (`callerParent`) is continued only with `trustParent`;
 * otherwise it is a link of a new trace, whose sampling is the service's own.
 */
export function createOtlpTracer(
  options: TracingOptions,
  trust: { trustParent: boolean } = { trustParent: false },
  warnings?: ExportWarnings,
): Tracer {
  const identity = {
    resource: { ...options.resourceAttributes, "service.name": options.serviceName },
    scope: SCOPE,
  };
  const format =
    options.protocol === "http/json" ? otlpJsonFormat(identity) : otlpProtobufFormat(identity);
  const poster = createExportPoster(options.endpoint, format.contentType, options.headers);
  const exporter = new BatchExporter(
    format,
    poster,
    { ...BATCH_DEFAULTS, ...options.batch },
    warnings,
  );
  const sample = createSampler(options.sampler);
  const { trustParent } = trust;
  return {
    enabled: true,
    startSpan(name: string, spanOptions: StartSpanOptions): Span {
      const parent = parentOf(
        spanOptions.parent ?? (trustParent ? spanOptions.callerParent : undefined),
      );
      let traceId: string;
      let spanId: string;
      if (parent) {
        traceId = parent.traceId;
        spanId = newSpanId();
      } else {
        const ids = newRootIds();
        traceId = ids.slice(0, 32);
        spanId = ids.slice(32);
      }
      if (!sample(traceId, parent?.sampled)) return new UnsampledSpan(traceId, spanId);
      const link: RecordedLink | undefined =
        trustParent || spanOptions.callerParent === undefined
          ? undefined
          : parseTraceparent(spanOptions.callerParent);
      return new RecordedSpan(
        exporter,
        name,
        OTLP_KINDS[spanOptions.kind],
        traceId,
        spanId,
        parent?.spanId,
        link,
        spanOptions.attributes,
      );
    },
    shutdown: () => exporter.shutdown(),
  };
}

/** A parent's trace, span and sampled flag: a span of this tracer's read in place. */
function parentOf(parent: Span | string | undefined): ParentContext | undefined {
  if (parent instanceof RecordedSpan || parent instanceof UnsampledSpan) return parent;
  return parseTraceparent(typeof parent === "string" ? parent : parent?.traceparent || undefined);
}

interface ParentContext {
  traceId: string;
  spanId: string;
  sampled: boolean;
}
