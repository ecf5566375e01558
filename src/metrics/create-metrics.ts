import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { createCounterChildren } from "./counter-children.js";

/** Every metric's name starts with this. */
export const METRIC_PREFIX = "image_task_sidecar_";

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const HTTP_LABELS = ["route", "method", "status"] as const;
const UPSTREAM_LABELS = ["channel", "route", "outcome"] as const;
const TOKEN_LABELS = ["channel", "model", "group", "type"] as const;
const TASK_BUCKETS = [0.5, 1, 2.5, 5, 10, 20, 30, 60, 100, 150, 200, 300, 600, 1200];

/**
 * The service's metrics on their own registry (no global state, so tests can
 * build many apps). Labels are bounded: route templates, channel names from
 * the config, statuses and reasons from fixed lists; never a key, task id,
 * model name from a client, or prompt.
 */
export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
    // Gauges named *_total break the exposition format's rules (promtool flags them);
    // the same counts stay available by type in the metrics without the suffix.
    for (const name of [
      "active_handles_total",
      "active_requests_total",
      "active_resources_total",
    ]) {
      registry.removeSingleMetric(`${METRIC_PREFIX}nodejs_${name}`);
    }
  }
  const p = METRIC_PREFIX;
  let queueCounts: () => Promise<{ waiting: number; running: number }> = async () => ({
    waiting: 0,
    running: 0,
  });
  // The counters every passthrough request moves count per series here, and reach
  // prom-client when scraped (see counter-children.ts).
  const httpRequestSeries = createCounterChildren(HTTP_LABELS);
  const upstreamRequestSeries = createCounterChildren(UPSTREAM_LABELS);
  const tokenSeries = createCounterChildren(TOKEN_LABELS);
  return {
    registry,
    httpRequests: new Counter({
      name: `${p}http_requests_total`,
      help: "HTTP requests answered, by route template, method and status.",
      labelNames: HTTP_LABELS,
      registers: [registry],
      collect() {
        httpRequestSeries.flush(this);
      },
    }),
    /** {@link httpRequests} by series, for the per-request path. */
    httpRequestSeries,
    httpDuration: new Histogram({
      name: `${p}http_request_duration_seconds`,
      help: "Time to answer an HTTP request (to the last byte), by route, method and status.",
      labelNames: HTTP_LABELS,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    upstreamRequests: new Counter({
      name: `${p}upstream_requests_total`,
      help: "Calls to channels, by channel, route and outcome (HTTP status, error or timeout).",
      labelNames: UPSTREAM_LABELS,
      registers: [registry],
      collect() {
        upstreamRequestSeries.flush(this);
      },
    }),
    /** {@link upstreamRequests} by series, for the per-request path. */
    upstreamRequestSeries,
    upstreamDuration: new Histogram({
      name: `${p}upstream_request_duration_seconds`,
      help: "Time from sending a call to a channel to its response headers, by channel and route.",
      labelNames: ["channel", "route"] as const,
      buckets: [...LATENCY_BUCKETS, 300, 600],
      registers: [registry],
    }),
    tokens: new Counter({
      name: `${p}tokens_total`,
      help: "Tokens channels reported in passthrough answers, by channel, model (one a channel lists, else other), group and type (input, output).",
      labelNames: TOKEN_LABELS,
      registers: [registry],
      collect() {
        tokenSeries.flush(this);
      },
    }),
    /** {@link tokens} by series, for the per-request path. */
    tokenSeries,
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
      help: "Image tasks accepted (202), not counting idempotent replays.",
      registers: [registry],
    }),
    tasksFinished: new Counter({
      name: `${p}tasks_finished_total`,
      help: "Image tasks that ended, by status (completed, failed) and reason (error code, or ok).",
      labelNames: ["status", "reason"] as const,
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
    webhookAttempts: new Counter({
      name: `${p}webhook_attempts_total`,
      help: "Webhook delivery attempts, by outcome (delivered, http_error, redirect, timeout, network_error, refused).",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    webhookAttemptDuration: new Histogram({
      name: `${p}webhook_attempt_duration_seconds`,
      help: "Time from sending a webhook attempt to the receiver's status line (or its failure), by outcome.",
      labelNames: ["outcome"] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    webhookDeliveries: new Counter({
      name: `${p}webhook_deliveries_total`,
      help: "Webhook deliveries that ended, by result (delivered, exhausted after maxAttempts, refused address).",
      labelNames: ["result"] as const,
      registers: [registry],
    }),
    webhookDeliveryAttempts: new Histogram({
      name: `${p}webhook_delivery_attempts`,
      help: "Attempt number at which a webhook delivery ended, by result.",
      labelNames: ["result"] as const,
      buckets: [1, 2, 3, 4, 5, 6, 7, 8, 10, 15, 20, 50, 100],
      registers: [registry],
    }),
    imageStoreOperations: new Counter({
      name: `${p}image_store_operations_total`,
      help: "Image store operations, by backend (memory, file, s3), op (put, get, delete, list, ping) and outcome (ok, not_found, error).",
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

/** The service's metrics. */
export type Metrics = ReturnType<typeof createMetrics>;

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
