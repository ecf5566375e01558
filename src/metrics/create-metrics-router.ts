import type { IncomingMessage, ServerResponse } from "node:http";
import { Router, type RequestHandler } from "express";
import type { Metrics } from "./create-metrics.js";

/** `GET /metrics`: Prometheus text, no auth (scrapers on the cluster network). */
export function createMetricsRouter(metrics: Metrics): Router {
  const router = Router();
  router.get("/metrics", async (_req, res) => {
    res.set("Content-Type", metrics.registry.contentType).send(await metrics.registry.metrics());
  });
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
    const labels = {
      route: route(),
      method: req.method ?? "",
      status: res.writableFinished ? String(res.statusCode) : "aborted",
    };
    metrics.httpRequests.inc(labels);
    metrics.httpDuration.observe(labels, (performance.now() - started) / 1000);
  };
  // "close" always comes, after "finish" when there is one.
  res.once("close", record);
}
