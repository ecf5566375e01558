import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import type { ImageStoreDeployment } from "../config/deployment.js";
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
  const { config, logger } = deps;
  const backend = imageBackendOf(config);
  const opened = await backend.open(logger);
  if (config.images.links === "public") {
    // The config refuses it beside memory://, where nothing else could serve the links.
    logger.warn(
      { publicBaseUrl: config.images.publicBaseUrl },
      "images.links is public: image links (publicBaseUrl + the object key) never expire and need no key; whatever serves publicBaseUrl alone decides who may read them",
    );
  }
  const store = withImageStoreMetrics(opened, deps.metrics);
  try {
    await waitForImageStore(store, {
      timeoutMs: deps.config.images.connectTimeoutSec * 1000,
      where: backend.where,
      logger: deps.logger,
    });
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

/** Where the image store is, for a line a person reads: no credentials. */
export function describeImageStore(config: ImageStoreConfig): string {
  return imageBackendOf(config).where;
}

/** What start-up's check does on the image store (`check-config --probe` says it). */
export function describeImageCheck(config: ImageStoreConfig): string {
  return imageBackendOf(config).check;
}

/**
 * The origin `images.links: presigned` links point at: the bucket as the S3
 * SDK addresses it (path-style on the endpoint when `forcePathStyle` is set
 * or the bucket name has a dot, else the bucket as a subdomain of the
 * endpoint or of AWS's regional host); undefined for a store that presigns none.
 */
export function presignedLinkOrigin(config: ImageStoreConfig): string | undefined {
  return imageBackendOf(config).presignedOrigin?.();
}

/** What the configuration says of the image store. */
type ImageStoreConfig = Pick<Config, "images" | "deployment">;

/** One kind of image store, for one configuration. */
interface ImageBackend {
  /** Where it is, for a line a person reads: no credentials. */
  where: string;
  /** What start-up's check does there. */
  check: string;
  /** Where presigned links point, for a store that makes them. */
  presignedOrigin?(): string;
  open(logger: Logger): Promise<ImageStore>;
}

/** The kind of image store the deployment names: the one place that tells the kinds apart. */
function imageBackendOf(config: ImageStoreConfig): ImageBackend {
  const { images, shared } = config.deployment;
  switch (images.kind) {
    case "memory":
      return {
        where: images.url,
        check: "this process's memory",
        async open(logger) {
          if (shared) {
            logger.warn(
              "images.url is memory:// with a Redis task store: other replicas cannot read this one's images; use s3:// or a shared file:// directory",
            );
          }
          return createMemoryImageStore();
        },
      };
    case "directory":
      return {
        where: images.url,
        check: "a file written and removed",
        async open(logger) {
          const { dir } = images;
          if (shared) {
            logger.warn(
              { dir },
              `images.url is a directory (${images.url}) with a Redis task store: every replica must mount the same directory, or use s3://`,
            );
          }
          // Images an earlier release wrote under a permissive umask.
          reportTightened(logger, `images.url: ${images.url}`, await tightenTree(dir));
          return createFileImageStore({ dir });
        },
      };
    case "s3":
      return s3Backend(config.images, images);
  }
}

function s3Backend(
  settings: Config["images"],
  images: Extract<ImageStoreDeployment, { kind: "s3" }>,
): ImageBackend {
  const { s3 } = settings;
  const { endpoint, region, forcePathStyle } = s3;
  let where = `${images.url} in AWS region ${region}`;
  if (endpoint) {
    const shown = new URL(endpoint);
    shown.username = "";
    shown.password = "";
    where = `${images.url} at ${shown.origin}`;
  }
  return {
    where,
    check: "HeadBucket, then an object written, read back and deleted",
    presignedOrigin() {
      const base = new URL(endpoint ?? `https://s3.${region}.amazonaws.com`);
      if (forcePathStyle || images.bucket.includes(".")) return base.origin;
      return `${base.protocol}//${images.bucket}.${base.host}`;
    },
    open: () =>
      openS3ImageStore({
        bucket: images.bucket,
        prefix: images.prefix,
        region,
        forcePathStyle,
        ...(endpoint ? { endpoint } : {}),
        ...(s3.accessKeyId && s3.secretAccessKey
          ? {
              credentials: {
                accessKeyId: s3.accessKeyId,
                secretAccessKey: s3.secretAccessKey,
                ...(s3.sessionToken ? { sessionToken: s3.sessionToken } : {}),
              },
            }
          : {}),
      }),
  };
}
