import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type { Logger } from "pino";
import type { ImagesConfig } from "../config/schema/images-schema.js";
import { extensionOf } from "../files/image-type.js";
import type { ImageUrlSigner } from "../files/image-url-signer.js";
import { AppError } from "../http/app-error.js";
import { inputKey, partialKey, resultKey } from "../images/image-keys.js";
import type { ImageObject, ImageStore } from "../images/image-store.js";
import type { GeneratedImage } from "./generate-images.js";
import type { TaskStore } from "./store/task-store.js";
import { available } from "./store-available.js";
import { imageKeysOf, type TaskImage, type TaskInput, type TaskRecord } from "./task-record.js";

/** SigV4's longest presigned link: 7 days. */
const PRESIGN_MAX_SEC = 7 * 24 * 3600;

/** Dependencies of {@link createTaskImages}. */
export interface TaskImagesDeps {
  imageStore: ImageStore;
  /** Reads the bytes of records written before the image store (legacy). */
  taskStore: Pick<TaskStore, "getImage" | "getInput">;
  signer: ImageUrlSigner;
  config: Pick<ImagesConfig, "links" | "publicBaseUrl">;
  logger: Logger;
  now: () => number;
  /**
   * The longest from a task's start to its expiry (`timeoutSec` +
   * `retentionSec`): how long a running task's partial image links last.
   */
  runLimitSec: number;
}

/** The images of tasks: where they are written, read, linked to and deleted. */
export type TaskImages = ReturnType<typeof createTaskImages>;

/** An image store failure as clients see it: 503 `storage_unavailable`, retry shortly. */
export function storageUnavailable(cause: unknown): AppError {
  return new AppError("storage_unavailable", "The image store cannot be reached; retry shortly.", {
    headers: { "Retry-After": "5" },
    cause,
  });
}

async function storage<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw storageUnavailable(err);
  }
}

/** Bytes kept in the task store (records from before the image store), as an object to stream. */
function legacyObject(bytes: Buffer, mime: string): ImageObject {
  return {
    body: Readable.from([bytes]),
    size: bytes.byteLength,
    contentType: mime,
    etag: `"${createHash("sha256").update(bytes).digest("base64url").slice(0, 27)}"`,
  };
}

/**
 * A task's images in the image store: results under the day the task
 * expires, an edit's inputs under the last day they may be needed. Records
 * carry each image's key; a record without keys was written before the image
 * store, and its bytes are read from the task store as they always were.
 */
