import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import type { Lane, LaneMatch } from "../http/lane.js";
import { createRouteTable } from "../http/route-table.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { createMetricsHandler } from "./metrics-handler.js";

/**
 * `GET /metrics` on the main port: Prometheus text, behind `metrics.bearerToken`
 * when set. None when `metrics.port` moves it to a listener of its own
 * (`startMetricsListener`), so the main port then answers 404 there.
 */
export function createMetricsLane(
  metrics: Metrics,
  config: Config["metrics"],
  logger: Logger,
): Lane {
  if (config.port !== undefined) return { match: () => undefined };
  const handle = createMetricsHandler(metrics, config, logger);
  const served: LaneMatch = {
    template: "/metrics",
    auth: false,
    serve: ({ req, res }) => handle(req, res),
  };
  const table = createRouteTable([{ method: "GET", template: "/metrics" }]);
  return { match: (method, path) => (table(method, path) ? served : undefined) };
}
