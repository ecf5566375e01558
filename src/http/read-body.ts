import type { IncomingMessage } from "node:http";
import type { Readable, Transform } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { AppError } from "./app-error.js";

/** Limits of {@link readRequestBody}. */
export interface ReadBodyOptions {
  /** Largest body accepted, after decoding, in bytes. */
  limit: number;
  /** Time the whole body may take to arrive, from now, in ms. */
  timeoutMs: number;
}

/** A 413 naming the limit, so a client knows what to send instead. */
export function bodyTooLarge(limit: number): AppError {
  return new AppError(
    "request_too_large",
    `The request body is larger than this route accepts (${limit} bytes).`,
  );
}

/** A 408 for a body that did not arrive in time (the connection is closed after it). */
export function bodyTimedOut(timeoutMs: number): AppError {
  return new AppError(
    "request_timeout",
    `The request body did not arrive within ${Math.round(timeoutMs / 1000)} s.`,
  );
}

/**
 * The decoder for a request's `Content-Encoding`, `undefined` for identity.
 * @throws AppError `invalid_value` for an encoding the service cannot decode
 */
export function requestDecoder(req: IncomingMessage): Transform | undefined {
  const encoding = req.headers["content-encoding"]?.trim().toLowerCase();
  if (!encoding || encoding === "identity") return undefined;
  if (encoding === "gzip" || encoding === "x-gzip") return createGunzip();
  if (encoding === "deflate") return createInflate();
  if (encoding === "br") return createBrotliDecompress();
  throw new AppError("invalid_value", "The request body has an unsupported content encoding.");
}

/** A body still arriving, and what to do when its time is up. */
interface Deadline {
  at: number;
  expire: () => void;
}
const deadlines = new Set<Deadline>();
let sweeper: NodeJS.Timeout | undefined;
/** How often deadlines are checked: a body is cut at most this late. */
const SWEEP_MS = 250;

/**
 * Calls `expire` once `timeoutMs` have passed, unless the returned function
 * is called first. One shared timer checks every deadline instead of one
 * timer per request (a timer costs more than the rest of a small body's read).
 */
export function watchDeadline(timeoutMs: number, expire: () => void): () => void {
  const deadline = { at: performance.now() + timeoutMs, expire };
  deadlines.add(deadline);
  sweeper ??= setInterval(() => {
    const now = performance.now();
    for (const entry of deadlines) {
      if (entry.at > now) continue;
      deadlines.delete(entry);
      entry.expire();
    }
    if (deadlines.size === 0) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  }, SWEEP_MS).unref();
  return () => deadlines.delete(deadline);
}

/**
 * Reads a request body whole (JSON bodies are small by their route's limit),
 * decoded from gzip, deflate or br. The limit counts decoded bytes, so a
 * compressed bomb stops at the limit; the deadline counts from the call, so
 * a body that never ends is cut even though the server itself has no request
 * timeout (the synchronous image route needs minutes to answer, not to send).
 * @throws AppError `request_too_large`, `request_timeout`, or `invalid_value`
 *   (undecodable, or the client went away)
 */
export function readRequestBody(req: IncomingMessage, options: ReadBodyOptions): Promise<Buffer> {
  const { limit, timeoutMs } = options;
  const decoder = requestDecoder(req);
  const declared = Number(req.headers["content-length"]);
  // A body that says it is too big is refused before a byte of it is read.
  if (!decoder && declared > limit) return Promise.reject(bodyTooLarge(limit));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const source: Readable = decoder ? req.pipe(decoder) : req;
    const settle = (err: AppError | undefined, body?: Buffer) => {
      if (settled) return;
      settled = true;
      unwatch();
      source.off("data", onData);
      source.off("end", onEnd);
      if (err) {
        // Stop taking bytes in; the error answer closes the connection.
        req.unpipe();
        req.pause();
        decoder?.destroy();
        reject(err);
      } else {
        resolve(body as Buffer);
      }
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) settle(bodyTooLarge(limit));
      else chunks.push(chunk);
    };
    const onEnd = () =>
      settle(undefined, chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    const unwatch = watchDeadline(timeoutMs, () => settle(bodyTimedOut(timeoutMs)));
    source.on("data", onData);
    source.once("end", onEnd);
    source.once("error", () =>
      settle(
        new AppError(
          "invalid_value",
          decoder
            ? "The request body could not be decoded from its content encoding."
            : "The request was aborted.",
        ),
      ),
    );
    req.once("close", () => {
      if (!req.complete) settle(new AppError("invalid_value", "The request was aborted."));
    });
  });
}
