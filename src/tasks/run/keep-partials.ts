import type { Logger } from "pino";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { StreamedImage } from "./read-image-stream.js";
import type { StoreAvailability } from "../core/store-availability.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskFinisher } from "../service/task-finisher.js";
import type { TaskImages } from "../images/task-images.js";
import type { TaskImage, TaskRecord } from "../core/task-record.js";
import { NOOP_SPAN, type Span } from "../../tracing/tracer.js";
import { untilAborted } from "./until-aborted.js";

/** What {@link keepPartials} works with. */
export interface KeepPartialsDeps {
  store: Pick<TaskStore, "transition">;
  images: Pick<TaskImages, "putPartial" | "deleteResults">;
  finisher: Pick<TaskFinisher, "announce">;
  metrics: Metrics;
  logger: Logger;
  /** Told of a failed write, so the image store is checked again at once. */
  stores?: Pick<StoreAvailability, "imagesFailed">;
}

/**
 * Keeps the partial images of run `started` as the channel sends them, one
 * at a time: each is written to the image store once, added to the record
 * (a compare-and-set on the run's attempt, so a run that lost its task adds
 * nothing) and announced as `image.task.partial_image`, its index its place
 * among those kept. A draft that cannot be kept (the image store or the task
 * store away) is skipped and the run goes on: only the result is the task's.
 * Returns the handler for each partial image.
 */
export function keepPartials(
  deps: KeepPartialsDeps,
  started: TaskRecord,
  signal: AbortSignal,
  span: Span = NOOP_SPAN,
): (index: number, image: StreamedImage) => Promise<void> {
  const { store, images, finisher, metrics, logger } = deps;
  let current = started;
  const skipped = (err: unknown) => {
    metrics.taskPartialImages.inc({ outcome: "failed" });
    if (!signal.aborted) {
      logger.warn({ err, taskId: started.id }, "could not keep a partial image; the run goes on");
    }
  };

  return async (_channelIndex, image) => {
    const index = current.partials?.length ?? 0;
    let kept: TaskImage;
    try {
      kept = await untilAborted(images.putPartial(current, index, image), signal);
    } catch (err) {
      if (!signal.aborted) deps.stores?.imagesFailed();
      skipped(err);
      return;
    }
    let updated: TaskRecord | undefined;
    try {
      updated = await untilAborted(
        store.transition(
          started.id,
          "in_progress",
          { status: "in_progress", partials: [...(current.partials ?? []), kept] },
          { attempts: started.attempts },
        ),
        signal,
      );
    } catch (err) {
      updated = undefined;
      skipped(err);
    }
    if (!updated) {
      // Not kept (the store is away, or the task is no longer this run's): its draft goes.
      await images.deleteResults([kept]).catch(() => undefined);
      return;
    }
    current = updated;
    metrics.taskPartialImages.inc({ outcome: "stored" });
    finisher.announce("partial_image", updated, index);
    span.addEvent("image.task.partial_image", { "image_task.partial_image_index": index });
  };
}
