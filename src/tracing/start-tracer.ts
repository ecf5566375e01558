import { NOOP_TRACER, type Tracer } from "./tracer.js";
import type { TracingOptions } from "./tracing-options.js";

/** What the tracer is told besides the `OTEL_*` variables. */
export interface TracerSettings {
  /** This process's name (`server.replicaName`), as `service.instance.id`. */
  replica: string;
  /** `tracing.trustParent`: continue a client's `traceparent` rather than link it. Default false. */
  trustParent?: boolean;
}

/**
 * The tracer the options ask for: off without them (nothing loaded), else
 * OpenTelemetry's SDK, loaded only now, exporting over OTLP/HTTP; spans
 * name the replica (`service.instance.id`) unless the variables do.
 */
export async function startTracer(
  options: TracingOptions | undefined,
  settings: TracerSettings,
): Promise<Tracer> {
  if (!options) return NOOP_TRACER;
  const { createOtelTracer } = await import("./otel-tracer.js");
  // Which replica made a span: a task's run may be on another than its submission.
  return createOtelTracer(
    {
      ...options,
      resourceAttributes: {
        "service.instance.id": settings.replica,
        ...options.resourceAttributes,
      },
    },
    { trustParent: settings.trustParent ?? false },
  );
}
