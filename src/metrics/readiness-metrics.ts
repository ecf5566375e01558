import { Counter, Gauge, type Registry } from "prom-client";
import { METRIC_PREFIX as p } from "./metric-conventions.js";

/** Bounded reasons for `task_submissions_refused_total`: what a refused submission was told. */
export const REFUSAL_REASONS = new Set([
  "store_unavailable",
  "storage_unavailable",
  "queue_full",
  "too_many_tasks",
  "shutting_down",
]);

/** Submissions refused while the service cannot take them, and what the channel checks found. */
export function createReadinessMetrics(registry: Registry) {
  const metrics = {
    taskSubmissionsRefused: new Counter({
      name: `${p}task_submissions_refused_total`,
      help: "Image task submissions refused before any channel was called, by reason (store_unavailable, storage_unavailable, queue_full, too_many_tasks, shutting_down).",
      labelNames: ["reason"] as const,
      registers: [registry],
    }),
    channelUp: new Gauge({
      name: `${p}channel_up`,
      help: "1 when the channel answered its last model-list check with its list, 0 when it did not, by channel.",
      labelNames: ["channel"] as const,
      registers: [registry],
    }),
  };
  // Each reason's series at 0 from the start: a panel shows 0 rather than "No data", and
  // increase() sees the first refusal.
  for (const reason of REFUSAL_REASONS) metrics.taskSubmissionsRefused.inc({ reason }, 0);
  return metrics;
}
