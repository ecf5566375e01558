import type { Readable } from "node:stream";

/** The kinds of image store: `images.url`'s scheme. */
export type ImageBackend = "memory" | "file" | "s3";

/** An object read back, as a stream with what an HTTP answer needs to describe it. */
export interface ImageObject {
  /** The bytes; the reader consumes or destroys it. */
  body: Readable;
  /**
   * The same bytes whole, when the backend has them in hand anyway (memory,
   * a small file read at once): a reader that wants them whole takes these
   * and destroys `body` unread.
   */
  bytes?: Buffer;
  size: number;
  contentType: string;
  /** A strong HTTP entity tag, quoted (`"..."`): the same on every replica. */
  etag: string;
}

/** One entry of {@link ImageStore.list}. */
export interface ListedObject {
  key: string;
  size: number;
}

/** How long a presigned link works, and from when it counts (the same date gives the same link). */
export interface PresignOptions {
  expiresInSec: number;
  signingDate: Date;
}

/**
 * Where image bytes live, apart from the task records: results, partial
 * images and the input images of waiting edits. Keys are relative
 * (`<YYYY-MM-DD>/<task id>/<n>.<ext>`); a backend may put its own prefix in
 * front ({@link objectKey}). Every backend passes one conformance suite. A
 * backend that fails rejects with an `ImageStoreError` (its own code, and
 * whether it can heal); a missing object is `undefined`, never an error, but
 * a missing bucket is an error.
 */
export interface ImageStore {
  readonly backend: ImageBackend;
  /** Writes an object whole: a reader sees the old object, none, or all of the new one. */
  put(key: string, bytes: Buffer, contentType: string): Promise<void>;
  /** The object as a stream, or undefined when there is none. */
  get(key: string, signal?: AbortSignal): Promise<ImageObject | undefined>;
  /** Deletes the objects; keys that do not exist are fine. */
  delete(keys: readonly string[]): Promise<void>;
  /** Every object whose key starts with `prefix`, in key order (oldest expiry day first). */
  list(prefix: string): AsyncIterable<ListedObject>;
  /** Rejects when the store cannot be reached (a light probe: S3 `HeadBucket`). */
  ping(): Promise<void>;
  /**
   * Proves the store can keep images, as start-up and the readiness probe
   * need: S3 `HeadBucket`, then a small object written, read back and
   * deleted under the prefix; a directory, a file written and removed.
   * Rejects with an `ImageStoreError` naming the store's own code, whether it
   * can heal, and the field at fault; or with the signal's reason.
   */
  check(signal?: AbortSignal): Promise<void>;
  /** The key as the backend names it (an S3 object key with its prefix): the path of a public link. */
  objectKey(key: string): string;
  /** A link that reads the object straight from the backend, where it has them (S3). */
  presign?(key: string, options: PresignOptions): Promise<string>;
  close(): Promise<void>;
}
