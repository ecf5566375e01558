import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import type { Logger } from "pino";
import type { Channel } from "../channels/channel.js";
import { AppError } from "../http/app-error.js";
import { HOP_BY_HOP_HEADERS } from "./hop-by-hop-headers.js";

/** How {@link passOnChannelError} reports back to the request it serves. */
export interface ChannelErrorContext {
  logger: Logger;
  /** Hands an error to the app's one error middleware. */
  fail: (err: AppError) => void;
  clientGone: () => boolean;
}

/**
 * A channel's error answer, read whole (error bodies are small): an OpenAI
 * error body goes on with its status, minus the channel's key should it echo
 * it; anything else (a CDN's HTML page, a bare 404 text) becomes this
 * service's own envelope, so no error is ever HTML.
 */
export function passOnChannelError(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  channel: Channel,
  context: ChannelErrorContext,
): void {
  const status = proxyRes.statusCode ?? 502;
  readChannelBody(proxyRes).then(
    (text) => {
      if (!isErrorEnvelope(text)) {
        context.logger.warn(
          { channel: channel.name, status },
          "channel answered an error without an OpenAI error body",
        );
        context.fail(envelopeFor(status, proxyRes.headers["retry-after"]));
        return;
      }
      const body = channel.apiKey ? text.split(channel.apiKey).join("[redacted]") : text;
      res.statusCode = status;
      for (const [name, value] of Object.entries(proxyRes.headers)) {
        if (value !== undefined && !HOP_BY_HOP_HEADERS.has(name) && !BODY_HEADERS.has(name)) {
          res.setHeader(name, value);
        }
      }
      res.setHeader("content-type", "application/json");
      res.setHeader("content-length", Buffer.byteLength(body));
      res.end(body);
    },
    () => {
      if (context.clientGone()) return;
      context.fail(
        new AppError("upstream_unavailable", "The upstream channel's answer was cut off."),
      );
    },
  );
}

/**
 * Our own error for a channel error without an OpenAI body: a timeout page is
 * a timeout, a rate limit stays a 429 with the channel's `Retry-After` (the
 * SDKs back off on it), anything else is an unusable channel.
 */
function envelopeFor(status: number, retryAfter: string | undefined): AppError {
  if (status === 504 || status === 524 || status === 408) {
    return new AppError(
      "upstream_timeout",
      `The upstream channel did not answer in time (HTTP ${status}).`,
    );
  }
  if (status === 429) {
    return new AppError(
      "upstream_rate_limited",
      "The upstream channel is rate limiting requests.",
      {
        headers: retryAfter && /^\d{1,6}$/.test(retryAfter) ? { "Retry-After": retryAfter } : {},
      },
    );
  }
  return new AppError(
    "upstream_unavailable",
    `The upstream channel answered HTTP ${status} without an OpenAI error body.`,
  );
}

/** Headers describing a body that {@link readChannelBody} re-encodes. */
const BODY_HEADERS = new Set(["content-length", "content-encoding", "content-type"]);
/** Larger error bodies are not OpenAI errors. */
const MAX_ERROR_BODY_BYTES = 1024 * 1024;

/** A channel's (error) body as text, decompressed; rejects when cut off, too big or undecodable. */
async function readChannelBody(proxyRes: IncomingMessage): Promise<string> {
  const encoding = String(proxyRes.headers["content-encoding"] ?? "identity").toLowerCase();
  const decoder =
    encoding === "gzip" || encoding === "x-gzip"
      ? createGunzip()
      : encoding === "deflate"
        ? createInflate()
        : encoding === "br"
          ? createBrotliDecompress()
          : undefined;
  if (!decoder && encoding !== "identity") throw new Error(`content-encoding ${encoding}`);
  const source: Readable = decoder ? proxyRes.pipe(decoder) : proxyRes;
  if (decoder) proxyRes.once("aborted", () => decoder.destroy(new Error("aborted")));
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of source as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_ERROR_BODY_BYTES) {
      proxyRes.destroy();
      throw new Error("error body too large");
    }
    chunks.push(chunk);
  }
  if (!proxyRes.complete) throw new Error("cut off");
  return Buffer.concat(chunks).toString("utf8");
}

/** Whether `text` is an OpenAI error envelope (`{"error": {...}}`). */
function isErrorEnvelope(text: string): boolean {
  try {
    const parsed = JSON.parse(text) as { error?: unknown } | null;
    return Boolean(parsed && typeof parsed.error === "object" && parsed.error !== null);
  } catch {
    return false;
  }
}
