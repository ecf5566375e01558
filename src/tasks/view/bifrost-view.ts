import type { BifrostJob } from "../../contract/task-contract.js";
import { createdMsOf, type TaskRecord } from "../core/task-record.js";
import type { PendingImage, TaskView } from "./present-task.js";
import { syncBodyOf, syncStatusOf } from "./sync-answer.js";

/** A task in Bifrost's dialect, `b64_json` payloads still to be read. */
export type BifrostView = BifrostJob<PendingImage>;

/** The fields a Bifrost job's webhook event carries (the view's own, nothing else). */
export const BIFROST_EVENT_FIELDS: ReadonlyArray<keyof BifrostView> = [
  "id",
  "status",
  "expires_at",
  "created_at",
  "completed_at",
  "status_code",
  "result",
  "error",
];

const STATUS: Record<TaskRecord["status"], BifrostView["status"]> = {
  queued: "pending",
  in_progress: "processing",
  completed: "completed",
  failed: "failed",
};

/** Unix seconds (or ms) as RFC 3339, in UTC. */
const rfc3339 = (ms: number) => new Date(ms).toISOString();

/**
 * A task as Bifrost's async inference API shows a job (its
 * `AsyncJobResponse`), over its native view: `pending` while queued,
 * `processing` while running; once finished, `status_code` (the status the
 * synchronous route would have answered), `expires_at`, and the
 * synchronous route's body as `result` or a `BifrostError` as `error`.
 */
export function presentBifrost(record: TaskRecord, view: TaskView): BifrostView {
  const shown: BifrostView = { id: record.id, status: STATUS[record.status], created_at: "" };
  if (record.expires_at !== undefined) shown.expires_at = rfc3339(record.expires_at * 1000);
  shown.created_at = rfc3339(createdMsOf(record));
  if (record.completed_at !== undefined) shown.completed_at = rfc3339(record.completed_at * 1000);
  if (record.status === "completed" || record.status === "failed") {
    shown.status_code = syncStatusOf(record);
  }
  if (record.status === "completed" && view.data) shown.result = syncBodyOf(record, view);
  if (record.status === "failed" && record.error) {
    const { type, code, message } = record.error;
    shown.error = {
      is_bifrost_error: false,
      status_code: syncStatusOf(record),
      error: { type, code, message },
    };
  }
  return shown;
}
