/**
 * Every error code the service itself produces (the `error.code` clients
 * see). The HTTP edge maps each to a status and an OpenAI error `type` in one
 * table (`http/error-codes.ts`); nothing below it knows either.
 */
export type ErrorCode =
  | "missing_api_key"
  | "invalid_api_key"
  | "model_not_found"
  | "invalid_json"
  | "request_too_large"
  | "missing_required_parameter"
  | "invalid_value"
  | "unsupported_model"
  | "queue_full"
  | "too_many_tasks"
  | "too_many_event_streams"
  | "too_many_connections"
  | "rate_limited"
  | "task_not_found"
  | "response_not_found"
  | "idempotency_key_conflict"
  | "upstream_rate_limited"
  | "upstream_unavailable"
  | "upstream_timeout"
  | "not_found"
  | "request_headers_too_large"
  | "request_timeout"
  | "service_unavailable"
  | "store_unavailable"
  | "storage_unavailable"
  | "invalid_response"
  | "internal_error";

/** Options of a {@link ServiceError} beyond its code and message. */
export interface ServiceErrorOptions {
  /** The request field at fault, reported as `error.param`. */
  param?: string | null;
  /**
   * When a retry may succeed: seconds, or a value a gateway gave (an HTTP
   * date), passed on as it is. The edge answers it as `Retry-After`.
   */
  retryAfter?: number | string;
  /**
   * The service itself is shedding load, not failing: the edge answers the
   * code's overload status (503) where its table has one.
   */
  overloaded?: boolean;
  /**
   * The request may have run upstream (and been billed) although it failed:
   * a client must not send it again on its own.
   */
  mayHaveRun?: boolean;
  cause?: unknown;
}

/**
 * The one error type every layer throws for a failure a client should see:
 * a code from the service's vocabulary, a message in the service's own words
 * (never a secret, never a channel's text), and nothing about HTTP.
 */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly retryAfter: number | string | undefined;
  readonly overloaded: boolean;
  readonly mayHaveRun: boolean;

  constructor(code: ErrorCode, message: string, options: ServiceErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = "ServiceError";
    this.code = code;
    this.param = options.param ?? null;
    this.retryAfter = options.retryAfter;
    this.overloaded = options.overloaded ?? false;
    this.mayHaveRun = options.mayHaveRun ?? false;
  }
}
