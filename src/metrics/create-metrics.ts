import { Registry, collectDefaultMetrics } from "prom-client";
import { registerEventLoopLag } from "./event-loop-lag.js";
import { createGenAiMetrics } from "./gen-ai-metrics.js";
import { createConnectionMetrics } from "./connection-metrics.js";
import { createHttpMetrics } from "./http-metrics.js";
import { createImageStoreMetrics } from "./image-store-metrics.js";
import { METRIC_PREFIX } from "./metric-conventions.js";
import { createReadinessMetrics } from "./readiness-metrics.js";
import { createRedisMetrics } from "./redis-metrics.js";
import { createStoreMetrics } from "./store-metrics.js";
import { createTaskEventMetrics } from "./task-event-metrics.js";
import { createTaskMetrics } from "./task-metrics.js";
import { createUpstreamMetrics } from "./upstream-metrics.js";
import { createWebhookMetrics } from "./webhook-metrics.js";

/**
 * The service's metrics on their own registry (no global state, so tests can
 * build many apps), declared by subject in the files beside this one. Labels
 * are bounded: route templates, channel names from the config, statuses and
 * reasons from fixed lists; never a key, task id, model name from a client,
 * or prompt.
 */
export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({
      register: registry,
      prefix: METRIC_PREFIX,
      // prom-client's event-loop gauges are replaced below: its sampler, which cannot be left
      // out, wakes once in 24 days instead of every 10 ms.
      eventLoopMonitoringPrecision: 2 ** 31 - 1,
    });
    // The event loop's delay sampled every 100 ms, not prom-client's 10: its libuv timer woke
    // an idle service 100 times a second (about 5 ms of CPU a second, most of what an idle
    // replica spent). A stall still shows: every sample after it is late by what it lasted.
    registerEventLoopLag(registry, METRIC_PREFIX, 100);
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
  // Registered in this order, which is the order /metrics lists them in.
  return {
    registry,
    ...createHttpMetrics(registry),
    ...createConnectionMetrics(registry),
    ...createUpstreamMetrics(registry),
    ...createGenAiMetrics(registry),
    ...createTaskMetrics(registry),
    ...createTaskEventMetrics(registry),
    ...createWebhookMetrics(registry),
    ...createImageStoreMetrics(registry),
    ...createStoreMetrics(registry),
    ...createReadinessMetrics(registry),
    ...createRedisMetrics(registry),
  };
}

/** The service's metrics. */
export type Metrics = ReturnType<typeof createMetrics>;
