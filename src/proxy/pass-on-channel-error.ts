import type { ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { ChannelAnswer } from "../channels/channel-answer.js";
import { readJsonDocument } from "../channels/read-json-document.js";
import { ServiceError } from "../errors/service-error.js";
import { shorten } from "../errors/shorten.js";
import { copyResponseHeaders } from "./forwarded-headers.js";

/** How {@link passOnChannelError} reports back to the request it serves. */
export interface ChannelErrorContext {
  logger: Logger;
  /** Hands an error to the one error writer. */
  fail: (err: unknown) => void;
  clientGone: () => boolean;
  /** Told of the channel's error `code` (else its `type`), scrubbed and shortened, when it has one. */
  onCode?: (code: string) => void;
}

/** Larger error bodies are not OpenAI errors. */
const MAX_ERROR_BODY_BYTES = 1024 * 1024;

/**
 * A channel's error answer, read whole (error bodies are small) and
 * decoded: an OpenAI error body goes on with its status, minus the key sent
 * in any spelling should the channel echo it; anything else (a CDN's HTML
 * page, a bare 404 text) becomes this service's own envelope, so no error is
 * ever HTML.
 */
export function passOnChannelError(
  answer: ChannelAnswer,
  res: ServerResponse,
  context: ChannelErrorContext,
): void {
  const { status, headers, scrubber } = answer;
  readJsonDocument(answer, MAX_ERROR_BODY_BYTES).then(
    (body) => {
      if (context.clientGone()) return;
      const code = errorCodeOf(body);
      if (code === undefined) {
        context.logger.warn(
          { channel: answer.channel.name, status },
          "channel answered an error without an OpenAI error body",
        );
        context.fail(envelopeFor(status, headers["retry-after"]));
        return;
      }
      if (code !== null) context.onCode?.(shorten(scrubber.scrubString(code)));
      const out = scrubber.scrub(body);
      res.statusCode = status;
      copyResponseHeaders(headers, (name, value) => res.setHeader(name, value), scrubber.scrubText);
      res.setHeader("content-type", "application/json");
      res.setHeader("content-length", out.length);
      res.end(out);
    },
    (err: unknown) => {
      if (!context.clientGone()) context.fail(err);
    },
  );
}

/**
 * Our own error for a channel error without an OpenAI body: a timeout page is
 * a timeout, a rate limit stays a 429 with the channel's `Retry-After` (the
 * SDKs back off on it), anything else is an unusable channel.
 */
function envelopeFor(status: number, retryAfter: string | string[] | undefined): ServiceError {
  if (status === 504 || status === 524 || status === 408) {
    return new ServiceError(
      "upstream_timeout",
      `The upstream channel did not answer in time (HTTP ${status}).`,
    );
  }
  if (status === 429) {
    const seconds = typeof retryAfter === "string" ? retryAfter : undefined;
    return new ServiceError(
      "upstream_rate_limited",
      "The upstream channel is rate limiting requests.",
      { retryAfter: seconds && /^\d{1,6}$/.test(seconds) ? seconds : undefined },
    );
  }
  return new ServiceError(
    "upstream_unavailable",
    `The upstream channel answered HTTP ${status} without an OpenAI error body.`,
  );
}

/**
 * The `code` (else the `type`) of an OpenAI error envelope (`{"error": {...}}`);
 * null for an envelope with neither; undefined for a body that is no envelope.
 */
function errorCodeOf(body: Buffer): string | null | undefined {
  let error: unknown;
  try {
    error = (JSON.parse(body.toString("utf8")) as { error?: unknown } | null)?.error;
  } catch {
    return undefined;
  }
  if (typeof error !== "object" || error === null) return undefined;
  const { code, type } = error as { code?: unknown; type?: unknown };
  if (typeof code === "string" && code !== "") return code;
  return typeof type === "string" && type !== "" ? type : null;
}
