import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import { createLineWriter, type LineWriter } from "../logging/line-writer.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { NOOP_SPAN, type Tracer } from "../tracing/tracer.js";
import type { RequestContext } from "./request-context.js";
import { requestIdOf } from "./request-id.js";
import { clientAddressOf, plainAddress } from "../net/client-address.js";
import type { TrustProxySetting } from "../net/trusted-proxies.js";

/** Dependencies of {@link createRequestObserver}. */
export interface RequestObserverDeps {
  metrics: Metrics;
  logger: Logger;
  tracer: Tracer;
  /** `logging.access`: one line per request. */
  accessLog: boolean;
  /** `server.trustProxy`: which peers' `X-Forwarded-For` gives the `client_ip`. */
  trustProxy?: TrustProxySetting;
}

/** A `User-Agent` as an access line shows it: cut to its first 200 characters. */
function userAgentOf(header: string | undefined): string | undefined {
  return header === undefined || header.length <= MAX_USER_AGENT
    ? header
    : header.slice(0, MAX_USER_AGENT);
}

/** Probes and scrapes: logged at `debug`, never traced. */
const PROBES = new Set(["/healthz", "/readyz", "/metrics"]);

/** The access line's fields, in the order {@link logAccess} gives their values. */
const ACCESS_FIELDS = [
  "req_id",
  "method",
  "route",
  "status",
  "duration_ms",
  "bytes_in",
  "bytes_out",
  "key_name",
  "group",
  "model",
  "channel",
  "upstream_status",
  "tries",
  "error_code",
  "aborted",
  "trace_id",
  "task_id",
  "client_ip",
  "user_agent",
] as const;

/** The access line's fields whose values come from a small set (see `LineWriterOptions`). */
const REPEATING_FIELDS = ["method", "route", "key_name", "group", "model", "channel", "client_ip"];

/** The longest `user_agent` an access line keeps. */
const MAX_USER_AGENT = 200;

/**
 * Bytes a socket had read and written when its last request ended (each
 * request's share), and its peer's address, read once per connection.
 */
const marks = new WeakMap<Socket, { read: number; written: number; peer?: string }>();

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
  // they skip pino's per-field work (see createLineWriter); the scrubbing of every written
  // line for the config's secrets still applies.
  const access: Observing = {
    ...deps,
    line: createLineWriter(deps.logger, ACCESS_FIELDS, { repeating: REPEATING_FIELDS }),
  };
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
      taskId: undefined,
      channel: undefined,
      upstreamStatus: undefined,
      tries: 0,
      errorCode: undefined,
      span:
        tracer.enabled && !probe
          ? tracer.startSpan(req.method ?? "HTTP", {
              kind: "server",
              // A hint, not an order: see `tracing.trustParent`.
              callerParent: headerOf(req.headers.traceparent),
              attributes: { "http.request.method": req.method },
            })
          : NOOP_SPAN,
      tracer,
    };
    res.setHeader("X-Request-Id", context.reqId);
    const started = performance.now();
    // "close" always comes, once, after "finish" when there is one (`on`: `once` costs a wrapper).
    res.on("close", () => finish(access, req, res, context, started, probe));
    return context;
  };
}

function headerOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** What {@link finish} needs: the deps, and the access lines' writer. */
interface Observing extends RequestObserverDeps {
  line: LineWriter;
}

/** The metrics, the access line and the server span of a request that is over. */
function finish(
  deps: Observing,
  req: IncomingMessage,
  res: ServerResponse,
  context: RequestContext,
  started: number,
  probe: boolean,
): void {
  const seconds = (performance.now() - started) / 1000;
  const route = context.route ?? "unmatched";
  const aborted = !res.writableFinished;
  const method = req.method ?? "";
  const status = aborted ? "aborted" : String(res.statusCode);
  deps.metrics.httpRequestSeries.get(route, method, status).inc();
  deps.metrics.httpDuration.series(route, method, status).observe(seconds);
  if (deps.accessLog) logAccess(deps, req, res, context, route, seconds, probe, aborted);
  const { span } = context;
  if (span !== NOOP_SPAN) {
    span.setName(`${req.method} ${route}`);
    span.setAttribute("http.route", route);
    span.setAttribute("http.response.status_code", res.headersSent ? res.statusCode : undefined);
    span.setAttribute("error.type", context.errorCode);
    if (res.statusCode >= 500 || aborted) span.setError(aborted ? "aborted" : "server error");
    span.end();
  }
}

/**
 * The access line: `msg: "request"` with what the request did. `status` is
 * the one sent, or 499 when the client left before any (as nginx logs it);
 * `bytes_in` / `bytes_out` count the request's and the answer's bytes on the
 * wire, headers included.
 */
function logAccess(
  deps: Observing,
  req: IncomingMessage,
  res: ServerResponse,
  context: RequestContext,
  route: string,
  seconds: number,
  probe: boolean,
  aborted: boolean,
): void {
  const { socket } = req;
  let mark = marks.get(socket);
  if (!mark) {
    mark = { read: 0, written: 0, peer: undefined };
    marks.set(socket, mark);
  }
  // Each a getter that adds up what the socket holds: read once.
  const read = socket.bytesRead;
  const written = socket.bytesWritten;
  const bytesIn = read - mark.read;
  const bytesOut = written - mark.written;
  mark.read = read;
  mark.written = written;
  const level = probe ? "debug" : "info";
  if (!deps.logger.isLevelEnabled(level)) return;
  deps.line(
    level,
    [
      context.reqId, // req_id
      req.method, // method
      route, // route
      res.headersSent ? res.statusCode : 499, // status
      Math.round(seconds * 10_000) / 10, // duration_ms
      bytesIn, // bytes_in
      bytesOut, // bytes_out
      context.keyName, // key_name
      context.group, // group
      context.model, // model
      context.channel, // channel
      context.upstreamStatus, // upstream_status
      context.tries === 0 ? undefined : context.tries, // tries
      context.errorCode, // error_code
      aborted ? true : undefined, // aborted
      context.span.traceId || undefined, // trace_id
      context.taskId, // task_id
      clientAddressOf(
        req,
        deps.trustProxy ?? false,
        (mark.peer ??= plainAddress(socket.remoteAddress)),
      ), // client_ip
      userAgentOf(req.headers["user-agent"]), // user_agent
    ],
    "request",
  );
}
