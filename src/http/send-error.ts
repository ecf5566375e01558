import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import { ServiceError } from "../errors/service-error.js";
import { ERROR_CODES } from "./error-codes.js";
import { bodyReadWhole } from "./read-body.js";

/** Turns anything thrown into a {@link ServiceError}; unknown errors become a bland 500. */
export function toServiceError(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  // A client error a Node or library layer raised with a status (a corrupt compressed body,
  // say) is the client's fault: a 400 envelope, not a 500.
  const status = (err as { status?: unknown } | null)?.status;
  if (typeof status === "number" && status >= 400 && status < 500) {
    return status === 413
      ? new ServiceError(
          "request_too_large",
          "The request body is larger than the service accepts.",
        )
      : new ServiceError("invalid_value", "The request could not be read.", { cause: err });
  }
  return new ServiceError("internal_error", "The service failed to handle the request.", {
    cause: err,
  });
}

/** An error as HTTP answers it: status, headers and the OpenAI envelope. */
export interface ErrorResponse {
  status: number;
  headers: Record<string, string>;
  body: OpenAIErrorBody;
}

/** The OpenAI error envelope. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** How `err` is answered: the {@link ERROR_CODES} table applied to what the error says. */
export function errorResponse(err: unknown): ErrorResponse {
  const error = toServiceError(err);
  const answer = ERROR_CODES[error.code];
  const headers: Record<string, string> = {};
  if (error.retryAfter !== undefined) headers["Retry-After"] = String(error.retryAfter);
  // The official SDKs retry a 502 or 504 on their own; this header, which they honour, keeps
  // them from sending again a request that a channel may have run (and billed).
  if (error.mayHaveRun) headers["x-should-retry"] = "false";
  return {
    status: (error.overloaded ? answer.overloadedStatus : undefined) ?? answer.status,
    headers,
    body: {
      error: { message: error.message, type: answer.type, param: error.param, code: error.code },
    },
  };
}

/**
 * The one place errors become responses: writes any error as the OpenAI
 * envelope on a plain Node response (every lane's failures end here, through
 * the edge); a 500 is logged, never shown. Returns the error's code, for the
 * caller to record in the request's context (its access line, its span).
 */
export function sendError(
  req: IncomingMessage,
  res: ServerResponse,
  err: unknown,
  logger: Logger,
): string {
  const answer = errorResponse(err);
  const code = answer.body.error.code as string;
  if (answer.status === 500) {
    logger.error({ err, method: req.method, path: req.url?.split("?")[0] }, "unhandled error");
  }
  if (res.headersSent) {
    // A stream was already under way: all that is left is to cut it.
    res.destroy();
    return code;
  }
  const body = JSON.stringify(answer.body);
  res.writeHead(answer.status, {
    ...answer.headers,
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    // A body left unread (refused, too large, too slow) is not waited for: the
    // connection closes after the answer instead of draining whatever follows.
    ...(bodyReadWhole(req) ? {} : { connection: "close" }),
  });
  res.end(body);
  return code;
}
