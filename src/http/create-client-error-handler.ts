import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { ServiceError } from "../errors/service-error.js";
import { errorResponse } from "./send-error.js";

/**
 * Node answers requests it cannot parse (headers too large, broken HTTP)
 * itself, with an empty body, before any route runs. This handler gives them
 * the OpenAI envelope like every other error.
 */
export function createClientErrorHandler(): (err: Error, socket: Duplex) => void {
  return (err, socket) => {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    const error =
      code === "HPE_HEADER_OVERFLOW"
        ? new ServiceError("request_headers_too_large", "The request headers are too large.")
        : code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? new ServiceError("request_timeout", "The request took too long to arrive.")
          : new ServiceError("invalid_value", "The request is not valid HTTP.");
    const { status, body: envelope } = errorResponse(error);
    const body = JSON.stringify(envelope);
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\n` +
        "content-type: application/json; charset=utf-8\r\n" +
        `content-length: ${Buffer.byteLength(body)}\r\n` +
        "connection: close\r\n\r\n" +
        body,
    );
  };
}
