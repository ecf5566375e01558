import type { Transform } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";

/**
 * A decoder for one `Content-Encoding` (gzip, deflate, br; lower case), the
 * same for requests and channels' answers; `undefined` for any other.
 */
export function contentDecoder(encoding: string): Transform | undefined {
  if (encoding === "gzip" || encoding === "x-gzip") return createGunzip();
  if (encoding === "deflate") return createInflate();
  if (encoding === "br") return createBrotliDecompress();
  return undefined;
}
