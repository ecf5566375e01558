import { Gauge, type Registry } from "prom-client";
import { METRIC_PREFIX as p } from "./metric-conventions.js";

/** Whether the stores the tasks need answered this process's last readiness check. */
export function createStoreMetrics(registry: Registry) {
  return {
    storeUp: new Gauge({
      name: `${p}store_up`,
      help: "1 when the store answered the last /readyz check, 0 when it did not, by store (tasks, images).",
      labelNames: ["store"] as const,
      registers: [registry],
    }),
  };
}
