import type { IncomingMessage, ServerResponse } from "node:http";
import { Router, type RequestHandler } from "express";
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

/**
 * Counts and times every request by its route template (never the raw path,
 * which holds task ids), once the response is done or the client left.
 */
export function createHttpMetricsMiddleware(metrics: Metrics): RequestHandler {
  return (req, res, next) => {
    observeHttpRequest(metrics, req, res, () => {
      const route = req.route?.path;
      return typeof route === "string" ? route : "unmatched";
    });
    next();
  };
}

/**
 * Counts and times one request once its response is done or its client
 * left; `route` is asked only then (Express knows its route template late).
 */
export function observeHttpRequest(
  metrics: Metrics,
  req: IncomingMessage,
  res: ServerResponse,
  route: () => string,
): void {
  const started = performance.now();
  const record = () => {
    const series = metrics.httpRequestSeries.get(
      route(),
      req.method ?? "",
      res.writableFinished ? String(res.statusCode) : "aborted",
    );
    series.inc();
    // The series' labels are the histogram's too: no labels object per request.
    metrics.httpDuration.observe(series.labels, (performance.now() - started) / 1000);
  };
  // "close" always comes, after "finish" when there is one.
  res.once("close", record);
}
