import { Counter, type Registry } from "prom-client";
import { createCounterChildren } from "./counter-children.js";
import { SeriesHistogram } from "./series-histogram.js";
import { LATENCY_BUCKETS, METRIC_PREFIX as p } from "./metric-conventions.js";

const HTTP_LABELS = ["route", "method", "status"] as const;

/** The service's own HTTP answers, by route template, method and status. */
export function createHttpMetrics(registry: Registry) {
  // Every passthrough request moves it: counted per series here, handed to prom-client
  // when scraped (see counter-children.ts).
  const httpRequestSeries = createCounterChildren(HTTP_LABELS);
  return {
    httpRequests: new Counter({
      name: `${p}http_requests_total`,
      help: "HTTP requests answered, by route template, method and status.",
      labelNames: HTTP_LABELS,
      registers: [registry],
      collect() {
        httpRequestSeries.flush(this);
      },
    }),
    /** {@link httpRequests} by series, for the per-request path. */
    httpRequestSeries,
    /** By series, for the per-request path: `httpDuration.series(route, method, status)`. */
    httpDuration: new SeriesHistogram({
      name: `${p}http_request_duration_seconds`,
      help: "Time to answer an HTTP request (to the last byte), by route, method and status.",
      labelNames: HTTP_LABELS,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
  };
}