export function createTaskImages(deps: TaskImagesDeps) {
  const { imageStore, taskStore, signer, config } = deps;
  const nowSec = () => Math.floor(deps.now() / 1000);

  /**
   * A link to `image` (file `file` of task `taskId` on the service's own
   * route), valid until `expiresAt`, as `mode` asks: public, presigned
   * (signed as of `signedFrom`, so every poll and replica gives the same
   * link; past SigV4's 7 days, a link signed this hour, for as long as
   * allowed), or the service's own signed URL (the only one a legacy image has).
   */
  async function linkTo(
    taskId: string,
    image: TaskImage | undefined,
    file: { name: string | number; ext: string },
    times: { expiresAt: number; signedFrom: number },
    baseUrl: string,
    mode: ImagesConfig["links"],
  ): Promise<string> {
    const { expiresAt, signedFrom } = times;
    if (image?.key && mode === "public" && config.publicBaseUrl) {
      return `${config.publicBaseUrl}/${imageStore.objectKey(image.key)}`;
    }
    if (image?.key && mode === "presigned" && imageStore.presign) {
      const signedAt =
        expiresAt - signedFrom <= PRESIGN_MAX_SEC
          ? signedFrom
          : Math.max(signedFrom, Math.floor(nowSec() / 3600) * 3600);
      const key = image.key;
      return storage(() =>
        imageStore.presign!(key, {
          signingDate: new Date(signedAt * 1000),
          expiresInSec: Math.max(1, Math.min(PRESIGN_MAX_SEC, expiresAt - signedAt)),
        }),
      );
    }
    return `${baseUrl}${signer.path(taskId, file.name, file.ext, expiresAt)}`;
  }

  /**
   * The `url` of a result image, as `images.links` asks, or as `mode` asks
   * (the MCP server asks for the service's own links, the one origin it
   * downloads from). A legacy image has only the service's own.
   */
  async function link(
    record: TaskRecord,
    index: number,
    baseUrl: string,
    mode: ImagesConfig["links"] = config.links,
  ): Promise<string> {
    const image = record.images?.[index];
    const ext = extensionOf(image?.mime ?? "image/png");
    const expiresAt = record.expires_at ?? 0;
    const signedFrom = record.completed_at ?? nowSec();
    return linkTo(record.id, image, { name: index, ext }, { expiresAt, signedFrom }, baseUrl, mode);
  }

  /**
   * The latest a running task's partial images may be needed: when the task
   * would expire if it finished at its timeout (its links last that long).
   */
  const partialsUntil = (record: TaskRecord) =>
    record.expires_at ?? (record.started_at ?? nowSec()) + deps.runLimitSec;

  return {
    link,

    /** The `url` of partial image `index` of a task (file `partial-<index>.<ext>` on the service). */
    async partialLink(
      record: TaskRecord,
      index: number,
      baseUrl: string,
      mode: ImagesConfig["links"] = config.links,
    ): Promise<string> {
      const image = record.partials?.[index];
      const ext = extensionOf(image?.mime ?? "image/png");
      const times = { expiresAt: partialsUntil(record), signedFrom: record.started_at ?? nowSec() };
      return linkTo(record.id, image, { name: `partial-${index}`, ext }, times, baseUrl, mode);
    },

    /** Partial image `index` of a task as a stream; undefined when it is not stored (any more). */
    async openPartial(
      record: TaskRecord,
      index: number,
      signal?: AbortSignal,
    ): Promise<ImageObject | undefined> {
      const key = record.partials?.[index]?.key;
      return key === undefined ? undefined : storage(() => imageStore.get(key, signal));
    },

    /**
     * Writes partial image `index` of the running task's current run, under
     * the last day its links may be used (its task's own expiry deletes it
     * sooner, with the task); resolves what the record keeps of it. Not
     * retried: a draft that cannot be kept is skipped, the run goes on.
     */
    async putPartial(
      record: TaskRecord,
      index: number,
      image: { bytes: Buffer; mime: string },
    ): Promise<TaskImage> {
      const key = partialKey(partialsUntil(record), record.id, index, image.mime, record.attempts);
      await imageStore.put(key, image.bytes, image.mime);
      return { mime: image.mime, bytes: image.bytes.byteLength, key };
    },

    /**
     * Result image `index` of a record, as a stream; undefined when it is not
     * stored (any more). The image store away: 503 `storage_unavailable`.
     */
    async open(
      record: TaskRecord,
      index: number,
      signal?: AbortSignal,
    ): Promise<ImageObject | undefined> {
      const image = record.images?.[index];
      if (!image) return undefined;
      if (image.key) {
        const key = image.key;
        return storage(() => imageStore.get(key, signal));
      }
      // Bytes from before the image store: the task store's failure is its own 503.
      const bytes = await available(() => taskStore.getImage(record.id, index));
      return bytes && legacyObject(bytes, image.mime);
    },

    /**
     * What the record keeps of the images run `attempt` made: their keys start
     * with the day the task expires, `expiresAtSec`, and are the run's own.
     */
    planResults(
      taskId: string,
      attempt: number,
      images: readonly GeneratedImage[],
      expiresAtSec: number,
    ): TaskImage[] {
      return images.map(({ bytes, mime, revised_prompt }, index) => ({
        mime,
        bytes: bytes.byteLength,
        ...(revised_prompt === undefined ? {} : { revised_prompt }),
        key: resultKey(expiresAtSec, taskId, index, mime, attempt),
      }));
    },

    /** Writes a result's images under their planned keys, all at once (the caller retries). */
    async putResults(planned: readonly TaskImage[], images: readonly GeneratedImage[]) {
      await Promise.all(
        planned.map((image, index) => imageStore.put(image.key!, images[index]!.bytes, image.mime)),
      );
    },

    /** Deletes result images (a run that lost its task, or could not store them all). */
    async deleteResults(images: readonly TaskImage[]): Promise<void> {
      await imageStore.delete(imageKeysOf({ images }));
    },

    /**
     * Writes an edit's input images before its task is created, under the
     * last day the task can need them (`untilSec`); 503 `storage_unavailable`
     * when the image store is away. Resolves the inputs as the record keeps them.
     */
    async putInputs(
      taskId: string,
      inputs: ReadonlyArray<{ field: TaskInput["field"]; mime: string; bytes: Buffer }>,
      untilSec: number,
    ): Promise<TaskInput[]> {
      return storage(() =>
        Promise.all(
          inputs.map(async ({ field, mime, bytes }, index) => {
            const key = inputKey(untilSec, taskId, index, mime);
            await imageStore.put(key, bytes, mime);
            return { field, mime, bytes: bytes.byteLength, key };
          }),
        ),
      );
    },

    /** An edit's input images, in order; an image no longer stored is undefined. */
    async readInputs(record: TaskRecord): Promise<Array<Buffer | undefined>> {
      return Promise.all(
        (record.inputs ?? []).map(async (input, index) => {
          if (!input.key) return taskStore.getInput(record.id, index);
          const found = await imageStore.get(input.key);
          if (!found) return undefined;
          const chunks: Buffer[] = [];
          for await (const chunk of found.body) chunks.push(chunk as Buffer);
          return Buffer.concat(chunks);
        }),
      );
    },

    /**
     * Deletes an edit's input images (its task finished, or was never
     * created); those of a task from before the image store go with the
     * task store's own finishing step.
     */
    async deleteInputs(inputs: readonly TaskInput[]): Promise<void> {
      await imageStore.delete(imageKeysOf({ inputs }));
    },
  };
}
