import type { SyncImagesBody } from "../../contract/task-contract.js";
import type { ErrorCode } from "../../errors/service-error.js";
import { ERROR_CODES } from "../../http/error-codes.js";
import type { TaskRecord } from "../core/task-record.js";
import type { PendingImage, TaskView } from "./present-task.js";

/**
 * A task cancelled by its owner: the status nginx (and sub2api) give a
 * request whose client gave up on it.
 */
export const CANCELLED_STATUS = 499;

/**
 * Codes a task fails with that are not the service's own error codes, as the
 * synchronous route names the same failure: the one table then gives the status.
 */
const AS_SYNC_CODE: Readonly<Record<string, ErrorCode>> = {
  // The channel did not finish in time.
  timeout: "upstream_timeout",
  // The service stopped under the request.
  interrupted: "service_unavailable",
  // A channel's answer that could not be used (an image link that broke, an error event).
  upstream_error: "invalid_response",
  rate_limit_exceeded: "upstream_rate_limited",
  // Forward mode: the submitter's key can no longer be used.
  credential_unavailable: "invalid_api_key",
  // An edit's images were gone before it ran.
  invalid_request: "invalid_value",
};

/**
 * The status `POST /v1/images/generations` (or `/edits`) would have answered
 * for what the task ended with: 200 once completed; for a failure, the
 * channel's status where it came from a channel's error answer, 499 for a
 * cancel, else the status the error table gives the failure's code (502 for
 * a code it does not know).
 */
export function syncStatusOf(
  record: Pick<TaskRecord, "status" | "error" | "failureStatus">,
): number {
  if (record.status === "completed") return 200;
  if (record.failureStatus !== undefined) return record.failureStatus;
  const code = record.error?.code ?? "";
  if (code === "cancelled") return CANCELLED_STATUS;
  const ours = Object.hasOwn(ERROR_CODES, code)
    ? (code as ErrorCode)
    : Object.hasOwn(AS_SYNC_CODE, code)
      ? AS_SYNC_CODE[code]
      : undefined;
  return ours ? ERROR_CODES[ours].status : 502;
}

/**
 * A completed task's result as the synchronous route's body: `created`
 * (its completion), its images as the task asked for them, and `usage`.
 */
export function syncBodyOf(
  record: Pick<TaskRecord, "created" | "completed_at">,
  view: Pick<TaskView, "data" | "usage">,
): SyncImagesBody<PendingImage> {
  const body: SyncImagesBody<PendingImage> = {
    created: record.completed_at ?? record.created,
    data: view.data ?? [],
  };
  if (view.usage !== undefined) body.usage = view.usage;
  return body;
}
