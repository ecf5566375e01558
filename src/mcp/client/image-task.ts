import { z } from "zod";
import { TASK_STATUSES, type TaskEventStage, type TaskView } from "../../contract/task-contract.js";

/**
 * A task as the service shows it (the contract's `TaskView`), read loosely:
 * unknown fields kept, and only what the tools use checked, so a newer
 * service's additions never break an older MCP server.
 */
export const imageTaskSchema = z
  .object({
    id: z.string(),
    object: z.string().optional(),
    status: z.enum(TASK_STATUSES),
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

/** Every task the service shows reads as an {@link ImageTask}: the schema follows the contract. */
export type ContractFits = TaskView extends ImageTask ? true : never;
const _contractFits: ContractFits = true;
void _contractFits;

/** One event of a task's event stream (`GET /v1/images/tasks/{id}/events`). */
export interface ImageTaskEvent {
  type: TaskEventStage;
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
