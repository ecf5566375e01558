import { readToDocumentEnd } from "./read-to-document-end.js";
import { BodyTooLargeError, refuseDeclaredOver, type ResponseLike } from "./read-capped-body.js";

/** Follows a document as its bytes stream past (`JsonDocumentEnd`, `ImageEnd`). */
export interface DocumentEnd {
  /** The index in `chunk` just after the document's last byte, or -1 if not in it. */
  push(chunk: Buffer): number;
}

/**
 * A response body (a fetch `Response`'s) read up to the end of the document
 * `end` follows, and at most `limit` bytes of it: a server (or a proxy or CDN
 * before it) that holds the body open after the document costs the reader
 * nothing (the rest is read for a second in the background, see
 * `readToDocumentEnd`), and what it sends after the document is dropped. A
 * document `end` cannot follow is read to the body's end, as it is sent.
 *
 * @throws BodyTooLargeError past `limit` (a `Content-Length` over it before reading);
 *   whatever the body throws before the document's end
 */
export async function readBodyToEnd(
  response: ResponseLike,
  limit: number,
  end: DocumentEnd,
): Promise<Buffer> {
  await refuseDeclaredOver(response, limit);
  if (!response.body) return Buffer.alloc(0);
  const parts: Buffer[] = [];
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
 * which a body held open never answers).
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
