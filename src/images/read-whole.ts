import type { ImageObject } from "./image-store.js";

/**
 * An object's bytes whole, checked against the size recorded when it was
 * written: the bytes the store handed over, else its stream read to the end.
 */
export async function readWhole(object: ImageObject, size: number): Promise<Buffer> {
  if (object.bytes) {
    object.body.destroy();
    if (object.bytes.byteLength !== size) throw sizeMismatch(object.bytes.byteLength, size);
    return object.bytes;
  }
  const chunks: Buffer[] = [];
  let seen = 0;
  try {
    for await (const chunk of object.body as AsyncIterable<Buffer>) {
      seen += chunk.byteLength;
      if (seen > size) break;
      chunks.push(chunk);
    }
  } finally {
    object.body.destroy();
  }
  if (seen !== size) throw sizeMismatch(seen, size);
  return Buffer.concat(chunks, size);
}

/** An object that read other than the size recorded for it. */
export const sizeMismatch = (seen: number, size: number) =>
  new Error(`an image read ${seen} bytes where ${size} were stored`);
