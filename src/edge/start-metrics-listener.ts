import type { RequestListener } from "node:http";
import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import { ServiceError } from "../errors/service-error.js";
import { createGuardedServer, type ConnectionLimits } from "../http/connection-guard.js";
import { sendError } from "../http/send-error.js";
import { listenOn } from "../net/listen-on.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { createMetricsHandler } from "./metrics-handler.js";

/** Connections the metrics listener takes at once, whatever the main listener's caps. */
export const METRICS_MAX_CONNECTIONS = 32;

/** The separate `/metrics` listener, when `metrics.port` is set. */
export interface MetricsListener {
  /** `http://HOST:PORT`; `/metrics` is under it. */
  url: string;
  close(): Promise<void>;
}

/** Inputs of {@link startMetricsListener}. */
export interface StartMetricsListenerOptions {
  config: Config["metrics"];
  /** `server.host`: the interface when `metrics.host` is unset. */
  defaultHost: string;
  /** The main listener's bounds; this one keeps its own small cap instead of theirs. */
  limits: ConnectionLimits;
  metrics: Metrics;
  logger: Logger;
}

/**
 * Serves `GET /metrics` (and nothing else) on `metrics.host:metrics.port`, so
 * an operator can keep scrapes off the public API port. Resolves `undefined`
 * when no `metrics.port` is configured: then the main app serves `/metrics`.
 */
export async function startMetricsListener(
  options: StartMetricsListenerOptions,
): Promise<MetricsListener | undefined> {
  const { config, metrics, logger } = options;
  if (config.port === undefined) return undefined;
  const handle = createMetricsHandler(metrics, config, logger);
  const listener: RequestListener = (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/metrics" && (req.method === "GET" || req.method === "HEAD")) {
      handle(req, res);
      return;
    }
    sendError(req, res, new ServiceError("not_found", "Only GET /metrics is served here."), logger);
  };
  const server = createGuardedServer(listener, {
    // A few scrapers: a client holding many connections here is not one.
    limits: {
      ...options.limits,
      maxConnections: METRICS_MAX_CONNECTIONS,
      maxConnectionsPerIp: undefined,
    },
    onRefused: () => metrics.connectionsRefused.inc({ reason: "metrics_listener" }),
    logger,
  });
  const host = config.host ?? options.defaultHost;
  const { url } = await listenOn(server, config.port, host, {
    port: "metrics.port",
    host: "metrics.host",
  });
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
