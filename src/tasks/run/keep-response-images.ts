import type { Logger } from "pino";
import { isPermanentImageStoreFailure } from "../../images/image-store-error.js";
import { partialKey, resultKey } from "../../images/image-keys.js";
import { decodeBase64Image, type DecodedImage } from "../../images/decode-base64-image.js";
import type { ImageRef } from "../core/response-state.js";
import type { StoreAvailability } from "../core/store-availability.js";
import { TaskFailure } from "../core/task-failure.js";
import type { TaskImage, TaskRecord } from "../core/task-record.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskImages } from "../images/task-images.js";
import type { ImageField } from "../responses/response-images.js";
import { untilAborted } from "./until-aborted.js";
import { SKIPPED_IN_ANSWER, warnSkippedOnce } from "./warn-skipped-once.js";

/** What {@link ResponseImages} works with. */
export interface ResponseImagesDeps {
  store: Pick<TaskStore, "transition">;
  images: Pick<TaskImages, "putResults" | "deleteResults">;
  logger: Logger;
  /** Told of each failed write, so the image store is checked again at once. */
  stores: Pick<StoreAvailability, "imagesFailed">;
  /** `images.writeRetrySec` in ms: how long a result's write is retried. */
  writeRetryMs: number;
  /** The latest a task that starts now can expire (`timeoutSec + retentionSec`), in seconds. */
  runLimitSec: number;
}

/** The run no longer holds its task (cancelled, or taken by another run): it stops writing. */
export class RunLost extends Error {
  constructor() {
    super("the response's run no longer holds its task");
  }
}

/** First wait after a failed write, doubled up to the last. */
const FIRST_RETRY_MS = 250;
const LAST_RETRY_MS = 5_000;

/**
 * Keeps the images of one run of a background response as its channel sends
 * them: each decoded, checked (PNG, JPEG or WebP, at most the channel's
 * `maxImageBytes`), written to the image store under the day the response
 * can last expire, and added to the record (`images` for results, `partials`
 * for partial images; a compare-and-set on the run's attempt), so that its
 * expiry or deletion deletes them. Where the base64 was, an {@link ImageRef}
 * is left. A result the channel repeats (its item in the final response) is
 * kept once. A partial image that cannot be kept is dropped. A result that is
 * not an image (or is larger than the channel allows) leaves its call
 * `failed` with a null `result`, as OpenAI shows a call that made no image,
 * and the response goes on: its text and usage were made and billed. A
 * result the image store cannot keep fails the response
 * (`storage_unavailable`).
 */
export class ResponseImages {
  private current: TaskRecord;
  /** Each result kept, by its item's id; null for one that was no image. */
  private readonly byItem = new Map<string, ImageRef | null>();
  private readonly untilSec: number;
  private readonly warnSkipped: (what: string) => void;

  /** The largest image taken: the channel's `maxImageBytes`, once it answered. */
  private maxImageBytes = 0;

  constructor(
    private readonly deps: ResponseImagesDeps,
    started: TaskRecord,
    private readonly signal: AbortSignal,
  ) {
    this.current = started;
    this.untilSec = (started.started_at ?? Math.floor(Date.now() / 1000)) + deps.runLimitSec;
    this.warnSkipped = warnSkippedOnce(deps.logger, started.id, SKIPPED_IN_ANSWER);
  }

  /** Takes images of at most `maxImageBytes` (the channel that answered says how large). */
  setLimit(maxImageBytes: number): void {
    this.maxImageBytes = maxImageBytes;
  }

  /** The result images kept so far. */
  get results(): TaskImage[] {
    return this.current.images ?? [];
  }

  /**
   * Keeps the image at `field` (its base64 replaced by a reference, or by null
   * when it is not a string); false when it is a partial image that could
   * not be kept (its event is dropped). A result that is no image leaves its
   * call failed (see the class).
   * @throws TaskFailure for a result the image store cannot keep
   * @throws RunLost when the run no longer holds its task
   */
  async keep(field: ImageField): Promise<boolean> {
    const { container } = field;
    const value = container[field.field];
    if (typeof value !== "string") {
      // Whatever else a channel put there is not kept, and never read as one of ours.
      if (value !== undefined) container[field.field] = null;
      return true;
    }
    const known = field.itemId === undefined ? undefined : this.byItem.get(field.itemId);
    if (known !== undefined) {
      if (known === null) failedCall(container);
      else container[field.field] = known;
      return true;
    }
    const image = this.decode(value);
    if (typeof image === "string") {
      if (field.kind === "partial") return false;
      if (field.itemId !== undefined) this.byItem.set(field.itemId, null);
      this.warnSkipped(`an image_generation_call's result (${image})`);
      failedCall(container);
      return true;
    }
    const kept = await (field.kind === "result" ? this.keepResult(image) : this.keepPartial(image));
    if (!kept) return false;
    const ref: ImageRef = { $image: { key: kept.key, bytes: kept.bytes } };
    if (field.itemId !== undefined && field.kind === "result") this.byItem.set(field.itemId, ref);
    container[field.field] = ref;
    return true;
  }

