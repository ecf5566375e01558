import type { IncomingMessage } from "node:http";
import type { Readable, Transform } from "node:stream";
import { ServiceError } from "../errors/service-error.js";
import { contentDecoder } from "../net/content-decoder.js";
import { watchBody, type BodyTiming } from "./watch-body.js";

/** Limits of {@link readRequestBody}. */
export interface ReadBodyOptions extends BodyTiming {
  /** Largest body accepted, after decoding, in bytes. */
  limit: number;
}

/** A 413 naming the limit, so a client knows what to send instead. */
export function bodyTooLarge(limit: number): ServiceError {
  return new ServiceError(
    "request_too_large",
    `The request body is larger than this route accepts (${limit} bytes).`,
  );
}

/**
 * The decoder for a request's `Content-Encoding`, `undefined` for identity.
 * @throws ServiceError `invalid_value` for an encoding the service cannot decode
 */
export function requestDecoder(req: IncomingMessage): Transform | undefined {
  const encoding = req.headers["content-encoding"]?.trim().toLowerCase();
  if (!encoding || encoding === "identity") return undefined;
  const decoder = contentDecoder(encoding);
  if (decoder) return decoder;
  throw new ServiceError("invalid_value", "The request body has an unsupported content encoding.");
}

/**
 * Reads a request body whole (JSON bodies are small by their route's limit),
 * decoded from gzip, deflate or br. The limit counts decoded bytes, so a
 * compressed bomb stops at the limit; the time limits ({@link watchBody}) count
 * from the call, so a body that never ends, or stops arriving, is cut even
 * though the server itself has no request timeout (the synchronous image
 * route needs minutes to answer, not to send).
 * @throws ServiceError `request_too_large`, `request_timeout`, or `invalid_value`
 *   (undecodable, or the client went away)
 */
export function readRequestBody(req: IncomingMessage, options: ReadBodyOptions): Promise<Buffer> {
  const { limit } = options;
  const decoder = requestDecoder(req);
  const declared = Number(req.headers["content-length"]);
  // A body that says it is too big is refused before a byte of it is read.
  if (!decoder && declared > limit) return Promise.reject(bodyTooLarge(limit));
  if (decoder) return readStreamed(req, options, decoder);
  const atHand = takeArrived(req, limit, declared);
  if (atHand) return Promise.resolve(atHand);
  return readStreamed(req, options, undefined);
}

/**
 * The request's body, taken at once, when all of it has arrived (a small
 * body comes in the packet of its headers) and is neither encoded nor over
 * `limit`; else `undefined`, and {@link readRequestBody} reads it. Lets the
 * passthrough go on without waiting on a promise for the usual chat body.
 */
export function bodyAtHand(req: IncomingMessage, limit: number): Buffer | undefined {
  const encoding = req.headers["content-encoding"];
  if (encoding !== undefined && encoding !== "identity") return undefined;
  return takeArrived(req, limit, Number(req.headers["content-length"]));
}

function takeArrived(req: IncomingMessage, limit: number, declared: number): Buffer | undefined {
  const arrived = arrivedBody(req, limit);
  if (arrived) return arrived;
  return declared <= limit && bufferedWhole(req, declared) ? afterParse(req) : undefined;
}

/** Set on a request whose body {@link afterParse} took before its message completed. */
const TAKEN_WHOLE = Symbol("bodyTakenWhole");

/**
 * Whether all of the request's body has been read, though Node's parser may
 * not have marked its message complete yet (see {@link afterParse}): an
 * answer then leaves no byte unread, and the connection can take the next
 * request.
 */
export function bodyReadWhole(req: IncomingMessage): boolean {
  return req.complete || (req as { [TAKEN_WHOLE]?: true })[TAKEN_WHOLE] === true;
}

/**
 * A body whose bytes are all in the request's buffer while its message is
 * not complete yet: the route runs between the parse of the body and that of
 * the message's end (Node runs the microtasks after each callback of its
 * parser), and nothing can come between the two but the parser completing
 * the message. Taken at once, as {@link arrivedBody} takes it, rather than
 * read through listeners, a timer watch and a promise per request, or a turn
 * of the event loop later (a `setImmediate` until 2026-12-04: an `epoll`
 * call more per request). Resumed, so that its `end` (and `close`) come when
 * the parser completes it, as for a body read to its end.
 */
function afterParse(req: IncomingMessage): Buffer {
  const body = req.read(req.readableLength) as Buffer;
  (req as { [TAKEN_WHOLE]?: true })[TAKEN_WHOLE] = true;
  req.resume();
  return body;
}

/** Whether all of a body framed by its `Content-Length` waits in the request's buffer. */
function bufferedWhole(req: IncomingMessage, declared: number): boolean {
  return (
    declared > 0 &&
    req.readableLength === declared &&
    req.headers["transfer-encoding"] === undefined &&
    req.readableFlowing === null &&
    req.readableEncoding === null &&
    !req.readableEnded &&
    !req.destroyed
  );
}

/** Reads a body as it arrives, decoded, within the limit and the time limits. */
function readStreamed(
  req: IncomingMessage,
  options: ReadBodyOptions,
  decoder: Transform | undefined,
): Promise<Buffer> {
  const { limit } = options;
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const source: Readable = decoder ? req.pipe(decoder) : req;
    const settle = (err: ServiceError | undefined, body?: Buffer) => {
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
    const unwatch = watchBody(req, options, settle);
    // `on`, not `once`, for what comes at most once or is settled once: `once` costs a
    // wrapper per listener per request, and `settle` ignores all but the first.
    source.on("data", onData);
    source.on("end", onEnd);
    source.on("error", () =>
      settle(
        new ServiceError(
          "invalid_value",
          decoder
            ? "The request body could not be decoded from its content encoding."
            : "The request was aborted.",
        ),
      ),
    );
    req.on("close", () => {
      if (!req.complete) settle(new ServiceError("invalid_value", "The request was aborted."));
    });
  });
}

/**
 * The body when all of it has arrived already and waits in the request's
 * buffer, its message complete (a small body comes in the packet that brought
 * the headers; see {@link afterParse} for one read before its message
 * completed): taken at once, with
 * no listener, timer or watch, as nothing more can arrive. `undefined` when
 * some of it is still to come, nobody may read it from the start any more,
 * it is empty, or over `limit`: the stream then reads it.
 */
function arrivedBody(req: IncomingMessage, limit: number): Buffer | undefined {
  const taken = req.readableFlowing !== null || req.readableEncoding !== null;
  if (!req.complete || taken || req.readableEnded || req.destroyed) return undefined;
  const size = req.readableLength;
  if (size === 0 || size > limit) return undefined;
  // Not flowing and ended: read() hands over the whole buffer, and "end" follows.
  return req.read(size) as Buffer;
}
