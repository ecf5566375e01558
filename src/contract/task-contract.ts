/**
 * The image task as clients see it: its statuses, its id, its JSON shape and
 * its events. One module, free of dependencies (no Node, no zod), imported
 * alike by the service's presenters, the MCP client and the web console, so
 * that the shape a dialect presents, the one MCP reads and the one the
 * browser renders cannot drift apart.
 */

/** The four states of a task, in the order a task moves through them. */
export const TASK_STATUSES = ["queued", "in_progress", "completed", "failed"] as const;

/** `queued -> in_progress -> completed | failed`, and `queued -> failed`. */
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** The orders a task list can run in, by creation: `desc` (newest first, the default) or `asc`. */
export const LIST_ORDERS = ["desc", "asc"] as const;

/** One of {@link LIST_ORDERS}. */
export type ListOrder = (typeof LIST_ORDERS)[number];

/** Whether a task has ended and will not change again. */
export function isFinished(status: TaskStatus): boolean {
  return status === "completed" || status === "failed";
}

/**
 * A native task id: `task_` and at least 128 random bits in base64url (the
 * service makes 22 characters; up to 64 are accepted). No dots and no
 * separators, so an id is safe as a file name and a URL segment.
 */
export const TASK_ID_PATTERN = /^task_[A-Za-z0-9_-]{22,64}$/;

/** Whether `value` has the shape of a native task id ({@link TASK_ID_PATTERN}). */
export function isTaskId(value: string): boolean {
  return TASK_ID_PATTERN.test(value);
}

/**
 * The async dialects a task may be submitted in: the service's own routes
 * (`native`), sub2api's (`/v1/images/generations/async`) and Bifrost's
 * (`/v1/async/images/generations`). A task answers in the dialect it was
 * submitted in.
 */
export const TASK_DIALECTS = ["native", "sub2api", "bifrost"] as const;

/** One of {@link TASK_DIALECTS}. */
export type TaskDialect = (typeof TASK_DIALECTS)[number];

/**
 * A task submitted in sub2api's dialect: `imgtask_` and at least 128 random
 * bits in base64url, made by the same generator as native ids. A Bifrost job
 * has a native id ({@link TASK_ID_PATTERN}).
 */
export const SUB2API_TASK_ID_PATTERN = /^imgtask_[A-Za-z0-9_-]{22,64}$/;

/** Whether `value` has the shape of a sub2api task id ({@link SUB2API_TASK_ID_PATTERN}). */
export function isSub2apiTaskId(value: string): boolean {
  return SUB2API_TASK_ID_PATTERN.test(value);
}

/** Whether `value` has the shape of the id of any task the service keeps, native or sub2api. */
export function isAnyTaskId(value: string): boolean {
  return TASK_ID_PATTERN.test(value) || SUB2API_TASK_ID_PATTERN.test(value);
}

/**
 * A background response the service runs (`POST /v1/responses` with
 * `background: true`): `resp_` and at least 128 random bits in base64url (22
 * characters made; up to 64 accepted). A channel's own response ids may have
 * the same shape: whether an id is the service's is told by its store, not by
 * this pattern alone.
 */
export const RESPONSE_ID_PATTERN = /^resp_[A-Za-z0-9_-]{22,64}$/;

/** Whether `value` has the shape of a background response id ({@link RESPONSE_ID_PATTERN}). */
export function isResponseId(value: string): boolean {
  return RESPONSE_ID_PATTERN.test(value);
}

/** The longest a client may ask a poll or a submission to wait (`?wait=`, `Prefer: wait=`), in seconds. */
export const MAX_WAIT_SEC = 60;

// Type aliases rather than interfaces: they read as records with unknown fields (as a loose zod
// schema infers them), so a reader can check that every view fits what it parses.

/** Why a task failed, as clients see it in `error`. */
export type TaskError = {
  code: string;
  message: string;
  type: string;
};

/**
 * One image of a task as clients see it. `B64` is the type of a `b64_json`
 * payload: a string on the wire; the service writes it as a marker that is
 * replaced by the image's base64 as it streams the answer.
 */
export type TaskViewImage<B64 = string> = {
  url?: string;
  b64_json?: B64;
  revised_prompt?: string;
  /**
   * In a list, for a `b64_json` task (whose payloads a list leaves out): a
   * signed link to the same image, for a thumbnail.
   */
  thumbnail_url?: string;
};

/** A partial image of a running task as clients see it. */
export type TaskViewPartial<B64 = string> = {
  /** Its `partial_image_index`. */
  index: number;
  url?: string;
  b64_json?: B64;
  /** As {@link TaskViewImage.thumbnail_url}. */
  thumbnail_url?: string;
};

/**
 * What a task was submitted with, as its owner sees it: the values the
 * channel was sent, the partial images asked for and the `response_format`.
 * Never `user` or `webhook_url`.
 */
