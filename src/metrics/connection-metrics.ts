import { Counter, type Registry } from "prom-client";
import { METRIC_PREFIX as p } from "./metric-conventions.js";

/** Why a connection (or, behind a trusted proxy, a request) was refused by a cap. */
export type ConnectionRefusal = "max_connections" | "per_ip" | "metrics_listener";

/** Every {@link ConnectionRefusal}, for the counter's series at 0. */
const CONNECTION_REFUSALS: readonly ConnectionRefusal[] = [
  "max_connections",
  "per_ip",
  "metrics_listener",
];

/** Client connections the listeners' caps refused. */
export function createConnectionMetrics(registry: Registry) {
  const metrics = {
    connectionsRefused: new Counter({
      name: `${p}connections_refused_total`,
      help:
        "Client connections closed at once by a cap, by reason: max_connections " +
        "(server.maxConnections), per_ip (server.maxConnectionsPerIp; behind a trusted proxy, " +
        "requests refused 429), metrics_listener (the metrics listener's own cap).",
      labelNames: ["reason"] as const,
      registers: [registry],
    }),
  };
  // Each reason's series at 0 from the start: a panel shows 0 rather than "No data", and
  // increase() sees the first refusal.
  for (const reason of CONNECTION_REFUSALS) metrics.connectionsRefused.inc({ reason }, 0);
  return metrics;
}
