import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import { reportTightened, tightenTree } from "../fs/owner-only.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { createFileImageStore } from "./file-image-store.js";
import type { ImageStore } from "./image-store.js";
import { createMemoryImageStore } from "./memory-image-store.js";
import { openS3ImageStore } from "./s3-image-store.js";
import { waitForImageStore } from "./wait-for-image-store.js";
import { withImageStoreMetrics } from "./with-image-store-metrics.js";

/** Dependencies of {@link openImageStore}. */
export interface OpenImageStoreDeps {
  config: Pick<Config, "images" | "deployment">;
  metrics: Metrics;
  logger: Logger;
}

/**
 * Opens the image store the deployment names (`images.url`, or its default beside the task store), with
 * its metrics, and checks that it can keep images (see `waitForImageStore`):
 * a refusal that cannot heal, or a store that does not answer within
 * `images.connectTimeoutSec`, rejects with a `ConfigError` naming the field
 * and the store's own code. Replicas on Redis must share it: with a `file://` store
 * beside Redis, start-up warns that every replica must mount the directory.
 */
export async function openImageStore(deps: OpenImageStoreDeps): Promise<ImageStore> {
  const store = withImageStoreMetrics(await openBackend(deps), deps.metrics);
  try {
    await waitForImageStore(store, {
      timeoutMs: deps.config.images.connectTimeoutSec * 1000,
      where: describeImageStore(deps.config),
      logger: deps.logger,
    });
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

/** Where the image store is, for a line a person reads: no credentials. */
export function describeImageStore(config: Pick<Config, "images" | "deployment">): string {
  const { images } = config.deployment;
  if (images.kind !== "s3") return images.url;
  const { endpoint, region } = config.images.s3;
  if (!endpoint) return `${images.url} in AWS region ${region}`;
  const shown = new URL(endpoint);
  shown.username = "";
  shown.password = "";
  return `${images.url} at ${shown.origin}`;
}

async function openBackend(deps: OpenImageStoreDeps): Promise<ImageStore> {
  const { config, logger } = deps;
  const { images, shared } = config.deployment;
  let store: ImageStore;
  if (images.kind === "memory") {
    if (shared) {
      logger.warn(
        "images.url is memory:// with a Redis task store: other replicas cannot read this one's images; use s3:// or a shared file:// directory",
      );
    }
    store = createMemoryImageStore();
  } else if (images.kind === "directory") {
    const { dir } = images;
    if (shared) {
      logger.warn(
        { dir },
        `images.url is a directory (${images.url}) with a Redis task store: every replica must mount the same directory, or use s3://`,
      );
    }
    // Images an earlier release wrote under a permissive umask.
    reportTightened(logger, `images.url: ${images.url}`, await tightenTree(dir));
    store = createFileImageStore({ dir });
  } else {
    const { s3 } = config.images;
    store = await openS3ImageStore({
      bucket: images.bucket,
      prefix: images.prefix,
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
  if (config.images.links === "public") {
    // The config refuses it beside memory://, where nothing else could serve the links.
    logger.warn(
      { publicBaseUrl: config.images.publicBaseUrl },
      "images.links is public: image links (publicBaseUrl + the object key) never expire and need no key; whatever serves publicBaseUrl alone decides who may read them",
    );
  }
  return store;
}
