import { Readable } from "node:stream";
import type { Logger } from "pino";
import type { Dispatcher } from "undici";
import { ServiceError } from "../errors/service-error.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { Channel } from "./channel.js";
import { BufferedAnswer, type ChannelAnswer } from "./channel-answer.js";
import { readJsonDocument } from "./read-json-document.js";
import {
  type ChannelError,
  closedWithoutAnswer,
  noAnswerInTime,
  redirected,
  unreachable,
} from "./channel-error.js";
import type { CallObserver } from "./call-observer.js";
import { createChannelPools, type ChannelPools } from "./channel-pools.js";
import { createDownloadAgents, type DownloadAgents } from "./download-agents.js";
import { ChannelTry, type TryOutcome } from "./channel-try.js";
import { mayTryNext, type TryStage } from "./failover-policy.js";
import { createKeyScrubber, type KeyScrubber } from "./key-scrubber.js";

/** A body streamed to the channel (a multipart form as it arrives from its client). */
export interface ChannelBodySource {
  /**
   * The whole body for one try, as a stream nothing is read from before
   * the connection to the channel exists.
   */
  open(): Readable;
  /** Whether a new try may open it again (a form that began to go out cannot). */
  canReopen(): boolean;
  /** Its length when known: the channel gets the same framing the client sent. */
  readonly contentLength?: number;
}

/**
 * What aborts a call: an `AbortSignal` (a task's), or anything shaped like
 * one (the passthrough's own, one per request, lighter than an
 * `AbortController`).
 */
