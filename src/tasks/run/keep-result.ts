import type { Logger } from "pino";
import { keyLabelOf } from "../../auth/principal.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import { countTokens } from "../../metrics/token-counts.js";
import { imageUsageOf } from "../core/image-usage.js";
import { isPermanentImageStoreFailure } from "../../images/image-store-error.js";
import type { GeneratedImage } from "../core/generated-image.js";
import type { StoreAvailability } from "../core/store-availability.js";
import { settleRunFailure, type AbortReason, type RunFailureDeps } from "./run-failure.js";
import { TaskFailure } from "../core/task-failure.js";
import type { RunEnd, TaskFinisher } from "../service/task-finisher.js";
import type { TaskImages } from "../images/task-images.js";
import type { TaskRecord } from "../core/task-record.js";
import { untilAborted } from "./until-aborted.js";
import { releaseImageBuffers } from "./image-buffers.js";

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
  /** Told of each failed write, so the image store is checked again at once. */
  stores: Pick<StoreAvailability, "imagesFailed">;
  /** `images.writeRetrySec`: how long failed writes are retried, within the task's timeout. */
  writeRetryMs: number;
  /** Where a completed task's tokens are counted (`tokens_total`), as a synchronous call's. */
  metrics?: Pick<Metrics, "tokenSeries">;
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
 * Keeps a run's result: writes its images to the image store, then completes
 * the task with their keys, its expiry the one the keys were made for. A
 * write the store refuses for good (no bucket, no rights) fails the task
 * `storage_unavailable` at once; one that may heal is retried with backoff
 * for at most `writeRetryMs` and within the run (its timeout, a cancel, a
 * lost lease, a shutdown), then fails the same way: never `completed`
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
  const { images, finisher } = deps;
  const { id, attempts } = started;
  const atMs = deps.now();
  const planned = images.planResults(
    id,
    attempts,
    result.images,
    finisher.expiresAt(atMs, started),
  );
  let tries = 0;
  const written = await writeResult(
    deps,
    started,
    () => {
      tries += 1;
      return images.putResults(planned, result.images);
    },
    signal,
  );
  if (written !== "written") {
    await images.deleteResults(planned).catch(() => undefined);
    if (written.kind === "run_ended") {
      await settleRunFailure(deps.failure, started, signal, written.err, end);
      return;
    }
    await finisher.fail(
      started,
      "in_progress",
      new TaskFailure("storage_unavailable", written.message, "server_error"),
      { attempts, end },
    );
    return;
  }
  // Every put has settled and nothing reads the bytes after it: the next run decodes over them.
  // After a failed try, a put of that try may still be reading them: they are left to the GC.
  if (tries === 1) releaseImageBuffers(result.images.map((image) => image.bytes));
  const completed = await finisher.complete(
    started,
    attempts,
    { images: planned, usage: result.usage },
    { atMs, end },
  );
  // Cancelled, or given to another run, meanwhile: its images go.
  if (!completed) {
    await images.deleteResults(planned).catch(() => undefined);
    return;
  }
  const usage = imageUsageOf(result.usage);
  if (usage && deps.metrics) {
    countTokens(
      deps.metrics,
      {
        channel: end.channel ?? "other",
        model: started.model,
        group: started.group ?? "other",
        key: keyLabelOf({ subject: started.owner, keyName: started.keyName }),
      },
      usage,
    );
  }
}

/** How writing a result ended when it did not: the store gave up, or the run ended first. */
type NotWritten = { kind: "store_failed"; message: string } | { kind: "run_ended"; err: unknown };

/** Writes with `put` until it succeeds, the store refuses for good, the retries run out, or the run ends. */
async function writeResult(
  deps: KeepResultDeps,
  started: TaskRecord,
  put: () => Promise<void>,
  signal: AbortSignal,
): Promise<"written" | NotWritten> {
  const { logger } = deps;
  const taskId = started.id;
  let firstFailureMs: number | undefined;
  for (let wait = FIRST_RETRY_MS; ; wait = Math.min(wait * 2, LAST_RETRY_MS)) {
    try {
      await untilAborted(put(), signal);
      return "written";
    } catch (err) {
      if (signal.aborted) return endedBy(signal, err);
      deps.stores.imagesFailed();
      if (isPermanentImageStoreFailure(err)) {
        logger.error({ err, taskId }, "the image store refused a task's images; the task fails");
        return {
          kind: "store_failed",
          message: "The image store refused to keep the task's images.",
        };
      }
      firstFailureMs ??= Date.now();
      const left = firstFailureMs + deps.writeRetryMs - Date.now();
      if (left <= 0) {
        logger.error({ err, taskId }, "could not store a task's images in time; the task fails");
        return {
          kind: "store_failed",
          message: `The image store could not be written for ${Math.round(deps.writeRetryMs / 1000)} seconds.`,
        };
      }
      logger.warn({ err, taskId }, "could not store a task's images; retrying");
      try {
        await pause(Math.min(wait, left), signal);
      } catch {
        return endedBy(signal, err);
      }
    }
  }
}

/**
 * The run ended while its images were being written: its timeout fails the
 * task `storage_unavailable` (the store held it up); a cancel, a lost lease
 * or a shutdown ends it as they do.
 */
function endedBy(signal: AbortSignal, err: unknown): NotWritten {
  if ((signal.reason as AbortReason) === "timeout") {
    return {
      kind: "store_failed",
      message: "The image store could not be written within the task's timeout.",
    };
  }
  return { kind: "run_ended", err };
}