  /** The image base64 `value` holds, checked; else why it is not one to keep. */
  private decode(value: string): DecodedImage | string {
    const image = decodeBase64Image(value, this.maxImageBytes);
    if (image === "too_large") return `larger than ${this.maxImageBytes} bytes`;
    if (image === "not_an_image") return "not a PNG, JPEG or WebP";
    return image;
  }

  private async keepPartial(image: { bytes: Buffer; mime: string }) {
    const index = this.current.partials?.length ?? 0;
    const { id, attempts } = this.current;
    const kept = { ...image, key: partialKey(this.untilSec, id, index, image.mime, attempts) };
    try {
      await untilAborted(this.put(kept), this.signal);
    } catch (err) {
      if (this.signal.aborted) throw this.signal.reason;
      this.deps.stores.imagesFailed();
      this.deps.logger.warn({ err, taskId: id }, "could not keep a partial image; the run goes on");
      return undefined;
    }
    return this.record(kept, "partials");
  }

  private async keepResult(image: { bytes: Buffer; mime: string }) {
    const index = this.current.images?.length ?? 0;
    const { id, attempts } = this.current;
    const kept = { ...image, key: resultKey(this.untilSec, id, index, image.mime, attempts) };
    await this.putRetried(kept);
    return this.record(kept, "images");
  }

  /** Writes a result until it is kept, the store refuses for good, the retries run out, or the run ends. */
  private async putRetried(kept: { bytes: Buffer; mime: string; key: string }): Promise<void> {
    const { id } = this.current;
    let firstFailureMs: number | undefined;
    for (let wait = FIRST_RETRY_MS; ; wait = Math.min(wait * 2, LAST_RETRY_MS)) {
      try {
        await untilAborted(this.put(kept), this.signal);
        return;
      } catch (err) {
        if (this.signal.aborted) throw this.signal.reason;
        this.deps.stores.imagesFailed();
        firstFailureMs ??= Date.now();
        const left = firstFailureMs + this.deps.writeRetryMs - Date.now();
        if (isPermanentImageStoreFailure(err) || left <= 0) {
          this.deps.logger.error({ err, taskId: id }, "could not store a response's image");
          throw new TaskFailure(
            "storage_unavailable",
            "The image store could not keep the response's images.",
            "server_error",
          );
        }
        await untilAborted(
          new Promise((resolve) => setTimeout(resolve, Math.min(wait, left))),
          this.signal,
        );
      }
    }
  }

  private put(image: { bytes: Buffer; mime: string; key: string }): Promise<void> {
    const planned = { mime: image.mime, bytes: image.bytes.byteLength, key: image.key };
    return this.deps.images.putResults([planned], [image]);
  }

  /** Adds a kept image to the record, as this run; the image goes again when the run lost it. */
  private async record(
    image: { bytes: Buffer; mime: string; key: string },
    list: "images" | "partials",
  ): Promise<TaskImage> {
    const kept: TaskImage = { mime: image.mime, bytes: image.bytes.byteLength, key: image.key };
    const { id, attempts } = this.current;
    const updated = await untilAborted(
      this.deps.store.transition(
        id,
        "in_progress",
        { status: "in_progress", [list]: [...(this.current[list] ?? []), kept] },
        { attempts },
      ),
      this.signal,
    ).catch(async (err: unknown) => {
      await this.deps.images.deleteResults([kept]).catch(() => undefined);
      throw err;
    });
    if (!updated) {
      await this.deps.images.deleteResults([kept]).catch(() => undefined);
      throw new RunLost();
    }
    this.current = updated;
    return kept;
  }
}

/**
 * An `image_generation_call` whose result could not be had, shown as OpenAI
 * shows a call that made no image: `failed`, its `result` null.
 */
function failedCall(item: Record<string, unknown>): void {
  item.result = null;
  item.status = "failed";
}