export interface CallSignal {
  readonly aborted: boolean;
  readonly reason?: unknown;
  addEventListener(type: "abort", listener: () => void): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/** One call to a channel, the same for every candidate tried. */
export interface ChannelRequest {
  /** Label of the call in the upstream metrics (`chat_completions`, `image_tasks`, `models`). */
  route: string;
  method: "GET" | "POST" | "DELETE";
  /** Path and query after the channel's base URL (which ends in its own `/v1`). */
  path: string;
  /**
   * Headers besides the credential (the channel's key, or a forward key, is
   * the only one sent) and the body's framing; `content-type` included.
   */
  headers?: Readonly<Record<string, string | string[] | undefined>>;
  /** A body read already (sent again to a next channel if need be), or one streamed. */
  body?: Buffer | ChannelBodySource;
  /**
   * Which of the channel's timeouts counts its silence: `timeoutSec` (default),
   * `imageTimeoutSec`, or milliseconds of the caller's own (a task run, which
   * its task's timeout bounds as a whole).
   */
  timeout?: "chat" | "image" | { idleMs: number };
  /** Aborts the call: the client went away, the task was cancelled or timed out. */
  signal?: CallSignal;
  /** Hears each try (access lines, task lines, client spans); see {@link CallObserver}. */
  observer?: CallObserver;
  /**
   * What changes with the channel tried, laid over the rest for its try: an
   * async job's submission, whose path and body each channel's API names.
   */
  forChannel?: (channel: Channel) => Pick<ChannelRequest, "path" | "headers" | "body">;
}

/**
 * The one client of channels: every call to one (passthrough, task runs,
 * model lists, forward-key checks) goes through {@link send}.
 */
export interface ChannelClient {
  /**
   * Sends `request` to `candidates` in order under the one failover rule
   * ({@link mayTryNext}) and resolves with the answer that ends the call:
   * the first that is the channel's own, or the last refusal (429, 5xx,
   * 401/403) when no later channel took the request. Redirects are never
   * followed. Its body waits for the caller (see {@link ChannelAnswer}).
   *
   * @throws ChannelError `upstream_unavailable` (no channel reached),
   *   `upstream_timeout`, `invalid_response` (reset without an answer, a redirect)
   * @throws the signal's reason when aborted, or what a streamed body failed with
   */
  send(candidates: readonly Channel[], request: ChannelRequest): Promise<ChannelAnswer>;
  /** The agents that download the image URLs in its answers (made on first use). */
  downloads: DownloadAgents;
  /** Closes every pooled connection, the downloads' too. */
  close(): Promise<void>;
}

/** Dependencies of {@link createChannelClient}. */
export interface ChannelClientDeps {
  metrics: Metrics;
  logger: Logger;
}

/** A buffered body larger than this is written in chunks, so that "sent" means handed over. */
const WRITE_CHUNK_BYTES = 64 * 1024;
/** A refusal is kept (as the answer if no later channel takes the call) up to this size. */
const MAX_KEPT_REFUSAL_BYTES = 64 * 1024;

/**
 * Builds the channel client on undici: a keep-alive pool per channel base
 * URL, the base URL's path prefix, the credential, the channel's idle
 * timeouts, abort, caps on what is read (see {@link ChannelAnswer}) and one
 * key scrubber per credential. undici rather than `node:http`: it costs less
 * CPU per call on the proxy's hot path (measured with `npm run bench`), and
 * its timeouts count only the channel's silence.
 */
export function createChannelClient(deps: ChannelClientDeps): ChannelClient {
  const pools = createChannelPools();
  const downloads = createDownloadAgents();
  const s: ClientState = {
    metrics: deps.metrics,
    logger: deps.logger,
    pools,
    scrubbers: new WeakMap(),
  };
  return {
    send: (candidates, request) => send(s, candidates, request),
    downloads,
    close: async () => {
      await Promise.all([pools.close(), downloads.close()]);
    },
  };
}

/** What the client's steps share. */
interface ClientState {
  metrics: Metrics;
  logger: Logger;
  pools: ChannelPools;
  /**
   * By channel object: configured channels live as long as the service; a forward key's
   * copy lives for one request, so its key is not kept here after it.
   */
  scrubbers: WeakMap<Channel, KeyScrubber>;
}

/** {@link ChannelClient.send}: the failover loop over `candidates`. */
async function send(
  s: ClientState,
  candidates: readonly Channel[],
  request: ChannelRequest,
): Promise<ChannelAnswer> {
  const { logger } = s;
  const { signal } = request;
  if (signal?.aborted) throw signal.reason;
  let refusal: ChannelAnswer | undefined;
  let failure: ChannelError | undefined;
  for (let index = 0; index < candidates.length; index += 1) {
    const channel = candidates[index] as Channel;
    const last = index === candidates.length - 1;
    const tried = request.forChannel ? { ...request, ...request.forChannel(channel) } : request;
    const outcome = await attempt(s, channel, tried);
    const canResend = canSendAgain(tried.body);
    if (outcome.kind === "answer") {
      const { answer } = outcome;
      const { status } = answer;
      if (status >= 300 && status < 400 && status !== 304) {
        answer.discard();
        logger.warn({ channel: channel.name, status }, "channel answered a redirect");
        throw redirected(status, channel.name);
      }
      if (last || !mayTryNext({ status }, canResend)) return answer;
      logger.warn({ channel: channel.name, status }, "channel refused the call; trying the next");
      refusal = await keep(answer);
      if (signal?.aborted) throw signal.reason;
      continue;
    }
    if (signal?.aborted) throw signal.reason;
    const { error, stage } = outcome;
    // A form refused half-way is the client's error, not the channel's.
    if (error instanceof ServiceError) throw error;
    const reason = reasonOf(error);
    logger.warn({ channel: channel.name, stage, reason }, "channel call failed");
    failure = failureAt(stage, error, reason, channel.name);
    if (!mayTryNext({ stage }, canResend)) throw failure;
  }
  if (refusal) return refusal;
  throw failure ?? unreachable("no channel");
}

function scrubberOf({ scrubbers }: ClientState, channel: Channel): KeyScrubber {
  let scrubber = scrubbers.get(channel);
  if (!scrubber) {
    scrubber = createKeyScrubber(channel.apiKey);
    scrubbers.set(channel, scrubber);
  }
  return scrubber;
}

/** Sends the request to one channel; resolves with how the try ended. */
function attempt(s: ClientState, channel: Channel, request: ChannelRequest): Promise<TryOutcome> {
  const target = s.pools.targetOf(channel);
  const { body, signal } = request;
  const source = body === undefined || Buffer.isBuffer(body) ? undefined : body;
  const chunked = Buffer.isBuffer(body) && body.length > WRITE_CHUNK_BYTES;
  const headers = headersFor(channel, request);
  const idleMs = idleMsOf(request.timeout, channel);
  const started = performance.now();
  const observed = request.observer?.tryStarted(channel);
  if (observed?.headers) headers.push(...observed.headers);

  return new Promise<TryOutcome>((resolve) => {
    const onAbort = () => handler.abort(signal?.reason as Error);
    const detach = () => signal?.removeEventListener("abort", onAbort);
    const handler = new ChannelTry(channel, scrubberOf(s, channel), chunked || !!source, {
      outcome(outcome) {
        if (outcome.kind === "failure") detach();
        record(s.metrics, channel, request, outcome, started);
        if (observed) observe(observed, outcome);
        resolve(outcome);
      },
      settled() {
        detach();
        observed?.ended();
      },
    });
    signal?.addEventListener("abort", onAbort);
    let dispatched: Dispatcher.DispatchOptions["body"] = body as Buffer | undefined;
    if (chunked || source) {
      // Streamed: "sent" once the stream ended, that is once undici took its last chunk.
      const stream = source
        ? source.open()
        : Readable.from(inChunks(body as Buffer), { objectMode: false });
      stream.once("end", () => handler.bodySent());
      stream.once("error", (err) => handler.bodyFailed(err));
      dispatched = stream;
      const length = source ? source.contentLength : (body as Buffer).length;
      if (length !== undefined) headers.push("content-length", String(length));
    }
    try {
      target.pool.dispatch(
        {
          path: target.prefix + request.path,
          method: request.method,
          headers,
          body: dispatched,
          headersTimeout: idleMs,
          bodyTimeout: idleMs,
        },
        handler,
      );
    } catch (err) {
      handler.onResponseError(undefined as never, err as Error);
    }
  });
}

/** Tells a try's observer how it went; a failed try is over at once. */
function observe(
  observed: NonNullable<ReturnType<CallObserver["tryStarted"]>>,
  outcome: TryOutcome,
) {
  if (outcome.kind === "answer") {
    observed.answered(outcome.answer.status);
    outcome.answer.observer = observed;
    return;
  }
  observed.failed(isTimeout(outcome.error) ? "timeout" : reasonOf(outcome.error));
  observed.ended();
}

/** The request's headers as undici takes them (a flat list), with the channel's credential. */
function headersFor(channel: Channel, request: ChannelRequest): string[] {
  const headers: string[] = [];
  for (const name in request.headers) {
    const value = request.headers[name];
    if (value === undefined) continue;
    if (typeof value === "string") headers.push(name, value);
    else for (const item of value) headers.push(name, item);
  }
  // Answers are scrubbed of the key, so they must arrive readable.
  headers.push("accept-encoding", "identity");
  if (channel.apiKey) headers.push("authorization", `Bearer ${channel.apiKey}`);
  return headers;
}

/** Counts a try in the upstream metrics (an aborted one is the caller's, not the channel's). */
function record(
  metrics: Metrics,
  channel: Channel,
  request: ChannelRequest,
  outcome: TryOutcome,
  started: number,
) {
  if (outcome.kind === "answer") {
    const { status } = outcome.answer;
    metrics.upstreamRequestSeries.get(channel.name, request.route, String(status)).inc();
    metrics.upstreamDuration
      .series(channel.name, request.route)
      .observe((performance.now() - started) / 1000);
    return;
  }
  if (request.signal?.aborted || outcome.error instanceof ServiceError) return;
  const kind = isTimeout(outcome.error) ? "timeout" : "error";
  metrics.upstreamRequestSeries.get(channel.name, request.route, kind).inc();
}

/**
 * A refusal kept whole while the next channel is tried; `undefined` if it
 * cannot be read. A JSON refusal is read to its object's end: one held open
 * after it does not hold the next channel back until this one's timeout.
 */
async function keep(answer: ChannelAnswer): Promise<ChannelAnswer | undefined> {
  try {
    const body = await readJsonDocument(answer, MAX_KEPT_REFUSAL_BYTES);
    return new BufferedAnswer(answer.channel, answer.status, answer.headers, answer.scrubber, body);
  } catch {
    return undefined;
  }
}

/** Whether a next try can get the whole body again. */
function canSendAgain(body: ChannelRequest["body"]): boolean {
  return body === undefined || Buffer.isBuffer(body) || body.canReopen();
}

/** The error a try that got no answer ends the call with, by how far it got. */
function failureAt(stage: TryStage, error: Error, reason: string, channel: string): ChannelError {
  if (stage === "connecting") return unreachable(reason, channel);
  if (isTimeout(error)) return noAnswerInTime(channel);
  if (stage === "sending") return unreachable(reason, channel);
  return closedWithoutAnswer(reason, channel);
}

const TIMEOUT_CODES = new Set([
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function isTimeout(error: Error): boolean {
  return TIMEOUT_CODES.has((error as { code?: string }).code ?? "");
}

/** A loggable name for a network failure: its code, never its message. */
function reasonOf(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && /^[A-Z0-9_]{2,40}$/.test(code) ? code : error.name;
}

/** A buffered body in chunks. */
function* inChunks(bytes: Buffer): Generator<Buffer> {
  for (let at = 0; at < bytes.length; at += WRITE_CHUNK_BYTES) {
    yield bytes.subarray(at, at + WRITE_CHUNK_BYTES);
  }
}

/** The longest delay a Node timer takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function idleMsOf(timeout: ChannelRequest["timeout"], channel: Channel): number {
  if (timeout === "image") return channel.imageTimeoutMs;
  if (timeout === undefined || timeout === "chat") return channel.timeoutMs;
  return Math.min(timeout.idleMs, MAX_TIMER_MS);
}
