import type { ImageUrlSigner } from "../files/image-url-signer.js";
import { AppError } from "../http/app-error.js";
import { extensionOf } from "../files/image-type.js";
import type { TaskError, TaskRecord, TaskStatus } from "./task-record.js";

/** A task as clients see it. */
export interface TaskView {
  id: string;
  object: "image.task";
  status: TaskStatus;
  created: number;
  model: string;
  started_at?: number;
  completed_at?: number;
  expires_at?: number;
  data?: Array<{ url?: string; b64_json?: string; revised_prompt?: string }>;
  usage?: unknown;
  error?: TaskError;
}

/** What {@link presentTask} needs besides the record. */
export interface PresentDeps {
  /** The stored bytes of a task's image (`b64_json` answers). */
  imageBytes: (taskId: string, index: number) => Promise<Buffer | undefined>;
  signer: ImageUrlSigner;
  /** Origin the signed URLs start with, e.g. `https://images.example.com`. */
  baseUrl: string;
  /**
   * `data` as GET shows it (`full`), without `b64_json` payloads (`listed`:
   * the task list and webhook events; `url` items stay), or not at all
   * (`none`: the submit answer does not need the images).
   */
  data: "full" | "listed" | "none";
}

/**
 * The client's view of a task: images as signed URLs or base64, as the task
 * asked, and nothing internal (owner, upstream body, attempts).
 */
export async function presentTask(record: TaskRecord, deps: PresentDeps): Promise<TaskView> {
  const view: TaskView = {
    id: record.id,
    object: "image.task",
    status: record.status,
    created: record.created,
    model: record.model,
  };
  if (record.started_at !== undefined) view.started_at = record.started_at;
  if (record.completed_at !== undefined) view.completed_at = record.completed_at;
  if (record.expires_at !== undefined) view.expires_at = record.expires_at;
  if (record.error) view.error = record.error;
  if (record.status === "completed" && deps.data !== "none") {
    view.data = await Promise.all(
      (record.images ?? []).map(async (image, index) => {
        const extra =
          image.revised_prompt === undefined ? {} : { revised_prompt: image.revised_prompt };
        if (record.responseFormat === "url") {
          const path = deps.signer.path(
            record.id,
            index,
            extensionOf(image.mime),
            record.expires_at ?? 0,
          );
          return { url: `${deps.baseUrl}${path}`, ...extra };
        }
        if (deps.data === "listed") return extra;
        const bytes = await deps.imageBytes(record.id, index);
        if (!bytes) {
          // The bytes expired a moment before the record did.
          throw new AppError("task_not_found", `No task found with id '${record.id}'.`, {
            param: "task_id",
          });
        }
        return { b64_json: bytes.toString("base64"), ...extra };
      }),
    );
  }
  if (record.usage !== undefined) view.usage = record.usage;
  return view;
}
