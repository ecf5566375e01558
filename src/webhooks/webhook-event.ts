import { randomBytes } from "node:crypto";

/** The two events a task sends, one per task, when it finishes. */
export type WebhookEventType = "image.task.completed" | "image.task.failed";

/** The body POSTed to a `webhook_url`. */
export interface WebhookEvent {
  /** `evt_` and 128 random bits; also the `webhook-id` header, the same on every attempt. */
  id: string;
  object: "event";
  type: WebhookEventType;
  /** Unix seconds when the event was made (the task's finish), as the task's `created`. */
  created_at: number;
  /** The task as `GET /v1/images/tasks/{id}` shows it, without `b64_json` payloads. */
  data: Record<string, unknown>;
}

/** The least of a task view an event needs; the task core's `TaskView` is one. */
export interface FinishedTaskView {
  id: string;
  status: string;
  data?: readonly object[];
}

/**
 * The fields of a task view an event carries: those GET documents. Anything
 * else (a stored record's `owner`, `request`, `webhook_url`) stays out, even
 * if a caller passes more than the view.
 */
const TASK_VIEW_FIELDS = [
  "id",
  "object",
  "status",
  "created",
  "model",
  "kind",
  "prompt",
  "parameters",
  "started_at",
  "completed_at",
  "expires_at",
  "data",
  "usage",
  "error",
] as const;

/** The shape every event id we issue has. */
export const EVENT_ID_PATTERN = /^evt_[A-Za-z0-9_-]{22}$/;

/** `evt_` and 128 random bits (base64url, 22 characters). */
export function newEventId(): string {
  return `evt_${randomBytes(16).toString("base64url")}`;
}

/**
 * The event for a finished task. Made once, when the task finishes, and kept
 * with the delivery: every attempt sends these same bytes under the same id,
 * even after the task itself has expired (the retry schedule may outlast
 * `retentionSec`).
 *
 * `b64_json` is dropped from every image item (an event carries no image
 * bytes, as the task list does not); `url` and `revised_prompt` stay. Only
 * the fields GET documents are copied (`options.fields`: those of the
 * dialect the task was submitted in): pass the view, but a record passed by
 * mistake leaks nothing internal.
 *
 * @throws Error when the task has not finished: only `completed` and `failed` send events.
 */
export function createWebhookEvent(
  task: FinishedTaskView,
  options: { id?: string; createdAt?: number; fields?: readonly string[] } = {},
): WebhookEvent {
  if (task.status !== "completed" && task.status !== "failed") {
    throw new Error(`A task in status ${task.status} sends no webhook event.`);
  }
  const view = task as unknown as Record<string, unknown>;
  const data: Record<string, unknown> = {};
  // An async dialect's view names its own fields (`options.fields`); still only those are copied.
  for (const field of options.fields ?? TASK_VIEW_FIELDS) {
    if (view[field] !== undefined) data[field] = view[field];
  }
  if (task.data) {
    data.data = task.data.map((item) => {
      const { b64_json: _dropped, ...rest } = item as { b64_json?: unknown };
      return rest;
    });
  }
  return {
    id: options.id ?? newEventId(),
    object: "event",
    type: task.status === "completed" ? "image.task.completed" : "image.task.failed",
    created_at: options.createdAt ?? Math.floor(Date.now() / 1000),
    data,
  };
}
