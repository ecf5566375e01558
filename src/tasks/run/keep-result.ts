import type { Logger } from "pino";
import type { GeneratedImage } from "../core/generated-image.js";
import { settleRunFailure, type AbortReason, type RunFailureDeps } from "./run-failure.js";
import { TaskFailure } from "../core/task-failure.js";
import type { RunEnd, TaskFinisher } from "../service/task-finisher.js";
import type { TaskImages } from "../images/task-images.js";
import type { TaskRecord } from "../core/task-record.js";
import { untilAborted } from "./until-aborted.js";

/** First wait after a failed write, doubled each time up to the last. */
const FIRST_RETRY_MS = 250;
const LAST_RETRY_MS = 5_000;

/** What {@link keepResult} works with. */
export interface KeepResultDeps {
  images: Pick<TaskImages, "planResults" | "putResults" | "deleteResults">;
  finisher: TaskFinisher;
  logger: Logger;
  now: () => number;
  /** How a run that cannot keep its result ends (see `settleRunFailure`). */
  failure: RunFailureDeps;
}

/** Resolves after `ms`, or rejects as soon as `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(done, ms);
    function done() {
      signal.removeEventListener("abort", aborted);
      resolve();
    }
    function aborted() {
      clearTimeout(timer);
      reject(signal.reason);
    }
    if (signal.aborted) aborted();
    else signal.addEventListener("abort", aborted, { once: true });
  });
}

/**
 * Keeps a run's result: writes its images to the image store, retried with
 * backoff until they are written or the run ends (its timeout, a cancel, a
 * lost lease, a shutdown), then completes the task with their keys, its
 * expiry the one the keys were made for. A task whose images could not be
 * written within its timeout fails `storage_unavailable`: never `completed`
 * without its bytes, never stuck. Images of a task that was cancelled or
 * taken by another run meanwhile are deleted; whatever a crash leaves is in
 * the expiry day's folder, which the image store's sweep deletes.
 */
export async function keepResult(
  deps: KeepResultDeps,
  started: TaskRecord,
  result: { images: GeneratedImage[]; usage?: unknown },
  signal: AbortSignal,
  end: RunEnd = {},
): Promise<void> {
  const { images, finisher, logger } = deps;
  const { id, attempts } = started;
  const atMs = deps.now();
  const planned = images.planResults(id, attempts, result.images, finisher.expiresAt(atMs));
  for (let wait = FIRST_RETRY_MS; ; wait = Math.min(wait * 2, LAST_RETRY_MS)) {
    try {
      await untilAborted(images.putResults(planned, result.images), signal);
      break;
    } catch (err) {
      if (!signal.aborted) {
        logger.warn({ err, taskId: id }, "could not store a task's images; retrying");
        try {
          await pause(wait, signal);
          continue;
        } catch {
          // the run ended while waiting: settled below
        }
      }
      await images.deleteResults(planned).catch(() => undefined);
      if ((signal.reason as AbortReason) !== "timeout") {
        await settleRunFailure(deps.failure, started, signal, err, end);
        return;
      }
      await finisher.fail(
        id,
        "in_progress",
        new TaskFailure(
          "storage_unavailable",
          "The image store could not be written within the task's timeout.",
          "server_error",
        ).toTaskError(),
        { attempts, end },
      );
      return;
    }
  }
  const completed = await finisher.complete(
    id,
    attempts,
    { images: planned, usage: result.usage },
    { atMs, end },
  );
  // Cancelled, or given to another run, meanwhile: its images go.
  if (!completed) await images.deleteResults(planned).catch(() => undefined);
}
