import { readToDocumentEnd } from "../../channels/read-json-document.js";
import { ImageEnd } from "../../images/image-end.js";
import {
  BodyTooLargeError,
  refuseDeclaredOver,
  type ResponseLike,
} from "../../net/read-capped-body.js";

/**
 * A downloaded image's bytes, read up to the image's last byte (see
 * {@link ImageEnd}) and at most `limit` of them: a server (or a proxy or CDN
 * before it) that holds the download open after the image costs the run
 * nothing (the rest is read for a second in the background, `AFTER_DOCUMENT_MS`),
 * not the channel's image timeout, and what it sends after the image is dropped. An image the scanner cannot follow is
 * read to the download's end, as it is sent.
 *
 * @throws BodyTooLargeError past `limit` (a `Content-Length` over it before reading);
 *   whatever the download throws before the image's end
 */
export async function readImageBody(response: ResponseLike, limit: number): Promise<Buffer> {
  await refuseDeclaredOver(response, limit);
  if (!response.body) return Buffer.alloc(0);
  const parts: Buffer[] = [];
  const end = new ImageEnd();
  let total = 0;
  const take = (chunk: Buffer) => {
    const at = end.push(chunk);
    const part = at === -1 ? chunk : chunk.subarray(0, at);
    total += part.byteLength;
    if (total > limit) throw new BodyTooLargeError(limit);
    parts.push(part);
    return at !== -1;
  };
  await readToDocumentEnd(readerChunks(response.body), take);
  return Buffer.concat(parts, total);
}

/**
 * A web stream's chunks as Buffers. Its `return` cancels the stream at once,
 * also while a read waits (a stream's own iterator would wait for that read,
 * which a download held open never answers).
 */
function readerChunks(body: ReadableStream<Uint8Array>): AsyncIterableIterator<Buffer> {
  const reader = body.getReader();
  const chunks: AsyncIterableIterator<Buffer> = {
    async next() {
      const read = await reader.read();
      if (read.done) return { done: true, value: undefined };
      const { buffer, byteOffset, byteLength } = read.value;
      return { done: false, value: Buffer.from(buffer, byteOffset, byteLength) };
    },
    async return() {
      await reader.cancel().catch(() => undefined);
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]: () => chunks,
  };
  return chunks;
}
