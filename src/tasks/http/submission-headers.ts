import type { IncomingMessage } from "node:http";
import { ServiceError } from "../../errors/service-error.js";

/**
 * Whether a submission asks to be answered with the new task's event stream
 * (`Accept: text/event-stream`, not refused with `q=0`).
 */
export function wantsEventStream(req: IncomingMessage): boolean {
  const accept = req.headers.accept;
  if (!accept) return false;
  return accept
    .split(",")
    .some(
      (range) =>
        /^\s*text\/event-stream\s*(;|$)/i.test(range) && !/;\s*q=0(\.0*)?\s*(;|$)/i.test(range),
    );
}

/** The `Idempotency-Key` header: 1 to 255 characters, when sent. */
export function idempotencyKeyOf(req: IncomingMessage): string | undefined {
  const value = req.headers["idempotency-key"];
  const key = Array.isArray(value) ? value.join(", ") : value;
  if (key !== undefined && (key.length === 0 || key.length > 255)) {
    throw new ServiceError("invalid_value", "Idempotency-Key must be 1 to 255 characters.", {
      param: "Idempotency-Key",
    });
  }
  return key;
}
