import { available } from "../../errors/store-unavailable.js";
import { storage } from "../../errors/storage-unavailable.js";
import { imageKeysOf, isFinished, type TaskRecord } from "../core/task-record.js";
import type { TaskImages } from "../images/task-images.js";
import { cancelTask, type CancelDeps } from "./cancel-task.js";
import { taskNotFound } from "./read-owned-task.js";
import { taskLine } from "./task-line.js";
import { logFields } from "../../logging/log-fields.js";

/** What {@link deleteTask} works with: a cancel's, and the image store's deletes. */
export interface DeleteDeps extends CancelDeps {
  images: Pick<TaskImages, "deleteResults" | "deleteInputs">;
}

/** Cancels tried before a task that keeps moving (handed back, run again) is deleted as it is. */
const CANCEL_TRIES = 3;

/**
 * Deletes a task its owner asked to delete (the owner already checked): an
 * unfinished one is cancelled first, as any cancel (its webhook, its final
 * event, which ends open event streams, its task line); then its images
 * (results, partial images, an edit's inputs) leave the image store, so even
 * links that point at the store itself stop working, and then the record
 * with every index entry, in one step. Images first: a store that fails in
 * between leaves a task the owner can delete again, never images nobody can
 * find. A task deleted meanwhile by another request is `task_not_found`, as
 * a second delete is. Resolves the record as it was deleted.
 */
export async function deleteTask(deps: DeleteDeps, record: TaskRecord): Promise<TaskRecord> {
  const { store, images, logger } = deps;
  let current = record;
  for (let tries = 0; !isFinished(current.status) && tries < CANCEL_TRIES; tries += 1) {
    current = await cancelTask(deps, current);
  }
  const dropped = new Set(imageKeysOf(current));
  await storage(() => dropImages(images, current));
  const deleted = await available(() => store.delete(current.id));
  if (!deleted) throw taskNotFound(current.id);
  // A task that kept running until the delete may hold images the first pass did not know.
  if (imageKeysOf(deleted).some((key) => !dropped.has(key))) {
    await dropImages(images, deleted).catch((err: unknown) => {
      logger.warn({ err, taskId: deleted.id }, "could not delete a deleted task's last images");
    });
  }
  logFields(logger, "info", taskLine(deleted), "task.deleted");
  return deleted;
}

/** Deletes the images `record` holds: results, partial images, an edit's inputs. */
async function dropImages(images: DeleteDeps["images"], record: TaskRecord): Promise<void> {
  const results = [...(record.images ?? []), ...(record.partials ?? [])];
  await Promise.all([
    results.length > 0 ? images.deleteResults(results) : undefined,
    record.inputs?.length ? images.deleteInputs(record.inputs) : undefined,
  ]);
}
