import type { IncomingMessage, ServerResponse } from "node:http";
import { AppError } from "../http/app-error.js";
import { BrokenBodyError, decodedChannelBody, readChannelBody } from "./channel-body.js";
import { copyResponseHeaders } from "./forwarded-headers.js";
import type { KeyScrubber } from "./key-scrubber.js";
import { EventStreamTap, usageOf, type TokenUsage } from "./token-usage.js";

/** What {@link deliverAnswer} needs from the request it answers. */
export interface AnswerContext {
  scrubber: KeyScrubber;
  /** Largest non-streamed answer read (`server.maxResponseBytes`). */
  maxBytes: number;
  /** Token usage the answer reported (for streams: the last event that had one). */
  onUsage(usage: TokenUsage): void;
  /**
   * Sees the parsed JSON answer before it is sent; the answer waits for the
   * returned promise (so a response id is recorded before the client has it).
   */
  onAnswer?(answer: unknown): Promise<void> | void;
  /** Sees the first events of a stream, until it returns true; never delays them. */
  onEvent?(event: unknown): boolean;
  /** The answer cannot be used and nothing was sent: fail over, or 502. */
  broken(reason: string): void;
  /** Whether the channel's idle timeout cut the answer. */
  timedOut(): boolean;
  fail(err: AppError): void;
  clientGone(): boolean;
}

/** JSON answers are read whole and checked; anything else is streamed. */
function isJson(contentType: string): boolean {
  const type = contentType.toLowerCase();
  return type.startsWith("application/json") || /^application\/[\w.-]+\+json\b/.test(type);
}

/** Statuses that carry no body. */
const NO_BODY = new Set([204, 205, 304]);

/**
 * Passes a channel's successful answer on. A JSON answer is read whole,
 * must parse, and only then goes out with its own Content-Length: a channel
 * that resets, truncates, stalls past its timeout or sends something else
 * is `broken` (the next channel, or 502 `invalid_response`), never a 200 with
 * a broken body. Event streams and binary answers (speech) are passed on
 * chunk by chunk as they arrive; event streams carry `X-Accel-Buffering: no`
 * and `Cache-Control: no-cache` for an nginx in front. Every byte and allowed
 * header is scrubbed of the channel key; compressed answers are decoded.
 */
export function deliverAnswer(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  context: AnswerContext,
): void {
  const status = proxyRes.statusCode ?? 200;
  const contentType = String(proxyRes.headers["content-type"] ?? "");
  const setHeader = (name: string, value: string | string[]) => res.setHeader(name, value);
  const scrubText = context.scrubber.scrubText;

  if (NO_BODY.has(status) || proxyRes.headers["content-length"] === "0") {
    proxyRes.resume();
    res.statusCode = status;
    copyResponseHeaders(proxyRes.headers, setHeader, scrubText);
    res.end();
    return;
  }

  if (isJson(contentType)) {
    readChannelBody(proxyRes, context.maxBytes).then(
      (body) => {
        if (context.clientGone()) return;
        let answer: unknown;
        try {
          answer = JSON.parse(body.toString("utf8"));
        } catch {
          context.broken("not JSON");
          return;
        }
        const usage = usageOf(answer);
        if (usage) context.onUsage(usage);
        const send = () => {
          if (context.clientGone()) return;
          const out = context.scrubber.scrub(body);
          res.statusCode = status;
          copyResponseHeaders(proxyRes.headers, setHeader, scrubText);
          res.setHeader("content-length", out.length);
          res.end(out);
        };
        const recorded = context.onAnswer?.(answer);
        if (recorded) void recorded.then(send);
        else send();
      },
      (err: unknown) => {
        if (context.clientGone()) return;
        if (context.timedOut()) {
          context.fail(
            new AppError("upstream_timeout", "The upstream channel stopped sending its answer."),
          );
          return;
        }
        context.broken(err instanceof BrokenBodyError ? err.reason : "unreadable");
      },
    );
    return;
  }

  const source = decodedChannelBody(proxyRes);
  if (!source) {
    proxyRes.resume();
    context.broken("undecodable");
    return;
  }
  res.statusCode = status;
  copyResponseHeaders(proxyRes.headers, setHeader, scrubText);
  const eventStream = contentType.startsWith("text/event-stream");
  const tap = eventStream ? new EventStreamTap(context.onEvent) : undefined;
  if (eventStream) {
    res.setHeader("cache-control", "no-cache");
    res.setHeader("x-accel-buffering", "no");
    res.flushHeaders();
  }
  const scrub = context.scrubber.stream();
  const resume = () => source.resume();
  source.on("data", (chunk: Buffer) => {
    if (res.destroyed) return;
    const out = scrub.push(chunk);
    if (out.length > 0 && !res.write(out)) {
      source.pause();
      res.once("drain", resume);
    }
    tap?.push(chunk);
  });
  source.once("end", () => {
    if (!proxyRes.complete || res.destroyed) return;
    const rest = scrub.flush();
    res.end(rest.length > 0 ? rest : undefined);
    tap?.end();
    if (tap?.usage) context.onUsage(tap.usage);
  });
  // A cut stream must look cut to the client, never complete.
  source.once("error", () => res.destroy());
  proxyRes.once("close", () => {
    if (!proxyRes.complete) res.destroy();
  });
}
