import { Agent, fetch as undiciFetch, type Dispatcher } from "undici";
import type { Logger } from "pino";
import { channelAuthHeaders, type Channel } from "../channels/channel.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { sniffImageType } from "../files/image-type.js";
import { TaskFailure } from "./task-failure.js";

/** One generated image, decoded. */
export interface GeneratedImage {
  bytes: Buffer;
  mime: string;
  revised_prompt?: string;
}

/** Dependencies and inputs of {@link generateImages}. */
export interface GenerateImagesInput {
  candidates: readonly Channel[];
  body: Record<string, unknown>;
  /** Aborted on timeout, cancel or shutdown; its reason says which. */
  signal: AbortSignal;
  metrics: Metrics;
  logger: Logger;
  /** From {@link createSlowAgent}. */
  dispatcher: Dispatcher;
}

/**
 * Generations run for minutes: the task's own signal bounds them, so the
 * HTTP client's header and body timeouts (300 s by default) are switched off.
 */
export function createSlowAgent(): Agent {
  return new Agent({ headersTimeout: 0, bodyTimeout: 0 });
}

/** Largest image download accepted when a channel answers with URLs. */
const MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024;

/**
 * Calls the channels' `/images/generations` in order until one answers:
 * a connect failure or 5xx moves on to the next channel, anything else is
 * the answer. Every failure becomes a {@link TaskFailure} with a code and a
 * message free of channel keys; an abort is rethrown for the caller to name.
 */
export async function generateImages(
  input: GenerateImagesInput,
): Promise<{ images: GeneratedImage[]; usage?: unknown }> {
  const { candidates, body, signal, metrics } = input;
  let lastFailure = new TaskFailure(
    "upstream_unavailable",
    "No upstream channel could be reached.",
  );
  for (const [index, channel] of candidates.entries()) {
    const isLast = index === candidates.length - 1;
    const started = performance.now();
    let response: Awaited<ReturnType<typeof undiciFetch>>;
    try {
      response = await undiciFetch(`${channel.baseUrl}/images/generations`, {
        method: "POST",
        headers: { "content-type": "application/json", ...channelAuthHeaders(channel) },
        body: JSON.stringify(body),
        signal,
        dispatcher: input.dispatcher,
      });
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      metrics.upstreamRequests.inc({
        channel: channel.name,
        route: "image_tasks",
        outcome: "error",
      });
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
      route: "image_tasks",
      outcome: String(response.status),
    });
    metrics.upstreamDuration.observe(
      { channel: channel.name, route: "image_tasks" },
      (performance.now() - started) / 1000,
    );
    const text = await readText(response, signal);
    if (response.status >= 500 && !isLast) {
      lastFailure = upstreamFailure(response.status, text, channel);
      continue;
    }
    if (response.status >= 400) throw upstreamFailure(response.status, text, channel);
    return parseGeneration(text, channel, signal, input.dispatcher);
  }
  throw lastFailure;
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

async function readText(response: { text(): Promise<string> }, signal: AbortSignal) {
  try {
    return await response.text();
  } catch {
    if (signal.aborted) throw signal.reason;
    throw new TaskFailure(
      "upstream_error",
      "The upstream channel broke off its answer.",
      "upstream_error",
    );
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

async function parseGeneration(
  text: string,
  channel: Channel,
  signal: AbortSignal,
  dispatcher: Dispatcher,
) {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalidResponse("is not valid JSON");
  }
  const data = (parsed as { data?: unknown } | null)?.data;
  if (!Array.isArray(data) || data.length === 0) throw invalidResponse("holds no images");
  const images: GeneratedImage[] = [];
  for (const item of data as Array<Record<string, unknown> | null>) {
    let bytes: Buffer;
    if (typeof item?.b64_json === "string" && item.b64_json.length > 0) {
      bytes = Buffer.from(item.b64_json, "base64");
    } else if (typeof item?.url === "string") {
      bytes = await download(item.url, channel, signal, dispatcher);
    } else {
      throw invalidResponse("has an image with neither b64_json nor url");
    }
    const type = sniffImageType(bytes);
    if (!type) throw invalidResponse("has an image that is not PNG, JPEG or WebP");
    images.push({
      bytes,
      mime: type.mimeType,
      ...(typeof item?.revised_prompt === "string" ? { revised_prompt: item.revised_prompt } : {}),
    });
  }
  return { images, usage: (parsed as { usage?: unknown }).usage };
}

async function download(
  url: string,
  channel: Channel,
  signal: AbortSignal,
  dispatcher: Dispatcher,
): Promise<Buffer> {
  let parsedUrl: URL;
  try {
    parsedUrl = new URL(url);
  } catch {
    throw invalidResponse("has an image URL that is not a URL");
  }
  if (parsedUrl.protocol !== "https:" && parsedUrl.protocol !== "http:") {
    throw invalidResponse("has an image URL that is not http(s)");
  }
  try {
    const response = await undiciFetch(parsedUrl, { signal, dispatcher });
    if (!response.ok) throw new Error(`status ${response.status}`);
    const length = Number(response.headers.get("content-length") ?? 0);
    if (length > MAX_DOWNLOAD_BYTES) throw new Error("too large");
    const bytes = Buffer.from(await response.arrayBuffer());
    if (bytes.length > MAX_DOWNLOAD_BYTES) throw new Error("too large");
    return bytes;
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    throw new TaskFailure(
      "upstream_error",
      `Could not download the image the upstream channel produced (${scrub((err as Error).message, channel)}).`,
      "upstream_error",
    );
  }
}

function invalidResponse(what: string): TaskFailure {
  return new TaskFailure(
    "invalid_response",
    `The upstream channel's answer ${what}.`,
    "upstream_error",
  );
}

/** A channel may echo its own key in an error; it must never reach a client. */
function scrub(message: string, channel: Channel): string {
  return channel.apiKey ? message.split(channel.apiKey).join("[redacted]") : message;
}
