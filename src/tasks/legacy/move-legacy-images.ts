import type { Logger } from "pino";
import { inputKey, resultKey } from "../../images/image-keys.js";
import type { ImageStore } from "../../images/image-store.js";
import type { TaskImage, TaskInput, TaskRecord } from "../core/task-record.js";
import type { LegacyTask, LegacyTaskData } from "./legacy-task-data.js";

/** Tasks read per round. */
const BATCH = 50;
/** Tries per task whose record another process changes meanwhile. */
const MAX_TRIES = 5;

/** Options of {@link moveLegacyImages}. */
export interface MoveLegacyImagesOptions {
  legacy: LegacyTaskData;
  imageStore: ImageStore;
  /** `imageTasks.retentionSec` and `timeoutSec`: how long an edit's inputs are kept. */
  limits: { retentionSec: number; timeoutSec: number };
  logger: Logger;
  /** The clock, in ms (default `Date.now`). */
  now?: () => number;
}

/**
 * Moves image bytes that releases before the image store kept in the task
 * store into the image store, and gives each record its images' keys, so
 * that nothing past start-up reads a task any other way. Idempotent and safe
 * to run on several replicas at once (the keys are the same; each record is
 * written by a compare-and-set). Resolves how many tasks it moved.
 */
export async function moveLegacyImages(options: MoveLegacyImagesOptions): Promise<number> {
  const { legacy, logger } = options;
  let moved = 0;
  for (;;) {
    const batch = await legacy.tasksWithBytes(BATCH);
    if (batch.length === 0) break;
    for (const task of batch) {
      await moveTask(options, task);
      moved += 1;
    }
  }
  await legacy.finish();
  if (moved > 0) {
    logger.info(
      { tasks: moved },
      "moved the images of tasks from an earlier release into the image store",
    );
  }
  return moved;
}

async function moveTask(options: MoveLegacyImagesOptions, first: LegacyTask): Promise<void> {
  let task = first;
  for (let tries = 1; ; tries += 1) {
    const record = task.record && (await withKeys(options, task, task.record));
    if (await options.legacy.settle(task, record)) return;
    if (tries >= MAX_TRIES) throw new Error(`task ${task.id} kept changing while its images moved`);
    task = await options.legacy.reload(task.id);
  }
}

/**
 * The record with a key for each image and input, their bytes written under
 * it first. An image whose bytes had already expired gets a key too, which
 * points at nothing: it reads as gone, as it did.
 */
async function withKeys(
  options: MoveLegacyImagesOptions,
  task: LegacyTask,
  record: TaskRecord,
): Promise<TaskRecord> {
  const { imageStore, limits } = options;
  const put = async (key: string, bytes: Buffer | undefined, mime: string) => {
    if (bytes) await imageStore.put(key, bytes, mime);
  };
  const images = await Promise.all(
    (record.images ?? []).map(async (image: Partial<TaskImage>, index): Promise<TaskImage> => {
      const mime = image.mime ?? "image/png";
      if (image.key) return image as TaskImage;
      const expiresAt =
        record.expires_at ?? record.created + limits.retentionSec + limits.timeoutSec;
      const key = resultKey(expiresAt, record.id, index, mime, Math.max(1, record.attempts));
      await put(key, task.images.get(index), mime);
      return { ...(image as Omit<TaskImage, "key">), key };
    }),
  );
  // Kept as if the task were submitted now: one still queued runs after the upgrade, however
  // old it is, and an image key whose day has passed is swept at once. Replicas upgrading on
  // different days write different keys; the record keeps one, the other is swept in its time.
  const fromSec = Math.max(record.created, Math.floor((options.now ?? Date.now)() / 1000));
  const untilSec = fromSec + limits.retentionSec + limits.timeoutSec;
  const inputs = await Promise.all(
    (record.inputs ?? []).map(async (input: Partial<TaskInput>, index): Promise<TaskInput> => {
      const mime = input.mime ?? "image/png";
      if (input.key) return input as TaskInput;
      const key = inputKey(untilSec, record.id, index, mime);
      await put(key, task.inputs.get(index), mime);
      return { ...(input as Omit<TaskInput, "key">), key };
    }),
  );
  return {
    ...record,
    ...(record.images ? { images } : {}),
    ...(record.inputs ? { inputs } : {}),
  };
}
