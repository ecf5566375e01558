import type { IncomingMessage, ServerResponse } from "node:http";
import { watchBody, type BodyTiming } from "./watch-body.js";

/** Whether a request says it has a body (a length above 0, or chunked). */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/**
 * Bounds a body that the route answering it did not read (a `GET /healthz`
 * sent with a body, an answer given before the upload ended): once the answer
 * is out with the body still arriving, the connection takes no further
 * request (its sending side is ended), the rest of the body is read and
 * dropped, and the connection is destroyed when the body has taken
 * `timing.timeoutMs` since the request began or went silent for
 * `timing.idleMs`. Node alone would drain such a body for as long as the
 * client trickles it, on a connection that no timer covers.
 *
 * Draining first rather than closing at once: closing a socket with unread
 * bytes arriving resets it, and a client still sending can lose the answer.
 */
export function closeAfterUnreadBody(
  req: IncomingMessage,
  res: ServerResponse,
  timing: BodyTiming,
): void {
  const socket = req.socket;
  const started = performance.now();
  // A route that answers at once answers before the rest of the packet that brought its
  // headers is parsed: whether the body is all there is known once that is done. A body read
  // whole already (the usual case) needs nothing.
  // "finish" comes at most once (`on`: `once` costs a wrapper per request).
  res.on("finish", () => {
    if (!req.complete) setImmediate(drain);
  });
  const drain = () => {
    if (req.complete || socket.destroyed) return;
    socket.end();
    req.unpipe();
    req.resume();
    const left = timing.timeoutMs - (performance.now() - started);
    if (left <= 0) {
      socket.destroy();
      return;
    }
    const unwatch = watchBody(req, { timeoutMs: left, idleMs: timing.idleMs }, () =>
      socket.destroy(),
    );
    req.once("end", unwatch);
    socket.once("close", unwatch);
  };
}
