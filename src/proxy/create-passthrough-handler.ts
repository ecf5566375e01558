import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Principal } from "../auth/principal.js";
import type { Channel } from "../channels/channel.js";
import type { ChannelRegistry } from "../channels/channel-registry.js";
import { AppError } from "../http/app-error.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { ModelAccess } from "../models/model-access.js";
import { createChannelRequester } from "./channel-request.js";
import { upstreamAuthorization } from "./channel-selection.js";
import { deliverAnswer, type AnswerContext } from "./deliver-answer.js";
import type { FormBody } from "./form/form-upload.js";
import { forwardedRequestHeaders } from "./forwarded-headers.js";
import { createKeyScrubber, type KeyScrubber } from "./key-scrubber.js";
import { passOnChannelError } from "./pass-on-channel-error.js";
import type { RouteMatch } from "./passthrough-routes.js";
import { createRequestPreparer } from "./prepare-request.js";
import type { ProxyAttempt } from "./proxy-attempt.js";
import type { ResponseOwners } from "./response-owners.js";
import type { TokenUsage } from "./token-usage.js";

/** Dependencies of {@link createPassthrough}. */
export interface PassthroughDeps {
  registry: ChannelRegistry;
  access: ModelAccess;
  metrics: Metrics;
  logger: Logger;
  responseOwners: ResponseOwners;
  limits: {
    /** `server.maxBodyBytes` */
    maxBodyBytes: number;
    /** `server.maxUploadBytes` */
    maxUploadBytes: number;
    /** `server.bodyTimeoutSec`, in ms */
    bodyTimeoutMs: number;
    /** `server.bodyIdleSec`, in ms */
    bodyIdleMs: number;
    /** `server.maxResponseBytes` */
    maxResponseBytes: number;
  };
}

/**
 * Serves one authenticated passthrough request. Errors before the answer
 * started go to `fail` (or are thrown), never written here.
 */
export type Passthrough = (
  match: RouteMatch,
  req: IncomingMessage,
  res: ServerResponse,
  principal: Principal,
  fail: (err: unknown) => void,
) => Promise<void>;

/**
 * The passthrough for every OpenAI route that names a model (and the routes
 * on a response the service recorded): the body's `model` picks the
 * channels, the key's group must allow it, the client's credentials are
 * replaced by the channel's key and its headers cut to an allow-list, and
 * the answer comes back checked (JSON) or as it arrives (streams). A channel
 * that cannot be reached, answers 5xx or a redirect, or sends a broken JSON
 * answer is skipped for the next one while nothing went to the client; a
 * timeout is not retried, since the channel may still be working (and
 * billing) on it.
 */
