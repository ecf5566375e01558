import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Channel } from "../channels/channel.js";
import { AppError } from "../http/app-error.js";
import { readChannelBody } from "./channel-body.js";
import { copyResponseHeaders } from "./forwarded-headers.js";
import type { KeyScrubber } from "./key-scrubber.js";

/** How {@link passOnChannelError} reports back to the request it serves. */
export interface ChannelErrorContext {
  logger: Logger;
  scrubber: KeyScrubber;
  /** Hands an error to the one error writer. */
  fail: (err: AppError) => void;
  clientGone: () => boolean;
}

/** Larger error bodies are not OpenAI errors. */
const MAX_ERROR_BODY_BYTES = 1024 * 1024;

/**
 * A channel's error answer, read whole (error bodies are small) and
 * decoded: an OpenAI error body goes on with its status, minus the channel's
 * key in any spelling should it echo it; anything else (a CDN's HTML page, a
 * bare 404 text) becomes this service's own envelope, so no error is ever HTML.
 */
export function passOnChannelError(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  channel: Channel,
  context: ChannelErrorContext,
): void {
  const status = proxyRes.statusCode ?? 502;
  readChannelBody(proxyRes, MAX_ERROR_BODY_BYTES).then(
    (body) => {
      if (context.clientGone()) return;
      if (!isErrorEnvelope(body)) {
        context.logger.warn(
          { channel: channel.name, status },
          "channel answered an error without an OpenAI error body",
        );
        context.fail(envelopeFor(status, proxyRes.headers["retry-after"]));
        return;
      }
      const out = context.scrubber.scrub(body);
      res.statusCode = status;
      copyResponseHeaders(
        proxyRes.headers,
        (name, value) => res.setHeader(name, value),
        context.scrubber.scrubText,
      );
      res.setHeader("content-type", "application/json");
      res.setHeader("content-length", out.length);
      res.end(out);
    },
    () => {
      if (context.clientGone()) return;
      context.fail(new AppError("invalid_response", "The upstream channel's answer was cut off."));
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

/** Whether `body` is an OpenAI error envelope (`{"error": {...}}`). */
function isErrorEnvelope(body: Buffer): boolean {
  try {
    const parsed = JSON.parse(body.toString("utf8")) as { error?: unknown } | null;
    return Boolean(parsed && typeof parsed.error === "object" && parsed.error !== null);
  } catch {
    return false;
  }
}
