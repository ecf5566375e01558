/** Why a call to the image-task HTTP API failed, so tools can turn it into a clear message. */
export type ImageTaskApiErrorKind = "http" | "network" | "timeout" | "protocol" | "refused";

/**
 * A failed call to the HTTP API. `message` is written for the person reading the tool result:
 * it names the status and OpenAI error code and says what to do, and never holds a key, a stack
 * or a raw response body.
 */
export class ImageTaskApiError extends Error {
  constructor(
    readonly kind: ImageTaskApiErrorKind,
    message: string,
    readonly status?: number,
    readonly code?: string,
  ) {
    super(message);
    this.name = "ImageTaskApiError";
  }
}

/** Codes that say the caller's credential is wrong. */
const CREDENTIAL_CODES = new Set(["missing_api_key", "invalid_api_key"]);

/** Codes of the service's or its channels' own trouble: nothing the caller did. */
const TROUBLE_CODES = new Set([
  "upstream_unavailable",
  "upstream_timeout",
  "invalid_response",
  "service_unavailable",
  "store_unavailable",
  "storage_unavailable",
  "internal_error",
]);

/**
 * What the reader of a refusal can do about it, from its error code (and,
 * over HTTP, its status when the answer had no code); undefined when the
 * message says it all.
 */
export function refusalHint(
  code: string | undefined,
  status: number | undefined,
  retryAfterSec: number | undefined,
  credentialHint: string,
): string | undefined {
  if ((code && CREDENTIAL_CODES.has(code)) || status === 401 || status === 403) {
    return credentialHint;
  }
  switch (code) {
    case "task_not_found":
      return "Tasks are visible only to the key that submitted them, and expire after a while.";
    case "model_not_found":
      return "Use a model this key may use (gpt-image-1 by default).";
    case "unsupported_model":
      return "Only gpt-image-* models run as image tasks.";
    case "queue_full":
    case "rate_limited":
      return retryAfterSec === undefined
        ? "Try again in a little while."
        : `Try again in about ${retryAfterSec} s.`;
    default:
      return (code && TROUBLE_CODES.has(code)) || (status ?? 0) >= 500
        ? "The service or its upstream is having trouble; try again later."
        : undefined;
  }
}

/**
 * The error a tool shows when the task service, called in process, refused
 * an operation: its error code and message, and what to do. No HTTP status:
 * nothing went over HTTP.
 */
export function serviceRefusal(
  refusal: { code: string; message: string; retryAfterSec?: number | undefined },
  credentialHint: string,
): ImageTaskApiError {
  const parts = [`The image service refused (${refusal.code}): ${refusal.message}`];
  const hint = refusalHint(refusal.code, undefined, refusal.retryAfterSec, credentialHint);
  if (hint) parts.push(hint);
  return new ImageTaskApiError("refused", parts.join(" "), undefined, refusal.code);
}
