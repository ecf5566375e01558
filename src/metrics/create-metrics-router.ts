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
    const started = performance.now();
    let recorded = false;
    const record = () => {
      if (recorded) return;
      recorded = true;
      const route = req.route?.path;
      const labels = {
        route: typeof route === "string" ? route : "unmatched",
        method: req.method,
        status: res.writableFinished ? String(res.statusCode) : "aborted",
      };
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, (performance.now() - started) / 1000);
    };
    res.on("finish", record);
    res.on("close", record);
    next();
  };
}
