import { Counter, Gauge, type Registry } from "prom-client";
import { METRIC_PREFIX as p } from "./metric-conventions.js";

/** Why an event stream was refused (`task_event_streams_refused_total`). */
const STREAM_REFUSALS = ["per_key", "total"] as const;
/** Why an event stream was cut (`task_event_watchers_cut_total`). */
const WATCHER_CUTS = ["slow_reader", "unread_bytes"] as const;

/** Task event streams and the partial images runs announce on them. */
export function createTaskEventMetrics(registry: Registry) {
  const metrics = {
    taskEventWatchers: new Gauge({
      name: `${p}task_event_watchers`,
      help: "Task event streams (GET /v1/images/tasks/{id}/events and submissions that asked for one) open in this process.",
      registers: [registry],
    }),
    taskEventStreamsRefused: new Counter({
      name: `${p}task_event_streams_refused_total`,
      help: "Event streams refused with 429 too_many_event_streams, by reason (per_key: events.maxStreamsPerKey, total: events.maxStreams).",
      labelNames: ["reason"] as const,
      registers: [registry],
    }),
    taskEventWatchersCut: new Counter({
      name: `${p}task_event_watchers_cut_total`,
      help: "Event streams the service cut because their client was not reading, by reason (slow_reader: a write waited events.slowReaderSec; unread_bytes: 64 MiB left unread).",
      labelNames: ["reason"] as const,
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
  // Each reason's series at 0 from the start: a panel shows 0 rather than "No data", and
  // increase() sees the first one.
  for (const reason of STREAM_REFUSALS) metrics.taskEventStreamsRefused.inc({ reason }, 0);
  for (const reason of WATCHER_CUTS) metrics.taskEventWatchersCut.inc({ reason }, 0);
  return metrics;
}
