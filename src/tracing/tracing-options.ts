/** How traces are exported, from the standard `OTEL_*` variables (see `loadTracingOptions`). */
export interface TracingOptions {
  /** The OTLP/HTTP traces URL (`.../v1/traces`); tracing is off without one. */
  endpoint: string;
  protocol: "http/protobuf" | "http/json";
  /** Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`), e.g. an API key of the collector. */
  headers: Record<string, string>;
  /** `service.name` (`OTEL_SERVICE_NAME`, default `image-task-sidecar`). */
  serviceName: string;
  /** More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`). */
  resourceAttributes: Record<string, string>;
  /** `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`) and its argument. */
  sampler: {
    name:
      | "always_on"
      | "always_off"
      | "traceidratio"
      | "parentbased_always_on"
      | "parentbased_always_off"
      | "parentbased_traceidratio";
    ratio: number;
  };
  /** Batching and export (`OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_TIMEOUT`); unset ones are {@link BATCH_DEFAULTS}. */
  batch?: Partial<typeof BATCH_DEFAULTS>;
}

/** OpenTelemetry's batch defaults, but for a 1 s delay (the SDK's is 5 s). */
export const BATCH_DEFAULTS = {
  /** `OTEL_BSP_MAX_QUEUE_SIZE`: spans held at most; past it, spans are dropped. */
  maxQueueSize: 2048,
  /** `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: spans per export request. */
  maxBatchSize: 512,
  /** `OTEL_BSP_SCHEDULE_DELAY`: how long a span waits for its batch to fill, in ms. */
  delayMs: 1000,
  /** `OTEL_EXPORTER_OTLP_TIMEOUT` (`_TRACES_TIMEOUT`): the deadline of one export request, in ms. */
  timeoutMs: 10_000,
};
