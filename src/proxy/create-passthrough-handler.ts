import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import { keyLabelOf, type Principal } from "../auth/principal.js";
import type { Channel } from "../channels/channel.js";
import type { ChannelAnswer } from "../channels/channel-answer.js";
import type { CallSignal, ChannelClient } from "../channels/channel-client.js";
import { ChannelError } from "../channels/channel-error.js";
import type { ChannelRegistry } from "../channels/channel-registry.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { countTokens } from "../metrics/token-counts.js";
import { createCallObserver } from "../observability/create-call-observer.js";
import type { RequestContext } from "../observability/request-context.js";
import type { ModelAccess } from "../models/model-access.js";
import { deliverAnswer, type AnswerContext } from "./deliver-answer.js";
import { forwardedRequestHeaders } from "./forwarded-headers.js";
import { forwardedQuery } from "./forwarded-query.js";
import { passOnChannelError, type ChannelErrorContext } from "./pass-on-channel-error.js";
import type { PassthroughRequest } from "./passthrough-request.js";
import type { RouteMatch } from "./passthrough-routes.js";
import { createRequestPreparer } from "./prepare-request.js";
import type { BackgroundResponses, ResponseRouteName } from "./background-responses.js";
import type { ResponseOwners } from "./response-owners.js";
import { formStreamImageCount } from "./stream-image-count.js";
import type { TokenUsage } from "./token-usage.js";

/** Dependencies of {@link createPassthrough}. */
export interface PassthroughDeps {
  /** Makes every call to a channel: pools, credential, timeouts, failover. */
  client: ChannelClient;
  registry: ChannelRegistry;
  access: ModelAccess;
  metrics: Metrics;
  logger: Logger;
  responseOwners: ResponseOwners;
  /**
   * The service's own background responses (`background: true` on channels
   * that do not run it, and the routes on the responses it made).
   */
  background?: BackgroundResponses | undefined;
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
  context: RequestContext,
) => Promise<void>;

/** Why a call is aborted when its client went away. */
const CLIENT_GONE = new Error("the client went away");

/**
 * The passthrough for every OpenAI route that names a model (and the routes
 * on a response the service recorded): the body's `model` picks the
 * channels, the key's group must allow it, and the channel client sends it
 * with the channel's key (or a forward key) under its failover rule. What is
 * the passthrough's own: the client's headers cut to an allow-list, the query
 * string passed on, the answer written back (checked JSON, or streamed as it
 * arrives), token usage counted, Responses API owners recorded.
 */
export function createPassthrough(deps: PassthroughDeps): Passthrough {
  const s: PassthroughState = {
    deps,
    metrics: deps.metrics,
    logger: deps.logger,
    prepare: createRequestPreparer(deps),
  };
  return (match, req, res, principal, fail, context) =>
    serve(s, match, req, res, principal, fail, context);
}

/** What the passthrough's steps share. */
interface PassthroughState {
  deps: PassthroughDeps;
  metrics: Metrics;
  logger: Logger;
  prepare: ReturnType<typeof createRequestPreparer>;
}

