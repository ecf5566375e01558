import {
  Agent as HttpAgent,
  type ClientRequest,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { createProxyMiddleware, type Plugin } from "http-proxy-middleware";
import type { Logger } from "pino";
import type { Principal } from "../auth/principal.js";
import type { Channel } from "../channels/channel.js";
import type { ChannelRegistry } from "../channels/channel-registry.js";
import { AppError } from "../http/app-error.js";
import { getRawBody } from "../http/json-body.js";
import { requireJsonObject } from "../http/parse-body.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { ModelAccess } from "../models/model-access.js";
import { modelNotFound } from "../models/model-not-found.js";
import { HOP_BY_HOP_HEADERS, REQUEST_HEADERS_NOT_FORWARDED } from "./hop-by-hop-headers.js";
import { passOnChannelError } from "./pass-on-channel-error.js";

/** Which passthrough route, for metrics and the timeout to apply. */
export type PassthroughRoute = "chat_completions" | "images_generations";

/** One client request's walk through its candidate channels. */
interface ProxyAttempt {
  candidates: Channel[];
  index: number;
  body: Buffer;
  /** Hands an error to the one error path (headers not sent yet). */
  fail: (err: unknown) => void;
  upstream?: ClientRequest;
  sentAt: number;
  timedOut: boolean;
  clientGone: boolean;
}

/** A request with its parsed JSON body. */
export type ParsedRequest = IncomingMessage & { body?: unknown };

/**
 * Proxies one authenticated request with its parsed body; errors before the
 * response started go to `fail` (or are thrown), never written here.
 */
export type PassthroughHandler = (
  req: ParsedRequest,
  res: ServerResponse,
  principal: Principal,
  fail: (err: unknown) => void,
) => Promise<void>;

/** Dependencies of {@link createPassthroughHandler}. */
export interface PassthroughDeps {
  registry: ChannelRegistry;
  access: ModelAccess;
  metrics: Metrics;
  logger: Logger;
}

/**
 * The passthrough for chat and synchronous images: the body's `model` picks
 * the channels, the client's credentials are replaced by the channel's key,
 * and the channel's response is piped back as it arrives (never buffered, so
 * SSE reaches the client chunk by chunk). A channel that fails to connect or
 * answers 5xx before anything went to the client is skipped for the next one;
 * a timeout is not retried, since the channel may still be working (and
 * billing) on it.
 */
export function createPassthroughHandler(
  route: PassthroughRoute,
  deps: PassthroughDeps,
): PassthroughHandler {
  const attempts = new WeakMap<IncomingMessage, ProxyAttempt>();
  const current = (req: IncomingMessage) => attempts.get(req) as ProxyAttempt;
  const channelOf = (attempt: ProxyAttempt) => attempt.candidates[attempt.index] as Channel;

  const retryOrFail = (attempt: ProxyAttempt, req: IncomingMessage, res: ServerResponse) => {
    if (attempt.index + 1 < attempt.candidates.length) {
      attempt.index += 1;
      void proxy(req, res, attempt.fail);
      return;
    }
    attempt.fail(new AppError("upstream_unavailable", "No upstream channel could be reached."));
  };

  const events: Plugin = (proxyServer) => {
    proxyServer.on("proxyReq", (proxyReq, req, res) => {
      const attempt = current(req);
      const channel = channelOf(attempt);
      attempt.upstream = proxyReq;
      attempt.sentAt = performance.now();
      attempt.timedOut = false;
      if (channel.apiKey) proxyReq.setHeader("authorization", `Bearer ${channel.apiKey}`);
      proxyReq.setHeader("content-type", "application/json");
      proxyReq.setHeader("content-length", attempt.body.length);
      proxyReq.write(attempt.body);
      const timeoutMs = route === "chat_completions" ? channel.timeoutMs : channel.imageTimeoutMs;
      // An idle timeout: a stream that keeps sending is never cut, a silent channel is.
      proxyReq.setTimeout(timeoutMs, () => {
        attempt.timedOut = true;
        proxyReq.destroy(new Error("upstream timeout"));
      });
      if (res.writableEnded || attempt.clientGone) proxyReq.destroy();
    });

    proxyServer.on("proxyRes", (proxyRes, req, res) => {
      const attempt = current(req);
      const channel = channelOf(attempt);
      const status = proxyRes.statusCode ?? 502;
      deps.metrics.upstreamRequests.inc({ channel: channel.name, route, outcome: String(status) });
      deps.metrics.upstreamDuration.observe(
        { channel: channel.name, route },
        (performance.now() - attempt.sentAt) / 1000,
      );
      if (status >= 500 && attempt.index + 1 < attempt.candidates.length && !res.headersSent) {
        deps.logger.warn(
          { channel: channel.name, status },
          "channel answered 5xx; trying the next",
        );
        proxyRes.resume();
        retryOrFail(attempt, req, res);
        return;
      }
      if (status >= 400) {
        passOnChannelError(proxyRes, res, channel, {
          logger: deps.logger,
          fail: attempt.fail,
          clientGone: () => attempt.clientGone,
        });
        return;
      }
      res.statusCode = status;
      for (const [name, value] of Object.entries(proxyRes.headers)) {
        if (value !== undefined && !HOP_BY_HOP_HEADERS.has(name)) res.setHeader(name, value);
      }
      // An event stream's headers go out at once; other answers leave with their body,
      // in one write, as a bare pipe does.
      if (String(proxyRes.headers["content-type"]).startsWith("text/event-stream")) {
        res.flushHeaders();
      }
      proxyRes.on("error", () => res.destroy());
      proxyRes.on("aborted", () => res.destroy());
      proxyRes.pipe(res);
    });

    proxyServer.on("error", (err, req, res) => {
      const attempt = attempts.get(req);
      if (!attempt || attempt.clientGone) return;
      const channel = channelOf(attempt);
      const outcome = attempt.timedOut ? "timeout" : "error";
      deps.metrics.upstreamRequests.inc({ channel: channel.name, route, outcome });
      const response = res as ServerResponse;
      if (response.headersSent) {
        // The stream was already under way: the client must see it cut, not completed.
        response.destroy();
        return;
      }
      deps.logger.warn({ channel: channel.name, err: err.message, outcome }, "channel call failed");
      if (attempt.timedOut) {
        attempt.fail(
          new AppError("upstream_timeout", "The upstream channel did not answer in time."),
        );
        return;
      }
      retryOrFail(attempt, req, response);
    });
  };

  // http-proxy opens a new connection per request unless given an agent: keep-alive
  // agents (one per protocol, as Node requires) make the proxy cost about a bare pipe.
  const proxyFor = (agent: HttpAgent) =>
    createProxyMiddleware({
      router: (req) => channelOf(current(req)).baseUrl,
      changeOrigin: true,
      selfHandleResponse: true,
      ejectPlugins: true,
      plugins: [events],
      agent,
    });
  const httpProxy = proxyFor(new HttpAgent({ keepAlive: true }));
  const httpsProxy = proxyFor(new HttpsAgent({ keepAlive: true }));
  const proxy = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) =>
    channelOf(current(req)).baseUrl.startsWith("https:")
      ? httpsProxy(req, res, next)
      : httpProxy(req, res, next);

  return async (req, res, principal, fail) => {
    const body = requireJsonObject(req.body);
    const model = body.model;
    if (model === undefined || model === null || model === "") {
      throw new AppError("missing_required_parameter", "Missing required parameter: 'model'.", {
        param: "model",
      });
    }
    if (typeof model !== "string") {
      throw new AppError("invalid_value", "'model' must be a string.", { param: "model" });
    }
    const candidates = deps.access.candidates(principal, model);
    if (candidates.length === 0) throw modelNotFound(model);

    const attempt: ProxyAttempt = {
      candidates,
      index: 0,
      // A body that passed requireJsonObject was parsed from these bytes.
      body: getRawBody(req) as Buffer,
      fail,
      sentAt: 0,
      timedOut: false,
      clientGone: false,
    };
    attempts.set(req, attempt);
    res.on("close", () => {
      if (!res.writableFinished) {
        attempt.clientGone = true;
        attempt.upstream?.destroy();
      }
    });
    // The channel's base already ends in its own /v1.
    req.url = (req.url ?? "").replace(/^\/v1(?=\/)/, "");
    // http-proxy copies req.headers: drop what must not reach the channel before it does.
    for (const header of REQUEST_HEADERS_NOT_FORWARDED) delete req.headers[header];
    await proxy(req, res, fail);
  };
}
