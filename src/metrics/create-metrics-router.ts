import { Router } from "express";
import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import type { Metrics } from "./create-metrics.js";
import { createMetricsHandler } from "./create-metrics-handler.js";

/**
 * `GET /metrics` on the main port: Prometheus text, behind `metrics.bearerToken`
 * when set. Empty when `metrics.port` moves it to a listener of its own
 * (`startMetricsListener`), so the main port then answers 404 there.
 */
export function createMetricsRouter(
  metrics: Metrics,
  config: Config["metrics"],
  logger: Logger,
): Router {
  const router = Router();
  if (config.port !== undefined) return router;
  const handle = createMetricsHandler(metrics, config, logger);
  router.get("/metrics", (req, res) => handle(req, res));
  return router;
}
