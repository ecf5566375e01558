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
}
