import type { IncomingMessage, ServerResponse } from "node:http";
import type { ErrorRequestHandler, RequestHandler } from "express";
import type { Logger } from "pino";
import { AppError } from "./app-error.js";
import { shorten } from "./shorten.js";

/** body-parser errors carry a `type`; these are the ones a client can cause. */
const BODY_PARSER_ERRORS: Record<string, () => AppError> = {
  "entity.parse.failed": () => new AppError("invalid_json", "The request body is not valid JSON."),
  "entity.too.large": () =>
    new AppError("request_too_large", "The request body is larger than the service accepts."),
  "encoding.unsupported": () =>
    new AppError("invalid_value", "The request body has an unsupported content encoding."),
  "charset.unsupported": () =>
    new AppError("invalid_value", "The request body has an unsupported charset."),
  "request.aborted": () => new AppError("invalid_value", "The request was aborted."),
  "request.size.invalid": () =>
    new AppError("invalid_value", "The request body does not match its Content-Length."),
};

/** Turns anything thrown into an {@link AppError}; unknown errors become a bland 500. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const type = (err as { type?: unknown } | null)?.type;
  if (typeof type === "string" && BODY_PARSER_ERRORS[type]) return BODY_PARSER_ERRORS[type]();
  // Other client errors Express raises (a corrupt gzip body, a broken %-escape in the path)
  // are the client's fault: a 400 envelope, not a 500.
  const status = (err as { status?: unknown } | null)?.status;
  if (typeof status === "number" && status >= 400 && status < 500) {
    return status === 413
      ? BODY_PARSER_ERRORS["entity.too.large"]!()
      : new AppError("invalid_value", "The request could not be read.", { cause: err });
  }
  return new AppError("internal_error", "The service failed to handle the request.", {
    cause: err,
  });
}

/**
 * The one place errors become responses: every route's failures reach the
 * client as the OpenAI envelope, never as a stack trace or HTML.
 */
export function createErrorMiddleware(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => sendError(req, res, err, logger);
}

/**
 * Writes any error as the OpenAI envelope on a plain Node response; the
 * Express error middleware and the proxy lane (which runs outside Express)
 * both end here.
 */
export function sendError(
  req: IncomingMessage,
  res: ServerResponse,
  err: unknown,
  logger: Logger,
): void {
  const appError = toAppError(err);
  if (appError.status >= 500 && appError.code === "internal_error") {
    logger.error({ err, method: req.method, path: req.url?.split("?")[0] }, "unhandled error");
  }
  if (res.headersSent) {
    // A stream was already under way: all that is left is to cut it.
    res.destroy();
    return;
  }
  const body = JSON.stringify(appError.toJSON());
  res.writeHead(appError.status, {
    ...appError.headers,
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    // A body left unread (refused, too large, too slow) is not waited for: the
    // connection closes after the answer instead of draining whatever follows.
    ...(req.complete ? {} : { connection: "close" }),
  });
  res.end(body);
}

/** Unknown routes: a 404 envelope instead of Express's HTML page. */
export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new AppError("not_found", `Unknown route: ${req.method} ${shorten(req.path)}`));
};