export type TaskParameters = {
  size?: string;
  quality?: string;
  n?: number;
  background?: string;
  output_format?: string;
  output_compression?: number;
  moderation?: string;
  /** Edits only. */
  input_fidelity?: string;
  /** Partial images asked for (1 to 3); absent: none. */
  partial_images?: number;
  response_format: "url" | "b64_json";
};

/** Token usage as the channel reported it for the task's images. */
export type TaskUsage = {
  input_tokens?: number;
  output_tokens?: number;
  total_tokens?: number;
  [detail: string]: unknown;
};

/** A task as `GET /v1/images/tasks/{id}`, the list, its events, webhooks and MCP show it. */
export type TaskView<B64 = string> = {
  id: string;
  object: "image.task";
  status: TaskStatus;
  created: number;
  model: string;
  /** `edit`: made by `POST /v1/images/edits/tasks`. Not in a submission's answer. */
  kind?: "generation" | "edit";
  /** As submitted; not in a submission's answer. */
  prompt?: string;
  /** As submitted; not in a submission's answer. */
  parameters?: TaskParameters;
  started_at?: number;
  completed_at?: number;
  expires_at?: number;
  data?: Array<TaskViewImage<B64>>;
  /** While the task runs: the partial images of its run so far, oldest first. */
  partial_images?: Array<TaskViewPartial<B64>>;
  /** On a partial image's event: which one it announces. */
  partial_image_index?: number;
  usage?: TaskUsage;
  error?: TaskError;
};

/** A page of `GET /v1/images/tasks`, newest first, in OpenAI's list shape. */
export type TaskPage<B64 = string> = {
  object: "list";
  data: Array<TaskView<B64>>;
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
};

/** The answer of `DELETE /v1/images/tasks/{task_id}`. */
export type TaskDeleted = {
  id: string;
  object: "image.task.deleted";
  deleted: true;
};

/** The stages a task's event stream tells, each as `image.task.<stage>`. */
export const TASK_EVENT_STAGES = [
  "queued",
  "in_progress",
  "partial_image",
  "completed",
  "failed",
] as const;

/** One stage of {@link TASK_EVENT_STAGES}. */
export type TaskEventStage = (typeof TASK_EVENT_STAGES)[number];

/** The SSE `event:` name of a stage (`image.task.completed`). */
export function taskEventName(stage: TaskEventStage): `image.task.${TaskEventStage}` {
  return `image.task.${stage}`;
}

/**
 * The synchronous image routes' body (`POST /v1/images/generations`), as the
 * dialects carry it in a finished task's `result`.
 */
export type SyncImagesBody<B64 = string> = {
  created: number;
  data: Array<TaskViewImage<B64>>;
  usage?: TaskUsage;
};

/**
 * A task in sub2api's dialect, as `POST /v1/images/generations/async`
 * answers it and `GET /v1/images/tasks/{imgtask_id}` (with the events, the
 * list and webhooks) shows it: `processing` while queued or running.
 */
export type Sub2apiTask<B64 = string> = {
  id: string;
  /** The same as `id`. */
  task_id: string;
  object: "image.generation.task";
  status: "processing" | "completed" | "failed";
  /** Unix seconds. */
  created_at: number;
  /**
   * Unix seconds: once finished, when the task expires; before, when it
   * would if it ran to its timeout from its creation.
   */
  expires_at: number;
  /** `/v1/images/tasks/{id}`, relative to the service's origin. */
  poll_url: string;
  /** Finished: the status `POST /v1/images/generations` would have answered (499: cancelled). */
  http_status?: number;
  /** Completed: the synchronous route's body. */
  result?: SyncImagesBody<B64>;
  /** Completed: the first image's `url`, where the task asked for links. */
  image_url?: string;
  completed_at?: number;
  error?: TaskError;
  /** While the task runs, as the native view shows them. */
  partial_images?: Array<TaskViewPartial<B64>>;
  /** On a partial image's event: which one it announces. */
  partial_image_index?: number;
};

/** A failure in Bifrost's dialect (its `BifrostError`). */
export type BifrostError = {
  is_bifrost_error: false;
  status_code: number;
  error: TaskError;
};

/**
 * A task in Bifrost's dialect (its `AsyncJobResponse`), as
 * `POST /v1/async/images/generations` answers it and
 * `GET /v1/async/images/generations/{id}` shows it. Times are RFC 3339.
 */
export type BifrostJob<B64 = string> = {
  id: string;
  status: "pending" | "processing" | "completed" | "failed";
  created_at: string;
  completed_at?: string;
  /** Once finished: when the job's result expires. */
  expires_at?: string;
  /** Finished: the status the synchronous route would have answered. */
  status_code?: number;
  /** Completed: the synchronous route's body. */
  result?: SyncImagesBody<B64>;
  error?: BifrostError;
};
