import { z } from "zod";
import { fromText } from "./field-types.js";

/** How the service treats trace context; export itself is set by the standard `OTEL_*` variables. */
export const tracingSchema = z
  .object({
    trustParent: fromText(z.boolean({ error: "must be true or false" }))
      .default(false)
      .meta({
        description:
          "Continue the trace an incoming `traceparent` names, its sampling decision included. " +
          "Default `false`: a client's `traceparent` is only a hint, recorded as a link of a " +
          "new trace that the service's own sampler (`OTEL_TRACES_SAMPLER`) decides on, so a " +
          "client can neither force tracing on, nor keep a task out of it, nor choose the " +
          "`trace_id` of log lines and of what is sent to a channel. Set `true` only behind a " +
          "proxy that sets or strips `traceparent` itself.",
      }),
  })
  .strict()
  .prefault({})
  .meta({
    description:
      "Traces: exported over OTLP/HTTP when the standard `OTEL_EXPORTER_OTLP_*` variables name " +
      "an endpoint (off otherwise); this section says how far a caller's trace context counts.",
  });
