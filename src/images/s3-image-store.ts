import type { Readable } from "node:stream";
import type { S3Client } from "@aws-sdk/client-s3";
import { checkKey } from "./image-keys.js";
import type { ImageStore } from "./image-store.js";

/** Options of {@link openS3ImageStore}: `s3://bucket/prefix` and the `images.s3` section. */
export interface S3ImageStoreOptions {
  bucket: string;
  /** Every key is written under it (no leading or trailing `/`); may be empty. */
  prefix: string;
  /** An S3-compatible endpoint (MinIO, R2, Ceph); AWS when absent. */
  endpoint?: string;
  region: string;
  forcePathStyle: boolean;
  /** Static credentials; else the SDK's default chain (environment, profile, instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Seconds to wait for a connection and for a silent answer. Default 5 and 30. */
  connectTimeoutSec?: number;
  idleTimeoutSec?: number;
}

/** How long `ping` waits for the store. */
const PING_TIMEOUT_MS = 5_000;

/** Deletes in flight at once: one request per object, which every S3-compatible store takes. */
const DELETE_CONCURRENCY = 8;

const isNotFound = (err: unknown) => {
  const { name, $metadata } = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return name === "NoSuchKey" || name === "NotFound" || $metadata?.httpStatusCode === 404;
};

/**
 * Images in an S3-compatible bucket (`s3://bucket/prefix`). The SDK is
 * loaded only when this backend is used. Checksums are computed only where
 * an operation requires them (`WHEN_REQUIRED`), as R2, MinIO and other
 * self-hosted stores expect; the SDK retries once, the task's own write
 * retries cover the rest.
 */
export async function openS3ImageStore(options: S3ImageStoreOptions): Promise<ImageStore> {
  const sdk = await import("@aws-sdk/client-s3");
  const { getSignedUrl } = await import("@aws-sdk/s3-request-presigner");
  const client: S3Client = new sdk.S3Client({
    region: options.region,
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    forcePathStyle: options.forcePathStyle,
    // A copy: the SDK writes its own bookkeeping into the object it is given.
    ...(options.credentials ? { credentials: { ...options.credentials } } : {}),
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    maxAttempts: 2,
    requestHandler: {
      connectionTimeout: (options.connectTimeoutSec ?? 5) * 1000,
      requestTimeout: (options.idleTimeoutSec ?? 30) * 1000,
    },
  });
  const { bucket } = options;
  const base = options.prefix === "" ? "" : `${options.prefix}/`;
  const objectKey = (key: string) => `${base}${checkKey(key)}`;

  return {
    backend: "s3",

    async put(key, bytes, contentType) {
      await client.send(
        new sdk.PutObjectCommand({
          Bucket: bucket,
          Key: objectKey(key),
          Body: bytes,
          ContentType: contentType,
          ContentLength: bytes.byteLength,
        }),
      );
    },

    async get(key, signal) {
      try {
        const answer = await client.send(
          new sdk.GetObjectCommand({ Bucket: bucket, Key: objectKey(key) }),
          signal ? { abortSignal: signal } : {},
        );
        return {
          body: answer.Body as Readable,
          size: answer.ContentLength ?? 0,
          contentType: answer.ContentType ?? "application/octet-stream",
          etag: answer.ETag ?? `"${key}"`,
        };
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },

    async delete(keys) {
      const queue = [...keys];
      const worker = async () => {
        for (let key = queue.shift(); key !== undefined; key = queue.shift()) {
          await client.send(new sdk.DeleteObjectCommand({ Bucket: bucket, Key: objectKey(key) }));
        }
      };
      await Promise.all(Array.from({ length: Math.min(DELETE_CONCURRENCY, keys.length) }, worker));
    },

    async *list(prefix) {
      let token: string | undefined;
      do {
        const page = await client.send(
          new sdk.ListObjectsV2Command({
            Bucket: bucket,
            Prefix: `${base}${prefix}`,
            ...(token ? { ContinuationToken: token } : {}),
          }),
        );
        for (const item of page.Contents ?? []) {
          if (item.Key?.startsWith(base)) {
            yield { key: item.Key.slice(base.length), size: item.Size ?? 0 };
          }
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    },

    async ping() {
      // Reachable and signed in to, with the permission the sweep's listing needs anyway;
      // promptly, so that a store that hangs makes /readyz fail rather than hang.
      await client.send(new sdk.HeadBucketCommand({ Bucket: bucket }), {
        abortSignal: AbortSignal.timeout(PING_TIMEOUT_MS),
      });
    },

    objectKey,

    presign(key, { expiresInSec, signingDate }) {
      return getSignedUrl(
        client,
        new sdk.GetObjectCommand({ Bucket: bucket, Key: objectKey(key) }),
        {
          expiresIn: expiresInSec,
          signingDate,
        },
      );
    },

    async close() {
      client.destroy();
    },
  };
}
