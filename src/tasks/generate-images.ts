import { Agent, FormData, fetch as undiciFetch, type Dispatcher } from "undici";
import type { Logger } from "pino";
import { channelAuthHeaders, type Channel } from "../channels/channel.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { extensionOf, sniffImageType } from "../files/image-type.js";
import { assertUrlAllowed, ForbiddenAddressError } from "../net/address-policy.js";
import { createGuardedAgent } from "../net/create-guarded-agent.js";
import { BodyTooLargeError, readCappedBody } from "../net/read-capped-body.js";
import { TaskFailure } from "./task-failure.js";

/** One generated image, decoded. */
export interface GeneratedImage {
  bytes: Buffer;
  mime: string;
  revised_prompt?: string;
}

/** An input image of an edit, as it goes to the channel. */
export interface EditFile {
  /** `image`, `image[]` or `mask`. */
  field: string;
  mime: string;
  bytes: Buffer;
}

/** Dependencies and inputs of {@link generateImages}. */
export interface GenerateImagesInput {
  candidates: readonly Channel[];
  /** The generation's JSON body, or an edit's form fields. */
  body: Record<string, unknown>;
  /** An edit's images: the call goes to `/images/edits` as `multipart/form-data`. */
  files?: readonly EditFile[];
  /** Aborted on timeout, cancel or shutdown; its reason says which. */
  signal: AbortSignal;
  metrics: Metrics;
  logger: Logger;
  /** From {@link createSlowAgent}: for the channels themselves, whose addresses the operator chose. */
  dispatcher: Dispatcher;
}

/**
 * Generations run for minutes: the task's own signal bounds them, so the
 * HTTP client's header and body timeouts (300 s by default) are switched off.
 */
export function createSlowAgent(): Agent {
  return new Agent({ headersTimeout: 0, bodyTimeout: 0 });
}

/** Room in a channel's answer beside the images: revised prompts, usage, envelope. */
const ANSWER_OVERHEAD_BYTES = 256 * 1024;
/** Error bodies are read this far for their message; the rest is not needed. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;
/** Objects nested deeper than this in `usage` are dropped rather than walked. */
const MAX_USAGE_DEPTH = 16;

/**
 * An edit's form: the fields as text, then the images, named by their place
 * (`image-0.png`, `mask.png`): the client's file names are not passed on.
 */
function editForm(body: Record<string, unknown>, files: readonly EditFile[]): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(body)) form.append(name, String(value));
  files.forEach((file, index) => {
    const name = file.field === "mask" ? "mask" : `image-${index}`;
    form.append(
      file.field,
      new Blob([file.bytes], { type: file.mime }),
      `${name}.${extensionOf(file.mime)}`,
    );
  });
  return form;
}

/**
 * Calls the channels' `/images/generations` (an edit: `/images/edits`) in order until one answers:
 * a connect failure or 5xx moves on to the next channel, anything else is
 * the answer. Every failure becomes a {@link TaskFailure} with a code and a
 * message free of channel keys; an abort is rethrown for the caller to name.
 *
 * What a channel sends is bounded while it arrives: the JSON answer to what
 * `n` images of `maxImageBytes` take, each image download to `maxImageBytes`.
 * Image URLs are fetched only from the channel's own origin or its
 * `imageUrlOrigins` (those never on loopback, private or metadata addresses),
 * and no redirect is ever followed, neither of the channel nor of an image.
 */
export async function generateImages(
  input: GenerateImagesInput,
): Promise<{ images: GeneratedImage[]; usage?: unknown }> {
  const { candidates, body, files, signal, metrics } = input;
  const route = files ? "image_edit_tasks" : "image_tasks";
  // Made only when needed: an Error captures a stack, on every run otherwise.
  let lastFailure: TaskFailure | undefined;
  for (const [index, channel] of candidates.entries()) {
    const isLast = index === candidates.length - 1;
    const started = performance.now();
    let response: Awaited<ReturnType<typeof undiciFetch>>;
    try {
      response = await undiciFetch(`${channel.baseUrl}/images/${files ? "edits" : "generations"}`, {
        method: "POST",
        headers: files
          ? channelAuthHeaders(channel)
          : { "content-type": "application/json", ...channelAuthHeaders(channel) },
        // A form is read as it is sent: each channel tried gets one of its own.
        body: files ? editForm(body, files) : JSON.stringify(body),
        signal,
        dispatcher: input.dispatcher,
        // A redirect would send the prompt (and, same-origin, the key) where nobody configured.
        redirect: "manual",
      });
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      metrics.upstreamRequests.inc({ channel: channel.name, route, outcome: "error" });
      const code = errorCode(err);
      input.logger.warn({ channel: channel.name, err: code }, "channel call failed");
      if (CONNECT_ERRORS.has(code)) continue;
      // The request may have reached the channel, which may be generating (and billing)
      // it: another channel would make it twice, so the task fails instead.
      throw new TaskFailure(
        "upstream_unavailable",
        "The connection to the upstream channel broke before it answered.",
        "upstream_error",
      );
    }
    metrics.upstreamRequests.inc({
      channel: channel.name,
      route,
      outcome: String(response.status),
    });
    metrics.upstreamDuration.observe(
      { channel: channel.name, route },
      (performance.now() - started) / 1000,
    );
    if (response.status >= 400) {
      const text = await readErrorText(response, signal);
      if (response.status >= 500 && !isLast) {
        lastFailure = upstreamFailure(response.status, text, channel);
        continue;
      }
      throw upstreamFailure(response.status, text, channel);
    }
    if (response.status >= 300) {
      await response.body?.cancel().catch(() => undefined);
      throw invalidResponse(`is a redirect (status ${response.status}), which is not followed`);
    }
    const limit = answerLimit(body, channel.maxImageBytes);
    const bytes = await readCapped(response, limit, signal, "answer");
    return parseGeneration(bytes.toString("utf8"), channel, input);
  }
  throw (
    lastFailure ?? new TaskFailure("upstream_unavailable", "No upstream channel could be reached.")
  );
}

