import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { METRIC_PREFIX as p } from "./metric-conventions.js";

const TASK_BUCKETS = [0.5, 1, 2.5, 5, 10, 20, 30, 60, 100, 150, 200, 300, 600, 1200];

/** Bounded reasons for `tasks_finished_total`: anything else is counted as `other`. */
export const FINISH_REASONS = new Set([
  "ok",
  "timeout",
  "cancelled",
  "interrupted",
  "upstream_error",
  "upstream_unavailable",
  "content_policy_violation",
  "invalid_response",
  "rate_limit_exceeded",
  "invalid_request",
  "credential_unavailable",
  "storage_unavailable",
]);

/** Image tasks: the queue's gauges, submissions, ends, timeouts and durations. */
export function createTaskMetrics(registry: Registry) {
  let queueCounts: () => Promise<{ waiting: number; running: number }> = async () => ({
    waiting: 0,
    running: 0,
  });
  return {
    taskQueueDepth: new Gauge({
      name: `${p}task_queue_depth`,
      help: "Image tasks waiting for a slot, across all replicas.",
      registers: [registry],
      async collect() {
        this.set((await queueCounts()).waiting);
      },
    }),
    /**
     * Names where the queue's counts are read at scrape time (the queue is
     * built after metrics); with Redis they are the cluster's, so every
     * replica reports the same values.
     */
    watchQueue(source: () => Promise<{ waiting: number; running: number }>) {
      queueCounts = source;
    },
    tasksInProgress: new Gauge({
      name: `${p}tasks_in_progress`,
      help: "Image tasks running now, across all replicas.",
      registers: [registry],
      async collect() {
        this.set((await queueCounts()).running);
      },
    }),
    tasksSubmitted: new Counter({
      name: `${p}tasks_submitted_total`,
      help: "Image tasks accepted (202), not counting idempotent replays, by dialect (native, sub2api, bifrost).",
      labelNames: ["dialect"] as const,
      registers: [registry],
    }),
    tasksFinished: new Counter({
      name: `${p}tasks_finished_total`,
      help: "Image tasks that ended, by status (completed, failed), reason (error code, or ok) and dialect.",
      labelNames: ["status", "reason", "dialect"] as const,
      registers: [registry],
    }),
    taskTimeouts: new Counter({
      name: `${p}task_timeouts_total`,
      help: "Image tasks failed because generation ran past imageTasks.timeoutSec.",
      registers: [registry],
    }),
    taskRunDuration: new Histogram({
      name: `${p}task_run_duration_seconds`,
      help: "Time from started_at to the end of a task, by final status.",
      labelNames: ["status"] as const,
      buckets: TASK_BUCKETS,
      registers: [registry],
    }),
    taskQueueWait: new Histogram({
      name: `${p}task_queue_wait_seconds`,
      help: "Time a task waited queued before it started.",
      buckets: TASK_BUCKETS,
      registers: [registry],
    }),
  };
}
