/** The four states of a task, in the order a task moves through them. */
export const TASK_STATUSES = ["queued", "in_progress", "completed", "failed"] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** An image of a task: a link, or its base64 (never in a list). */
export interface TaskImage {
  url?: string;
  b64_json?: string;
  /** In a list, for a `b64_json` task: a signed link to the same image (no bearer needed). */
  thumbnail_url?: string;
  revised_prompt?: string;
}

/** A partial image of a running task. */
export interface TaskPartial extends TaskImage {
  index: number;
}

/** What the task was submitted with, as the API shows its owner. */
export interface TaskParameters {
  size?: string;
  quality?: string;
  n?: number;
  background?: string;
  output_format?: string;
  output_compression?: number;
  moderation?: string;
  input_fidelity?: string;
  partial_images?: number;
  response_format?: "url" | "b64_json";
}

/** A finished task's token counts, each where the channel gave it. */
export interface TaskUsage {
  input_tokens?: number;
  output_tokens?: number;
  total_tokens?: number;
}

/** A task as `GET /v1/images/tasks/{id}`, the list and the events show it. */
export interface Task {
  id: string;
  object: "image.task";
  status: TaskStatus;
  created: number;
  model: string;
  kind?: "generation" | "edit";
  prompt?: string;
  parameters?: TaskParameters;
  started_at?: number;
  completed_at?: number;
  expires_at?: number;
  data?: TaskImage[];
  partial_images?: TaskPartial[];
  /** On a partial image's event: which one it announces. */
  partial_image_index?: number;
  /** As the channel reported it (gpt-image: input, output and total tokens). */
  usage?: TaskUsage;
  error?: { code: string; message: string; type?: string };
}

/** A page of `GET /v1/images/tasks`. */
export interface TaskPage {
  object: "list";
  data: Task[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/** Whether the task has ended and will not change again. */
export function isFinished(status: TaskStatus): boolean {
  return status === "completed" || status === "failed";
}

/** Task ids as the service makes them: anything else is not looked up. */
export const TASK_ID = /^task_[A-Za-z0-9_-]{22,64}$/;

/** `DELETE /v1/images/tasks/{id}`'s answer. */
export interface TaskDeleted {
  id: string;
  object: "image.task.deleted";
  deleted: true;
}
