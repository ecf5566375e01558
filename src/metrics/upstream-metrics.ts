import { Counter, type Registry } from "prom-client";
import { createCounterChildren } from "./counter-children.js";
import { SeriesHistogram } from "./series-histogram.js";
import { LATENCY_BUCKETS, METRIC_PREFIX as p } from "./metric-conventions.js";

const UPSTREAM_LABELS = ["channel", "route", "outcome"] as const;
const TOKEN_LABELS = ["channel", "model", "group", "key", "type"] as const;

/** Outcomes of `upstream_async_submissions_total`. */
export const ASYNC_SUBMISSION_OUTCOMES = ["accepted", "refused", "failed"] as const;
/** Outcomes of `upstream_async_polls_total`. */
export const ASYNC_POLL_OUTCOMES = ["running", "completed", "failed", "error"] as const;

/** Calls to channels and the tokens their answers reported. */
export function createUpstreamMetrics(registry: Registry) {
  // Every passthrough request moves these: counted per series here, handed to
  // prom-client when scraped (see counter-children.ts).
  const upstreamRequestSeries = createCounterChildren(UPSTREAM_LABELS);
  const tokenSeries = createCounterChildren(TOKEN_LABELS);
  return {
    upstreamRequests: new Counter({
      name: `${p}upstream_requests_total`,
      help: "Calls to channels, by channel, route and outcome (HTTP status, error or timeout).",
      labelNames: UPSTREAM_LABELS,
      registers: [registry],
      collect() {
        upstreamRequestSeries.flush(this);
      },
    }),
    /** {@link upstreamRequests} by series, for the per-request path. */
    upstreamRequestSeries,
    /** By series, for the per-request path: `upstreamDuration.series(channel, route)`. */
    upstreamDuration: new SeriesHistogram({
      name: `${p}upstream_request_duration_seconds`,
      help: "Time from sending a call to a channel to its response headers, by channel and route.",
      labelNames: ["channel", "route"] as const,
      buckets: [...LATENCY_BUCKETS, 300, 600],
      registers: [registry],
    }),
    tokens: new Counter({
      name: `${p}tokens_total`,
      help: "Tokens channels reported (passthrough answers, image tasks, background responses), by channel, model (one a channel lists, else other), group, key (a configured key's key_name, else other) and type (input, output).",
      labelNames: TOKEN_LABELS,
      registers: [registry],
      collect() {
        tokenSeries.flush(this);
      },
    }),
    /** {@link tokens} by series, for the per-request path. */
    tokenSeries,
    asyncSubmissions: new Counter({
      name: `${p}upstream_async_submissions_total`,
      help: "Image generations submitted as jobs to channels with an async API, by channel and outcome (accepted: the channel answered a job id; refused: it answered an error; failed: no usable answer).",
      labelNames: ["channel", "outcome"] as const,
      registers: [registry],
    }),
    asyncPolls: new Counter({
      name: `${p}upstream_async_polls_total`,
      help: "Polls of channels' async image jobs, by channel and outcome (running, completed, failed: the job's state; error: no usable answer, polled again).",
      labelNames: ["channel", "outcome"] as const,
      registers: [registry],
    }),
  };
}
