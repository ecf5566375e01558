import type { ImagesConfig } from "../../config/schema/images-schema.js";
import { inputKey, partialKey, resultKey } from "../../images/image-keys.js";
import type { ImageObject } from "../../images/image-store.js";
import type { GeneratedImage } from "../core/generated-image.js";
import {
  imageKeysOf,
  type TaskImage,
  type TaskInput,
  type TaskRecord,
} from "../core/task-record.js";
import { partialLink, partialsUntil, resultLink } from "./image-links.js";
import type { TaskImagesDeps, TaskImagesState } from "./task-images-deps.js";

export type { TaskImagesDeps } from "./task-images-deps.js";
import { storage } from "../../errors/storage-unavailable.js";
import { readWhole } from "../../images/read-whole.js";

/** The images of tasks: where they are written, read, linked to and deleted. */
export interface TaskImages {
  /**
   * The `url` of a result image, as `images.links` asks, or as `mode` asks
   * (the MCP server asks for the service's own links, the one origin it
   * downloads from).
   */
  link(
    record: TaskRecord,
    index: number,
    baseUrl: string,
    mode?: ImagesConfig["links"],
  ): Promise<string>;
  /** The `url` of partial image `index` of a task (file `partial-<index>.<ext>` on the service). */
  partialLink(
    record: TaskRecord,
    index: number,
    baseUrl: string,
    mode?: ImagesConfig["links"],
  ): Promise<string>;
  /** Partial image `index` of a task as a stream; undefined when it is not stored (any more). */
  openPartial(
    record: TaskRecord,
    index: number,
    signal?: AbortSignal,
  ): Promise<ImageObject | undefined>;
  /**
   * Writes partial image `index` of the running task's current run, under
   * the last day its links may be used (its task's own expiry deletes it
   * sooner, with the task); resolves what the record keeps of it. Not
   * retried: a draft that cannot be kept is skipped, the run goes on.
   */
  putPartial(
    record: TaskRecord,
    index: number,
    image: { bytes: Buffer; mime: string },
  ): Promise<TaskImage>;
  /**
   * Result image `index` of a record, as a stream; undefined when it is not
   * stored (any more). The image store away: 503 `storage_unavailable`.
   */
  open(record: TaskRecord, index: number, signal?: AbortSignal): Promise<ImageObject | undefined>;
  /**
   * What the record keeps of the images run `attempt` made: their keys start
   * with the day the task expires, `expiresAtSec`, and are the run's own.
   */
  planResults(
    taskId: string,
    attempt: number,
    images: readonly GeneratedImage[],
    expiresAtSec: number,
  ): TaskImage[];
  /** Writes a result's images under their planned keys, all at once (the caller retries). */
  putResults(planned: readonly TaskImage[], images: readonly GeneratedImage[]): Promise<void>;
  /** Deletes result images (a run that lost its task, or could not store them all). */
  deleteResults(images: readonly TaskImage[]): Promise<void>;
  /**
   * Writes an edit's input images before its task is created, under the
   * last day the task can need them (`untilSec`); 503 `storage_unavailable`
   * when the image store is away. Resolves the inputs as the record keeps them.
   */
  putInputs(
    taskId: string,
    inputs: ReadonlyArray<{ field: TaskInput["field"]; mime: string; bytes: Buffer }>,
    untilSec: number,
  ): Promise<TaskInput[]>;
  /** An edit's input images, in order; an image no longer stored is undefined. */
  readInputs(record: TaskRecord): Promise<Array<Buffer | undefined>>;
  /** Deletes an edit's input images (its task finished, or was never created). */
  deleteInputs(inputs: readonly TaskInput[]): Promise<void>;
}

/**
 * A task's images in the image store: results under the day the task
 * expires, an edit's inputs under the last day they may be needed. Records
 * carry each image's key. Links are made in `image-links.ts`.
 */
export function createTaskImages(deps: TaskImagesDeps): TaskImages {
  const s: TaskImagesState = deps;
  const { imageStore } = deps;
  const links = deps.config.links;
  return {
    link: (record, index, baseUrl, mode = links) => resultLink(s, record, index, baseUrl, mode),
    partialLink: (record, index, baseUrl, mode = links) =>
      partialLink(s, record, index, baseUrl, mode),
    async openPartial(record, index, signal) {
      const key = record.partials?.[index]?.key;
      return key === undefined ? undefined : storage(() => imageStore.get(key, signal));
    },
    async putPartial(record, index, image) {
      const key = partialKey(
        partialsUntil(s, record),
        record.id,
        index,
        image.mime,
        record.attempts,
      );
      await imageStore.put(key, image.bytes, image.mime);
      return { mime: image.mime, bytes: image.bytes.byteLength, key };
    },
    open: (record, index, signal) => openResult(s, record, index, signal),
    planResults,
    async putResults(planned, images) {
      await Promise.all(
        planned.map((image, index) => imageStore.put(image.key, images[index]!.bytes, image.mime)),
      );
    },
    async deleteResults(images) {
      await imageStore.delete(imageKeysOf({ images }));
    },
    putInputs: (taskId, inputs, untilSec) => putInputs(s, taskId, inputs, untilSec),
    readInputs: (record) => readInputs(s, record),
    async deleteInputs(inputs) {
      await imageStore.delete(imageKeysOf({ inputs }));
    },
  };
}

/** {@link TaskImages.open}. */
async function openResult(
  s: TaskImagesState,
  record: TaskRecord,
  index: number,
  signal?: AbortSignal,
): Promise<ImageObject | undefined> {
  const key = record.images?.[index]?.key;
  return key === undefined ? undefined : storage(() => s.imageStore.get(key, signal));
}

/** {@link TaskImages.planResults}. */
function planResults(
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
}

/** {@link TaskImages.putInputs}. */
async function putInputs(
  s: TaskImagesState,
  taskId: string,
  inputs: ReadonlyArray<{ field: TaskInput["field"]; mime: string; bytes: Buffer }>,
  untilSec: number,
): Promise<TaskInput[]> {
  return storage(() =>
    Promise.all(
      inputs.map(async ({ field, mime, bytes }, index) => {
        const key = inputKey(untilSec, taskId, index, mime);
        await s.imageStore.put(key, bytes, mime);
        return { field, mime, bytes: bytes.byteLength, key };
      }),
    ),
  );
}

/** {@link TaskImages.readInputs}. */
async function readInputs(
  s: TaskImagesState,
  record: TaskRecord,
): Promise<Array<Buffer | undefined>> {
  return Promise.all(
    (record.inputs ?? []).map(async (input) => {
      const found = await s.imageStore.get(input.key);
      return found && readWhole(found, input.bytes);
    }),
  );
}