/** One request: prepared, sent through the channel client, its answer written back. */
async function serve(
  s: PassthroughState,
  match: RouteMatch,
  req: IncomingMessage,
  res: ServerResponse,
  principal: Principal,
  fail: (err: unknown) => void,
  context: RequestContext,
): Promise<void> {
  const { route } = match;
  const { background } = s.deps;
  if (background && match.responseId !== undefined) {
    // A response the service made is its own to answer; any other, its channel's.
    const call = callOf(req, res, principal, context);
    if (await background.serve(route.name as ResponseRouteName, match.responseId, call)) return;
  }
  const headers = forwardedRequestHeaders(req.headers);
  // The channel logs the request under the same id as the service.
  headers["x-request-id"] = context.reqId;
  const request: PassthroughRequest = {
    route,
    principal,
    responseId: match.responseId,
    candidates: [],
    method: req.method as PassthroughRequest["method"],
    path: pathOf(match, req.url ?? ""),
    headers,
  };
  const call = new PassthroughCall(s, request, context);
  // "close" comes once (`on`: `once` costs a wrapper).
  res.on("close", () => {
    if (!res.writableFinished) call.abort(CLIENT_GONE);
    request.form?.dispose();
  });
  // Most bodies are at hand already: no promise to wait on then.
  const prepared = s.prepare(request, req);
  if (prepared !== undefined) await prepared;
  context.model = request.model;
  if (background && request.background) {
    // Background mode: the channel's own where the channel that would serve it has it.
    if (!request.candidates[0]?.nativeBackground) {
      await background.create({
        ...callOf(req, res, principal, context),
        ...request.background,
        model: request.model as string,
      });
      return;
    }
    request.candidates = request.candidates.filter((channel) => channel.nativeBackground);
  }
  if (call.aborted) {
    request.form?.dispose();
    return;
  }
  let answer: ChannelAnswer;
  try {
    answer = await s.deps.client.send(request.candidates, {
      route: route.name,
      method: request.method,
      path: request.path,
      headers: request.headers,
      body: request.body ?? request.form,
      timeout: route.timeout,
      signal: call,
      observer: createCallObserver({
        report: context,
        operation: route.operation,
        model: request.model,
        modelLabel: modelLabel(s.deps, request, request.candidates),
        parent: context.span,
        tracer: context.tracer,
        metrics: s.metrics,
      }),
    });
  } catch (err) {
    if (!call.aborted) fail(err);
    return;
  }
  if (call.aborted) answer.discard();
  else call.answerWith(answer, res, fail);
}

/**
 * One passthrough request once prepared: the abort signal of its channel
 * call (the client went away), and what its answer reports to (the
 * channel's error, or its answer: usage counted, Responses API owners
 * kept). One object instead of a closure per callback on every request.
 */
class PassthroughCall implements CallSignal, AnswerContext, ChannelErrorContext {
  aborted = false;
  reason: unknown;
  readonly maxBytes: number;
  readonly logger: Logger;
  onAnswer?: AnswerContext["onAnswer"];
  onEvent?: AnswerContext["onEvent"];
  /** The abort listener of the try in flight; any more in `others`. */
  private listener: (() => void) | undefined;
  private others: Array<() => void> | undefined;
  private answer: ChannelAnswer | undefined;
  private failer: ((err: unknown) => void) | undefined;

  constructor(
    private readonly s: PassthroughState,
    private readonly request: PassthroughRequest,
    private readonly context: RequestContext,
  ) {
    this.maxBytes = s.deps.limits.maxResponseBytes;
    this.logger = s.logger;
  }

  addEventListener(_type: "abort", listener: () => void): void {
    if (this.listener === undefined) this.listener = listener;
    else (this.others ??= []).push(listener);
  }

  removeEventListener(_type: "abort", listener: () => void): void {
    if (this.listener === listener) {
      this.listener = this.others?.shift();
      return;
    }
    const at = this.others?.indexOf(listener) ?? -1;
    if (at !== -1) this.others?.splice(at, 1);
  }

