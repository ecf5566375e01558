import { Counter, Gauge, type Registry } from "prom-client";
import { METRIC_PREFIX as p } from "./metric-conventions.js";

/** Task event streams and the partial images runs announce on them. */
export function createTaskEventMetrics(registry: Registry) {
  return {
    taskEventWatchers: new Gauge({
      name: `${p}task_event_watchers`,
      help: "Task event streams (GET /v1/images/tasks/{id}/events and submissions that asked for one) open in this process.",
      registers: [registry],
    }),
    taskEventsSent: new Counter({
      name: `${p}task_events_sent_total`,
      help: "Task events written to event streams, by event (queued, in_progress, partial_image, completed, failed).",
      labelNames: ["event"] as const,
      registers: [registry],
    }),
    taskPartialImages: new Counter({
      name: `${p}task_partial_images_total`,
      help: "Partial images that task runs received and kept, by outcome (stored, or failed: the write did not succeed and the run went on).",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
  };
}
