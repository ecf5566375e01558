import { Counter, Histogram, type Registry } from "prom-client";
import { LATENCY_BUCKETS, METRIC_PREFIX as p } from "./metric-conventions.js";

/** How a webhook delivery ends (`webhook_deliveries_total`). */
const DELIVERY_RESULTS = ["delivered", "exhausted", "refused"] as const;

/** Webhook attempts and deliveries. */
export function createWebhookMetrics(registry: Registry) {
  const metrics = {
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
  };
  // Each result's series at 0 from the start: "given up" shows 0 rather than "No data", and
  // the alert's increase() sees the first delivery given up.
  for (const result of DELIVERY_RESULTS) metrics.webhookDeliveries.inc({ result }, 0);
  return metrics;
}