  /** The client went away: the call in flight is aborted. */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const { listener, others } = this;
    this.listener = undefined;
    this.others = undefined;
    listener?.();
    if (others) for (const other of others) other();
  }

  clientGone(): boolean {
    return this.aborted;
  }

  streamImages(): number | undefined {
    const { route, form, images } = this.request;
    if (!route.streamsImages) return undefined;
    return form ? formStreamImageCount(form.nField()) : images;
  }

  /** Writes the answer that ended the call: the channel's error, or its answer. */
  answerWith(answer: ChannelAnswer, res: ServerResponse, fail: (err: unknown) => void): void {
    this.answer = answer;
    this.failer = fail;
    if (answer.status >= 400) {
      passOnChannelError(answer, res, this);
      return;
    }
    const { s, request } = this;
    const { route } = request;
    const { channel } = answer;
    if (route.createsResponse) {
      this.onAnswer = (parsed) =>
        remember(s, request, channel, (parsed as { id?: unknown } | null)?.id);
      this.onEvent = (event) => {
        const id = (event as { response?: { id?: unknown } } | null)?.response?.id;
        if (typeof id !== "string") return false;
        void remember(s, request, channel, id);
        return true;
      };
    } else if (route.name === "responses_delete" && request.responseId !== undefined) {
      const id = request.responseId;
      this.onAnswer = () => void s.deps.responseOwners.forget(id).catch(() => {});
    }
    deliverAnswer(answer, res, this);
  }

  /** An error to answer with (nothing was sent yet); a broken answer is logged. */
  fail(err: unknown): void {
    if (err instanceof ChannelError) {
      this.logger.warn(
        { channel: err.channel, reason: err.reason },
        "channel sent a broken answer",
      );
    }
    this.failer?.(err);
  }

  /** The channel's own code (or type) goes in the access line, as ours would. */
  onCode(code: string): void {
    this.context.errorCode = code;
  }

  onUsage(usage: TokenUsage): void {
    const answer = this.answer as ChannelAnswer;
    answer.observer?.usage?.(usage, usage.model);
    recordUsage(this.s, this.request, answer.channel, usage);
  }
}

function recordUsage(
  { deps, metrics }: PassthroughState,
  request: PassthroughRequest,
  channel: Channel,
  usage: TokenUsage,
): void {
  if (!request.route.countsUsage) return;
  const { principal } = request;
  countTokens(
    metrics,
    {
      channel: channel.name,
      model: modelLabel(deps, request, channel),
      group: principal.group,
      key: keyLabelOf(principal),
    },
    usage,
  );
}

/**
 * The request's model as a metric label: bounded, since a made-up id that only
 * matches a channel's glob is not a label; a forward key's model is one its
 * gateway listed. Else `other`.
 */
function modelLabel(
  deps: PassthroughDeps,
  request: PassthroughRequest,
  channels: Channel | readonly Channel[],
): string {
  const { model } = request;
  if (model === undefined) return "other";
  let listed = false;
  if (!Array.isArray(channels)) listed = deps.registry.lists(channels as Channel, model);
  else {
    for (let i = 0; i < channels.length && !listed; i += 1) {
      listed = deps.registry.lists(channels[i] as Channel, model);
    }
  }
  listed ||= request.principal.upstream?.models.ids.has(model) ?? false;
  return listed ? model : "other";
}

function remember(
  { deps, logger }: PassthroughState,
  request: PassthroughRequest,
  channel: Channel,
  id: unknown,
): Promise<void> {
  if (typeof id !== "string") return Promise.resolve();
  return deps.responseOwners
    .remember(id, { channel: channel.name, owner: request.principal.subject })
    .catch((err: unknown) => logger.warn({ err }, "could not record a response's owner"));
}

/**
 * Path and query after the channel's `/v1` base: the route's own path (a
 * trailing slash the client added is not sent on), or for the routes on a
 * stored response the path as the client sent it, and the client's query
 * string (see {@link forwardedQuery}).
 */
function pathOf(match: RouteMatch, url: string): string {
  const query = url.indexOf("?");
  const path =
    match.route.body === "none"
      ? (query === -1 ? url : url.slice(0, query)).slice("/v1".length)
      : match.route.template.slice("/v1".length);
  return query === -1 ? path : path + forwardedQuery(url.slice(query));
}

/**
 * The request as the service's own background responses take it: made only
 * for them, not for every passthrough request.
 */
function callOf(
  req: IncomingMessage,
  res: ServerResponse,
  principal: Principal,
  context: RequestContext,
) {
  return { req, res, principal, context, query: queryOf(req.url ?? "") };
}

/** The query string of a request URL, without its `?`. */
function queryOf(url: string): string {
  const mark = url.indexOf("?");
  return mark === -1 ? "" : url.slice(mark + 1);
}
