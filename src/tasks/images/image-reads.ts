import type { FileSource } from "../../files/create-files-router.js";
import { extensionOf } from "../../images/image-type.js";
import { available } from "../../errors/store-unavailable.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskImages } from "./task-images.js";

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

/** {@link ImageReads} over the task store's records and their images. */
export function createImageReads(store: TaskStore, images: TaskImages): ImageReads {
  return {
    link: images.link,
    open: images.open,
    partialLink: images.partialLink,
    openPartial: images.openPartial,
    async openPartialFile(taskId, index, ext, signal) {
      // Kept, and linked to, until the task expires, whatever its status.
      const record = await available(() => store.get(taskId));
      const image = record?.partials?.[index];
      if (!record || !image || extensionOf(image.mime) !== ext) return undefined;
      return images.openPartial(record, index, signal);
    },
    async openCompleted(taskId, index, ext, signal) {
      const record = await available(() => store.get(taskId));
      const image = record?.status === "completed" ? record.images?.[index] : undefined;
      if (!record || !image || extensionOf(image.mime) !== ext) return undefined;
      return images.open(record, index, signal);
    },
  };
}
