import { NOOP_TRACER, type Tracer } from "./tracer.js";
import type { TracingOptions } from "./tracing-options.js";

/**
 * The tracer the options ask for: off without them (nothing loaded), else
 * OpenTelemetry's SDK, loaded only now, exporting over OTLP/HTTP; spans
 * name the replica (`service.instance.id`) unless the variables do.
 */
export async function startTracer(
  options: TracingOptions | undefined,
  replica: string,
): Promise<Tracer> {
  if (!options) return NOOP_TRACER;
  const { createOtelTracer } = await import("./otel-tracer.js");
  // Which replica made a span: a task's run may be on another than its submission.
  return createOtelTracer({
    ...options,
    resourceAttributes: { "service.instance.id": replica, ...options.resourceAttributes },
  });
}
