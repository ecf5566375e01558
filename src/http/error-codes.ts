import type { ErrorCode } from "../errors/service-error.js";

/** How one error code is answered over HTTP. */
export interface ErrorAnswer {
  status: number;
  /** The OpenAI error `type`. */
  type: string;
  /** The status when the service sheds load itself (`ServiceError.overloaded`). */
  overloadedStatus?: number;
}

/**
 * The one table from error code to HTTP status and OpenAI error `type`: every layer below the edge throws codes, and this alone
 * decides how they are answered. Kept pure so it can be read (and tested)
 * without running anything.
 */
export const ERROR_CODES: Readonly<Record<ErrorCode, ErrorAnswer>> = {
  missing_api_key: { status: 401, type: "invalid_request_error" },
  invalid_api_key: { status: 401, type: "invalid_request_error" },
  model_not_found: { status: 404, type: "invalid_request_error" },
  invalid_json: { status: 400, type: "invalid_request_error" },
  request_too_large: { status: 413, type: "invalid_request_error" },
  missing_required_parameter: { status: 400, type: "invalid_request_error" },
  invalid_value: { status: 400, type: "invalid_request_error" },
  unsupported_model: { status: 400, type: "invalid_request_error" },
  queue_full: { status: 429, type: "rate_limit_error" },
  too_many_tasks: { status: 429, type: "rate_limit_error" },
  too_many_event_streams: { status: 429, type: "rate_limit_error" },
  too_many_connections: { status: 429, type: "rate_limit_error" },
  // A client over its own share of something the service bounds per address (forward key checks).
  rate_limited: { status: 429, type: "rate_limit_error" },
  task_not_found: { status: 404, type: "invalid_request_error" },
  response_not_found: { status: 404, type: "invalid_request_error" },
  idempotency_key_conflict: { status: 409, type: "invalid_request_error" },
  upstream_rate_limited: { status: 429, type: "rate_limit_error" },
  // 503 when the service sheds load (forward mode's key checks at their limit), not a channel's fault.
  upstream_unavailable: { status: 502, type: "upstream_error", overloadedStatus: 503 },
  upstream_timeout: { status: 504, type: "upstream_error" },
  not_found: { status: 404, type: "invalid_request_error" },
  request_headers_too_large: { status: 431, type: "invalid_request_error" },
  request_timeout: { status: 408, type: "invalid_request_error" },
  service_unavailable: { status: 503, type: "server_error" },
  store_unavailable: { status: 503, type: "server_error" },
  storage_unavailable: { status: 503, type: "server_error" },
  invalid_response: { status: 502, type: "upstream_error" },
  internal_error: { status: 500, type: "server_error" },
};
