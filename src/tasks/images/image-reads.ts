import type { ImageObject } from "../../images/image-store.js";
import { extensionOf } from "../../images/image-type.js";
import { available } from "../../errors/store-unavailable.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskImages } from "./task-images.js";

/** An image the files route serves, and when its task expires (links die with it). */
export type ServedImage = ImageObject & {
  /** Unix seconds: the link is refused from then on, and no cache keeps it longer. */
  expiresAt?: number;
};

/** What the files route reads: a task's image by id, as a stream. */
export interface FileSource {
  /**
   * Image `index` of the completed task `taskId`, if its type has extension
   * `ext`; undefined otherwise. Rejects with `store_unavailable` /
   * `storage_unavailable` when a store is away.
   */
  openCompleted(
    taskId: string,
    index: number,
    ext: string,
    signal?: AbortSignal,
  ): Promise<ServedImage | undefined>;
  /** Partial image `index` of task `taskId` (while the task is kept), if its extension is `ext`. */
  openPartialFile(
    taskId: string,
    index: number,
    ext: string,
    signal?: AbortSignal,
  ): Promise<ServedImage | undefined>;
}

/** A task's images as the HTTP routes and MCP read them. */
export interface ImageReads extends FileSource {
  /** The `url` of a result image, in the `images.links` mode (or `service`, the service's own). */
  link: TaskImages["link"];
  /** A result image's bytes as a stream (`b64_json`), or undefined once gone. */
  open: TaskImages["open"];
  /** The `url` of a running task's partial image. */
  partialLink: TaskImages["partialLink"];
  /** A partial image's bytes as a stream, or undefined once gone. */
  openPartial: TaskImages["openPartial"];
}

/**
 * How long a cache may keep a running task's partial image: the task may
 * finish and expire sooner than its links were signed for.
 */
const RUNNING_PARTIAL_CACHE_SEC = 60;

/**
 * {@link ImageReads} over the task store's records and their images. A link
 * dies with its task: once the task has expired (`now` past its
 * `expires_at`) its files are refused, even before the sweep removes them,
 * and no cache is told to keep one longer.
 */
export function createImageReads(
  store: TaskStore,
  images: TaskImages,
  now: () => number = Date.now,
): ImageReads {
  const live = async (taskId: string) => {
    const record = await available(() => store.get(taskId));
    const nowSec = Math.floor(now() / 1000);
    return record && (record.expires_at === undefined || record.expires_at > nowSec)
      ? { record, nowSec }
      : undefined;
  };
  return {
    link: images.link,
    open: images.open,
    partialLink: images.partialLink,
    openPartial: images.openPartial,
    async openPartialFile(taskId, index, ext, signal) {
      // Kept, and linked to, until the task expires, whatever its status.
      const found = await live(taskId);
      const image = found?.record.partials?.[index];
      if (!found || !image || extensionOf(image.mime) !== ext) return undefined;
      const opened = await images.openPartial(found.record, index, signal);
      const expiresAt = found.record.expires_at ?? found.nowSec + RUNNING_PARTIAL_CACHE_SEC;
      return opened && { ...opened, expiresAt };
    },
    async openCompleted(taskId, index, ext, signal) {
      const found = await live(taskId);
      const { record } = found ?? {};
      const image = record?.status === "completed" ? record.images?.[index] : undefined;
      if (!record || !image || extensionOf(image.mime) !== ext) return undefined;
      const opened = await images.open(record, index, signal);
      return opened && { ...opened, expiresAt: record.expires_at };
    },
  };
}
