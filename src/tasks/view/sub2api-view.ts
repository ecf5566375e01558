import type { Sub2apiTask } from "../../contract/task-contract.js";
import { retentionSecOf, type TaskRecord } from "../core/task-record.js";
import type { PendingImage, TaskView } from "./present-task.js";
import { syncBodyOf, syncStatusOf } from "./sync-answer.js";

/** A task in sub2api's dialect, `b64_json` payloads still to be read. */
export type Sub2apiView = Sub2apiTask<PendingImage>;

/** The limits a sub2api task's `expires_at` comes from (`imageTasks`). */
export interface Sub2apiLimits {
  timeoutSec: number;
  retentionSec: number;
}

/** The fields a sub2api task's webhook event carries (the view's own, nothing else). */
export const SUB2API_EVENT_FIELDS: ReadonlyArray<keyof Sub2apiView> = [
  "id",
  "task_id",
  "object",
  "status",
  "http_status",
  "image_url",
  "result",
  "error",
  "created_at",
  "completed_at",
  "expires_at",
  "poll_url",
];

/**
 * A task as sub2api shows it, over its native view: `processing` while
 * queued or running; once completed, `http_status: 200`, the synchronous
 * route's body as `result` and the first link as `image_url`; once failed,
 * the status the synchronous route would have answered and the error.
 * `expires_at` is the task's own once it has finished; before, the moment it
 * would expire if it ran to its timeout from its creation.
 */
export function presentSub2api(
  record: TaskRecord,
  view: TaskView,
  limits: Sub2apiLimits,
): Sub2apiView {
  const status =
    record.status === "completed" || record.status === "failed" ? record.status : "processing";
  // In sub2api's own field order: JSON readers do not care, people reading answers do.
  const shown: Sub2apiView = {
    id: record.id,
    task_id: record.id,
    object: "image.generation.task",
    status,
  } as Sub2apiView;
  if (status !== "processing") shown.http_status = syncStatusOf(record);
  if (status === "completed" && view.data) {
    const url = view.data.find((image) => image.url !== undefined)?.url;
    if (url !== undefined) shown.image_url = url;
    shown.result = syncBodyOf(record, view);
  }
  if (status === "failed" && record.error) {
    const { type, code, message } = record.error;
    shown.error = { type, code, message };
  }
  shown.created_at = record.created;
  if (record.completed_at !== undefined) shown.completed_at = record.completed_at;
  shown.expires_at =
    record.expires_at ??
    record.created + limits.timeoutSec + retentionSecOf(record, limits.retentionSec);
  shown.poll_url = `/v1/images/tasks/${record.id}`;
  if (view.partial_images) shown.partial_images = view.partial_images;
  return shown;
}
