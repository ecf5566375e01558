/** Every metric's name starts with this. */
export const METRIC_PREFIX = "image_task_sidecar_";

/** Buckets of the request and operation latencies, in seconds. */
export const LATENCY_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
];
