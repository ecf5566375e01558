import { createHmac, timingSafeEqual } from "node:crypto";

/** Signs and checks the image URLs that work without a bearer header until the task expires. */
export interface ImageUrlSigner {
  /**
   * `/v1/images/files/{taskId}/{name}.{ext}?expires=..&signature=..`, `name`
   * a result's index or `partial-<index>`.
   */
  path(taskId: string, name: number | string, ext: string, expiresAt: number): string;
  /** Whether a request for `file` (`{index}.{ext}`) carries a valid, unexpired signature. */
  verify(taskId: string, file: string, expires: string, signature: string, nowSec: number): boolean;
}

/** HMAC-SHA256 over the task id, file name and expiry, so none of them can be changed. */
export function createImageUrlSigner(secret: string): ImageUrlSigner {
  const sign = (taskId: string, file: string, expires: string) =>
    createHmac("sha256", secret).update(`${taskId}/${file}?${expires}`).digest("base64url");
  return {
    path(taskId, name, ext, expiresAt) {
      const file = `${name}.${ext}`;
      const expires = String(expiresAt);
      return `/v1/images/files/${taskId}/${file}?expires=${expires}&signature=${sign(taskId, file, expires)}`;
    },
    verify(taskId, file, expires, signature, nowSec) {
      if (!/^\d{1,12}$/.test(expires) || Number(expires) <= nowSec) return false;
      const expected = Buffer.from(sign(taskId, file, expires));
      const given = Buffer.from(signature);
      return given.length === expected.length && timingSafeEqual(given, expected);
    },
  };
}