/** Errors that prove the request never reached the channel, so another may take it. */
const CONNECT_ERRORS = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/** The system or undici error code behind a fetch failure (`fetch failed` hides it in `cause`). */
function errorCode(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown } } | null)?.cause;
  const code = cause?.code ?? (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "unknown";
}

/** Base64 length of `bytes` bytes. */
function base64Length(bytes: number): number {
  return Math.ceil(bytes / 3) * 4;
}

/** The most a successful answer for this request may hold: `n` images and some room. */
function answerLimit(body: Record<string, unknown>, maxImageBytes: number): number {
  const n = typeof body.n === "number" && Number.isInteger(body.n) ? Math.min(10, body.n) : 1;
  return Math.max(1, n) * (base64Length(maxImageBytes) + ANSWER_OVERHEAD_BYTES);
}

type FetchResponse = Awaited<ReturnType<typeof undiciFetch>>;

/**
 * Reads a channel's body within `limit` bytes (see {@link readCappedBody}); too
 * large is the channel's `invalid_response`, broken off an `upstream_error`.
 */
async function readCapped(
  response: FetchResponse,
  limit: number,
  signal: AbortSignal,
  what: "answer" | "image",
): Promise<Buffer> {
  try {
    return await readCappedBody(response, limit);
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (err instanceof BodyTooLargeError) {
      throw invalidResponse(
        what === "answer"
          ? `is larger than ${limit} bytes`
          : `has an image larger than ${limit} bytes`,
      );
    }
    throw new TaskFailure(
      "upstream_error",
      what === "answer"
        ? "The upstream channel broke off its answer."
        : "The download of an image the upstream channel produced broke off.",
      "upstream_error",
    );
  }
}

/** The start of an error body, enough for its message. */
async function readErrorText(response: FetchResponse, signal: AbortSignal): Promise<string> {
  try {
    return (await readCapped(response, MAX_ERROR_BODY_BYTES, signal, "answer")).toString("utf8");
  } catch {
    if (signal.aborted) throw signal.reason;
    // Too long or broken off: the status-based message will do.
    return "";
  }
}

/** The channel's own error, passed on with its code and message, scrubbed of its key. */
function upstreamFailure(status: number, text: string, channel: Channel): TaskFailure {
  let code = status === 429 ? "rate_limit_exceeded" : "upstream_error";
  let message = `The upstream channel answered with status ${status}.`;
  let type = "upstream_error";
  try {
    const error = (JSON.parse(text) as { error?: Record<string, unknown> }).error;
    if (error && typeof error === "object") {
      if (typeof error.code === "string" && error.code) code = error.code;
      if (typeof error.message === "string" && error.message) message = error.message;
      if (typeof error.type === "string" && error.type) type = error.type;
    }
  } catch {
    // Not an OpenAI error body: the status-based message stands.
  }
  // Every field is the channel's own text, so each is scrubbed, not only the message.
  return new TaskFailure(
    scrub(code, channel).slice(0, 100),
    scrub(message, channel).slice(0, 2000),
    scrub(type, channel).slice(0, 100),
  );
}

