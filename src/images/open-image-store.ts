import { dirname, resolve } from "node:path";
import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { createFileImageStore } from "./file-image-store.js";
import type { ImageStore } from "./image-store.js";
import { createMemoryImageStore } from "./memory-image-store.js";
import { openS3ImageStore } from "./s3-image-store.js";
import { withImageStoreMetrics } from "./with-image-store-metrics.js";

/** Where a Redis deployment keeps images when `images.url` is not set. */
const SHARED_DEFAULT = "file://./data/images";

/**
 * `images.url`, or its default for the task store: `memory://` beside the
 * memory store, `file://` beside the SQLite file, `file://./data/images`
 * beside Redis.
 */
export function imagesUrlOf(config: Pick<Config, "images" | "store">): string {
  if (config.images.url) return config.images.url;
  const store = config.store.url;
  if (store.startsWith("memory://")) return "memory://";
  if (store.startsWith("sqlite://")) {
    return `file://${resolve(dirname(resolve(store.slice("sqlite://".length))), "images")}`;
  }
  return SHARED_DEFAULT;
}

/** `s3://bucket/some/prefix` as bucket and prefix (no slashes around it). */
export function parseS3Url(url: string): { bucket: string; prefix: string } {
  const rest = url.slice("s3://".length);
  const slash = rest.indexOf("/");
  if (slash === -1) return { bucket: rest, prefix: "" };
  return { bucket: rest.slice(0, slash), prefix: rest.slice(slash + 1).replace(/^\/+|\/+$/g, "") };
}

/** Dependencies of {@link openImageStore}. */
export interface OpenImageStoreDeps {
  config: Pick<Config, "images" | "store">;
  metrics: Metrics;
  logger: Logger;
}

/**
 * Opens the image store `images.url` names (see {@link imagesUrlOf}), with
 * its metrics. Replicas on Redis must share it: with a `file://` store
 * beside Redis, start-up warns that every replica must mount the directory.
 */
export async function openImageStore(deps: OpenImageStoreDeps): Promise<ImageStore> {
  const { config, metrics, logger } = deps;
  const url = imagesUrlOf(config);
  const shared = config.store.url.startsWith("redis");
  let store: ImageStore;
  if (url === "memory://") {
    if (shared) {
      logger.warn(
        "images.url is memory:// with a Redis task store: other replicas cannot read this one's images; use s3:// or a shared file:// directory",
      );
    }
    store = createMemoryImageStore();
  } else if (url.startsWith("file://")) {
    const dir = resolve(url.slice("file://".length));
    if (shared) {
      logger.warn(
        { dir },
        `images.url is a directory (${url}) with a Redis task store: every replica must mount the same directory, or use s3://`,
      );
    }
    store = createFileImageStore({ dir });
  } else {
    const { s3 } = config.images;
    store = await openS3ImageStore({
      ...parseS3Url(url),
      region: s3.region,
      forcePathStyle: s3.forcePathStyle,
      ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
      ...(s3.accessKeyId && s3.secretAccessKey
        ? {
            credentials: {
              accessKeyId: s3.accessKeyId,
              secretAccessKey: s3.secretAccessKey,
              ...(s3.sessionToken ? { sessionToken: s3.sessionToken } : {}),
            },
          }
        : {}),
    });
  }
  return withImageStoreMetrics(store, metrics);
}
