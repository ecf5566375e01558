import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { AppError } from "./app-error.js";

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
        ? new AppError("request_headers_too_large", "The request headers are too large.")
        : code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? new AppError("request_timeout", "The request took too long to arrive.")
          : new AppError("invalid_value", "The request is not valid HTTP.");
    const body = JSON.stringify(error.toJSON());
    socket.end(
      `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ""}\r\n` +
        "content-type: application/json; charset=utf-8\r\n" +
        `content-length: ${Buffer.byteLength(body)}\r\n` +
        "connection: close\r\n\r\n" +
        body,
    );
  };
}
