import type { ExportWarnings } from "./batch-exporter.js";
import { NOOP_TRACER, type Tracer } from "./tracer.js";
import type { TracingOptions } from "./tracing-options.js";

/** What the tracer is told besides the `OTEL_*` variables. */
export interface TracerSettings {
  /** This process's name (`server.replicaName`), as `service.instance.id`. */
  replica: string;
  /** `tracing.trustParent`: continue a client's `traceparent` rather than link it. Default false. */
  trustParent?: boolean;
  /** Where lost spans are told (a full queue, a collector that is down), at most once a minute. */
  logger?: ExportWarnings;
}

/**
 * The tracer the options ask for: off without them (nothing loaded), else
 * the service's own OTLP/HTTP tracer, loaded only now; spans name the
 * replica (`service.instance.id`) unless the variables do.
 */
export async function startTracer(
  options: TracingOptions | undefined,
  settings: TracerSettings,
): Promise<Tracer> {
  if (!options) return NOOP_TRACER;
  const { createOtlpTracer } = await import("./otlp-tracer.js");
  // Which replica made a span: a task's run may be on another than its submission.
  return createOtlpTracer(
    {
      ...options,
      resourceAttributes: {
        "service.instance.id": settings.replica,
        ...options.resourceAttributes,
      },
    },
    { trustParent: settings.trustParent ?? false },
    settings.logger,
  );
}
