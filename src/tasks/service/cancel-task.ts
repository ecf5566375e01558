import type { Logger } from "pino";
import type { TaskQueue } from "../core/task-queue.js";
import type { TaskStore } from "../core/task-store.js";
import { available } from "../../errors/store-unavailable.js";
import type { TaskFinisher } from "./task-finisher.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";

const CANCELLED = {
  code: "cancelled",
  message: "The task was cancelled.",
  type: "cancelled",
} as const;

/** What {@link cancelTask} works with. */
export interface CancelDeps {
  store: TaskStore;
  queue: TaskQueue;
  finisher: TaskFinisher;
  logger: Logger;
}

/**
 * Fails a queued or running task with `cancelled`; a finished one is returned
 * as it is. The failure is written first, so a run's own completion loses the
 * race; then the run is stopped wherever it runs.
 */
export async function cancelTask(deps: CancelDeps, record: TaskRecord): Promise<TaskRecord> {
  const { store, queue, finisher, logger } = deps;
  const { id } = record;
  // Finished already: nothing to fail, and the record was just read.
  if (isFinished(record.status)) return record;
  return available(async () => {
    if (record.status === "queued") {
      const failed = await finisher.fail(record, "queued", CANCELLED);
      if (failed) {
        // Best effort: a job left behind finds its task failed and ends at once.
        await queue.remove({ taskId: id, owner: record.owner }).catch(() => false);
        return failed;
      }
    }
    if (record.status === "queued" || record.status === "in_progress") {
      // Queued a moment ago, or running: it may have started since.
      const failed = await finisher.fail(record, "in_progress", CANCELLED);
      if (failed) {
        // Best effort: a run that misses the message sees the failure on its next check.
        await queue.cancel(id).catch((err: unknown) => {
          logger.warn({ err, taskId: id }, "could not reach the run of a cancelled task");
        });
        return failed;
      }
    }
    // A race lost: the task finished meanwhile, as it now reads.
    return (await store.get(id)) ?? record;
  });
}
