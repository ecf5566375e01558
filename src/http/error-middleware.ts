import type { ErrorRequestHandler, RequestHandler } from "express";
import type { Logger } from "pino";
import { ServiceError } from "../errors/service-error.js";
import { shorten } from "../errors/shorten.js";
import { sendError } from "./send-error.js";

/**
 * Express's error middleware: every route's failures reach the client as the
 * OpenAI envelope (see `sendError`), never as a stack trace or HTML.
 */
export function createErrorMiddleware(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => sendError(req, res, err, logger);
}

/** Unknown routes: a 404 envelope instead of Express's HTML page. */
export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new ServiceError("not_found", `Unknown route: ${req.method} ${shorten(req.path)}`));
};
