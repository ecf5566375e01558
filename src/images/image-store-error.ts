/**
 * An image store operation that failed, as the store itself said it: its own
 * error code (`NoSuchBucket`, `SignatureDoesNotMatch`, `ECONNREFUSED`,
 * `EACCES`), whether it can heal by waiting, and the configuration field a
 * person would change to fix it. Backends throw it for every failure but an
 * abort; nothing in it is about HTTP.
 */
export class ImageStoreError extends Error {
  /**
   * @param code the store's own code, safe to print (never a message that could echo a key)
   * @param permanent true when retrying cannot help: a missing bucket, a refused key, no
   *   rights, a directory that cannot be written; false for a store that did not answer
   * @param field the configuration field at fault (`images.url`, `images.s3.accessKeyId`)
   * @param reason what it means, in the service's words
   * @param operation what was being done (`PutObject`, `write`)
   */
  constructor(
    readonly code: string,
    readonly permanent: boolean,
    readonly field: string,
    readonly reason: string,
    readonly operation: string,
    options: { cause?: unknown } = {},
  ) {
    super(`${reason} (${code}, on ${operation})`, { cause: options.cause });
    this.name = "ImageStoreError";
  }
}

/** Whether `err` is an image store failure that retrying cannot heal. */
export function isPermanentImageStoreFailure(err: unknown): boolean {
  return err instanceof ImageStoreError && err.permanent;
}

/** File system codes a retry cannot heal: the directory is not one the service may write. */
const FILE_PERMANENT = new Map<string, string>([
  ["EACCES", "the directory cannot be written: permission denied"],
  ["EPERM", "the directory cannot be written: operation not permitted"],
  ["EROFS", "the directory is on a read-only file system"],
  ["ENOTDIR", "a part of the directory's path is a file, not a directory"],
  ["EEXIST", "a part of the directory's path is a file, not a directory"],
  ["ELOOP", "the directory's path loops through symbolic links"],
  ["ENAMETOOLONG", "the directory's path is too long"],
]);

/**
 * A `file://` store's failure: permissions and read-only mounts cannot heal;
 * a full disk, an I/O error or too many open files may.
 */
export function fileStoreFailure(err: unknown, operation: string): unknown {
  if (err instanceof ImageStoreError) return err;
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (typeof code !== "string") return err;
  const permanent = FILE_PERMANENT.get(code);
  return new ImageStoreError(
    code,
    permanent !== undefined,
    "images.url",
    permanent ?? "the directory could not be written now",
    operation,
    { cause: err },
  );
}