export function createPassthrough(deps: PassthroughDeps): Passthrough {
  const { limits, metrics, logger } = deps;
  const prepare = createRequestPreparer(deps);
  const channelOf = (attempt: ProxyAttempt) => attempt.candidates[attempt.index] as Channel;
  const scrubbers = new Map<Channel, KeyScrubber>();
  const scrubberOf = (channel: Channel) => {
    let scrubber = scrubbers.get(channel);
    if (scrubber) return scrubber;
    scrubber = createKeyScrubber(channel.apiKey);
    // Configured channels are few and kept; a forward key's channel is a copy made for one
    // call (bound to that key), so caching it would grow with every request.
    if (deps.registry.channels.includes(channel)) scrubbers.set(channel, scrubber);
    return scrubber;
  };

  const canFailOver = (attempt: ProxyAttempt, res: ServerResponse) =>
    attempt.index + 1 < attempt.candidates.length &&
    !res.headersSent &&
    !(attempt.form?.started ?? false);

  const retryOrFail = (attempt: ProxyAttempt, res: ServerResponse, err: AppError) => {
    if (!canFailOver(attempt, res)) {
      attempt.fail(err);
      return;
    }
    attempt.index += 1;
    launch(attempt, res);
  };

  const recordUsage = (attempt: ProxyAttempt, channel: Channel, usage: TokenUsage) => {
    if (!attempt.route.countsUsage) return;
    const { model } = attempt;
    // Bounded: a made-up id that only matches a channel's glob is not a label; a forward
    // key's model is one its gateway listed.
    const listed =
      model !== undefined &&
      (deps.registry.lists(channel, model) ||
        (attempt.principal.upstream?.models.ids.has(model) ?? false));
    const label = listed ? (model as string) : "other";
    const group = attempt.principal.group;
    const tokens = metrics.tokenSeries;
    if (usage.input > 0) tokens.get(channel.name, label, group, "input").inc(usage.input);
    if (usage.output > 0) tokens.get(channel.name, label, group, "output").inc(usage.output);
  };

  const remember = (attempt: ProxyAttempt, channel: Channel, id: unknown): Promise<void> => {
    if (typeof id !== "string") return Promise.resolve();
    return deps.responseOwners
      .remember(id, { channel: channel.name, owner: attempt.principal.subject })
      .catch((err: unknown) => logger.warn({ err }, "could not record a response's owner"));
  };

  const answerContext = (
    attempt: ProxyAttempt,
    res: ServerResponse,
    channel: Channel,
  ): AnswerContext => {
    const { route } = attempt;
    return {
      scrubber: scrubberOf(channel),
      maxBytes: limits.maxResponseBytes,
      onUsage: (usage) => recordUsage(attempt, channel, usage),
      onAnswer: route.createsResponse
        ? (answer) => remember(attempt, channel, (answer as { id?: unknown } | null)?.id)
        : route.name === "responses_delete" && attempt.responseId !== undefined
          ? () => void deps.responseOwners.forget(attempt.responseId as string).catch(() => {})
          : undefined,
      onEvent: route.createsResponse
        ? (event) => {
            const id = (event as { response?: { id?: unknown } } | null)?.response?.id;
            if (typeof id !== "string") return false;
            void remember(attempt, channel, id);
            return true;
          }
        : undefined,
      broken: (reason) => {
        logger.warn({ channel: channel.name, reason }, "channel sent a broken answer");
        retryOrFail(
          attempt,
          res,
          new AppError("invalid_response", "The upstream channel sent a broken answer."),
        );
      },
      timedOut: () => attempt.timedOut,
      fail: attempt.fail,
      clientGone: () => attempt.clientGone,
    };
  };

  /** The channel's answer headers arrived: skip it, pass its error on, or deliver it. */
  const onResponse = (attempt: ProxyAttempt, res: ServerResponse, proxyRes: IncomingMessage) => {
    const channel = channelOf(attempt);
    attempt.responded = true;
    const status = proxyRes.statusCode ?? 502;
    const route = attempt.route.name;
    metrics.upstreamRequestSeries.get(channel.name, route, String(status)).inc();
    metrics.upstreamDuration.observe(
      { channel: channel.name, route },
      (performance.now() - attempt.sentAt) / 1000,
    );
    if (status >= 300 && status < 400) {
      // Never followed and never handed on: a client re-sending its prompt to a
      // channel's redirect target would leave the service's control.
      proxyRes.resume();
      logger.warn({ channel: channel.name, status }, "channel answered a redirect");
      retryOrFail(
        attempt,
        res,
        new AppError(
          "invalid_response",
          `The upstream channel answered a redirect (HTTP ${status}).`,
        ),
      );
      return;
    }
    if (status >= 500 && canFailOver(attempt, res)) {
      logger.warn({ channel: channel.name, status }, "channel answered 5xx; trying the next");
      proxyRes.resume();
      attempt.index += 1;
      launch(attempt, res);
      return;
    }
    if (status >= 400) {
      passOnChannelError(proxyRes, res, channel, {
        logger,
        scrubber: scrubberOf(channel),
        fail: attempt.fail,
        clientGone: () => attempt.clientGone,
      });
      return;
    }
    deliverAnswer(proxyRes, res, answerContext(attempt, res, channel));
  };

  /** The call failed before its answer (or the form feeding it was refused). */
  const onError = (attempt: ProxyAttempt, res: ServerResponse, err: Error) => {
    // After the whole answer went out, what breaks (the form's request closing) is nobody's.
    if (attempt.clientGone || attempt.refused || res.writableEnded) return;
    if (err instanceof AppError) {
      // The rest of the form was refused: the channel must never get a complete body.
      attempt.refused = true;
      attempt.upstream?.destroy();
      attempt.fail(err);
      return;
    }
    if (attempt.responded) return;
    const channel = channelOf(attempt);
    const outcome = attempt.timedOut ? "timeout" : "error";
    metrics.upstreamRequestSeries.get(channel.name, attempt.route.name, outcome).inc();
    if (res.headersSent) {
      // The answer was already under way: the client must see it cut, not completed.
      res.destroy();
      return;
    }
    logger.warn({ channel: channel.name, err: err.message, outcome }, "channel call failed");
    // A form that broke on this side leaves its call open: end it before the next.
    attempt.upstream?.destroy();
    if (attempt.timedOut) {
      attempt.fail(
        new AppError("upstream_timeout", "The upstream channel did not answer in time."),
      );
      return;
    }
    // A pooled connection the channel closed meanwhile: the request never reached it.
    if (
      attempt.upstream?.reusedSocket &&
      (err as NodeJS.ErrnoException).code === "ECONNRESET" &&
      !attempt.staleRetried &&
      !attempt.form
    ) {
      attempt.staleRetried = true;
      launch(attempt, res);
      return;
    }
    retryOrFail(
      attempt,
      res,
      new AppError("upstream_unavailable", "No upstream channel could be reached."),
    );
  };

  const send = createChannelRequester();

  /** Sends the request to the current candidate. */
  function launch(attempt: ProxyAttempt, res: ServerResponse): void {
    try {
      call(attempt, res);
    } catch (err) {
      attempt.fail(err);
    }
  }

  function call(attempt: ProxyAttempt, res: ServerResponse): void {
    attempt.responded = false;
    attempt.timedOut = false;
    const channel = channelOf(attempt);
    // A fresh object per call: the requester adds Host, and a retry must not inherit this one's.
    const headers: OutgoingHttpHeaders = { ...attempt.headers };
    const authorization = upstreamAuthorization(channel, attempt.principal);
    if (authorization) headers.authorization = authorization;
    // Answers are scrubbed of the key, so they must arrive readable.
    headers["accept-encoding"] = "identity";
    let form: FormBody | undefined;
    if (attempt.body) {
      headers["content-type"] = "application/json";
      headers["content-length"] = attempt.body.length;
    } else if (attempt.form) {
      form = attempt.form.body();
      attempt.formBody = form;
      headers["content-type"] = attempt.form.contentType;
      if (attempt.form.contentLength !== undefined) {
        headers["content-length"] = attempt.form.contentLength;
      }
    } else if (attempt.method !== "GET") {
      headers["content-length"] = 0;
    }
    const upstream = send({
      baseUrl: channel.baseUrl,
      path: attempt.path,
      method: attempt.method,
      headers,
      fresh: form !== undefined,
      timeoutMs: attempt.route.timeout === "image" ? channel.imageTimeoutMs : channel.timeoutMs,
      onTimeout: () => {
        if (attempt.upstream === upstream) attempt.timedOut = true;
      },
    });
    attempt.upstream = upstream;
    attempt.sentAt = performance.now();
    // Events of a call already given up (skipped, retried) are not this try's.
    upstream.on("response", (proxyRes: IncomingMessage) => {
      if (attempt.upstream === upstream) onResponse(attempt, res, proxyRes);
      else proxyRes.resume();
    });
    upstream.on("error", (err) => {
      if (attempt.upstream === upstream) onError(attempt, res, err);
    });
    if (!form) {
      upstream.end(attempt.body);
      return;
    }
    const body = form;
    body.once("error", (err) => {
      if (attempt.upstream === upstream) onError(attempt, res, err);
    });
    body.pipe(upstream);
    // Nothing of the form leaves before the connection is up: until then another
    // channel can still get all of it.
    upstream.once("socket", (socket) => {
      if ("encrypted" in socket) socket.once("secureConnect", () => body.start());
      else if (socket.connecting) socket.once("connect", () => body.start());
      else body.start();
    });
  }

  return async (match, req, res, principal, fail) => {
    const { route } = match;
    const attempt: ProxyAttempt = {
      route,
      principal,
      responseId: match.responseId,
      candidates: [],
      index: 0,
      method: req.method ?? "POST",
      // The channel's base already ends in its own /v1; only stored-response routes take a query.
      path:
        route.body === "none"
          ? (req.url ?? "").slice("/v1".length)
          : route.template.slice("/v1".length),
      headers: forwardedRequestHeaders(req.headers),
      fail,
      sentAt: 0,
      timedOut: false,
      responded: false,
      clientGone: false,
      staleRetried: false,
      refused: false,
    };
    res.once("close", () => {
      if (!res.writableFinished) {
        attempt.clientGone = true;
        attempt.upstream?.destroy();
        attempt.formBody?.destroy();
      }
      attempt.form?.dispose();
    });
    await prepare(attempt, req);
    if (attempt.clientGone) return;
    launch(attempt, res);
  };
}
