import { Counter, Gauge, type Registry } from "prom-client";
import { METRIC_PREFIX as p } from "./metric-conventions.js";

/** Which Redis node is the primary, and its switches, as this process saw them. */
export function createRedisMetrics(registry: Registry) {
  return {
    redisPrimary: new Gauge({
      name: `${p}redis_primary_info`,
      help: "1 for each Redis node this process writes to as primary (host:port; a cluster's masters).",
      labelNames: ["address"] as const,
      registers: [registry],
    }),
    redisSwitches: new Counter({
      name: `${p}redis_switches_total`,
      help: "Redis primary switches this process saw (a Sentinel promotion, a cluster master replaced).",
      registers: [registry],
    }),
    redisLastSwitch: new Gauge({
      name: `${p}redis_last_switch_timestamp_seconds`,
      help: "When this process last saw a Redis primary switch (Unix seconds); 0 before the first.",
      registers: [registry],
    }),
  };
}

/** What {@link followRedisPrimary} reads (the backend's `redis` watch). */
export interface RedisPrimarySource {
  onChange(
    listener: (status: {
      primary: string[];
      switches: number;
      switchedAt?: Date | undefined;
    }) => void,
  ): void;
}

/** Keeps the Redis metrics in step with the primary the backend follows. */
export function followRedisPrimary(
  metrics: ReturnType<typeof createRedisMetrics>,
  source: RedisPrimarySource,
): void {
  let counted = 0;
  metrics.redisLastSwitch.set(0);
  source.onChange(({ primary, switches, switchedAt }) => {
    metrics.redisPrimary.reset();
    for (const address of primary) metrics.redisPrimary.set({ address }, 1);
    if (switches > counted) metrics.redisSwitches.inc(switches - counted);
    counted = switches;
    if (switchedAt) metrics.redisLastSwitch.set(switchedAt.getTime() / 1000);
  });
}