async function parseGeneration(text: string, channel: Channel, input: GenerateImagesInput) {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalidResponse("is not valid JSON");
  }
  const data = (parsed as { data?: unknown } | null)?.data;
  if (!Array.isArray(data) || data.length === 0) throw invalidResponse("holds no images");
  const requested = typeof input.body.n === "number" ? input.body.n : 1;
  if (data.length > Math.max(1, requested)) {
    throw invalidResponse(`holds ${data.length} images where ${requested} were asked for`);
  }
  const images: GeneratedImage[] = [];
  for (const item of data as Array<Record<string, unknown> | null>) {
    let bytes: Buffer;
    if (typeof item?.b64_json === "string" && item.b64_json.length > 0) {
      if (item.b64_json.length > base64Length(channel.maxImageBytes) + 4) {
        throw invalidResponse(`has an image larger than ${channel.maxImageBytes} bytes`);
      }
      bytes = Buffer.from(item.b64_json, "base64");
    } else if (typeof item?.url === "string") {
      bytes = await download(item.url, channel, input);
    } else {
      throw invalidResponse("has an image with neither b64_json nor url");
    }
    if (bytes.length > channel.maxImageBytes) {
      throw invalidResponse(`has an image larger than ${channel.maxImageBytes} bytes`);
    }
    const type = sniffImageType(bytes);
    if (!type) throw invalidResponse("has an image that is not PNG, JPEG or WebP");
    images.push({
      bytes,
      mime: type.mimeType,
      ...(typeof item?.revised_prompt === "string"
        ? { revised_prompt: scrub(item.revised_prompt, channel) }
        : {}),
    });
  }
  const usage = scrubDeep((parsed as { usage?: unknown }).usage, channel, 0);
  return { images, ...(usage === undefined ? {} : { usage }) };
}

/**
 * Downloads an image a channel answered as a URL. Its own origin is trusted as
 * the operator configured it; an `imageUrlOrigins` origin goes through the
 * address guard; anything else is refused without a request.
 */
async function download(url: string, channel: Channel, input: GenerateImagesInput) {
  const { signal } = input;
  const channelOrigin = new URL(channel.baseUrl).origin;
  let target: URL;
  try {
    target = new URL(url, `${channelOrigin}/`);
  } catch {
    throw invalidResponse("has an image URL that is not a URL");
  }
  if (target.protocol !== "https:" && target.protocol !== "http:") {
    throw invalidResponse("has an image URL that is not http(s)");
  }
  const own = target.origin === channelOrigin;
  if (!own && !channel.imageUrlOrigins.includes(target.origin)) {
    throw invalidResponse(
      `has an image URL on ${scrub(target.origin, channel)}, which is neither the channel's ` +
        `origin nor in its imageUrlOrigins`,
    );
  }
  let dispatcher = input.dispatcher;
  let ownDispatcher: Dispatcher | undefined;
  try {
    if (!own) {
      assertUrlAllowed(target);
      ownDispatcher = createDownloadAgent();
      dispatcher = ownDispatcher;
    }
    const response = await undiciFetch(target, { signal, dispatcher, redirect: "manual" });
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel().catch(() => undefined);
      throw invalidResponse(
        `has an image URL that redirects (status ${response.status}); redirects are not followed`,
      );
    }
    if (!response.ok) {
      await response.body?.cancel().catch(() => undefined);
      throw new Error(`status ${response.status}`);
    }
    return await readCapped(response, channel.maxImageBytes, signal, "image");
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (err instanceof TaskFailure) throw err;
    const refusal = forbiddenAddress(err);
    throw new TaskFailure(
      refusal ? "invalid_response" : "upstream_error",
      `Could not download the image the upstream channel produced (${scrub(
        refusal?.message ?? (err as Error).message,
        channel,
      )}).`,
      "upstream_error",
    );
  } finally {
    void ownDispatcher?.destroy().catch(() => undefined);
  }
}

/** One download's guarded agent; no pooling is lost, as each task downloads once. */
function createDownloadAgent(): Dispatcher {
  return createGuardedAgent({ agent: { headersTimeout: 0, bodyTimeout: 0 } });
}

/** The guard's refusal, thrown directly or wrapped by fetch in `cause`. */
function forbiddenAddress(err: unknown): ForbiddenAddressError | undefined {
  if (err instanceof ForbiddenAddressError) return err;
  const cause = (err as { cause?: unknown } | null)?.cause;
  return cause instanceof ForbiddenAddressError ? cause : undefined;
}

function invalidResponse(what: string): TaskFailure {
  return new TaskFailure(
    "invalid_response",
    `The upstream channel's answer ${what}.`,
    "upstream_error",
  );
}

/**
 * A channel may echo its own key anywhere in its answer; it must never reach a
 * client. JSON escapes are already decoded here, so the literal key is all
 * there is to find.
 */
function scrub(message: string, channel: Channel): string {
  return channel.apiKey ? message.split(channel.apiKey).join("[redacted]") : message;
}

/** {@link scrub} on every string (keys included) of a parsed JSON value. */
function scrubDeep(value: unknown, channel: Channel, depth: number): unknown {
  if (typeof value === "string") return scrub(value, channel);
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_USAGE_DEPTH) return undefined;
  if (Array.isArray(value)) return value.map((item) => scrubDeep(item, channel, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    // defineProperty, so a "__proto__" key stays data and never reaches the prototype.
    Object.defineProperty(out, scrub(key, channel), {
      value: scrubDeep(item, channel, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}
