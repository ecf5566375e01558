import { responseStatusOf, type ResponseStatus } from "../core/response-state.js";
import type { TaskRecord } from "../core/task-record.js";

type Json = Record<string, unknown>;

/**
 * The Response object of a background response as it stands, in OpenAI's
 * shape: the one the channel ended it with (its output, usage, its own error)
 * once there is one, else one made from the request (`queued`,
 * `in_progress`, `cancelled`, or `failed` with the service's error). Its id
 * is the service's, `background` true; images stay {@link ImageRef}s (see
 * `restoreImages`).
 */
export function responseObject(record: TaskRecord): Json {
  const status = responseStatusOf(record);
  const { final } = record.response ?? {};
  if (final && (status === "completed" || status === "incomplete" || status === "failed")) {
    // Kept as what differs from the request's echo (see keptObject).
    const own = ownObject(record, { ...responseShell(record, status), ...final }, status);
    own.completed_at ??= record.completed_at ?? null;
    return own;
  }
  const shell = responseShell(record, status);
  if (status === "failed" && record.error) {
    shell.error = { code: errorCodeOf(record.error.code), message: record.error.message };
  }
  if (status !== "queued" && status !== "in_progress") {
    shell.completed_at = record.completed_at ?? null;
  }
  return shell;
}

/**
 * A Response object the channel sent (in an event or its answer), made the
 * service's: its id, `created_at`, `background: true`, and the
 * `previous_response_id` the client named (the channel was sent its own).
 */
export function ownObject(record: TaskRecord, object: Json, status?: ResponseStatus): Json {
  const own: Json = {
    ...object,
    id: record.id,
    object: "response",
    created_at: record.created,
    background: true,
  };
  if (status !== undefined) own.status = status;
  own.previous_response_id = record.response?.previous ?? null;
  return own;
}

/** The fields {@link ownObject} sets: a final object is kept without them. */
const OWN_FIELDS = ["id", "object", "created_at", "background", "previous_response_id"];

/**
 * A final Response object as the record keeps it: what differs from the
 * object its request stands for ({@link responseShell}: the settings it
 * echoes, OpenAI's defaults), without what {@link ownObject} puts back. So a
 * long `instructions` or list of `tools` is kept once, in the request.
 */
export function keptObject(record: TaskRecord, object: Json): Json {
  const shell = responseShell(record, "completed");
  return Object.fromEntries(
    Object.entries(object).filter(
      ([name, value]) =>
        !OWN_FIELDS.includes(name) && JSON.stringify(value) !== JSON.stringify(shell[name]),
    ),
  );
}

/** The Response object a request stands for, before its channel said anything (or after a cancel). */
export function responseShell(record: TaskRecord, status: ResponseStatus): Json {
  const body = record.request;
  const given = (key: string, fallback: unknown) => body[key] ?? fallback;
  return {
    id: record.id,
    object: "response",
    created_at: record.created,
    status,
    background: true,
    completed_at: null,
    error: null,
    incomplete_details: null,
    instructions: given("instructions", null),
    max_output_tokens: given("max_output_tokens", null),
    max_tool_calls: given("max_tool_calls", null),
    model: record.model,
    output: [],
    parallel_tool_calls: given("parallel_tool_calls", true),
    previous_response_id: record.response?.previous ?? null,
    prompt_cache_key: given("prompt_cache_key", null),
    reasoning: given("reasoning", { effort: null, summary: null }),
    safety_identifier: given("safety_identifier", null),
    service_tier: given("service_tier", "auto"),
    store: body.store !== false,
    temperature: given("temperature", 1),
    text: given("text", { format: { type: "text" }, verbosity: "medium" }),
    tool_choice: given("tool_choice", "auto"),
    tools: given("tools", []),
    top_logprobs: given("top_logprobs", 0),
    top_p: given("top_p", 1),
    truncation: given("truncation", "disabled"),
    usage: null,
    user: given("user", null),
    metadata: given("metadata", {}),
  };
}

/**
 * The Responses API's error codes a failure is shown with: the task's own
 * where it is one of them (`rate_limit_exceeded`, ...), else `server_error`
 * (a timeout, an interrupted run, an unreachable channel). The message keeps
 * the detail.
 */
const RESPONSE_ERROR_CODES = new Set([
  "server_error",
  "rate_limit_exceeded",
  "invalid_prompt",
  "vector_store_timeout",
  "invalid_image",
  "invalid_image_format",
  "invalid_base64_image",
  "invalid_image_url",
  "image_too_large",
  "image_too_small",
  "image_parse_error",
  "image_content_policy_violation",
  "invalid_image_mode",
  "image_file_too_large",
  "unsupported_image_media_type",
  "empty_image_file",
  "failed_to_download_image",
  "image_file_not_found",
]);

function errorCodeOf(code: string): string {
  return RESPONSE_ERROR_CODES.has(code) ? code : "server_error";
}
