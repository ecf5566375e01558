import { randomBytes } from "node:crypto";
import { finished } from "node:stream/promises";
import type * as S3Sdk from "@aws-sdk/client-s3";
import { checkKey, dayOf } from "./image-keys.js";
import type { ImageObject, ImageStore, ListedObject } from "./image-store.js";
import { ImageStoreError } from "./image-store-error.js";
import { presignGet } from "./s3-presign-get.js";
import { createS3Sender, withOneRetry, type S3Send } from "./s3-sender.js";
import { s3StoreFailure } from "./s3-store-failure.js";
import { createS3Target } from "./s3-target.js";

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

/**
 * A missing object, not a missing bucket: a bucket that is gone is a failure
 * of the store (`NoSuchBucket`), never "no such image".
 */
const isNotFound = (err: unknown) => {
  const { name } = err as { name?: string };
  return name === "NoSuchKey" || name === "NotFound";
};

/**
 * Images in an S3-compatible bucket (`s3://bucket/prefix`). The SDK is
 * loaded only when this backend is used. Checksums are computed only where
 * an operation requires them (`WHEN_REQUIRED`), as R2, MinIO and other
 * self-hosted stores expect; each request is tried twice at most, the
 * task's own write retries cover the rest. Images are written and read,
 * and links presigned, without the SDK's per-call pipeline (`createS3Sender`,
 * `presignGet`): each happens per task, per poll or per download; the
 * SDK's client does the rare rest (the bucket's probe, deletes, listings).
 */
export async function openS3ImageStore(options: S3ImageStoreOptions): Promise<ImageStore> {
  const sdk = await import("@aws-sdk/client-s3");
  const { getSignedUrl } = await import("@aws-sdk/s3-request-presigner");
  const signerModule = await import("@smithy/signature-v4");
  const client = openClient(sdk, options);
  const target = createS3Target({
    sdk,
    client,
    signerModule,
    getSignedUrl,
    bucket: options.bucket,
  });
  const sender = createS3Sender({
    target,
    connectTimeoutMs: (options.connectTimeoutSec ?? 5) * 1000,
    idleTimeoutMs: (options.idleTimeoutSec ?? 30) * 1000,
  });
  const s: S3State = {
    sdk,
    client,
    bucket: options.bucket,
    base: options.prefix === "" ? "" : `${options.prefix}/`,
    staticCredentials: options.credentials !== undefined,
    send: sender.send,
  };
  return {
    backend: "s3",
    put: (key, bytes, contentType) =>
      failing(s, "PutObject", () => put(s, key, bytes, contentType)),
    get: (key, signal) => failing(s, "GetObject", () => get(s, key, signal)),
    delete: (keys) => failing(s, "DeleteObject", () => deleteKeys(s, keys)),
    list: (prefix) => list(s, prefix),
    ping: () => failing(s, "HeadBucket", () => headBucket(s, AbortSignal.timeout(PING_TIMEOUT_MS))),
    check: (signal) => check(s, signal),
    objectKey: (key) => objectKey(s, key),
    async presign(key, options) {
      return presignGet(await target(), objectKey(s, key), options);
    },
    async close() {
      sender.close();
      client.destroy();
    },
  };
}

/** What the store's steps share: the SDK (loaded on open), its client, where the objects go. */
interface S3State {
  sdk: typeof S3Sdk;
  client: S3Sdk.S3Client;
  bucket: string;
  /** The prefix with its `/`, or "". */
  base: string;
  /** `images.s3.accessKeyId` is set (else the SDK's chain signs): which field a refusal names. */
  staticCredentials: boolean;
  /** Requests on objects without the SDK's pipeline (see `createS3Sender`). */
  send: S3Send;
}

/** Runs one operation; its failure becomes an `ImageStoreError` (an abort passes as it is). */
async function failing<T>(s: S3State, operation: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    throw s3StoreFailure(err, operation, s.staticCredentials);
  }
}

async function headBucket(s: S3State, signal: AbortSignal | undefined): Promise<void> {
  // Reachable and signed in to, with the permission the sweep's listing needs anyway.
  await s.client.send(
    new s.sdk.HeadBucketCommand({ Bucket: s.bucket }),
    signal ? { abortSignal: signal } : {},
  );
}

/**
 * {@link ImageStore.check}: `HeadBucket`, then a small object written, read
 * back and deleted under the prefix (in today's folder, so that one a
 * failed delete leaves is swept with its day). A `HeadBucket` has no body:
 * its bare 403 or 404 says nothing of why, so the write that follows names
 * the store's own code (`NoSuchBucket`, `SignatureDoesNotMatch`,
 * `InvalidAccessKeyId`, `AccessDenied`); a key that may write but not list
 * is refused for the listing the expiry sweep needs.
 */
