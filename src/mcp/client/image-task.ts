import { z } from "zod";

/** A task as the HTTP API shows it, read loosely (unknown fields kept). */
export const imageTaskSchema = z
  .object({
    id: z.string(),
    object: z.string().optional(),
    status: z.enum(["queued", "in_progress", "completed", "failed"]),
    created: z.number().optional(),
    model: z.string().optional(),
    started_at: z.number().nullish(),
    completed_at: z.number().nullish(),
    expires_at: z.number().nullish(),
    data: z
      .array(
        z
          .object({
            url: z.string().optional(),
            b64_json: z.string().optional(),
            revised_prompt: z.string().nullish(),
          })
          .loose(),
      )
      .nullish(),
    error: z
      .object({
        code: z.string().nullish(),
        message: z.string().nullish(),
        type: z.string().nullish(),
      })
      .loose()
      .nullish(),
  })
  .loose();

/** A task as the HTTP API returns it (`GET /v1/images/tasks/{id}`). */
export type ImageTask = z.infer<typeof imageTaskSchema>;

export const TASK_EVENT_STAGES = [
  "queued",
  "in_progress",
  "partial_image",
  "completed",
  "failed",
] as const;

/** One event of a task's event stream (`GET /v1/images/tasks/{id}/events`). */
export interface ImageTaskEvent {
  type: (typeof TASK_EVENT_STAGES)[number];
  /** The task as the event shows it. */
  task: ImageTask;
  /** Which partial image a `partial_image` event announces (0-based). */
  partialImageIndex?: number;
}

/** Options of {@link ImageTaskApiClient.watchTask}. */
export interface WatchTaskOptions {
  /** How long to follow the task (at most 60 s). */
  waitSeconds: number;
  signal?: AbortSignal;
  onEvent(event: ImageTaskEvent): void;
}
