import { Counter, Histogram, type Registry } from "prom-client";
import { LATENCY_BUCKETS, METRIC_PREFIX as p } from "./metric-conventions.js";

/** The image store's operations, latencies and bytes written. */
export function createImageStoreMetrics(registry: Registry) {
  return {
    imageStoreOperations: new Counter({
      name: `${p}image_store_operations_total`,
      help: "Image store operations, by backend (memory, file, s3), op (put, get, delete, list, ping, check) and outcome (ok, not_found, error).",
      labelNames: ["backend", "op", "outcome"] as const,
      registers: [registry],
    }),
    imageStoreDuration: new Histogram({
      name: `${p}image_store_operation_duration_seconds`,
      help: "Time an image store operation took (a get: until its stream could start), by backend and op.",
      labelNames: ["backend", "op"] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    imageStoreWrittenBytes: new Counter({
      name: `${p}image_store_written_bytes_total`,
      help: "Bytes written to the image store, by backend.",
      labelNames: ["backend"] as const,
      registers: [registry],
    }),
  };
}