async function check(s: S3State, signal: AbortSignal | undefined): Promise<void> {
  let refusedHead: ImageStoreError | undefined;
  try {
    await failing(s, "HeadBucket", () => headBucket(s, signal));
  } catch (err) {
    // A HEAD answer has no body, so no code (a bare 403 or 404): the write below names it.
    if (!(err instanceof ImageStoreError) || !err.permanent) throw err;
    refusedHead = err;
  }
  const key = `${dayOf(Math.floor(Date.now() / 1000))}/check-${randomBytes(6).toString("hex")}.txt`;
  const bytes = Buffer.from("image-task-sidecar store check\n");
  const options = signal ? { abortSignal: signal } : {};
  // Written and read as images are (the same requests), so what passes here passes there.
  await failing(s, "PutObject", () => put(s, key, bytes, "text/plain", signal));
  await failing(s, "GetObject", async () => {
    const found = await get(s, key, signal);
    const read = found ? Buffer.concat(await found.body.toArray()) : Buffer.alloc(0);
    if (!read.equals(bytes)) {
      throw new ImageStoreError(
        "ContentMismatch",
        true,
        "images.s3.endpoint",
        "the store answered other bytes than were written: is images.s3.endpoint an S3 endpoint?",
        "GetObject",
      );
    }
  });
  await failing(s, "DeleteObject", () =>
    s.client.send(
      new s.sdk.DeleteObjectCommand({ Bucket: s.bucket, Key: objectKey(s, key) }),
      options,
    ),
  );
  if (refusedHead?.field === "images.url") throw refusedHead;
  if (refusedHead) {
    throw new ImageStoreError(
      "AccessDenied",
      true,
      refusedHead.field,
      "the key may write objects but not list the bucket (s3:ListBucket), which the expiry " +
        "sweep needs",
      "HeadBucket",
    );
  }
}

function openClient(sdk: typeof S3Sdk, options: S3ImageStoreOptions): S3Sdk.S3Client {
  return new sdk.S3Client({
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
      // The silence a request may wait through, then it fails (smithy's `requestTimeout`
      // only logs unless told to throw, and counts the whole request, not its silence).
      socketTimeout: (options.idleTimeoutSec ?? 30) * 1000,
    },
  });
}

const objectKey = (s: S3State, key: string) => `${s.base}${checkKey(key)}`;

/** Writes an image (or the check's object); the body goes unsigned (see `createS3Sender`). */
async function put(
  s: S3State,
  key: string,
  bytes: Buffer,
  contentType: string,
  signal?: AbortSignal,
): Promise<void> {
  const request = {
    method: "PUT" as const,
    objectKey: objectKey(s, key),
    headers: { "content-type": contentType },
    body: bytes,
    signal,
  };
  await withOneRetry(async () => {
    const answer = await s.send(request);
    await finished(answer.resume());
  }, signal);
}

/** Reads an object as a stream; undefined when there is none (a missing bucket is a failure). */
async function get(
  s: S3State,
  key: string,
  signal: AbortSignal | undefined,
): Promise<ImageObject | undefined> {
  const request = { method: "GET" as const, objectKey: objectKey(s, key), signal };
  try {
    const answer = await withOneRetry(() => s.send(request), signal);
    const { headers } = answer;
    return {
      body: answer,
      size: Number(headers["content-length"] ?? 0),
      contentType: headers["content-type"] ?? "application/octet-stream",
      etag: headers.etag ?? `"${key}"`,
    };
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

async function deleteKeys(s: S3State, keys: readonly string[]): Promise<void> {
  const queue = [...keys];
  const worker = async () => {
    for (let key = queue.shift(); key !== undefined; key = queue.shift()) {
      await s.client.send(
        new s.sdk.DeleteObjectCommand({ Bucket: s.bucket, Key: objectKey(s, key) }),
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(DELETE_CONCURRENCY, keys.length) }, worker));
}

async function* list(s: S3State, prefix: string): AsyncGenerator<ListedObject> {
  const { base } = s;
  let token: string | undefined;
  do {
    const page = await failing(s, "ListObjectsV2", () =>
      s.client.send(
        new s.sdk.ListObjectsV2Command({
          Bucket: s.bucket,
          Prefix: `${base}${prefix}`,
          ...(token ? { ContinuationToken: token } : {}),
        }),
      ),
    );
    for (const item of page.Contents ?? []) {
      if (item.Key?.startsWith(base)) {
        yield { key: item.Key.slice(base.length), size: item.Size ?? 0 };
      }
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
}
