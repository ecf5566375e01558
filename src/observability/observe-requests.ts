import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { Metrics } from "../metrics/create-metrics.js";
import { NOOP_SPAN, type Tracer } from "../tracing/tracer.js";
import { bindContext, type RequestContext } from "./request-context.js";
import { requestIdOf } from "./request-id.js";

/** Dependencies of {@link createRequestObserver}. */
export interface RequestObserverDeps {
  metrics: Metrics;
  logger: Logger;
  tracer: Tracer;
  /** `logging.access`: one line per request. */
  accessLog: boolean;
}

/** Probes and scrapes: logged at `debug`, never traced. */
const PROBES = new Set(["/healthz", "/readyz", "/metrics"]);

/** Bytes a socket had read and written when its last request ended: each request's share. */
const marks = new WeakMap<Socket, { read: number; written: number }>();

/**
 * The edge of every request: its context (see {@link RequestContext}), its
 * `X-Request-Id` answered on every response, its server span, and once the
 * answer ended or the client left, its metrics and its access line. Costs a
 * context, a header and a listener per request; the line is formatted only
 * when `logging.access` is on and its level is enabled.
 */
export function createRequestObserver(
  deps: RequestObserverDeps,
): (req: IncomingMessage, res: ServerResponse) => RequestContext {
  const { tracer } = deps;
  // Access lines hold only fields the service fills in itself (never a header or a body), so
  // they skip the field redaction, which costs more than the rest of a line; the scrubbing of
  // every written line for the config's secrets still applies.
  const access: RequestObserverDeps = { ...deps, logger: deps.logger.child({}, { redact: [] }) };
  return (req, res) => {
    const url = req.url ?? "";
    const mark = url.indexOf("?");
    const probe = PROBES.has(mark === -1 ? url : url.slice(0, mark));
    const context: RequestContext = {
      reqId: requestIdOf(req.headers["x-request-id"]),
      route: undefined,
      keyName: undefined,
      group: undefined,
      model: undefined,
      channel: undefined,
      upstreamStatus: undefined,
      tries: 0,
      errorCode: undefined,
      span:
        tracer.enabled && !probe
          ? tracer.startSpan(req.method ?? "HTTP", {
              kind: "server",
              parent: headerOf(req.headers.traceparent),
              attributes: { "http.request.method": req.method },
            })
          : NOOP_SPAN,
      tracer,
    };
    res.setHeader("X-Request-Id", context.reqId);
    bindContext(res, context);
    const started = performance.now();
    // "close" always comes, after "finish" when there is one.
    res.once("close", () => finish(access, req, res, context, started, probe));
    return context;
  };
}

function headerOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The route Express matched, for the requests no lane took. */
function expressRoute(req: IncomingMessage): string | undefined {
  const { route, baseUrl } = req as { route?: { path?: unknown }; baseUrl?: string };
  if (typeof route?.path !== "string") return undefined;
  if (!baseUrl) return route.path;
  return route.path === "/" ? baseUrl : baseUrl + route.path;
}

/** The metrics, the access line and the server span of a request that is over. */
function finish(
  deps: RequestObserverDeps,
  req: IncomingMessage,
  res: ServerResponse,
  context: RequestContext,
  started: number,
  probe: boolean,
): void {
  const seconds = (performance.now() - started) / 1000;
  const route = context.route ?? expressRoute(req) ?? "unmatched";
  const aborted = !res.writableFinished;
  const series = deps.metrics.httpRequestSeries.get(
    route,
    req.method ?? "",
    aborted ? "aborted" : String(res.statusCode),
  );
  series.inc();
  // The series' labels are the histogram's too: no labels object per request.
  deps.metrics.httpDuration.observe(series.labels, seconds);
  if (deps.accessLog) logAccess(deps.logger, req, res, context, route, seconds, probe, aborted);
  if (context.span !== NOOP_SPAN) {
    context.span.setName(`${req.method} ${route}`);
    context.span.setAttributes({
      "http.route": route,
      "http.response.status_code": res.headersSent ? res.statusCode : undefined,
      "error.type": context.errorCode,
    });
    if (res.statusCode >= 500 || aborted)
      context.span.setError(aborted ? "aborted" : "server error");
    context.span.end();
  }
}

/**
 * The access line: `msg: "request"` with what the request did. `status` is
 * the one sent, or 499 when the client left before any (as nginx logs it);
 * `bytes_in` / `bytes_out` count the request's and the answer's bytes on the
 * wire, headers included.
 */
function logAccess(
  logger: Logger,
  req: IncomingMessage,
  res: ServerResponse,
  context: RequestContext,
  route: string,
  seconds: number,
  probe: boolean,
  aborted: boolean,
): void {
  const { socket } = req;
  const before = marks.get(socket) ?? { read: 0, written: 0 };
  const now = { read: socket.bytesRead, written: socket.bytesWritten };
  marks.set(socket, now);
  const level = probe ? "debug" : "info";
  if (!logger.isLevelEnabled(level)) return;
  logger[level](
    {
      req_id: context.reqId,
      method: req.method,
      route,
      status: res.headersSent ? res.statusCode : 499,
      duration_ms: Math.round(seconds * 10_000) / 10,
      bytes_in: now.read - before.read,
      bytes_out: now.written - before.written,
      key_name: context.keyName,
      group: context.group,
      model: context.model,
      channel: context.channel,
      upstream_status: context.upstreamStatus,
      tries: context.tries === 0 ? undefined : context.tries,
      error_code: context.errorCode,
      aborted: aborted ? true : undefined,
      trace_id: context.span.traceId || undefined,
    },
    "request",
  );
}
